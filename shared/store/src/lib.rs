//! Access to the two MongoDB stores and the indexes their queries need.
//!
//! Primary (`--mongo-uri`, `--db`): each crawl's `seeds`, `frontier`,
//! `pages` and `body_dicts`, in collections named after the crawl
//! (`<crawl>__pages`, see [`CrawlId`]).
//! Second (`--robots-uri`, `--robots-db`): `robots`, `domains`, shared by
//! every crawl.
//!
//! Documents are keyed by their natural key in `_id` (normalised URL,
//! origin, domain), which makes every write idempotent (a retried insert is
//! a duplicate-key error we ignore, an upsert is an upsert) without an
//! extra unique index to maintain.
//!
//! Only features that both a real `mongod` and the nx-27017 stand-in
//! support are used: no `list_collections`, no index names but those the
//! store lists, no transactions, no `bulkWrite` command.

#![warn(unreachable_pub)]

pub mod args;
pub mod body_dict;
pub mod crawl_id;
pub mod docs;
pub mod exchange;
pub mod metric;
pub mod page_body;
pub mod page_links;
pub mod payload_digest;
pub mod point_reads;
pub mod read;
pub mod sharding;
pub mod work;
pub mod write;

use std::time::Duration;

use anyhow::Context;
use bson::{doc, Document, RawDocumentBuf};
use mongodb::options::{ClientOptions, IndexOptions};
use mongodb::{Client, Collection, Database, IndexModel};

pub use crate::args::StoreArgs;
pub use crate::crawl_id::CrawlId;
use crate::docs::{
    BodyDictDoc, CaptureDoc, ControlDoc, DomainDoc, FrontierDoc, OutcomeDoc, PageDoc, ProgressDoc, RobotsDoc,
    RobotsTxtDoc, SeedDoc, SegmentDoc, UrlDoc,
};

// Kinds of a crawl's collections: the names are `CrawlId::collection(kind)`.
pub const SEEDS: &str = "seeds";
/// The frontier of earlier versions, one document per URL
/// (`docs::FrontierDoc`): read only to convert it into segments.
pub const FRONTIER: &str = "frontier";
/// The frontier: each domain's admitted URLs in segments (`docs::SegmentDoc`).
pub const SEGMENTS: &str = "segments";
/// URLs that finished without a page, and why (`docs::OutcomeDoc`).
pub const OUTCOMES: &str = "outcomes";
/// Each domain's progress through its queue (`docs::ProgressDoc`).
pub const PROGRESS: &str = "progress";
/// With `--seen-check store`: every admitted URL by itself (`docs::UrlDoc`).
pub const URLS: &str = "urls";
pub const PAGES: &str = "pages";
/// zstd dictionaries of page bodies (see `body_dict`).
pub const BODY_DICTS: &str = "body_dicts";
/// An operator's changes to a running crawl (see `docs::ControlDoc`).
pub const CONTROL: &str = "control";
/// Visits after a URL's first, when the crawl revisits (see `docs::CaptureDoc`).
pub const CAPTURES: &str = "captures";
/// The robots.txt responses a crawl received (see `docs::RobotsTxtDoc`).
pub const ROBOTS_TXT: &str = "robots_txt";
// Collections of the second store, shared by every crawl.
pub const ROBOTS: &str = "robots";
pub const DOMAINS: &str = "domains";

/// The stores, as one crawl sees them.
#[derive(Clone)]
pub struct Stores {
    pub primary: Database,
    pub second: Database,
    crawl: CrawlId,
    /// The second store has a client of its own (`--robots-uri` differs).
    separate_second: bool,
    /// The primary store through a client without command monitoring,
    /// for bulk inserts on a process's hot path (see
    /// [`Stores::with_bulk_client`]).
    bulk: Option<Database>,
}

impl Stores {
    pub async fn connect(args: &StoreArgs, app_name: &str, crawl: CrawlId) -> anyhow::Result<Stores> {
        let primary_client = client(&args.mongo_uri, app_name).await?;
        let (second_client, separate_second) = match &args.robots_uri {
            Some(uri) if uri != &args.mongo_uri => (client(uri, app_name).await?, true),
            _ => (primary_client.clone(), false),
        };
        Ok(Stores {
            primary: primary_client.database(&args.db),
            second: second_client.database(&args.robots_db),
            crawl,
            separate_second,
            bulk: None,
        })
    }

    /// Adds a second client of the primary store, one the driver does not
    /// monitor, for the page inserts of a crawler child
    /// ([`Stores::pages_for_inserts`]): with command monitoring on, the
    /// driver copies every command, page bodies and all, for its event
    /// (see `work`). Its inserts are counted by `write` instead. One more
    /// connection pool to the primary store per process that asks.
    pub async fn with_bulk_client(mut self, args: &StoreArgs, app_name: &str) -> anyhow::Result<Stores> {
        let bulk = unmonitored_client(&args.mongo_uri, app_name).await?;
        self.bulk = Some(bulk.database(&args.db));
        Ok(self)
    }

