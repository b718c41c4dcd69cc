//! Replay in pywb (installed by `scripts/pywb.sh`), the tool researchers
//! open a web archive with: a crawl's `pages export --format warc` is
//! served by pywb's `wayback` on loopback, from two collections of the
//! same file, one indexed by our CDXJ index and one by pywb's own indexer
//! (`wb-manager add`), and every capture is fetched back at its time.
//!
//! What must hold (every capture through our index, the revisits through
//! pywb's too): a page's first capture replays with its status and the
//! body stored (the digest taken at fetch time); a later changed one with
//! its new body; a revisit of a 304 with status 200 and
//! the body of the capture it repeats (pywb replays a revisit whose own
//! head says 3xx as an empty redirect: see `pages/src/export/captures.rs`);
//! a same-payload revisit with its own status and the repeated body (the
//! synthetic web's are 404s and redirects, whose bodies the export does
//! not keep: their status is what is checked).
//!
//! The crawl is `revisit_e2e`'s, which calls [`check`] on its export: a
//! crawl of its own would cost this test a minute more of CI.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bson::DateTime;
use crawl_tests::harness::{free_port, repo_root};
use store::docs::{CaptureDoc, CaptureKind, PageDoc};
use store::payload_digest::PayloadDigest;

/// The two collections: the export's own CDXJ index, and pywb's.
const COLLECTIONS: [&str; 2] = ["ours", "pywb"];

/// pywb's `wayback`, serving a folder of collections on loopback; stopped
/// on drop.
struct Wayback {
    child: std::process::Child,
    port: u16,
}

