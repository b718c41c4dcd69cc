//! Unordered inserts keyed by `_id` that tell store errors apart by what a
//! retry can do about them, shared by every writer of the crawl:
//!
//! - the store is down, slow or failing over: the write is retried with
//!   backoff for as long as it takes (writers bound their queues, so the
//!   crawl pauses instead of dropping data);
//! - the store refuses a document for good (over its size limit, invalid):
//!   that document is given back to the caller, and the rest are written;
//! - a duplicate key is success (the document is already there: writes are
//!   idempotent by `_id`);
//! - an error we cannot place is retried a few times, then handled as a
//!   refusal, so no loop is endless on an error a retry cannot fix.

use std::time::Instant;

use mongodb::error::{ErrorKind, WriteFailure};
use serde::Serialize;

use crate::Backoff;
use shared::timing::{Op, TimingLog};

/// Tries for an error that is neither an outage nor a refusal.
const MAX_UNCLEAR_TRIES: u32 = 5;

/// What a failed write means for the documents in it.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Everything is stored (the errors were duplicates).
    Stored,
    /// The store is unavailable: retry the whole write.
    Outage,
    /// The store refused these documents (index in the write, reason) for
    /// good; the others are stored.
    Refused(Vec<(usize, String)>),
    /// The write as a whole was refused before reaching the documents
    /// (a client-side limit): retry them one by one to find the culprit.
    Split(String),
    /// Neither: retry a few times, then treat as a refusal.
    Unclear(String),
}

/// Server codes that mean "not now" (shutdown, step-down, time limits).
const TRANSIENT_CODES: [i32; 12] = [6, 7, 50, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435];

fn verdict(err: &mongodb::error::Error) -> Verdict {
    match err.kind.as_ref() {
        ErrorKind::InsertMany(e) => {
            if e.write_concern_error.is_some() {
                return Verdict::Outage;
            }
            let errs = e.write_errors.as_deref().unwrap_or_default();
            if errs.iter().any(|w| TRANSIENT_CODES.contains(&w.code)) {
                return Verdict::Outage;
            }
            let refused: Vec<_> = errs
                .iter()
                .filter(|w| w.code != 11000)
                .map(|w| (w.index, format!("code {}: {}", w.code, w.message)))
                .collect();
            if refused.is_empty() {
                Verdict::Stored
            } else {
                Verdict::Refused(refused)
            }
        }
        ErrorKind::Write(WriteFailure::WriteError(w)) if w.code == 11000 => Verdict::Stored,
        ErrorKind::Write(WriteFailure::WriteError(w)) if !TRANSIENT_CODES.contains(&w.code) => {
            Verdict::Refused(vec![(0, format!("code {}: {}", w.code, w.message))])
        }
        ErrorKind::InvalidArgument { .. } | ErrorKind::BsonSerialization(_) => {
            Verdict::Split(err.to_string())
        }
        ErrorKind::Io(_)
        | ErrorKind::ServerSelection { .. }
        | ErrorKind::ConnectionPoolCleared { .. }
        | ErrorKind::DnsResolve { .. }
        | ErrorKind::Write(_) => Verdict::Outage,
        ErrorKind::Command(c) if TRANSIENT_CODES.contains(&c.code) => Verdict::Outage,
        _ if err.contains_label(mongodb::error::RETRYABLE_WRITE_ERROR) => Verdict::Outage,
        _ => Verdict::Unclear(err.to_string()),
    }
}

/// Why [`until_stored`] gave up on a write.
#[derive(Debug)]
enum GaveUp {
    /// The store refused these (index in the write, reason) for good.
    Refused(Vec<(usize, String)>),
    /// The write as a whole was refused before reaching the store.
    Split(String),
    /// An error neither an outage nor a refusal persisted.
    Unclear(String),
}

impl GaveUp {
    /// In words, for a write of one document or statement.
    fn why(self) -> String {
        match self {
            GaveUp::Refused(mut why) => why.pop().map(|(_, w)| w).unwrap_or_default(),
            GaveUp::Split(why) | GaveUp::Unclear(why) => why,
        }
    }
}