    /// Ends the clients' sessions and stops their background workers, at
    /// most [`SHUTDOWN`] long. Call it before the runtime ends: a client
    /// dropped while the runtime shuts down sends its `endSessions` to
    /// workers already gone, and the driver panics in a worker thread
    /// (`connection_requester.rs`, a send on a closed channel). Handles in
    /// use elsewhere fail from then on.
    pub async fn shutdown(&self) {
        let mut clients = vec![self.primary.client().clone()];
        if self.separate_second {
            clients.push(self.second.client().clone());
        }
        clients.extend(self.bulk.as_ref().map(|b| b.client().clone()));
        for c in clients {
            if tokio::time::timeout(SHUTDOWN, c.shutdown().immediate(true))
                .await
                .is_err()
            {
                tracing::warn!(timeout = ?SHUTDOWN, "a store client did not shut down in time");
            }
        }
    }

    /// Fails fast with a clear message when a store is not reachable.
    pub async fn ping(&self) -> anyhow::Result<()> {
        self.primary
            .run_command(doc! {"ping": 1})
            .await
            .context("primary store (--mongo-uri) is not answering")?;
        self.second
            .run_command(doc! {"ping": 1})
            .await
            .context("second store (--robots-uri) is not answering")?;
        Ok(())
    }

    /// Creates every secondary index the queries use, and no other: each
    /// one is written on every insert. Lookups by key go through `_id`;
    /// the dispatcher reads a domain's next queued segments by `{domain,
    /// seq, state}` (its queue lives in the store), and halted domains at
    /// start-up.
    ///
    /// Why `state` is in the queue index: start-up groups the queued
    /// segments by domain (`dispatcher/src/resume.rs`) and a queue read
    /// passes over deferred ones, and an index holding the state answers
    /// both without reading documents that are not wanted. Segments are
    /// never updated, so no key ever moves. `{domain, seq}` stays a
    /// prefix, so the sort by it and the shard key use the same index.
    ///
    /// No other index is made: an index no query uses costs a B-tree
    /// insert per document. Indexes an older store has (on the per-URL
    /// `frontier`, `crawl_id` on pages) stay until dropped by hand.
    pub async fn ensure_indexes(&self) -> anyhow::Result<()> {
        let idx = |keys: Document| {
            IndexModel::builder()
                .keys(keys)
                .options(IndexOptions::builder().build())
                .build()
        };
        self.domains()
            .create_index(idx(doc! {"halted": 1}))
            .await
            .context("creating domains index")?;
        self.segments()
            .create_index(idx(queue_index()))
            .await
            .context("creating the frontier's queue index")?;
        Ok(())
    }

    /// The index a revisiting crawl reads what is due by, `{due_ms: 1}`
    /// on `pages`, sparse: made only for such a crawl (every other crawl
    /// would pay an index entry per page for nothing), and only pages
    /// with a due time are in it.
    pub async fn ensure_revisit_index(&self) -> anyhow::Result<()> {
        let model = IndexModel::builder()
            .keys(doc! {PageDoc::DUE_MS: 1})
            .options(IndexOptions::builder().sparse(true).build())
            .build();
        self.pages()
            .create_index(model)
            .await
            .context("creating the pages' due-time index")?;
        Ok(())
    }

    pub fn crawl(&self) -> &CrawlId {
        &self.crawl
    }
    pub fn seeds(&self) -> Collection<SeedDoc> {
        self.primary.collection(&self.crawl.collection(SEEDS))
    }
    pub fn frontier(&self) -> Collection<FrontierDoc> {
        self.primary.collection(&self.crawl.collection(FRONTIER))
    }
    pub fn segments(&self) -> Collection<SegmentDoc> {
        self.primary.collection(&self.crawl.collection(SEGMENTS))
    }
    pub fn outcomes(&self) -> Collection<OutcomeDoc> {
        self.primary.collection(&self.crawl.collection(OUTCOMES))
    }
    pub fn progress(&self) -> Collection<ProgressDoc> {
        self.primary.collection(&self.crawl.collection(PROGRESS))
    }
    pub fn urls(&self) -> Collection<UrlDoc> {
        self.primary.collection(&self.crawl.collection(URLS))
    }
    pub fn pages(&self) -> Collection<PageDoc> {
        self.primary.collection(&self.crawl.collection(PAGES))
    }
    /// `pages` for batches of page inserts, and who counts them in the
    /// store's work: through the bulk client when there is one
    /// ([`Stores::with_bulk_client`]), counted by the writer.
    pub fn pages_for_inserts(&self) -> (Collection<PageDoc>, write::CountedBy) {
        match &self.bulk {
            Some(bulk) => (
                bulk.collection(&self.crawl.collection(PAGES)),
                write::CountedBy::Writer,
            ),
            None => (self.pages(), write::CountedBy::Driver),
        }
    }
    pub fn body_dicts(&self) -> Collection<BodyDictDoc> {
        self.primary.collection(&self.crawl.collection(BODY_DICTS))
    }
    pub fn control(&self) -> Collection<ControlDoc> {
        self.primary.collection(&self.crawl.collection(CONTROL))
    }
    pub fn captures(&self) -> Collection<CaptureDoc> {
        self.primary.collection(&self.crawl.collection(CAPTURES))
    }
    pub fn robots_txt(&self) -> Collection<RobotsTxtDoc> {
        self.primary.collection(&self.crawl.collection(ROBOTS_TXT))
    }
    pub fn robots(&self) -> Collection<RobotsDoc> {
        self.second.collection(ROBOTS)
    }
    pub fn domains(&self) -> Collection<DomainDoc> {
        self.second.collection(DOMAINS)
    }
}