impl Wayback {
    /// Starts it in `root` (which holds `collections/`) and waits until it
    /// answers.
    async fn start(root: &Path) -> Wayback {
        let port = free_port();
        let child = Command::new(pywb("wayback"))
            .args(["-b", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(root)
            .stdout(std::fs::File::create(root.join("wayback.log")).unwrap())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("starting pywb's wayback");
        let w = Wayback { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = client();
        loop {
            let up = client.get(w.url("/")).send().await.is_ok();
            if up {
                return w;
            }
            assert!(Instant::now() < deadline, "wayback did not answer in 60 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Wayback {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pywb(command: &str) -> PathBuf {
    let status = Command::new(repo_root().join("scripts/pywb.sh"))
        .arg("install")
        .status()
        .expect("scripts/pywb.sh install");
    assert!(status.success(), "installing pywb failed");
    repo_root().join(".venv-pywb/bin").join(command)
}

fn client() -> reqwest::Client {
    shared::http_client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The 14-digit timestamp a capture's WARC-Date gives it in an index.
fn timestamp(t: DateTime) -> String {
    let s = t.try_to_rfc3339_string().unwrap();
    s.chars().filter(char::is_ascii_digit).take(14).collect()
}

/// When a visit's records are dated: its request's start.
fn started(page: &PageDoc) -> DateTime {
    store::exchange::fetch_started(page).unwrap_or(page.fetched_at)
}

/// What replaying one capture must give.
struct Expect {
    url: String,
    at: DateTime,
    what: &'static str,
    status: u16,
    /// The payload's digest, where the export keeps the body.
    digest: Option<PayloadDigest>,
}

/// What each capture of `pages` and `captures` must replay as.
fn expectations(pages: &[PageDoc], captures: &[CaptureDoc]) -> Vec<Expect> {
    let mut out = Vec::new();
    let target = |p: &PageDoc| p.final_url.clone().unwrap_or_else(|| p.url.clone());
    let status = |p: &PageDoc| u16::try_from(p.status).unwrap();
    for p in pages {
        // A page whose body was not kept (not HTML, cut to fit) replays
        // what was kept; the check is on the ones kept whole.
        if p.status == 200 && !p.truncated {
            out.push(Expect {
                url: target(p),
                at: started(p),
                what: "first capture",
                status: 200,
                digest: p.payload_sha1,
            });
        }
    }
    for c in captures {
        let url = target(&c.page);
        let at = started(&c.page);
        match c.kind {
            CaptureKind::Changed if c.page.status == 200 && !c.page.truncated => out.push(Expect {
                url,
                at,
                what: "changed",
                status: 200,
                digest: c.page.payload_sha1,
            }),
            CaptureKind::Changed => {}
            CaptureKind::NotModified => {
                // The latest capture with a payload before this one: what
                // the 304 says the page still is.
                let before = pages
                    .iter()
                    .filter(|p| p.url == c.id.url)
                    .map(|p| (started(p), p))
                    .chain(
                        captures
                            .iter()
                            .filter(|o| o.id.url == c.id.url && o.kind == CaptureKind::Changed)
                            .map(|o| (started(&o.page), &o.page)),
                    )
                    .filter(|(t, _)| *t < at)
                    .max_by_key(|(t, _)| *t)
                    .map(|(_, p)| p)
                    .expect("a 304 repeats an earlier capture");
                out.push(Expect {
                    url,
                    at,
                    what: "304 revisit",
                    status: status(before),
                    digest: before.payload_sha1,
                });
            }
            CaptureKind::SamePayload => {
                // The body is checked where the export keeps it: a 200's
                // (a 404's or a redirect's is received, not kept).
                let kept = c.page.status == 200 && !c.page.truncated;
                out.push(Expect {
                    url,
                    at,
                    what: "same-payload revisit",
                    status: status(&c.page),
                    digest: if kept { c.page.payload_sha1 } else { None },
                })
            }
        }
    }
    out
}

/// Replays every capture of the export in `export_dir` (one WARC file and
/// its CDXJ index) in pywb from our index, and every revisit from pywb's
/// index too, and asserts each gives what [`expectations`] says. Returns what was replayed, by
/// kind, for the test's summary line.
pub(crate) async fn check(export_dir: &Path, pages: &[PageDoc], captures: &[CaptureDoc]) -> String {
    let started_at = Instant::now();
    let warc = export_dir.join("pages-00000.warc.gz");
    let root = tempfile::tempdir().unwrap();
    let wb_manager = pywb("wb-manager");
    for name in COLLECTIONS {
        let ok = Command::new(&wb_manager)
            .args(["init", name])
            .current_dir(root.path())
            .output()
            .unwrap();
        assert!(ok.status.success(), "wb-manager init: {ok:?}");
    }
    // Ours: the file and our index, as a researcher copies them in.
    let ours = root.path().join("collections/ours");
    std::fs::copy(&warc, ours.join("archive/pages-00000.warc.gz")).unwrap();
    std::fs::copy(
        export_dir.join("pages-00000.cdxj"),
        ours.join("indexes/index.cdxj"),
    )
    .unwrap();
    // pywb's: its own indexer over the same file.
    let added = Command::new(&wb_manager)
        .args(["add", "pywb", warc.to_str().unwrap()])
        .current_dir(root.path())
        .output()
        .unwrap();
    assert!(added.status.success(), "wb-manager add: {added:?}");

    let wayback = Wayback::start(root.path()).await;
    let client = client();
    let expect = expectations(pages, captures);
    let kinds = ["first capture", "changed", "304 revisit", "same-payload revisit"];
    let mut counts = [0usize; 4];
    for e in &expect {
        // Every capture from our index; from pywb's, the revisits (what
        // replayed wrong before), to keep the test short.
        let revisit = e.what.ends_with("revisit");
        for coll in COLLECTIONS.into_iter().filter(|c| *c == "ours" || revisit) {
            // `id_`: the archived bytes as they were, not rewritten for a browser.
            let path = format!("/{coll}/{}id_/{}", timestamp(e.at), e.url);
            let resp = client.get(wayback.url(&path)).send().await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.bytes().await.unwrap();
            assert_eq!(
                status,
                e.status,
                "{} of {} at {} in {coll}: {}",
                e.what,
                e.url,
                timestamp(e.at),
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
            if let Some(d) = e.digest {
                assert!(
                    PayloadDigest::of(&body) == d,
                    "{} of {} at {} in {coll}: a body of {} bytes that is not the one stored",
                    e.what,
                    e.url,
                    timestamp(e.at),
                    body.len()
                );
            }
        }
        if let Some(i) = kinds.iter().position(|k| *k == e.what) {
            counts[i] += 1;
        }
    }
    let summary = kinds
        .iter()
        .zip(counts)
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "replayed in pywb (revisits from our index and pywb's, the rest from ours): {summary} ({:.1} s)",
        started_at.elapsed().as_secs_f64()
    )
}
