//! Reads of one document by `_id`, gathered into one query.
//!
//! A child that meets a new domain reads its robots rules and its
//! last-crawled time: two point reads. At the start of a wide crawl it
//! meets thousands of new domains a second, and one `find_one` each kept
//! 100,000 reads queued in the driver at 100,000 domains, most of them
//! timing out after [`OP_TIMEOUT`](crate::OP_TIMEOUT) (issue 61). Here
//! every read waiting while a query is out goes into the next query, one
//! `find({_id: {$in: [...]}})` of up to [`MAX_IDS`]: a round trip, a
//! command and an index walk per batch, not per id. On nx-27017 a
//! `find_one` took 0.81 ms and a read gathered 500 at a time 0.028 ms; on
//! mongod it is also one command's overhead instead of hundreds.
//!
//! Nothing waits to fill a batch: an ask goes out at once when a query
//! slot is free, so a quiet child reads as fast as before.

use std::collections::HashMap;
use std::sync::Arc;

use bson::{doc, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::Collection;
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Ids per query: a query of 500 string ids is a few tens of KB, far
/// below the 16 MiB a command may be, and takes nx-27017 about 14 ms.
pub const MAX_IDS: usize = 500;
/// Queries out at once: while they are out, asks gather for the next.
/// With four, a wide crawl's start averaged 12 ids a query (the store
/// answered each before many gathered); two make fuller ones.
const QUERIES_IN_FLIGHT: usize = 2;
/// Asks queued for a query; an asker waits (within its deadline) past it.
const QUEUE: usize = 65_536;

/// What reading one document gave.
#[derive(Debug)]
pub enum Read<T> {
    Found(T),
    /// No document has that `_id`.
    Missing,
    /// The store failed or the document does not decode: why.
    Failed(String),
    /// No answer within [`OP_TIMEOUT`](crate::OP_TIMEOUT).
    TimedOut,
}

impl<T> Read<T> {
    /// The document, if one was read.
    pub fn found(self) -> Option<T> {
        match self {
            Read::Found(t) => Some(t),
            _ => None,
        }
    }

    /// How the read ended, for timing logs: `ok` (found or not), `error`
    /// or `timeout`.
    pub fn outcome(&self) -> &'static str {
        match self {
            Read::Found(_) | Read::Missing => "ok",
            Read::Failed(_) => "error",
            Read::TimedOut => "timeout",
        }
    }
}

struct Ask<T> {
    id: String,
    reply: oneshot::Sender<Read<T>>,
}

/// Point reads of one collection, gathered (see the module doc). Cheap to
/// clone; the task that sends the queries ends when the last clone drops.
pub struct PointReads<T> {
    asks: mpsc::Sender<Ask<T>>,
}

impl<T> Clone for PointReads<T> {
    fn clone(&self) -> Self {
        PointReads {
            asks: self.asks.clone(),
        }
    }
}

impl<T: DeserializeOwned + Send + Sync + 'static> PointReads<T> {
    /// Starts the task that reads `coll` (needs a Tokio runtime).
    pub fn spawn(coll: Collection<T>) -> Self {
        let (asks, rx) = mpsc::channel(QUEUE);
        tokio::spawn(serve(coll.clone_with_type::<RawDocumentBuf>(), rx));
        PointReads { asks }
    }

    /// The document whose `_id` is `id`, within
    /// [`OP_TIMEOUT`](crate::OP_TIMEOUT) from now however long the queue.
    pub async fn get(&self, id: &str) -> Read<T> {
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            id: id.to_string(),
            reply,
        };
        let read = crate::deadline(async {
            if self.asks.send(ask).await.is_err() {
                return Read::Failed("the reader has stopped".into());
            }
            answer
                .await
                .unwrap_or_else(|_| Read::Failed("the reader dropped the read".into()))
        });
        read.await.unwrap_or(Read::TimedOut)
    }
}

/// Takes asks as they come and sends each gathering as one query, up to
/// [`QUERIES_IN_FLIGHT`] at a time.
async fn serve<T: DeserializeOwned + Send + Sync + 'static>(
    coll: Collection<RawDocumentBuf>,
    mut asks: mpsc::Receiver<Ask<T>>,
) {
    let slots = Arc::new(Semaphore::new(QUERIES_IN_FLIGHT));
    while let Some(first) = asks.recv().await {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        // Asks that came while every slot was busy ride along.
        let mut batch = vec![first];
        while batch.len() < MAX_IDS {
            match asks.try_recv() {
                Ok(ask) => batch.push(ask),
                Err(_) => break,
            }
        }
        let coll = coll.clone();
        tokio::spawn(async move {
            answer(&coll, batch).await;
            drop(slot);
        });
    }
}

/// Reads the batch's ids in one query and answers each ask.
async fn answer<T: DeserializeOwned>(coll: &Collection<RawDocumentBuf>, batch: Vec<Ask<T>>) {
    let mut ids: Vec<&str> = batch.iter().map(|a| a.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let query = async {
        let mut cursor = coll
            .find(doc! {"_id": {"$in": ids}})
            .batch_size(MAX_IDS as u32)
            .await?;
        let mut docs = HashMap::new();
        while let Some(d) = cursor.try_next().await? {
            if let Ok(id) = d.get_str("_id") {
                docs.insert(id.to_string(), d);
            }
        }
        Ok::<_, mongodb::error::Error>(docs)
    };
    let docs = match crate::deadline(query).await {
        Some(Ok(docs)) => docs,
        Some(Err(e)) => {
            let why = e.to_string();
            for ask in batch {
                let _ = ask.reply.send(Read::Failed(why.clone()));
            }
            return;
        }
        None => {
            for ask in batch {
                let _ = ask.reply.send(Read::TimedOut);
            }
            return;
        }
    };
    for ask in batch {
        // Each ask decodes its own copy: the same id asked twice in one
        // batch is rare (a domain's reads are made under its lock).
        let read = match docs.get(&ask.id) {
            None => Read::Missing,
            Some(raw) => match bson::from_slice::<T>(raw.as_bytes()) {
                Ok(t) => Read::Found(t),
                Err(e) => Read::Failed(format!("malformed document {:?}: {e}", ask.id)),
            },
        };
        let _ = ask.reply.send(read);
    }
}
