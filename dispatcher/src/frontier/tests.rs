//! The frontier's own tests: leasing, supervisors, blocks and adoption.

use link::protocol::WorkItem;

use super::domains::DomainQ;
use super::*;

fn f() -> Frontier {
    let mut f = Frontier::new(2, 1000, 1);
    f.start_assigning();
    f
}

/// The record every domain held costs (a `Vec` slot, besides its
/// name and its window): a crawl may hold millions of domains.
#[test]
#[cfg(target_pointer_width = "64")]
fn a_domain_record_stays_small() {
    assert!(
        std::mem::size_of::<DomainQ>() <= 120,
        "{}",
        std::mem::size_of::<DomainQ>()
    );
}

#[test]
fn leases_round_robin_over_domains() {
    let mut f = f();
    let s = f.add_supervisor();
    for i in 0..5 {
        for d in ["a", "b"] {
            let url = format!("http://{d}/{i}");
            f.push(url, d, 0);
        }
    }
    assert_eq!(f.queued(), 10);
    let got = f.take(s, 10, 0);
    // Two per domain at most (max in flight), alternating domains.
    let domains: Vec<_> = got.iter().map(|w| w.domain.as_str()).collect();
    assert_eq!(domains, ["a", "b", "a", "b"]);
    assert_eq!(f.in_flight(), 4);
    // Completing one frees room for that domain only.
    assert!(f.complete(got[0].lease).is_some());
    assert!(f.complete(got[0].lease).is_none());
    let more = f.take(s, 10, 0);
    assert_eq!(more.len(), 1);
    assert_eq!(more[0].domain, "a");
    assert_eq!(more[0].url, "http://a/2");
}

/// One supervisor and domains `d0`.. with `urls` URLs each
/// (`http://d{n}/{i}`), leased one at a time per domain.
fn one_url_at_a_time(domains: usize, urls: usize) -> (Frontier, SupId) {
    let mut f = Frontier::new(1, 1000, 1);
    f.start_assigning();
    let s = f.add_supervisor();
    for d in 0..domains {
        for i in 0..urls {
            f.push(format!("http://d{d}/{i}"), &format!("d{d}"), 0);
        }
    }
    (f, s)
}

/// One domain's URLs follow each other, not one per rotation over every
/// other domain (owners' module doc): at 100,000 domains a rotation took
/// minutes, and a domain's connection was gone by its next URL.
#[test]
fn a_domain_being_crawled_is_served_before_those_waiting_their_first_turn() {
    let (mut f, s) = one_url_at_a_time(20, 3);
    let first = f.take(s, 1, 0);
    assert_eq!(first[0].url, "http://d0/0");
    f.complete(first[0].lease).unwrap();
    // d0's result came: its next URL goes before 19 domains never leased.
    let next = f.take(s, 1, 0);
    assert_eq!(next[0].url, "http://d0/1");
}

/// New domains start only as the crawled ones leave room: while a
/// crawled domain is ready, no domain waiting its first turn is taken, so
/// the domains being crawled do not grow in number (owners' module doc:
/// they had, a new one every eight picks, and their gaps with them).
#[test]
fn new_domains_start_as_crawled_ones_leave_room() {
    let (mut f, s) = one_url_at_a_time(40, 3);
    // d0 and d1 start, each answered, so both are being crawled.
    for w in f.take(s, 2, 0) {
        f.complete(w.lease).unwrap();
    }
    // Their remaining four URLs come before any other domain's.
    let mut order = Vec::new();
    for _ in 0..6 {
        let w = f.take(s, 1, 0).remove(0);
        order.push(w.domain.clone());
        f.complete(w.lease).unwrap();
    }
    assert_eq!(order, ["d0", "d1", "d0", "d1", "d2", "d2"]);
}

