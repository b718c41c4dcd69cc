//! A site of several host names, served only with
//! [`WebExtras::site_family`](super::WebExtras): what `--scope site` and the
//! operator's allow/deny rules are about.
//!
//! - `www.family.test/` links to `/about`, `/private/secret`,
//!   `http://blog.family.test:PORT/` and `http://shop.family.test:PORT/`
//!   (subdomains of the same registered domain) and
//!   `http://family-neighbour.test:PORT/` (another site);
//! - `blog.family.test/` links to `/post/1`, which links back to `www`;
//! - `family-neighbour.test/` links to `/x`.
//!
//! Every robots.txt allows everything. A crawl seeded with `www` alone and
//! `--scope site` requests `www` and `blog` and never the neighbour; with
//! `--scope seeds`, `www` alone.

use super::hostile::{not_found, page, reply, Reply};
use super::traps::ROBOTS_ALLOW_ALL;

/// One host of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FamilyHost {
    Www,
    Blog,
    Shop,
    Neighbour,
}

impl FamilyHost {
    pub const ALL: [FamilyHost; 4] = [
        FamilyHost::Www,
        FamilyHost::Blog,
        FamilyHost::Shop,
        FamilyHost::Neighbour,
    ];

    pub fn host(self) -> &'static str {
        match self {
            FamilyHost::Www => "www.family.test",
            FamilyHost::Blog => "blog.family.test",
            FamilyHost::Shop => "shop.family.test",
            FamilyHost::Neighbour => "family-neighbour.test",
        }
    }

    /// Every path the host serves (200), robots.txt aside.
    pub fn paths(self) -> &'static [&'static str] {
        match self {
            FamilyHost::Www => &["/", "/about", "/private/secret"],
            FamilyHost::Blog => &["/", "/post/1"],
            FamilyHost::Shop => &["/"],
            FamilyHost::Neighbour => &["/", "/x"],
        }
    }

    /// The answer to `GET path_and_query`; `host_header` (with its port)
    /// names the other hosts in absolute links.
    pub(crate) fn respond(self, host_header: &str, path_and_query: &str) -> Reply {
        let port = host_header
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .map_or(String::new(), |p| format!(":{p}"));
        let on = |h: FamilyHost, path: &str| format!("http://{}{port}{path}", h.host());
        let path = path_and_query.split(['?', '#']).next().unwrap_or("");
        if path == "/robots.txt" {
            return reply(200, "text/plain", ROBOTS_ALLOW_ALL);
        }
        if !self.paths().contains(&path) {
            return not_found();
        }
        let links: Vec<String> = match (self, path) {
            (FamilyHost::Www, "/") => vec![
                "/about".into(),
                "/private/secret".into(),
                on(FamilyHost::Blog, "/"),
                on(FamilyHost::Shop, "/"),
                on(FamilyHost::Neighbour, "/"),
            ],
            (FamilyHost::Blog, "/") => vec!["/post/1".into()],
            (FamilyHost::Blog, "/post/1") => vec![on(FamilyHost::Www, "/")],
            (FamilyHost::Neighbour, "/") => vec!["/x".into()],
            _ => Vec::new(),
        };
        let links: Vec<&str> = links.iter().map(String::as_str).collect();
        page(self.host(), &links)
    }
}

#[cfg(test)]
mod tests {
    use super::super::hostile::ReplyBody;
    use super::*;

    fn body(r: Reply) -> String {
        match r.body {
            ReplyBody::Full(b) => String::from_utf8(b.to_vec()).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_family_links_across_its_hosts_with_the_port_asked_for() {
        let www = body(FamilyHost::Www.respond("www.family.test:8123", "/"));
        assert!(www.contains("href=\"http://blog.family.test:8123/\""), "{www}");
        assert!(www.contains("href=\"http://family-neighbour.test:8123/\""));
        assert!(www.contains("href=\"/private/secret\""));
        let post = body(FamilyHost::Blog.respond("blog.family.test:8123", "/post/1"));
        assert!(post.contains("href=\"http://www.family.test:8123/\""));
        for h in FamilyHost::ALL {
            for p in h.paths() {
                assert_eq!(h.respond("x:1", p).status, 200, "{h:?} {p}");
            }
            assert_eq!(h.respond("x:1", "/robots.txt").status, 200);
            assert_eq!(h.respond("x:1", "/nope").status, 404);
        }
    }
}