/// Tries `attempt` (each within [`crate::deadline`]) until the store has
/// it, backing off while the store is away, with this module's rules;
/// the answer, if the store's was not an error.
/// `judge` places an answer that came back (a command's reply can hold
/// write errors); each try is timed as `op`, a batch of `batch` when
/// given; `what` names the writer in log lines.
async fn until_stored<T, F, Fut>(
    timing: &TimingLog,
    op: Op,
    batch: Option<usize>,
    what: &str,
    mut attempt: F,
    judge: impl Fn(&T) -> Verdict,
) -> Result<Option<T>, GaveUp>
where
    F: FnMut() -> Fut,
    Fut: std::future::IntoFuture<Output = mongodb::error::Result<T>>,
{
    let mut backoff = Backoff::default();
    let mut unclear = 0;
    loop {
        let start = Instant::now();
        let res = crate::deadline(attempt()).await;
        let verdict = match &res {
            None => Verdict::Outage,
            Some(Ok(answer)) => judge(answer),
            Some(Err(e)) => verdict(e),
        };
        let outcome = match verdict {
            Verdict::Stored => "ok",
            Verdict::Refused(_) => "refused",
            _ => "error",
        };
        match batch {
            Some(n) => timing.record_batch(op, start.elapsed(), outcome, n),
            None => timing.record(op, start.elapsed(), outcome, None, None),
        }
        match verdict {
            // `None` when the answer was an error that means "stored"
            // (duplicate keys).
            Verdict::Stored => return Ok(res.and_then(Result::ok)),
            Verdict::Refused(refused) => return Err(GaveUp::Refused(refused)),
            Verdict::Split(why) => return Err(GaveUp::Split(why)),
            Verdict::Unclear(why) => {
                unclear += 1;
                if unclear >= MAX_UNCLEAR_TRIES {
                    return Err(GaveUp::Unclear(why));
                }
                backoff.note(what, &why).await;
            }
            Verdict::Outage => {
                let why = match &res {
                    Some(Err(e)) => e.to_string(),
                    Some(Ok(_)) => "the store answered with an error it may not repeat".to_string(),
                    None => format!("no answer within {:?}", crate::OP_TIMEOUT),
                };
                backoff.note(what, &why).await;
            }
        }
    }
}

/// Inserts `docs` (unordered); returns the ones the store refused for good
/// (index, why). Returns only once every other document is stored. Each
/// attempt is timed as `op`; `what` names the writer in log lines.
pub async fn insert_unordered<T: Serialize + Send + Sync>(
    coll: &mongodb::Collection<T>,
    docs: &[T],
    timing: &TimingLog,
    op: Op,
    what: &str,
) -> Vec<(usize, String)> {
    insert_counted(coll, CountedBy::Driver, docs, timing, op, what).await
}

/// Who counts a collection's commands in the store's work (`crate::work`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountedBy {
    /// The driver's command monitoring (a client made with `work::handler`).
    Driver,
    /// The writer, for a collection of a client without it
    /// (`Stores::pages_for_inserts`): one insert command per attempt,
    /// with every document it carries.
    Writer,
}

/// [`insert_unordered`] on a collection whose commands are counted by
/// `counted`.
pub async fn insert_counted<T: Serialize + Send + Sync>(
    coll: &mongodb::Collection<T>,
    counted: CountedBy,
    docs: &[T],
    timing: &TimingLog,
    op: Op,
    what: &str,
) -> Vec<(usize, String)> {
    let insert = || async move {
        let sent = (counted == CountedBy::Writer)
            .then(|| crate::work::Sent::command(coll.name(), "insert", docs.len() as u64));
        let answer = coll.insert_many(docs).ordered(false).await;
        if let Some(sent) = sent {
            sent.answered();
        }
        answer
    };
    match until_stored(timing, op, Some(docs.len()), what, insert, |_| Verdict::Stored).await {
        Ok(_) => Vec::new(),
        Err(GaveUp::Refused(refused)) => refused,
        Err(GaveUp::Split(_) | GaveUp::Unclear(_)) if docs.len() > 1 => {
            one_by_one(coll, counted, docs, timing, op, what).await
        }
        Err(GaveUp::Split(why) | GaveUp::Unclear(why)) => vec![(0, why)],
    }
}

