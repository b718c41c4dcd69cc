//! Reading what follows the pages (captures, robots.txt responses): a
//! cursor in key order, every wait with a deadline, and a document this
//! version cannot read skipped with a warning rather than ending the
//! export.

use std::marker::PhantomData;

use anyhow::Context;
use bson::{Document, RawDocumentBuf};
use futures::TryStreamExt;
use mongodb::{Collection, Cursor};
use serde::de::DeserializeOwned;
use store::deadline;

pub(super) struct Reader<T> {
    cursor: Cursor<RawDocumentBuf>,
    /// What is read, for errors and warnings (`captures`).
    what: &'static str,
    docs: PhantomData<T>,
}

impl<T: DeserializeOwned> Reader<T> {
    pub(super) async fn open<C: Send + Sync>(
        coll: &Collection<C>,
        filter: Document,
        sort: Document,
        what: &'static str,
    ) -> anyhow::Result<Reader<T>> {
        let raw = coll.clone_with_type::<RawDocumentBuf>();
        let cursor = deadline(raw.find(filter).sort(sort))
            .await
            .context("the store did not answer in time")?
            .with_context(|| format!("reading {what}"))?;
        Ok(Reader {
            cursor,
            what,
            docs: PhantomData,
        })
    }

    /// The next readable document; `None` at the end.
    pub(super) async fn next(&mut self) -> anyhow::Result<Option<T>> {
        loop {
            let next = deadline(self.cursor.try_next())
                .await
                .context("the store did not answer in time")?
                .with_context(|| format!("reading {}", self.what))?;
            let Some(raw) = next else { return Ok(None) };
            match bson::from_slice(raw.as_bytes()) {
                Ok(doc) => return Ok(Some(doc)),
                Err(e) => tracing::warn!(error = %e, what = self.what, "skipping a malformed document"),
            }
        }
    }
}