/// Documents per cursor batch of a long read (the server still caps a
/// batch at 16 MiB). Without it a server answers 101 at a time, a round
/// trip per hundred documents of a read of millions.
pub const READ_BATCH: u32 = 8192;

/// Reads every document `find` returns on `coll`, decoding each on its own:
/// one malformed document (written by hand, by an older version, or by a
/// store that went wrong) is passed to `bad` and skipped, rather than
/// ending the whole read as a typed cursor would.
/// In batches of [`READ_BATCH`].
pub async fn decode_each<T: serde::de::DeserializeOwned + Send + Sync>(
    coll: &Collection<T>,
    filter: Document,
    mut each: impl FnMut(T),
    mut bad: impl FnMut(&RawDocumentBuf, bson::de::Error),
) -> mongodb::error::Result<()> {
    use futures::TryStreamExt;
    let mut cursor = coll
        .clone_with_type::<RawDocumentBuf>()
        .find(filter)
        .batch_size(READ_BATCH)
        .await?;
    while let Some(d) = cursor.try_next().await? {
        match bson::from_slice::<T>(d.as_bytes()) {
            Ok(t) => each(t),
            Err(e) => bad(&d, e),
        }
    }
    Ok(())
}

/// A domain's queue in `seq` order, `{domain: 1, seq: 1}`: the
/// frontier's shard key (see `sharding`) and the prefix of
/// [`queue_index`].
pub fn queue_order() -> Document {
    doc! {SegmentDoc::DOMAIN: 1, SegmentDoc::SEQ: 1}
}

/// The frontier's queue index, [`queue_order`] then `state`: a domain's
/// queued segments in `seq` order (see [`Stores::ensure_indexes`]).
pub fn queue_index() -> Document {
    let mut keys = queue_order();
    keys.insert(SegmentDoc::STATE, 1);
    keys
}

async fn client(uri: &str, app_name: &str) -> anyhow::Result<Client> {
    let mut opts = client_options(uri, app_name).await?;
    opts.command_event_handler = crate::work::handler();
    Client::with_options(opts).context("creating MongoDB client")
}

/// A client whose commands the driver does not report (see `work::Sent`).
async fn unmonitored_client(uri: &str, app_name: &str) -> anyhow::Result<Client> {
    let opts = client_options(uri, app_name).await?;
    Client::with_options(opts).context("creating MongoDB client")
}

async fn client_options(uri: &str, app_name: &str) -> anyhow::Result<ClientOptions> {
    let mut opts = ClientOptions::parse(uri)
        .await
        .with_context(|| format!("bad MongoDB URI {:?}", redact_uri(uri)))?;
    opts.app_name = Some(app_name.to_string());
    opts.server_selection_timeout = Some(Duration::from_secs(10));
    opts.connect_timeout = Some(Duration::from_secs(5));
    Ok(opts)
}

/// `uri` with the password of its user info (`user:password@`) replaced
/// by `***`, and the values of query options that carry secrets, for
/// messages: a URI may be shown, its password never. A password may hold
/// `/`, `?`, `#` or `@` unencoded (the driver takes them), so everything
/// between `://` and the last `@` is user info.
pub fn redact_uri(uri: &str) -> String {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let redacted = match rest.rfind('@') {
        Some(at) => {
            let user = rest[..at].split_once(':').map_or(&rest[..at], |(user, _)| user);
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        }
        None => uri.to_string(),
    };
    redact_secret_options(&redacted)
}

/// Query options whose values are secrets (compared without case).
const SECRET_OPTIONS: [&str; 4] = [
    "password",
    "authmechanismproperties",
    "tlscertificatekeyfilepassword",
    "sslpemkeypassword",
];