/// `$set`s `fields` on the document with `_id` `id`, retried like an
/// insert while the store is away; `Err` when the store refuses it for
/// good (or an unclear error persists). A document that is not there is
/// not made: the update only moves what a page already says.
pub async fn set_fields<T: Send + Sync>(
    coll: &mongodb::Collection<T>,
    id: &str,
    fields: bson::Document,
    timing: &TimingLog,
    op: Op,
    what: &str,
) -> Result<(), String> {
    let update = || coll.update_one(bson::doc! {"_id": id}, bson::doc! {"$set": fields.clone()});
    match until_stored(timing, op, None, what, update, |_| Verdict::Stored).await {
        Ok(_) => Ok(()),
        Err(e) => Err(e.why()),
    }
}

/// Runs `statements` (`{q, u}` documents of the `update` command, each
/// updating one document at most) on `coll` in one unordered command: a
/// batched update, one round trip however many documents it moves, which
/// both MongoDB and nx-27017 answer (the driver's `bulk_write` needs
/// MongoDB 8). Retried while the store is away, so the statements must be
/// safe to run twice. Returns the documents modified; `Err` with the
/// first reason when the store refused some for good (the rest ran).
pub async fn update_each<T: Send + Sync>(
    coll: &mongodb::Collection<T>,
    statements: Vec<bson::Document>,
    timing: &TimingLog,
    op: Op,
    what: &str,
) -> Result<u64, String> {
    let n = statements.len();
    let command = bson::doc! {"update": coll.name(), "updates": statements, "ordered": false};
    let db = coll.client().database(&coll.namespace().db);
    let run = || db.run_command(command.clone());
    match until_stored(timing, op, Some(n), what, run, reply_verdict).await {
        Ok(reply) => Ok(reply
            .as_ref()
            .and_then(|r| r.get("nModified"))
            .and_then(integer)
            .map_or(0, |n| u64::try_from(n).unwrap_or(0))),
        Err(e) => Err(e.why()),
    }
}

/// The `update` statement that sets `fields` on the document `_id` = `id`,
/// inserting it if there is none: one of [`update_each`]'s or
/// [`update_once`]'s `statements`. `None` if `fields` is no document.
pub fn upsert_statement(id: &str, fields: &impl serde::Serialize) -> Option<bson::Document> {
    Some(bson::doc! {
        "q": {"_id": id},
        "u": {"$set": bson::to_document(fields).ok()?},
        "upsert": true,
    })
}

/// Why [`update_once`] did not write everything.
#[derive(Debug)]
pub enum NotWritten {
    /// The store failed, timed out or is away: the statements may be
    /// tried again.
    Unavailable,
    /// The store refused some statements for good (why); the rest ran.
    /// Trying again would be refused again.
    Refused(String),
}

/// Runs `statements` (as for [`update_each`]) on `coll` in one unordered
/// command, once, within [`OP_TIMEOUT`](crate::OP_TIMEOUT). For a flusher
/// that keeps what it could not write and tries again on its next round,
/// rather than waiting for the store here.
pub async fn update_once<T: Send + Sync>(
    coll: &mongodb::Collection<T>,
    statements: Vec<bson::Document>,
) -> Result<(), NotWritten> {
    let command = bson::doc! {"update": coll.name(), "updates": statements, "ordered": false};
    let db = coll.client().database(&coll.namespace().db);
    match crate::deadline(db.run_command(command)).await {
        Some(Ok(reply)) => match reply_verdict(&reply) {
            Verdict::Stored => Ok(()),
            Verdict::Refused(why) => Err(NotWritten::Refused(
                why.into_iter().next().map(|(_, why)| why).unwrap_or_default(),
            )),
            Verdict::Outage | Verdict::Split(_) | Verdict::Unclear(_) => Err(NotWritten::Unavailable),
        },
        _ => Err(NotWritten::Unavailable),
    }
}

/// A number of a reply, which a server may send as any BSON number.
fn integer(b: &bson::Bson) -> Option<i64> {
    match *b {
        bson::Bson::Int32(n) => Some(i64::from(n)),
        bson::Bson::Int64(n) => Some(n),
        bson::Bson::Double(n) if n.is_finite() => Some(n as i64),
        _ => None,
    }
}

