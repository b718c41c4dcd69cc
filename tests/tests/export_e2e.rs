//! End-to-end: crawl the synthetic web, then take the data out with
//! `pages export` and read it with an independent WARC reader, warcio,
//! and its CDXJ index with cdxj-indexer (both installed by
//! `scripts/warcio.sh`), as a researcher would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crawl_tests::harness::{all_docs, all_pages, args, bin, crawl_coll, repo_root, ClusterSpec, StoreServer};
use crawl_tests::in_process::run_in_process;
use crawl_tests::verify;
use crawl_tests::web::{WebServer, WebSpec};
use sha1::{Digest, Sha1};
use store::payload_digest::PayloadDigest;

fn web_spec() -> WebSpec {
    WebSpec {
        seed: 11,
        hosts: 6,
        outside_hosts: 1,
        pages_per_host: 40,
        crawl_delay_every: 0,
        ..WebSpec::default()
    }
}

/// Runs `pages ARGS` against the store; returns stdout.
fn pages(uri: &str, list: &[&str]) -> String {
    let out = Command::new(bin("pages").expect("the pages binary"))
        .env("CRAWLER_MONGO_URI", uri)
        .args(list)
        .output()
        .expect("running pages");
    assert!(
        out.status.success(),
        "pages {list:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs warcio's own Python on a script; returns stdout.
fn warcio_python(script: &str, file: &Path) -> String {
    warcio_python_args(script, &[file])
}

/// Runs warcio's own Python on a script with arguments; returns stdout.
fn warcio_python_args(script: &str, args: &[&Path]) -> String {
    let status = Command::new(repo_root().join("scripts/warcio.sh"))
        .arg("install")
        .status()
        .expect("scripts/warcio.sh install");
    assert!(status.success(), "installing warcio failed");
    let python = repo_root().join(".venv-warcio/bin/python");
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("running warcio's python");
    assert!(
        out.status.success(),
        "warcio script failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Reads a JSON lines or CSV export with Python's standard library only;
/// prints `{url: [status, title, domain, bytes]}` as JSON (values as text,
/// as CSV has them).
const STDLIB_READER: &str = r#"
import csv, json, sys
fmt, path = sys.argv[1], sys.argv[2]
with open(path, newline='', encoding='utf-8') as f:
    rows = [json.loads(l) for l in f] if fmt == 'jsonl' else list(csv.DictReader(f))
text = lambda v: '' if v is None else str(v)
print(json.dumps({r['url']: [text(r['status']), text(r['title']), r['domain'], text(r['bytes']), text(r['payload_digest'])] for r in rows}))
"#;

fn python_stdlib(script: &str, list: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(list)
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn warcio(list: &[&str]) -> (bool, String) {
    let out = Command::new(repo_root().join("scripts/warcio.sh"))
        .args(list)
        .output()
        .expect("running warcio");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `warcio index -f FIELDS file` (which must succeed, `when` says after
/// what), one JSON object a record.
pub(crate) fn warcio_index(fields: &str, file: &Path, when: &str) -> Vec<serde_json::Value> {
    let (ok, index) = warcio(&["index", "-f", fields, file.to_str().unwrap()]);
    assert!(ok, "warcio index failed{when}:\n{index}");
    index.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Checks the CDXJ index beside a WARC file with warcio and cdxj-indexer
/// (from PyPI, in warcio's virtualenv): it is sorted, it lists what
/// cdxj-indexer lists for the file, key for key and offset for offset, and
/// at each offset and length is the gzip member of the response (or
/// revisit) it names.
/// Prints what it saw as JSON.
const CDXJ_CHECK: &str = r#"
import io, json, re, subprocess, sys
from warcio.archiveiterator import ArchiveIterator
warc, indexer = sys.argv[1], sys.argv[2]
cdxj = re.sub(r'\.warc\.gz$', '.cdxj', warc)
ours = [l.rstrip('\n') for l in open(cdxj, encoding='utf-8')]
theirs = subprocess.run([indexer, warc], capture_output=True, text=True, check=True).stdout.splitlines()
def fields(line):
    key, ts, js = line.split(' ', 2)
    j = json.loads(js)
    return (key, ts, j['url'], j.get('mime'), j.get('status'), j.get('digest'), j['length'], j['offset'], j['filename'])
mine, other = sorted(map(fields, ours)), sorted(map(fields, theirs))
read = 0
with open(warc, 'rb') as f:
    for key, ts, url, mime, status, digest, length, offset, name in map(fields, ours):
        f.seek(int(offset))
        member = f.read(int(length))
        rec = next(ArchiveIterator(io.BytesIO(member)))
        ok = (rec.rec_type in ('response', 'revisit') and rec.rec_headers.get_header('WARC-Target-URI') == url
              and re.sub(r'\D', '', rec.rec_headers.get_header('WARC-Date')) == ts
              and (rec.http_headers.get_statuscode() if rec.http_headers else None) == status)
        if not ok:
            raise SystemExit(f'not the record indexed at {offset}: {url}')
        rec.content_stream().read()
        read += 1
print(json.dumps({'lines': len(ours), 'sorted': ours == sorted(ours), 'same_as_cdxj_indexer': mine == other,
                  'cdxj_indexer_lines': len(theirs), 'read_at_offsets': read,
                  'first_difference': next(([a, b] for a, b in zip(mine, other) if a != b), None)}))
"#;

/// Counts the `metadata` records that keep a 304's head (a
/// `response-status-line` of status 304, see `pages/src/export/captures.rs`)
/// and are concurrent to a `server-not-modified` revisit record.
const METADATA_304: &str = r#"
import sys
from warcio.archiveiterator import ArchiveIterator
revisits, found = set(), 0
with open(sys.argv[1], 'rb') as f:
    for rec in ArchiveIterator(f):
        h = rec.rec_headers
        if rec.rec_type == 'revisit' and (h.get_header('WARC-Profile') or '').endswith('/server-not-modified'):
            revisits.add(h.get_header('WARC-Record-ID'))
        elif rec.rec_type == 'metadata' and h.get_header('WARC-Concurrent-To') in revisits:
            fields = rec.content_stream().read().decode('utf-8').split('\r\n')
            status = [l.split(': ', 1)[1] for l in fields if l.startswith('response-status-line: ')]
            if status and status[0].split()[1] == '304':
                found += 1
print(found)
"#;

/// Runs [`METADATA_304`] on `file`.
pub(crate) fn warcio_304_metadata(file: &Path) -> usize {
    warcio_python(METADATA_304, file).trim().parse().unwrap()
}

/// Runs [`CDXJ_CHECK`] on `file`; its findings.
pub(crate) fn check_cdxj(file: &Path) -> serde_json::Value {
    let indexer = repo_root().join(".venv-warcio/bin/cdxj-indexer");
    let out = warcio_python_args(CDXJ_CHECK, &[file, &indexer]);
    serde_json::from_str(out.trim()).unwrap()
}

/// `pages export --format FORMAT --out DIR` of the store at `uri`.
pub(crate) fn export(uri: &str, format: &str, out: &Path) {
    pages(
        uri,
        &["export", "--format", format, "--out", out.to_str().unwrap()],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_exports_to_warc_that_warcio_reads_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreServer::start().unwrap();
    let server = WebServer::local(web_spec()).await;
    let web = server.web();
    let mut spec = ClusterSpec::for_web(&store.uri, &server, dir.path()).unwrap();
    spec.supervisors = 1;
    spec.dispatcher_args = args(&["--min-delay-ms", "5", "--max-depth", "100"]);
    let run = run_in_process(&spec, Duration::from_secs(300)).await.unwrap();
    verify::assert_exited_ok(&run);

    let db = store.client().await.unwrap().database("crawler");
    let stored = all_pages(&db, &Default::default()).await.unwrap();
    assert!(stored.len() >= 100, "only {} pages stored", stored.len());
    // The exchange is kept with each page: the address dialled and the
    // headers both ways.
    for d in &stored {
        let id = &d.url;
        assert_eq!(d.ip.as_deref(), Some("127.0.0.1"), "ip of {id}");
        let ex = store::exchange::Exchange::of(d);
        assert!(
            ex.request_headers.iter().any(|(n, _)| n == "user-agent"),
            "request headers of {id}"
        );
        assert!(!ex.headers.is_empty(), "response headers of {id}");
        let status = d.status;
        assert!(
            ex.status_line
                .as_deref()
                .is_some_and(|l| l.starts_with(&format!("HTTP/1.1 {status}"))),
            "status line of {id}: {:?}",
            ex.status_line
        );
    }

    // Each crawled host's robots.txt response, kept for the archive.
    let robots_txt = all_docs(&db, &crawl_coll(store::ROBOTS_TXT)).await.unwrap();
    let hosts: BTreeSet<&str> = stored.iter().map(|p| p.domain.as_str()).collect();
    let asked: BTreeSet<&str> = robots_txt
        .iter()
        .map(|d| d.get_document("page").unwrap().get_str("domain").unwrap())
        .collect();
    assert_eq!(asked, hosts, "hosts whose robots.txt response was kept");
    assert_eq!(robots_txt.len(), hosts.len(), "robots.txt responses kept");
    let responses = stored.len() + robots_txt.len();

    // WARC, checked by warcio: every record's digests verify.
    let out = dir.path().join("warc");
    export(&store.uri, "warc", &out);
    let file = out.join("pages-00000.warc.gz");
    let (ok, text) = warcio(&["check", "-v", file.to_str().unwrap()]);
    assert!(ok, "warcio check failed:\n{text}");
    assert!(text.contains("digest pass"), "warcio checked no digest:\n{text}");
    assert!(!text.contains("digest fail"), "a digest failed:\n{text}");

    // One response, request and metadata record per stored page and
    // robots.txt response (and a warcinfo), per warcio's index.
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for v in warcio_index("warc-type,warc-target-uri", &file, "") {
        *kinds
            .entry(v["warc-type"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(kinds.get("warcinfo"), Some(&1), "{kinds:?}");
    for kind in ["response", "request", "metadata"] {
        assert_eq!(kinds.get(kind), Some(&responses), "{kind} records: {kinds:?}");
    }

    // Its CDXJ index: one line per response, what cdxj-indexer makes of
    // the file, and each line finds its record.
    let index = check_cdxj(&file);
    eprintln!("CDXJ index: {index}");
    assert_eq!(index["lines"], responses, "{index}");
    assert_eq!(index["sorted"], true, "{index}");
    assert_eq!(index["same_as_cdxj_indexer"], true, "{index}");
    assert_eq!(index["read_at_offsets"], responses, "{index}");

    // Each 200 page's payload (and robots.txt's), as warcio reads it, is
    // byte for byte what the synthetic web served.
    let script = r#"
import hashlib, json, sys
from warcio.archiveiterator import ArchiveIterator
with open(sys.argv[1], 'rb') as f:
    for r in ArchiveIterator(f):
        if r.rec_type == 'response':
            body = r.content_stream().read()
            print(json.dumps({'uri': r.rec_headers.get_header('WARC-Target-URI'),
                              'status': r.http_headers.get_statuscode(),
                              'ip': r.rec_headers.get_header('WARC-IP-Address'),
                              'digest': r.rec_headers.get_header('WARC-Payload-Digest'),
                              'sha1': hashlib.sha1(body).hexdigest()}))
"#;
    let by_url: BTreeMap<&str, &store::docs::PageDoc> = stored
        .iter()
        .map(|p| (p.final_url.as_deref().unwrap_or(&p.url), p))
        .collect();
    let mut checked = 0;
    let mut robots_checked = 0;
    for line in warcio_python(script, &file).lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["ip"], "127.0.0.1");
        if v["status"] != "200" {
            continue;
        }
        let url = url::Url::parse(v["uri"].as_str().unwrap()).unwrap();
        let served = web.respond(url.host_str().unwrap(), &url[url::Position::BeforePath..]);
        let want = hex(&Sha1::digest(&served.body));
        assert_eq!(
            v["sha1"].as_str().unwrap(),
            want,
            "payload of {url} differs from what was served"
        );
        if url.path() == "/robots.txt" {
            robots_checked += 1;
            continue;
        }
        // The digest the child took at fetch time is the served body's,
        // and the record names it (warcio checked it against the payload).
        let page = by_url.get(url.as_str()).expect("a record of a stored page");
        let at_fetch = page.payload_sha1.expect("a digest taken at fetch time");
        assert_eq!(at_fetch, PayloadDigest::of(&served.body), "{url}");
        assert_eq!(v["digest"].as_str(), Some(at_fetch.warc().as_str()), "{url}");
        checked += 1;
    }
    assert!(checked >= 100, "only {checked} payloads compared");
    let robots_200 = robots_txt
        .iter()
        .filter(|d| d.get_document("page").unwrap().get_i32("status") == Ok(200))
        .count();
    assert_eq!(robots_checked, robots_200, "robots.txt payloads compared");
    assert!(robots_200 > 0);

    // JSON lines and CSV: one line a page (CSV after its header).
    let jsonl = dir.path().join("jsonl");
    export(&store.uri, "jsonl", &jsonl);
    let lines = std::fs::read_to_string(jsonl.join("pages-00000.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), stored.len());
    let csv = dir.path().join("csv");
    export(&store.uri, "csv", &csv);
    // Both read by Python's standard library (json, csv) say what the
    // store holds, page by page.
    let want: BTreeMap<String, serde_json::Value> = stored
        .iter()
        .map(|p| {
            let row = serde_json::json!([
                p.status.to_string(),
                p.title.clone().unwrap_or_default(),
                p.domain,
                p.bytes.to_string(),
                p.payload_sha1.map(|h| h.warc()).unwrap_or_default()
            ]);
            (p.url.clone(), row)
        })
        .collect();
    for (format, file) in [
        ("jsonl", jsonl.join("pages-00000.jsonl")),
        ("csv", csv.join("pages-00000.csv")),
    ] {
        let got: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&python_stdlib(STDLIB_READER, &[format, file.to_str().unwrap()])).unwrap();
        assert_eq!(got.len(), want.len(), "{format}: pages");
        assert!(got == want, "{format} differs from the store");
    }

    // A second run of a finished export writes nothing more.
    let before = std::fs::metadata(&file).unwrap().len();
    export(&store.uri, "warc", &out);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), before);

    // An export cut short (its last checkpoint half-way, then half a
    // record more written) resumes to the same records: pages go in `_id`
    // order, three records each after the warcinfo.
    let records = warcio_index("offset,warc-type,warc-target-uri", &file, "");
    let mut ids: Vec<&str> = stored.iter().map(|d| d.url.as_str()).collect();
    ids.sort_unstable();
    let k = ids.len() / 2;
    let cut: u64 = records[1 + 3 * k]["offset"].as_str().unwrap().parse().unwrap();
    let state_path = out.join("export-state.json");
    let mut state: serde_json::Value = serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    state["finished"] = false.into();
    state["last_id"] = ids[k - 1].into();
    state["file_bytes"] = cut.into();
    state["pages"] = k.into();
    state["robots_txt"] = 0.into();
    state["last_robots_txt"] = serde_json::Value::Null;
    std::fs::write(&state_path, serde_json::to_vec(&state).unwrap()).unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.truncate(cut as usize + 100);
    std::fs::write(&file, &bytes).unwrap();
    export(&store.uri, "warc", &out);
    let (ok, text) = warcio(&["check", file.to_str().unwrap()]);
    assert!(ok, "warcio check failed after resuming:\n{text}");
    let resumed = warcio_index("warc-type,warc-target-uri", &file, " after resuming");
    let uris = |index: &[serde_json::Value]| -> Vec<(String, String)> {
        index
            .iter()
            .map(|v| (v["warc-type"].to_string(), v["warc-target-uri"].to_string()))
            .collect()
    };
    assert_eq!(
        uris(&resumed),
        uris(&records),
        "the resumed export differs from the whole one"
    );
    // The index is made again from the file as it now is.
    let index = check_cdxj(&file);
    assert_eq!(index["read_at_offsets"], responses, "after resuming: {index}");
    assert_eq!(index["same_as_cdxj_indexer"], true, "after resuming: {index}");
    // Every record, those written after the resume too, names the file's
    // own warcinfo record.
    let ids = warcio_index("warc-type,warc-record-id,warc-warcinfo-id", &file, "");
    let info = ids[0]["warc-record-id"].as_str().unwrap();
    assert_eq!(ids[0]["warc-type"], "warcinfo");
    assert!(
        ids[1..].iter().all(|v| v["warc-warcinfo-id"] == info),
        "a record names another warcinfo"
    );

    // stats counts every page.
    let stats = pages(&store.uri, &["stats"]);
    assert!(
        stats.starts_with(&format!("pages: {}\n", stored.len())),
        "{stats}"
    );
    // and the bodies by their digests taken at fetch time.
    let bodies = stored
        .iter()
        .filter(|p| (200..300).contains(&p.status) && p.bytes > 0)
        .count();
    assert!(
        stats.contains(&format!(
            "bodies (2xx, by the SHA-1 taken at fetch time): {bodies} pages, "
        )),
        "{stats}"
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
