//! The domains the frontier holds: one record each, by id, found by name,
//! and freed for reuse once nothing is left of the domain.
//!
//! A record is made of the parts' own pieces (its window, slot, owner,
//! block and URLs in flight), each written only through its part; this
//! table adds the name, finds records by it, and frees them.
//!
//! Forgetting (see `forget`) frees the records of domains with nothing
//! left, for the next new domains: at the millions of domains a research
//! crawl meets, held records were the term that grew.

use std::ops::{Index, IndexMut};

use super::blocks::Block;
use super::index::DomainIndex;
use super::leases::InFlight;
use super::owners::{Owner, Ring, SESSION_LEASES};
use super::parking::Slot;
use super::servers::ServerOf;
use super::window::Window;

/// How often the domains are swept (a pass over every domain held) unless
/// [`Domains::sweep_every`] says otherwise.
pub(super) const DEFAULT_SWEEP_MS: u64 = 60_000;

/// [`DomainQ::activity`]'s bit saying a result arrived since the last
/// sweep: the domain's owner may still be pacing it, so it is kept through
/// the next sweep, and it is being crawled (its owner's warm ring).
const RECENT: u8 = 0x80;
/// [`DomainQ::activity`]'s bits counting the leases since the domain was
/// last taken from its owner's cold ring: its session, up to
/// [`SESSION_LEASES`]. (Packed with [`RECENT`]: a crawl may hold millions
/// of these records.)
const SESSION: u8 = 0x7f;
const _: () = assert!(SESSION_LEASES <= SESSION);

/// One domain's record: its name and each part's piece of it.
pub(super) struct DomainQ {
    /// Empty for a free record (a URL's host is never empty).
    name: Box<str>,
    pub(super) window: Window,
    pub(super) owner: Owner,
    pub(super) block: Block,
    pub(super) in_flight: InFlight,
    pub(super) slot: Slot,
    pub(super) server: ServerOf,
    /// [`RECENT`] and the domain's session (see [`DomainQ::count_lease`]).
    activity: u8,
    /// Results since the domain's progress was last recorded (see
    /// `progress`), up to 255 (past the number that records it).
    unrecorded: u8,
}

impl DomainQ {
    fn new(name: &str) -> DomainQ {
        DomainQ {
            name: name.into(),
            window: Window::new(),
            owner: Owner::new(),
            block: Block::new(),
            in_flight: InFlight::new(),
            slot: Slot::new(),
            server: ServerOf::new(),
            activity: 0,
            unrecorded: 0,
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The name beside the window, for a read of it.
    pub(super) fn name_and_window(&mut self) -> (&str, &mut Window) {
        (&self.name, &mut self.window)
    }

    /// It was leased, from its owner's `ring`: a pick from the cold ring
    /// starts a session. True when this lease spends the session.
    pub(super) fn count_lease(&mut self, ring: Ring) -> bool {
        let recent = self.activity & RECENT;
        let session = match ring {
            Ring::Cold => 0,
            Ring::Warm => self.activity & SESSION,
        };
        let session = session.saturating_add(1).min(SESSION_LEASES);
        self.activity = recent | session;
        session == SESSION_LEASES
    }

    /// Whether a result of it came since the last sweep.
    fn recent(&self) -> bool {
        self.activity & RECENT != 0
    }

    /// Which of its owner's rings it waits in when it can be leased: the
    /// warm one while it is being crawled and its session lasts.
    pub(super) fn ring(&self) -> Ring {
        if self.recent() && self.activity & SESSION < SESSION_LEASES {
            Ring::Warm
        } else {
            Ring::Cold
        }
    }

    /// A result of the domain arrived (see `recent`).
    pub(super) fn note_result(&mut self) {
        self.activity |= RECENT;
        self.unrecorded = self.unrecorded.saturating_add(1);
    }

    /// Results since its progress was last recorded.
    pub(super) fn unrecorded(&self) -> u32 {
        u32::from(self.unrecorded)
    }

    /// Its progress is being recorded.
    pub(super) fn recorded(&mut self) {
        self.unrecorded = 0;
    }
}

/// The records, by id, and the index from name to id.
///
/// Invariant: every named record is in the index under its name, and
/// every unnamed one is free (listed once in `free`, not in the index),
/// so that `index.len() + free.len() == records.len()`. Only this type
/// names, indexes and frees records, which keeps the three in step.
pub(super) struct Domains {
    records: Vec<DomainQ>,
    index: DomainIndex,
    /// Ids of forgotten records, reused for the next new domains.
    free: Vec<u32>,
    /// When the next sweep is due (Unix ms), and how often.
    next_sweep_ms: u64,
    sweep_every_ms: u64,
    /// Domains forgotten so far.
    forgotten: u64,
}

impl Domains {
    pub(super) fn new() -> Domains {
        Domains {
            records: Vec::new(),
            index: DomainIndex::new(),
            free: Vec::new(),
            next_sweep_ms: 0,
            sweep_every_ms: DEFAULT_SWEEP_MS,
            forgotten: 0,
        }
    }

    /// The id of the domain named `name`, if held.
    pub(super) fn find(&self, name: &str) -> Option<u32> {
        self.index.get(name, &self.records)
    }

    /// The id of the domain named `name`, a new record (a free one if
    /// any) if it is not held.
    pub(super) fn id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.find(name) {
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.records[id as usize] = DomainQ::new(name);
                id
            }
            None => {
                self.records.push(DomainQ::new(name));
                (self.records.len() - 1) as u32
            }
        };
        self.index.insert(id, &self.records);
        id
    }

