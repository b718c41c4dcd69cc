//! Membership: supervisors joining (and adopting what they still hold),
//! leaving, saying bye and sending heartbeats: each connection a
//! [`Member`]. The members are [`CrawlState`]'s, beside the frontier,
//! as most of what they do is the frontier's too.

use std::collections::HashSet;

use link::protocol::{ToSupervisor, WorkItem};

use super::{CrawlState, Effect};
use crate::frontier::{Adoption, Stored, SupId};
use crate::refusals::Reason;

/// Why a supervisor's connection is given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    SaidBye,
    SaidHelloAgain,
    Reconnected,
    MissedHeartbeats,
    /// It stopped reading: its queue of messages from us filled up.
    NotReading,
}

impl Leaving {
    fn as_str(self) -> &'static str {
        match self {
            Leaving::SaidBye => "said bye",
            Leaving::SaidHelloAgain => "said hello again",
            Leaving::Reconnected => "reconnected",
            Leaving::MissedHeartbeats => "missed heartbeats",
            Leaving::NotReading => "stopped reading",
        }
    }
}

/// One connection of a supervisor, from its Join to its leaving. A
/// supervisor that reconnects gets a new one (a new [`SupId`]); the old one
/// stays, dead, so late messages on it are recognised.
pub(crate) struct Member<C> {
    /// The supervisor's own id (stable across its reconnections).
    pub(crate) id: String,
    /// The shell's handle on the connection (identity and session keys);
    /// never looked into here.
    pub(crate) conn: C,
    /// URLs it may hold at once; what it holds is
    /// [`Frontier::held`](crate::frontier::Frontier::held).
    pub(crate) capacity: u32,
    pub(crate) last_heard_ms: u64,
    pub(crate) live: bool,
    pub(crate) said_bye: bool,
    pub(crate) results: u64,
    /// An earlier connection of the same supervisor was met (it reconnected,
    /// perhaps after it was given up): what it held then and reports now
    /// may have been finished or handed out meanwhile, honestly.
    pub(crate) rejoined: bool,
}

impl<C> CrawlState<C> {
    /// The newest connection whose handle matches (a supervisor that
    /// re-introduced itself on the same socket has an older, dead one too).
    pub(crate) fn find(&self, conn: impl Fn(&C) -> bool) -> Option<SupId> {
        self.members.iter().rposition(|m| conn(&m.conn))
    }

    pub(crate) fn member(&self, s: SupId) -> Option<&Member<C>> {
        self.members.get(s)
    }

    pub(crate) fn member_mut(&mut self, s: SupId) -> Option<&mut Member<C>> {
        self.members.get_mut(s)
    }

    pub(crate) fn members(&self) -> &[Member<C>] {
        &self.members
    }

    pub(crate) fn is_live(&self, s: SupId) -> bool {
        self.members.get(s).is_some_and(|m| m.live)
    }

    /// Any message on an admitted connection counts as a sign of life.
    pub(crate) fn heard(&mut self, s: SupId, now_ms: u64) {
        if let Some(m) = self.members.get_mut(s) {
            m.last_heard_ms = now_ms;
        }
    }

    /// A supervisor that proved the cluster secret joins on a new
    /// connection, holding `holding` (leases it got before). Earlier live
    /// connections of the same supervisor are given up, and what they held
    /// and it did not list goes back to the queue now rather than after
    /// the heartbeat timeout. When the crawl is stopping it is told to stop
    /// (the shell sends its Welcome first).
    pub(crate) fn join(
        &mut self,
        conn: C,
        id: String,
        capacity: u32,
        holding: Vec<WorkItem>,
        now_ms: u64,
    ) -> SupId {
        let sid = self.frontier.add_supervisor();
        debug_assert_eq!(sid, self.members.len());
        let rejoined = self.members.iter().any(|m| m.id == id);
        self.members.push(Member {
            id,
            conn,
            capacity,
            last_heard_ms: now_ms,
            live: true,
            said_bye: false,
            results: 0,
            rejoined,
        });
        if !holding.is_empty() {
            self.adopt(sid, holding, now_ms);
        }
        let earlier: Vec<SupId> = (0..sid)
            .filter(|&o| self.members[o].live && self.members[o].id == self.members[sid].id)
            .collect();
        for o in earlier {
            self.leave(o, Leaving::Reconnected);
        }
        if self.stopping {
            // It reconnected while we stopped (it took a pause of ours for
            // our death): the Stop sent to its old connection never
            // reached it.
            self.effects.push(Effect::Send(sid, ToSupervisor::Stop));
        }
        sid
    }

