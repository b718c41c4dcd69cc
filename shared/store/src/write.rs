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
    let mut backoff = Backoff::default();
    let mut unclear = 0;
    loop {
        let start = Instant::now();
        let res = crate::deadline(coll.insert_many(docs).ordered(false)).await;
        let verdict = match &res {
            None => Verdict::Outage,
            Some(Ok(_)) => Verdict::Stored,
            Some(Err(e)) => verdict(e),
        };
        let outcome = match verdict {
            Verdict::Stored => "ok",
            Verdict::Refused(_) => "refused",
            _ => "error",
        };
        timing.record_batch(op, start.elapsed(), outcome, docs.len());
        match verdict {
            Verdict::Stored => return Vec::new(),
            Verdict::Refused(refused) => return refused,
            Verdict::Split(_) if docs.len() > 1 => return one_by_one(coll, docs, timing, op, what).await,
            Verdict::Split(why) => return vec![(0, why)],
            Verdict::Unclear(why) => {
                unclear += 1;
                if unclear >= MAX_UNCLEAR_TRIES {
                    if docs.len() > 1 {
                        return one_by_one(coll, docs, timing, op, what).await;
                    }
                    return vec![(0, why)];
                }
                backoff.note(what, &why).await;
            }
            Verdict::Outage => {
                let why = match &res {
                    Some(Err(e)) => e.to_string(),
                    _ => format!("no answer within {:?}", crate::OP_TIMEOUT),
                };
                backoff.note(what, &why).await;
            }
        }
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
    let mut backoff = Backoff::default();
    let mut unclear = 0;
    loop {
        let start = Instant::now();
        let update = coll.update_one(bson::doc! {"_id": id}, bson::doc! {"$set": fields.clone()});
        let res = crate::deadline(update).await;
        let verdict = match &res {
            None => Verdict::Outage,
            Some(Ok(_)) => Verdict::Stored,
            Some(Err(e)) => verdict(e),
        };
        let outcome = match verdict {
            Verdict::Stored => "ok",
            Verdict::Refused(_) => "refused",
            _ => "error",
        };
        timing.record(op, start.elapsed(), outcome, None, None);
        match verdict {
            Verdict::Stored => return Ok(()),
            Verdict::Refused(mut why) => return Err(why.pop().map(|(_, w)| w).unwrap_or_default()),
            Verdict::Split(why) => return Err(why),
            Verdict::Unclear(why) => {
                unclear += 1;
                if unclear >= MAX_UNCLEAR_TRIES {
                    return Err(why);
                }
                backoff.note(what, &why).await;
            }
            Verdict::Outage => {
                let why = match &res {
                    Some(Err(e)) => e.to_string(),
                    _ => format!("no answer within {:?}", crate::OP_TIMEOUT),
                };
                backoff.note(what, &why).await;
            }
        }
    }
}

/// Writes each document alone, so one the store refuses is found and the
/// others are stored.
async fn one_by_one<T: Serialize + Send + Sync>(
    coll: &mongodb::Collection<T>,
    docs: &[T],
    timing: &TimingLog,
    op: Op,
    what: &str,
) -> Vec<(usize, String)> {
    let mut refused = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        // A batch of one cannot be split again: its refusal is final.
        for (_, why) in Box::pin(insert_unordered(
            coll,
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
}