    /// The record `id`, if there is one (free or not).
    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut DomainQ> {
        self.records.get_mut(id as usize)
    }

    /// Domains held (named records).
    pub(super) fn held(&self) -> usize {
        self.index.len()
    }

    /// Records, held or free: ids run below this.
    #[cfg(test)]
    pub(super) fn slots(&self) -> usize {
        self.records.len()
    }

    /// Every record with its id, free ones included (they hold nothing).
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &DomainQ)> {
        self.records.iter().enumerate().map(|(id, d)| (id as u32, d))
    }

    /// Every record with its id, to change, free ones included.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut DomainQ)> {
        self.records.iter_mut().enumerate().map(|(id, d)| (id as u32, d))
    }

    /// Sweeps every `every_ms`: a domain is forgotten between one and two
    /// periods after its last result.
    pub(super) fn sweep_every(&mut self, every_ms: u64) {
        self.sweep_every_ms = every_ms.max(1);
    }

    /// Whether a sweep is due at `now_ms`; if so, the next is a period on.
    pub(super) fn sweep_due(&mut self, now_ms: u64) -> bool {
        if now_ms < self.next_sweep_ms {
            return false;
        }
        self.next_sweep_ms = now_ms.saturating_add(self.sweep_every_ms);
        true
    }

    /// Domains forgotten so far.
    pub(super) fn forgotten(&self) -> u64 {
        self.forgotten
    }

    /// Forgets the held domains that `idle` says have nothing left and
    /// that had no result since the last sweep, and clears every record's
    /// mark of a result. Returns the forgotten records with their ids, in
    /// ascending order: their parts' pieces are the caller's to settle.
    pub(super) fn sweep(&mut self, idle: impl Fn(u32, &DomainQ) -> bool) -> Vec<(u32, DomainQ)> {
        let mut gone = Vec::new();
        for (id, d) in self.records.iter_mut().enumerate() {
            if !d.name.is_empty() && !d.recent() && idle(id as u32, d) {
                gone.push(id as u32);
            }
            d.activity &= !RECENT;
        }
        let mut out = Vec::with_capacity(gone.len());
        for id in gone {
            self.index.remove(id, &self.records);
            let d = std::mem::replace(&mut self.records[id as usize], DomainQ::new(""));
            self.free.push(id);
            out.push((id, d));
        }
        self.forgotten += out.len() as u64;
        self.index.shrink(&self.records);
        out
    }

    /// Every id the index holds (for the checks of the books).
    #[cfg(test)]
    pub(super) fn indexed(&self) -> impl Iterator<Item = u32> + '_ {
        self.index.ids()
    }

    /// Whether record `id` is free.
    #[cfg(test)]
    pub(super) fn is_free(&self, id: u32) -> bool {
        self.free.contains(&id)
    }

    /// Free records.
    #[cfg(test)]
    pub(super) fn free_count(&self) -> usize {
        self.free.len()
    }
}

impl Index<u32> for Domains {
    type Output = DomainQ;

    fn index(&self, id: u32) -> &DomainQ {
        &self.records[id as usize]
    }
}

impl IndexMut<u32> for Domains {
    fn index_mut(&mut self, id: u32) -> &mut DomainQ {
        &mut self.records[id as usize]
    }
}
