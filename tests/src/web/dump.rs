//! A [`SyntheticWeb`] written to files, for a stock web server to serve:
//! `synthweb --dump DIR`, which `scripts/bench.py --web nginx` serves with
//! nginx, to see what a page costs the crawl when a real server answers
//! instead of synthweb.
//!
//! Every file is what [`SyntheticWeb::respond`] answers (so the two cannot
//! drift apart), for every URL a crawl of the web can ask for: each
//! in-scope host's home page, pages, robots.txt, and every URL the ground
//! truth lists (stored or disallowed) with the hops of its redirects.
//! What `DIR` holds:
//!
//! - `hosts/<name>/`: one folder per in-scope host (nginx: `root
//!   DIR/hosts/$host;`, the Host header's name lower-cased without its
//!   port): `index.html` for `/`, `p/<n>` for a page (and its query-string
//!   variants: a static server ignores the query), `private/<n>`,
//!   `robots.txt`. A 404 is a file that is not there;
//! - `errors/404.html` and `errors/moved.html`: the bodies synthweb sends
//!   with a 404 and with a redirect;
//! - [`HTTP_CONF`]: nginx `map`s from `$host$request_uri` to each
//!   redirect's `Location`, one per status, to include at `http` level;
//! - [`SERVER_CONF`]: the rest, to include inside the `server` block:
//!   root, content types, error pages and the redirect rules.
//!
//! What differs from synthweb, by nature: a static server adds its own
//! headers (`Server`, `ETag`, `Last-Modified`, `Accept-Ranges`), serves a
//! page under any query string (synthweb only under the variants it
//! links), answers `/p` (a folder) with 404 as synthweb does, and sends a
//! redirect's `Content-Type` without its charset (nginx never names one
//! on a 301 or 302). Outside hosts are not written: a crawl never leaves
//! the in-scope hosts.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::html::{MOVED_HTML, NOT_FOUND_HTML};
use super::model::{parse_host, HostRef, Loc, WebExtras};
use super::synthetic::Answer;
use super::SyntheticWeb;

/// The include with the redirect maps, for nginx's `http` block.
pub const HTTP_CONF: &str = "nginx-http.conf";
/// The include for nginx's `server` block.
pub const SERVER_CONF: &str = "nginx-server.conf";
/// The folder of the hosts' folders.
pub const HOSTS_DIR: &str = "hosts";

/// The redirect statuses the dump can serve. nginx's `return 301 URL`
/// sends a body of its own; to send synthweb's, each redirect returns an
/// unused status that an `error_page` turns into the real one, answered
/// with `errors/moved.html` and the `Location` from the map. The unused
/// statuses are 5xx ones without a meaning to nginx (it closes the
/// connection after a 500 or 501, not after these).
const REDIRECTS: [(u16, u16); 5] = [(301, 551), (302, 552), (303, 553), (307, 557), (308, 558)];

/// What [`SyntheticWeb::dump`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dumped {
    /// Host folders.
    pub hosts: usize,
    /// Files under `hosts/` (pages and robots.txt).
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Redirect entries in the maps.
    pub redirects: usize,
}

/// One redirect, as the maps hold it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Redirect {
    /// `site3.test/r/5`: nginx's `$host$request_uri`.
    key: String,
    location: String,
}