/// A domain that spent its session gives way: one waiting its first turn
/// takes its place, and it waits behind the others (Heritrix's rotation),
/// so a crawl's breadth advances however big its domains are.
#[test]
fn a_domain_that_spent_its_session_gives_way_to_one_that_waited() {
    let session = usize::from(owners::SESSION_LEASES);
    let (mut f, s) = one_url_at_a_time(3, 2 * session + 10);
    let mut runs: Vec<(String, usize)> = Vec::new();
    for _ in 0..3 * session + 5 {
        let w = f.take(s, 1, 0).remove(0);
        match runs.last_mut() {
            Some((d, n)) if *d == w.domain => *n += 1,
            _ => runs.push((w.domain.clone(), 1)),
        }
        f.complete(w.lease).unwrap();
    }
    let runs: Vec<(&str, usize)> = runs.iter().map(|(d, n)| (d.as_str(), *n)).collect();
    assert_eq!(
        runs,
        [("d0", session), ("d1", session), ("d2", session), ("d0", 5)]
    );
}

#[test]
fn domains_spread_over_supervisors_and_survive_one_leaving() {
    let mut f = f();
    let s1 = f.add_supervisor();
    let s2 = f.add_supervisor();
    for d in ["a", "b", "c", "d"] {
        f.push(format!("http://{d}/"), d, 0);
    }
    let t1 = f.take(s1, 10, 0);
    let t2 = f.take(s2, 10, 0);
    assert_eq!(t1.len(), 2);
    assert_eq!(t2.len(), 2);
    // s1 dies holding its leases: they go back and to s2.
    assert_eq!(f.remove_supervisor(s1), 2);
    assert_eq!(f.queued(), 2);
    let t2b = f.take(s2, 10, 0);
    let mut urls: Vec<_> = t2b.iter().map(|w| w.url.clone()).collect();
    urls.sort();
    let mut expect: Vec<_> = t1.iter().map(|w| w.url.clone()).collect();
    expect.sort();
    assert_eq!(urls, expect);
}

#[test]
fn domains_wait_until_assigning_starts_then_spread() {
    let mut f = Frontier::new(2, 1000, 1);
    for d in ["a", "b", "c", "d"] {
        f.push(format!("http://{d}/"), d, 0);
    }
    let s1 = f.add_supervisor();
    assert!(f.take(s1, 10, 0).is_empty());
    let s2 = f.add_supervisor();
    f.start_assigning();
    assert_eq!(f.take(s1, 10, 0).len(), 2);
    assert_eq!(f.take(s2, 10, 0).len(), 2);
}

#[test]
fn paused_and_halted_domains_keep_their_urls() {
    let mut f = f();
    let s = f.add_supervisor();
    for i in 0..3 {
        f.push(format!("http://a/{i}"), "a", 0);
        f.push(format!("http://b/{i}"), "b", 0);
    }
    f.pause("a", 1000);
    f.halt("b");
    assert!(f.take(s, 10, 0).is_empty());
    assert_eq!(f.blocked_domains(), (vec!["a"], vec!["b"]));
    assert!(!f.is_idle());
    f.release_blocked(999);
    assert!(f.take(s, 10, 999).is_empty());
    f.release_blocked(1000);
    let a = f.take(s, 10, 1000);
    assert_eq!(a.len(), 2);
    for w in &a {
        f.complete(w.lease);
    }
    let rest = f.take(s, 10, 1000);
    assert_eq!(rest.len(), 1);
    f.complete(rest[0].lease);
    // Only the halted domain's URLs are left: the crawl can end, they stay queued.
    assert!(f.is_idle());
    assert_eq!(f.queued(), 3);
    assert!(f.unhalt("b"));
    assert!(!f.unhalt("b"));
    assert!(!f.is_idle());
    assert_eq!(f.take(s, 10, 1000).len(), 2);
}

#[test]
fn work_waits_for_a_supervisor_and_leases_expire() {
    let mut f = f();
    f.push("http://a/".into(), "a", 0);
    assert!(!f.is_idle());
    let s = f.add_supervisor();
    let t = f.take(s, 10, 100);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].lease_expires_ms, 1100);
    assert_eq!(f.expire(1099), 0);
    assert_eq!(f.expire(1100), 1);
    let again = f.take(s, 10, 2000);
    assert_eq!(again[0].url, "http://a/");
    assert_ne!(again[0].lease, t[0].lease);
    f.complete(again[0].lease);
    assert!(f.is_idle());
}