fn redact_secret_options(uri: &str) -> String {
    let Some((head, query)) = uri.split_once('?') else {
        return uri.to_string();
    };
    let options: Vec<String> = query
        .split('&')
        .map(|option| match option.split_once('=') {
            Some((key, _)) if SECRET_OPTIONS.iter().any(|s| key.eq_ignore_ascii_case(s)) => {
                format!("{key}=***")
            }
            _ => option.to_string(),
        })
        .collect();
    format!("{head}?{}", options.join("&"))
}

/// Longest one store operation may take before it counts as failed. The
/// driver bounds connecting and server selection, not a server that takes
/// a request and never answers; every store call is wrapped in this.
pub const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest [`Stores::shutdown`] waits for a client.
const SHUTDOWN: Duration = Duration::from_secs(2);

/// Runs a store operation under [`OP_TIMEOUT`]; `None` when it timed out.
pub async fn deadline<F: std::future::IntoFuture>(op: F) -> Option<F::Output> {
    tokio::time::timeout(OP_TIMEOUT, op.into_future()).await.ok()
}

/// True when every error of a failed insert is a duplicate key (E11000):
/// the documents are already stored, which is success for an idempotent write.
pub fn only_duplicates(err: &mongodb::error::Error) -> bool {
    use mongodb::error::ErrorKind;
    match err.kind.as_ref() {
        ErrorKind::InsertMany(e) => {
            e.write_concern_error.is_none()
                && e.write_errors
                    .as_ref()
                    .is_some_and(|errs| errs.iter().all(|w| w.code == 11000))
        }
        ErrorKind::Write(mongodb::error::WriteFailure::WriteError(w)) => w.code == 11000,
        _ => false,
    }
}

/// Store writes are retried with growing pauses until they succeed: the
/// crawl must not lose a page or a URL because the store blinked.
pub struct Backoff(std::time::Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(Duration::from_millis(100))
    }
}

impl Backoff {
    /// Counts and reports the error, then sleeps (100 ms doubling to 10 s).
    pub async fn wait(&mut self, what: &str, err: &mongodb::error::Error) {
        self.note(what, &err.to_string()).await
    }

    /// [`Backoff::wait`] for an error already put in words.
    pub async fn note(&mut self, what: &str, why: &str) {
        crate::metric::STORE_ERRORS.get().increment(1);
        tracing::warn!(retry_in = ?self.0, error = %why, "{what} failed; retrying");
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(Duration::from_secs(10));
    }
}

/// Runs `write` until the store takes it (each try within
/// [`deadline`]), backing off between tries: for a record that must land
/// however long the store is away.
pub async fn until_taken<T, F, Fut>(what: &str, mut write: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::IntoFuture<Output = mongodb::error::Result<T>>,
{
    let mut backoff = Backoff::default();
    loop {
        match deadline(write()).await {
            Some(Ok(taken)) => return taken,
            Some(Err(e)) => backoff.wait(what, &e).await,
            None => backoff.note(what, "no answer in time").await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_shown_without_their_password() {
        assert_eq!(
            redact_uri("mongodb://crawler:s3cr%40t@db1:27017,db2/crawl?authSource=admin"),
            "mongodb://crawler:***@db1:27017,db2/crawl?authSource=admin"
        );
        assert_eq!(
            redact_uri("mongodb+srv://u:p@cluster.example/"),
            "mongodb+srv://u:***@cluster.example/"
        );
        assert_eq!(
            redact_uri("mongodb://127.0.0.1:27017"),
            "mongodb://127.0.0.1:27017"
        );
        assert_eq!(redact_uri("not a uri"), "not a uri");
        // A password holding `/`, `?`, `#` or `@` unencoded: all of it goes.
        for password in ["a/b", "a?b", "a#b", "a@b", "x/y?z#w@v"] {
            let shown = redact_uri(&format!("mongodb://crawler:{password}@db1:27017/crawl"));
            assert_eq!(shown, "mongodb://crawler:***@db1:27017/crawl", "{password}");
        }
        // Secret query options.
        assert_eq!(
            redact_uri("mongodb://db/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:tok&tlsCertificateKeyFilePassword=pw&w=1"),
            "mongodb://db/?authMechanism=MONGODB-AWS&authMechanismProperties=***&tlsCertificateKeyFilePassword=***&w=1"
        );
    }

    #[tokio::test]
    async fn a_bad_uri_is_reported_without_its_password() {
        let err = client("mongodb://u:hunter2@", "t").await.expect_err("a bad URI");
        let msg = format!("{err:#}");
        assert!(!msg.contains("hunter2"), "{msg}");
        assert!(msg.contains("u:***@"), "{msg}");
    }
}