impl SyntheticWeb {
    /// Writes the web to `dir` (created if missing; see the module's
    /// doc). Links and redirects name the port the web was built with, so
    /// the server must listen there. Only the generated web can be
    /// written: a web with [`WebExtras`] (hostile hosts, slow or changing
    /// pages) is refused, their answers are not files.
    pub fn dump(&self, dir: &Path) -> anyhow::Result<Dumped> {
        anyhow::ensure!(
            self.extras == WebExtras::default(),
            "only the generated web can be written to files, without hostile, trap, slow or changing hosts"
        );
        let mut out = Dumped::default();
        let mut redirects: BTreeMap<u16, BTreeSet<Redirect>> = BTreeMap::new();
        let mut made: HashSet<PathBuf> = HashSet::new();
        for (i, locs) in self.locations_to_dump() {
            let host = HostRef::InScope(i);
            let name = self.host_name(host);
            let root = dir.join(HOSTS_DIR).join(&name);
            std::fs::create_dir_all(&root)?;
            out.hosts += 1;
            for loc in locs {
                let path = loc.path();
                let resp = self.respond(&name, &path);
                match resp.status {
                    200 => {
                        let Some(rel) = file_of(loc) else {
                            anyhow::bail!("{name}{path} answers 200 but has no file name");
                        };
                        let file = root.join(rel);
                        if let Some(parent) = file.parent() {
                            if made.insert(parent.to_path_buf()) {
                                std::fs::create_dir_all(parent)?;
                            }
                        }
                        std::fs::write(&file, &resp.body)?;
                        out.files += 1;
                        out.bytes += resp.body.len() as u64;
                    }
                    404 => {}
                    status => {
                        let location = resp
                            .headers
                            .iter()
                            .find(|(k, _)| *k == "location")
                            .map(|(_, v)| v.clone());
                        let (Some(location), true) = (location, REDIRECTS.iter().any(|&(s, _)| s == status))
                        else {
                            anyhow::bail!("{name}{path} answers {status}, which a file cannot");
                        };
                        let key = format!("{name}{path}");
                        anyhow::ensure!(
                            !key.contains('$') && !location.contains('$'),
                            "{key} -> {location}: nginx would read a `$` as a variable"
                        );
                        redirects
                            .entry(status)
                            .or_default()
                            .insert(Redirect { key, location });
                        out.redirects += 1;
                    }
                }
            }
        }
        let errors = dir.join("errors");
        std::fs::create_dir_all(&errors)?;
        std::fs::write(errors.join("404.html"), NOT_FOUND_HTML)?;
        std::fs::write(errors.join("moved.html"), MOVED_HTML)?;
        std::fs::write(dir.join(HTTP_CONF), http_conf(&redirects))?;
        std::fs::write(dir.join(SERVER_CONF), server_conf(dir)?)?;
        Ok(out)
    }

    /// Every location to write, by in-scope host index: the home page,
    /// robots.txt and pages of each host, the URLs of the ground truth
    /// (stored ones, disallowed ones), and the hops of their redirects.
    fn locations_to_dump(&self) -> BTreeMap<usize, BTreeSet<Loc>> {
        let mut by_host: BTreeMap<usize, BTreeSet<Loc>> = BTreeMap::new();
        let mut todo: Vec<(usize, Loc)> = Vec::new();
        for i in 0..self.spec.hosts {
            let pages = self.pages_of(HostRef::InScope(i));
            todo.extend([(i, Loc::Home), (i, Loc::Robots)]);
            todo.extend((0..pages).map(|n| (i, Loc::Page(n))));
        }
        let exp = self.expected_crawl();
        for url in exp.pages.keys().chain(exp.must_not_fetch.iter()) {
            if let Some(at) = self.in_scope_location(url) {
                todo.push(at);
            }
        }
        while let Some((i, loc)) = todo.pop() {
            if !by_host.entry(i).or_default().insert(loc) {
                continue;
            }
            if let Answer::Redirect {
                host: HostRef::InScope(j),
                loc: next,
                ..
            } = self.answer(HostRef::InScope(i), loc)
            {
                todo.push((j, next));
            }
        }
        by_host
    }

    /// `(host index, location)` of an in-scope URL of this web.
    fn in_scope_location(&self, url: &str) -> Option<(usize, Loc)> {
        let rest = url.strip_prefix("http://")?;
        let at = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(at);
        match parse_host(authority, self.spec.hosts, self.spec.outside_hosts)? {
            HostRef::InScope(i) => Some((i, Loc::parse(if path.is_empty() { "/" } else { path })?)),
            HostRef::Outside(_) => None,
        }
    }
}

/// The file, under a host's folder, that answers `loc` (one that answers 200).
fn file_of(loc: Loc) -> Option<String> {
    match loc {
        Loc::Home => Some("index.html".into()),
        Loc::Robots => Some("robots.txt".into()),
        Loc::Page(n) | Loc::Variant(n, _) => Some(format!("p/{n}")),
        Loc::Private(n) => Some(format!("private/{n}")),
        Loc::Missing(_) | Loc::Redirect(_) | Loc::Chain(_) | Loc::Cross(..) => None,
    }
}

/// nginx's name for the map of one redirect status.
fn map_var(status: u16) -> String {
    format!("$synthweb_redirect_{status}")
}