#[test]
fn credit_comes_back_however_a_lease_ends() {
    let mut f = Frontier::new(100, 1000, 1);
    f.start_assigning();
    let s = f.add_supervisor();
    for i in 0..6 {
        f.push(format!("http://a/{i}"), "a", 0);
    }
    let t = f.take(s, 6, 0);
    assert_eq!(f.held(s), 6);
    // A result gives one back, once: a duplicate result gives nothing.
    assert!(f.complete(t[0].lease).is_some());
    assert!(f.complete(t[0].lease).is_none());
    assert_eq!(f.held(s), 5);
    // Expiry gives back what expired.
    assert_eq!(f.expire(1000), 5);
    assert_eq!(f.held(s), 0);
    // A late result for an expired lease gives nothing back twice.
    assert!(f.complete(t[1].lease).is_none());
    assert_eq!(f.held(s), 0);
    // The re-queued URLs are leased again, and the supervisor leaving
    // gives their credit back too.
    assert_eq!(f.take(s, 10, 2000).len(), 5);
    assert_eq!(f.held(s), 5);
    assert_eq!(f.remove_supervisor(s), 5);
    assert_eq!(f.held(s), 0);
}

#[test]
fn heartbeats_renew_only_the_holders_leases() {
    let mut f = Frontier::new(100, 1000, 1);
    f.start_assigning();
    let s1 = f.add_supervisor();
    let s2 = f.add_supervisor();
    f.push("http://a/0".into(), "a", 0);
    f.push("http://b/0".into(), "b", 0);
    let t1 = f.take(s1, 10, 0);
    let t2 = f.take(s2, 10, 0);
    assert_eq!((t1.len(), t2.len()), (1, 1));
    // s1 renews its lease at 900; s2 tries to renew s1's and its own
    // unknown lease id 999 (a peer that lies changes nothing).
    assert_eq!(f.renew(s1, &[t1[0].lease], 900), 1);
    assert_eq!(f.renew(s2, &[t1[0].lease, 999], 900), 0);
    // At 1000 only s2's unrenewed lease expires.
    assert_eq!(f.expire(1000), 1);
    assert_eq!(f.held(s1), 1);
    assert_eq!(f.held(s2), 0);
    // Renewal never shortens a lease, and s1's runs to 1900.
    assert_eq!(f.renew(s1, &[t1[0].lease], 0), 1);
    assert_eq!(f.expire(1899), 0);
    assert_eq!(f.expire(1900), 1);
    assert_eq!(f.held(s1), 0);
}

#[test]
fn a_restarted_dispatcher_adopts_what_a_supervisor_still_holds() {
    // The old dispatcher leased a/0, a/1 and b/0 (lease ids 500..502);
    // the new one read all of a/0..a/2 and b/0 back as queued.
    let mut f = Frontier::new(2, 1000, 1);
    for u in ["http://a/0", "http://a/1", "http://a/2", "http://b/0"] {
        f.push(u.to_string(), &u[7..8], 0);
    }
    let held: Vec<WorkItem> = [("http://a/0", 500), ("http://a/1", 501), ("http://b/0", 502)]
        .iter()
        .map(|(u, lease)| WorkItem {
            server: None,
            lease: *lease,
            lease_expires_ms: 0,
            leased_ms: 0,
            url: u.to_string(),
            domain: u[7..8].to_string(),
            depth: 0,
            min_delay_ms: None,
            revisit: None,
        })
        .collect();
    let s1 = f.add_supervisor();
    let adopted = |a: Adoption| a.adopted;
    assert_eq!(adopted(f.adopt(s1, held.clone(), 10, |_| false)), 3);
    // A repeated Hello changes nothing: the leases are s1's already.
    assert_eq!(
        f.adopt(s1, held, 10, |_| false),
        Adoption {
            adopted: 3,
            refused: 0,
            look_up: vec![]
        }
    );
    assert_eq!(f.queued(), 1);
    assert_eq!(f.in_flight(), 3);
    assert_eq!(f.held(s1), 3);
    // Another supervisor joins; the adopted domains stay with s1.
    let s2 = f.add_supervisor();
    f.start_assigning();
    assert!(f.take(s2, 10, 10).is_empty());
    // a has 2 in flight (the per-domain maximum): nothing more yet.
    assert!(f.take(s1, 10, 10).is_empty());
    assert_eq!(f.complete(500).map(|l| l.url), Some("http://a/0".into()));
    let next = f.take(s1, 10, 10);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].url, "http://a/2");
    assert!(next[0].lease > 502, "new leases never collide with adopted ones");
    for lease in [501, 502, next[0].lease] {
        assert!(f.complete(lease).is_some());
    }
    assert!(f.is_idle());
}

