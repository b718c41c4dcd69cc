//! Which domains share a server (IP address), and which supervisor owns
//! the server: every domain of a server is owned by that supervisor, whose
//! child paces the server as a whole (see the child's `server_pace`).
//!
//! A domain's server is learnt from its children: the first URL of a
//! domain is leased without one, and a child that paces servers hands it
//! back unfetched with the address it resolved (`FailureKind::Regrouped`).
//! From then on the domain is leased to the server's owner, with the
//! address in the lease. A server's owner is the owner of the first of its
//! domains to be owned; when it leaves, the first domain given a new owner
//! takes the server along, and the others follow.

use std::collections::HashMap;
use std::net::IpAddr;

use super::owners::Owners;
use super::SupId;

/// No server, or no owner.
const NONE: u32 = u32::MAX;

/// A domain's server, if known. Written only by [`Servers`].
pub(super) struct ServerOf {
    id: u32,
}

impl ServerOf {
    pub(super) fn new() -> ServerOf {
        ServerOf { id: NONE }
    }

    fn get(&self) -> Option<usize> {
        (self.id != NONE).then_some(self.id as usize)
    }
}

struct Server {
    addr: IpAddr,
    /// Domains held that are served from it.
    domains: u32,
    owner: u32,
}

/// The servers of the domains held.
///
/// Invariant: a server is listed (in `by_addr` and `records`) while at
/// least one domain held names it, and `domains` counts those; `shared`
/// counts the servers with more than one. Only this type changes a
/// domain's [`ServerOf`], which keeps the counts in step.
pub(super) struct Servers {
    by_addr: HashMap<IpAddr, u32>,
    records: Vec<Server>,
    /// Ids of servers no domain names any more, for reuse.
    free: Vec<u32>,
    shared: usize,
}

impl Servers {
    pub(super) fn new() -> Servers {
        Servers {
            by_addr: HashMap::new(),
            records: Vec::new(),
            free: Vec::new(),
            shared: 0,
        }
    }

    /// The domain of `of` is served from `addr` (and no longer from the
    /// server it named before, if another).
    pub(super) fn join(&mut self, of: &mut ServerOf, addr: IpAddr) {
        if self.addr(of) == Some(addr) {
            return;
        }
        self.leave(of);
        let id = match self.by_addr.get(&addr) {
            Some(&id) => id,
            None => {
                let server = Server {
                    addr,
                    domains: 0,
                    owner: NONE,
                };
                let id = match self.free.pop() {
                    Some(id) => {
                        self.records[id as usize] = server;
                        id
                    }
                    None => {
                        self.records.push(server);
                        (self.records.len() - 1) as u32
                    }
                };
                self.by_addr.insert(addr, id);
                id
            }
        };
        let s = &mut self.records[id as usize];
        s.domains += 1;
        if s.domains == 2 {
            self.shared += 1;
        }
        of.id = id;
    }

    /// The domain of `of` is forgotten, or served from elsewhere.
    pub(super) fn leave(&mut self, of: &mut ServerOf) {
        let Some(id) = of.get() else { return };
        of.id = NONE;
        let s = &mut self.records[id];
        s.domains = s.domains.saturating_sub(1);
        match s.domains {
            0 => {
                self.by_addr.remove(&s.addr);
                self.free.push(id as u32);
            }
            1 => self.shared = self.shared.saturating_sub(1),
            _ => {}
        }
    }

    /// The address of the domain's server, if known.
    pub(super) fn addr(&self, of: &ServerOf) -> Option<IpAddr> {
        of.get().map(|id| self.records[id].addr)
    }

    /// The owner of the domain's server, if it has one that is live.
    pub(super) fn owner(&self, of: &ServerOf, owners: &Owners) -> Option<SupId> {
        let s = &self.records[of.get()?];
        (s.owner != NONE)
            .then_some(s.owner as SupId)
            .filter(|&sup| owners.is_live(sup))
    }

    /// The domain's server, if known, is owned by `sup` from now on.
    pub(super) fn set_owner(&mut self, of: &ServerOf, sup: SupId) {
        if let Some(id) = of.get() {
            self.records[id].owner = sup as u32;
        }
    }

    /// The domain's server, if known and without a live owner, is owned
    /// by `sup` (the domain's owner) from now on.
    pub(super) fn claim(&mut self, of: &ServerOf, sup: SupId, owners: &Owners) {
        if self.owner(of, owners).is_none() {
            self.set_owner(of, sup);
        }
    }

    /// Whether the domain's server serves other domains held too.
    pub(super) fn is_shared(&self, of: &ServerOf) -> bool {
        of.get().is_some_and(|id| self.records[id].domains > 1)
    }

    /// Servers with more than one domain held.
    pub(super) fn shared(&self) -> usize {
        self.shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn domains_join_and_leave_servers_and_empty_ones_are_reused() {
        let mut s = Servers::new();
        let mut owners = Owners::new();
        for _ in 0..4 {
            owners.add();
        }
        let (mut a, mut b) = (ServerOf::new(), ServerOf::new());
        s.join(&mut a, ip("192.0.2.1"));
        s.set_owner(&a, 3);
        s.join(&mut b, ip("192.0.2.1"));
        assert_eq!(
            (s.owner(&b, &owners), s.shared(), s.is_shared(&a)),
            (Some(3), 1, true)
        );
        // b's address changes: a new server, no owner yet.
        s.join(&mut b, ip("192.0.2.2"));
        assert_eq!(
            (s.owner(&b, &owners), s.shared(), s.is_shared(&a)),
            (None, 0, false)
        );
        s.leave(&mut a);
        assert_eq!(s.addr(&a), None);
        // The first server's record is free and taken by the next one.
        let mut c = ServerOf::new();
        s.join(&mut c, ip("192.0.2.3"));
        assert_eq!(
            (s.records.len(), s.by_addr.len(), s.owner(&c, &owners)),
            (2, 2, None)
        );
        s.leave(&mut b);
        s.leave(&mut c);
        assert!(s.by_addr.is_empty());
        assert_eq!(s.free.len(), 2);
    }
}