    /// Takes over the leases a (re)joining supervisor still holds: they
    /// were handed out before this dispatcher started (or before it gave
    /// the supervisor up for dead, or on an earlier connection), so they
    /// must not be leased again. Only what the frontier can vouch for is
    /// adopted, with its own domain and depth (see `Frontier::adopt`).
    fn adopt(&mut self, s: SupId, holding: Vec<WorkItem>, now_ms: u64) {
        let held = holding.len();
        let id = self.members[s].id.clone();
        let earlier: HashSet<SupId> = (0..s).filter(|&o| self.members[o].id == id).collect();
        let mut report = self
            .frontier
            .adopt(s, holding, now_ms, |holder| earlier.contains(&holder));
        tracing::info!(
            supervisor = %id,
            held,
            adopted = report.adopted,
            looked_up = report.to_look_up(),
            "supervisor holds URLs from before; adopted their leases"
        );
        let look_up = std::mem::take(&mut report.look_up);
        if !look_up.is_empty() {
            self.effects.push(Effect::LookUp(s, look_up));
        }
        self.refuse_unadoptable(s, &report);
    }

    fn refuse_unadoptable(&mut self, s: SupId, report: &Adoption) {
        if report.refused > 0 && self.members.get(s).is_some_and(|m| m.rejoined) {
            // Its own earlier leases, finished or handed out elsewhere
            // while it was away (given up, its pages found in the store):
            // not a lie, and their results are duplicates.
            let n = report.refused;
            self.stats.counts.stale_results += n as u64;
            let id = self.members.get(s).map_or("?", |m| m.id.as_str());
            tracing::info!(
                supervisor = %id,
                held = n,
                "held URLs finished or handed out elsewhere while it was away; their results are dropped as duplicates (a page is stored once)"
            );
        } else if report.refused > 0 {
            let n = report.refused;
            let id = self.members.get(s).map_or("?", |m| m.id.as_str());
            self.refusals.refuse(Reason::UnadoptableLease, n as u64, || {
                format!("{n} URLs supervisor {id} holds are not queued here or out at another supervisor; not adopted (their results will be dropped)")
            });
        }
    }

    /// Gives up connection `s`: what it held goes back to the queue.
    pub(crate) fn leave(&mut self, s: SupId, why: Leaving) {
        if !self.is_live(s) {
            return;
        }
        self.members[s].live = false;
        let requeued = self.frontier.remove_supervisor(s);
        let id = self.members[s].id.clone();
        if requeued > 0 || why != Leaving::SaidBye {
            tracing::warn!(supervisor = %id, why = why.as_str(), requeued, "supervisor left; its URLs re-queued");
        }
        // A restarted supervisor with the same id may have joined already.
        if !self.members.iter().any(|o| o.live && o.id == id) {
            self.effects.push(Effect::Gone(id));
        }
    }

    /// A supervisor says Bye on connection `s`: it is given up, and gets
    /// its Farewell (even on a connection given up before, so that it need
    /// not wait for one).
    pub(crate) fn bye(&mut self, s: SupId) {
        if s >= self.members.len() {
            return;
        }
        if self.members[s].live {
            self.members[s].said_bye = true;
            self.leave(s, Leaving::SaidBye);
        }
        self.effects.push(Effect::Send(s, ToSupervisor::Farewell));
    }

    /// A heartbeat lists the leases the supervisor holds: they are renewed.
    pub(crate) fn heartbeat(&mut self, s: SupId, holding: &[u64], now_ms: u64) {
        if self.is_live(s) {
            self.frontier.renew(s, holding, now_ms);
        }
    }

    /// Tells live supervisor `s` that its messages up to the one sealed
    /// with `seq` were read: its results up to there are in our hands, and
    /// its right to crawl runs on from when it sent that message
    /// (`link::fence`). Sent for each Heartbeat and Results.
    pub(crate) fn acknowledge(&mut self, s: SupId, seq: u64) {
        if self.is_live(s) {
            self.effects.push(Effect::Send(s, ToSupervisor::Ack { seq }));
        }
    }

    /// The held URLs of `s` looked up in the store (see `adopt`).
    pub(super) fn adopt_stored(
        &mut self,
        s: SupId,
        asked: usize,
        found: Result<Vec<(u64, Stored)>, String>,
        now_ms: u64,
    ) {
        let found = found.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "looking up a supervisor's held URLs in the store failed; they will be crawled again");
            Vec::new()
        });
        let report = self.frontier.adopt_stored(s, asked, found, now_ms);
        if let Some(m) = self.members.get(s) {
            tracing::info!(supervisor = %m.id, asked, adopted = report.adopted, "adopted held URLs queued in the store");
        }
        self.refuse_unadoptable(s, &report);
    }
}