#[test]
fn a_result_counts_only_from_the_holder_and_is_about_the_leased_url() {
    let mut f = f();
    let s1 = f.add_supervisor();
    let s2 = f.add_supervisor();
    f.push("http://a/0".into(), "a", 3);
    f.push("http://b/0".into(), "b", 0);
    let t1 = f.take(s1, 10, 0);
    assert_eq!(t1.len(), 1);
    // s2 reports on s1's lease: refused, and the lease stays s1's.
    let url = t1[0].url.as_str();
    assert_eq!(f.complete_for(s2, t1[0].lease, url), Err(LeaseRefusal::Foreign));
    assert_eq!(f.held(s1), 1);
    assert_eq!(f.complete_for(s1, 999_999, url), Err(LeaseRefusal::Unknown));
    // The holder's result about another URL (a lease id issued again
    // after a restart, or a lie) is refused, and the lease stays out.
    assert_eq!(
        f.complete_for(s1, t1[0].lease, "http://b/0"),
        Err(LeaseRefusal::OtherUrl)
    );
    assert_eq!(f.held(s1), 1);
    // The holder's result is about what was leased, from the record.
    let leased = f.complete_for(s1, t1[0].lease, url).unwrap();
    assert_eq!(leased.url, t1[0].url);
    assert_eq!(leased.domain, t1[0].domain);
    assert_eq!(leased.depth, t1[0].depth);
    assert_eq!(f.held(s1), 0);
    assert_eq!(f.complete_for(s1, t1[0].lease, url), Err(LeaseRefusal::Unknown));
}

fn held_item(url: &str, domain: &str, lease: u64, depth: u16) -> WorkItem {
    WorkItem {
        server: None,
        lease,
        lease_expires_ms: 0,
        leased_ms: 0,
        url: url.into(),
        domain: domain.into(),
        depth,
        min_delay_ms: None,
        revisit: None,
    }
}

#[test]
fn adoption_takes_only_queued_urls_with_their_own_domain_and_depth() {
    // A restarted dispatcher: http://a.test/0 is queued at depth 2.
    let mut f = Frontier::new(4, 1000, 1 << 20);
    f.push("http://a.test/0".into(), "a.test", 2);
    let s1 = f.add_supervisor();
    let claimed = vec![
        // Queued here: adopted, but with depth 2 and domain a.test
        // whatever the claim says.
        held_item("http://a.test/0", "evil.test", 500, 0),
        // Never seen here (nor its domain): refused.
        held_item("http://evil.test/", "evil.test", 501, 0),
        // A known domain, but not a queued URL: refused.
        held_item("http://a.test/forged", "a.test", 502, 0),
        // Not a URL at all.
        held_item("not a url", "a.test", 503, 0),
    ];
    assert_eq!(
        f.adopt(s1, claimed, 10, |_| false),
        Adoption {
            adopted: 1,
            refused: 3,
            look_up: vec![]
        }
    );
    assert_eq!(f.queued(), 0);
    assert_eq!(f.held(s1), 1);
    let leased = f.complete_for(s1, 500, "http://a.test/0").unwrap();
    assert_eq!(
        leased,
        Leased {
            url: "http://a.test/0".into(),
            domain: "a.test".into(),
            depth: 2,
            seq: 0
        }
    );
    for (lease, url) in [
        (501, "http://evil.test/"),
        (502, "http://a.test/forged"),
        (503, "not a url"),
    ] {
        assert_eq!(f.complete_for(s1, lease, url), Err(LeaseRefusal::Unknown));
    }
}