/// A string as an nginx config string (double-quoted). A `$` in it names
/// a variable (nginx has no escape for it): [`SyntheticWeb::dump`] refuses
/// URLs with one, and paths use it on purpose (`$host`).
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if matches!(c, '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn http_conf(redirects: &BTreeMap<u16, BTreeSet<Redirect>>) -> String {
    let mut s = String::from(
        "# Written by `synthweb --dump`: the web's redirects, to include in nginx's `http` block.\n\
         # Keyed by \"$host$request_uri\" (the original URI: an error_page's internal\n\
         # redirect changes $uri but not $request_uri). Big maps need big hashes.\n\
         map_hash_max_size 1048576;\nmap_hash_bucket_size 128;\n",
    );
    for (status, _) in REDIRECTS {
        let _ = writeln!(
            s,
            "map \"$host$request_uri\" {} {{\n    default \"\";",
            map_var(status)
        );
        for r in redirects.get(&status).into_iter().flatten() {
            let _ = writeln!(s, "    {} {};", quoted(&r.key), quoted(&r.location));
        }
        s.push_str("}\n");
    }
    s
}

fn server_conf(dir: &Path) -> anyhow::Result<String> {
    let dir = dir.canonicalize()?;
    let dir = dir
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("{} is not UTF-8", dir.display()))?;
    anyhow::ensure!(!dir.contains('$'), "{dir}: nginx would read a `$` as a variable");
    let hosts = quoted(&format!("{dir}/{HOSTS_DIR}/$host"));
    let errors = quoted(&format!("{dir}/errors/"));
    let mut s = format!(
        "# Written by `synthweb --dump`: the web, to include in nginx's `server` block.\n\
         root {hosts};\n\
         # Pages have no extension: text/html unless .txt; charset as synthweb names it.\n\
         types {{ text/plain txt; text/html html; }}\n\
         default_type text/html;\n\
         charset utf-8;\n\
         error_page 404 /__synthweb/404.html;\n"
    );
    for (status, internal) in REDIRECTS {
        let _ = writeln!(s, "error_page {internal} ={status} /__synthweb/moved.html;");
    }
    let locations: String = REDIRECTS.iter().map(|&(status, _)| map_var(status)).collect();
    let _ = write!(
        s,
        "location /__synthweb/ {{\n    internal;\n    alias {errors};\n    \
         add_header Location \"{locations}\" always;\n}}\n\
         location = / {{\n    try_files /index.html =404;\n}}\n\
         location / {{\n"
    );
    for (status, internal) in REDIRECTS {
        let _ = writeln!(
            s,
            "    if ({}) {{\n        return {internal};\n    }}",
            map_var(status)
        );
    }
    s.push_str("    try_files $uri =404;\n}\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::model::Profile;
    use crate::web::WebSpec;

    fn web(profile: Profile) -> SyntheticWeb {
        let spec = match profile {
            Profile::Realistic => WebSpec::realistic_sized(6, 40),
            Profile::Small => WebSpec {
                hosts: 8,
                pages_per_host: 30,
                crawl_delay_every: 3,
                ..WebSpec::default()
            },
        };
        SyntheticWeb::new(spec, 4123)
    }

    /// The maps' entries: status → key → location.
    fn map_entries(conf: &str) -> BTreeMap<u16, BTreeMap<String, String>> {
        let mut out: BTreeMap<u16, BTreeMap<String, String>> = BTreeMap::new();
        let mut current = None;
        for line in conf.lines() {
            if let Some(rest) = line.strip_prefix("map \"$host$request_uri\" $synthweb_redirect_") {
                current = rest.split(' ').next().and_then(|s| s.parse::<u16>().ok());
                continue;
            }
            let line = line.trim();
            if line == "}" || line.starts_with("default") {
                continue;
            }
            if let (Some(status), Some(body)) = (current, line.strip_suffix(';')) {
                let parts: Vec<&str> = body.split("\" \"").collect();
                assert_eq!(parts.len(), 2, "{line}");
                let key = parts[0].trim_start_matches('"').to_string();
                let location = parts[1].trim_end_matches('"').to_string();
                out.entry(status).or_default().insert(key, location);
            }
        }
        out
    }

    /// Every URL of the ground truth reads the same from the files as from
    /// the server: a 200's bytes, a redirect's status and Location, a
    /// 404's absence; robots.txt too; and the config names the folders.
    #[test]
    fn a_dumped_web_serves_what_synthweb_serves() {
        for profile in [Profile::Realistic, Profile::Small] {
            let web = web(profile);
            let tmp = tempfile::tempdir().expect("tempdir");
            let dumped = web.dump(tmp.path()).expect("dump");
            assert_eq!(dumped.hosts, web.spec().hosts);
            let maps = map_entries(&std::fs::read_to_string(tmp.path().join(HTTP_CONF)).expect("http conf"));
            let hosts = tmp.path().join(HOSTS_DIR);
            let exp = web.expected_crawl();
            let (mut pages, mut redirects, mut missing) = (0, 0, 0);
            for url in exp.pages.keys() {
                let (i, loc) = web.in_scope_location(url).expect("in scope");
                let name = web.host_name(HostRef::InScope(i));
                let path = loc.path();
                let served = web.respond(&name, &path);
                let file = file_of(loc).map(|f| hosts.join(&name).join(f));
                match served.status {
                    200 => {
                        let file = file.expect("a 200 has a file");
                        assert_eq!(std::fs::read(&file).expect("file"), served.body, "{url}");
                        pages += 1;
                    }
                    404 => {
                        assert!(file.is_none_or(|f| !f.exists()), "{url}: a 404 has no file");
                        missing += 1;
                    }
                    status => {
                        let location = served
                            .headers
                            .iter()
                            .find(|(k, _)| *k == "location")
                            .map(|(_, v)| v);
                        let entry = maps.get(&status).and_then(|m| m.get(&format!("{name}{path}")));
                        assert_eq!(entry, location, "{url}");
                        redirects += 1;
                    }
                }
            }
            assert!(
                pages > 100 && missing > 0 && redirects > 0,
                "{profile:?}: {pages} {missing} {redirects}"
            );
            for i in 0..web.spec().hosts {
                let name = web.host_name(HostRef::InScope(i));
                let file = hosts.join(&name).join("robots.txt");
                match web.robots_txt(&name) {
                    Some(txt) => assert_eq!(std::fs::read_to_string(&file).expect("robots"), txt),
                    None => assert!(!file.exists(), "{name}: no robots.txt"),
                }
            }
            // A page past the last and a /missing/ URL are absent.
            let site0 = hosts.join("site0.test");
            assert!(!site0.join(format!("p/{}", web.spec().pages_per_host)).exists());
            assert!(!site0.join("missing").exists());
            let server = std::fs::read_to_string(tmp.path().join(SERVER_CONF)).expect("server conf");
            let root = tmp.path().canonicalize().expect("canonical");
            assert!(
                server.contains(&format!("root \"{}/hosts/$host\";", root.display())),
                "{server}"
            );
            assert_eq!(
                std::fs::read_to_string(tmp.path().join("errors/404.html")).expect("404"),
                NOT_FOUND_HTML
            );
        }
    }

    /// A same-host redirect chain's every hop is in the maps, and the page
    /// it ends at is a file.
    #[test]
    fn redirect_chains_are_written_hop_by_hop() {
        let web = web(Profile::Small);
        let tmp = tempfile::tempdir().expect("tempdir");
        web.dump(tmp.path()).expect("dump");
        let maps = map_entries(&std::fs::read_to_string(tmp.path().join(HTTP_CONF)).expect("http conf"));
        let chains = maps.get(&302).expect("302s");
        let (key, first) = chains
            .iter()
            .find(|(k, _)| k.contains("/rr/"))
            .expect("a /rr/ chain in the small web");
        let host = key.split('/').next().expect("host");
        let second = maps
            .get(&301)
            .and_then(|m| m.get(&format!("{host}{first}")))
            .expect("the chain's second hop");
        assert!(second.starts_with("/p/"), "{second}");
        assert!(tmp.path().join(HOSTS_DIR).join(host).join(&second[1..]).exists());
    }

    #[test]
    fn webs_with_extras_are_refused() {
        let web = SyntheticWeb::with_extras(
            WebSpec::default(),
            WebExtras {
                hostile: true,
                ..WebExtras::default()
            },
            4000,
        );
        let tmp = tempfile::tempdir().expect("tempdir");
        assert!(web.dump(tmp.path()).is_err());
    }
}