/// What the reply of a write command says (its errors are in the reply,
/// not in an error of the driver's).
fn reply_verdict(reply: &bson::Document) -> Verdict {
    if reply.get_document("writeConcernError").is_ok() {
        return Verdict::Outage;
    }
    let Ok(errors) = reply.get_array("writeErrors") else {
        return Verdict::Stored;
    };
    let errors: Vec<(usize, i32, String)> = errors
        .iter()
        .filter_map(bson::Bson::as_document)
        .map(|e| {
            let index = e
                .get("index")
                .and_then(integer)
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(0);
            let code = e
                .get("code")
                .and_then(integer)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(0);
            let message = e.get_str("errmsg").unwrap_or_default().to_string();
            (index, code, message)
        })
        .collect();
    if errors.iter().any(|(_, code, _)| TRANSIENT_CODES.contains(code)) {
        return Verdict::Outage;
    }
    let refused: Vec<_> = errors
        .into_iter()
        .filter(|(_, code, _)| *code != 11000)
        .map(|(index, code, message)| (index, format!("code {code}: {message}")))
        .collect();
    if refused.is_empty() {
        Verdict::Stored
    } else {
        Verdict::Refused(refused)
    }
}

/// Writes each document alone, so one the store refuses is found and the
/// others are stored.
async fn one_by_one<T: Serialize + Send + Sync>(
    coll: &mongodb::Collection<T>,
    counted: CountedBy,
    docs: &[T],
    timing: &TimingLog,
    op: Op,
    what: &str,
) -> Vec<(usize, String)> {
    let mut refused = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        // A batch of one cannot be split again: its refusal is final.
        for (_, why) in Box::pin(insert_counted(
            coll,
            counted,
            std::slice::from_ref(doc),
            timing,
            op,
            what,
        ))
        .await
        {
            refused.push((i, why));
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::error::{Error, InsertManyError};
    use std::sync::Arc;

    fn insert_many_error(codes: &[i32]) -> Error {
        let write_errors: Vec<_> = codes
            .iter()
            .enumerate()
            .map(|(index, code)| serde_json::json!({"index": index, "code": code, "errmsg": "x"}))
            .collect();
        let e: InsertManyError =
            serde_json::from_value(serde_json::json!({ "writeErrors": write_errors })).unwrap();
        Error::from(ErrorKind::InsertMany(e))
    }

    #[test]
    fn refusals_outages_and_duplicates_are_told_apart() {
        assert_eq!(verdict(&insert_many_error(&[11000, 11000])), Verdict::Stored);
        assert_eq!(
            verdict(&insert_many_error(&[11000, 10334])),
            Verdict::Refused(vec![(1, "code 10334: x".into())])
        );
        assert_eq!(verdict(&insert_many_error(&[91])), Verdict::Outage);
        // A client-side refusal of the whole write (InvalidArgument, which
        // only the driver can build, is handled the same way).
        let unserialisable = bson::to_document(&5i32).unwrap_err();
        let client_side = Error::from(ErrorKind::BsonSerialization(unserialisable));
        assert!(matches!(verdict(&client_side), Verdict::Split(_)));
        let io = Error::from(ErrorKind::Io(Arc::new(std::io::Error::other("reset"))));
        assert_eq!(verdict(&io), Verdict::Outage);
    }

    #[test]
    fn a_command_reply_is_judged_by_the_write_errors_it_holds() {
        use bson::doc;
        assert_eq!(
            reply_verdict(&doc! {"ok": 1, "n": 2, "nModified": 1}),
            Verdict::Stored
        );
        let refused = doc! {"ok": 1, "writeErrors": [
            {"index": 3, "code": 11000, "errmsg": "dup"},
            {"index": 5_i64, "code": 2, "errmsg": "bad value"},
        ]};
        assert_eq!(
            reply_verdict(&refused),
            Verdict::Refused(vec![(5, "code 2: bad value".into())])
        );
        let dup_only = doc! {"ok": 1, "writeErrors": [{"index": 0, "code": 11000, "errmsg": "dup"}]};
        assert_eq!(reply_verdict(&dup_only), Verdict::Stored);
        let stepping_down = doc! {"ok": 1, "writeErrors": [{"index": 0, "code": 189, "errmsg": "x"}]};
        assert_eq!(reply_verdict(&stepping_down), Verdict::Outage);
        let concern = doc! {"ok": 1, "writeConcernError": {"code": 64, "errmsg": "w"}};
        assert_eq!(reply_verdict(&concern), Verdict::Outage);
        // A lying peer: numbers of any type, or none, never panic.
        let odd = doc! {"ok": 1, "writeErrors": [{"index": -1.5, "code": "x"}, 7]};
        assert!(matches!(reply_verdict(&odd), Verdict::Refused(_)));
    }
}