#[test]
fn adoption_moves_leases_of_an_earlier_connection_but_never_anothers() {
    let mut f = f();
    let old = f.add_supervisor();
    let other = f.add_supervisor();
    f.push("http://a.test/0".into(), "a.test", 0);
    f.push("http://b.test/0".into(), "b.test", 0);
    let mine = f.take(old, 10, 0);
    let theirs = f.take(other, 10, 0);
    assert_eq!((mine.len(), theirs.len()), (1, 1));
    // The same supervisor reconnects as `new`, listing its lease and,
    // by mistake or malice, the other supervisor's.
    let new = f.add_supervisor();
    let claimed = vec![mine[0].clone(), theirs[0].clone()];
    assert_eq!(
        f.adopt(new, claimed, 10, |s| s == old),
        Adoption {
            adopted: 1,
            refused: 1,
            look_up: vec![]
        }
    );
    assert_eq!((f.held(old), f.held(new), f.held(other)), (0, 1, 1));
    assert_eq!(
        f.complete_for(old, mine[0].lease, &mine[0].url),
        Err(LeaseRefusal::Foreign)
    );
    assert!(f.complete_for(new, mine[0].lease, &mine[0].url).is_ok());
    assert!(f.complete_for(other, theirs[0].lease, &theirs[0].url).is_ok());
    // The old connection owned a.test; the new one does now, and the
    // old one leaving hands nothing back twice.
    assert_eq!(f.remove_supervisor(old), 0);
    f.push("http://a.test/1".into(), "a.test", 0);
    assert_eq!(f.take(new, 10, 0).len(), 1);
}

/// Domains learnt to share a server end up with one owner, and are
/// leased with the server's address; when that owner leaves, they go on
/// together to one other.
#[test]
fn the_domains_of_one_server_are_owned_together() {
    use super::moves::HANDOVER_MS;
    let mut f = f();
    let (s0, s1, s2) = (f.add_supervisor(), f.add_supervisor(), f.add_supervisor());
    for d in ["a", "b", "c"] {
        f.push(format!("http://{d}/1"), d, 0);
        f.push(format!("http://{d}/2"), d, 0);
    }
    let owner = |f: &Frontier, d: &str| f.domains[f.domains.find(d).unwrap()].owner.get();
    // The fewest-domains rule spreads them out.
    assert_eq!(
        (owner(&f, "a"), owner(&f, "b"), owner(&f, "c")),
        (Some(s0), Some(s1), Some(s2))
    );
    // A first lease has no server; the child hands it back with one.
    let first = f.take(s1, 1, 0);
    assert_eq!(first[0].server, None);
    let server: std::net::IpAddr = "192.0.2.5".parse().unwrap();
    f.learn_server("a", server);
    f.learn_server("b", server);
    f.complete(first[0].lease);
    f.push_front(first[0].url.clone(), "b", 0, 0);
    assert_eq!(f.shared_servers(), 1);
    // s1 may not lease b any more: it moves to a's owner, after the hold.
    assert!(f.take(s1, 10, 0).is_empty());
    assert_eq!(owner(&f, "b"), Some(s0));
    f.release_blocked(HANDOVER_MS);
    let got = f.take(s0, 10, HANDOVER_MS);
    let mut domains: Vec<(&str, Option<std::net::IpAddr>)> =
        got.iter().map(|w| (w.domain.as_str(), w.server)).collect();
    domains.sort();
    domains.dedup();
    assert_eq!(domains, [("a", Some(server)), ("b", Some(server))]);
    // c, on a server of its own, is not touched.
    assert!(f
        .take(s2, 10, HANDOVER_MS)
        .iter()
        .all(|w| w.domain == "c" && w.server.is_none()));
    // s0 leaves: a and b go on together, to one supervisor.
    f.remove_supervisor(s0);
    assert!(owner(&f, "a").is_some());
    assert_eq!(owner(&f, "a"), owner(&f, "b"));
}
