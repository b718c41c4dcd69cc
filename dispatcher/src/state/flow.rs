//! Flow: how fast work goes out, held to what the store keeps up with.
//!
//! Leases wait for the expected supervisors, then go out member by member
//! as far as the frontier writer's backlog lets them (the write gate,
//! `state/write_gate.rs`); reads of domains' queues go out a tick's worth
//! at a time, and not past what the queue reader can have pending; and
//! domains' progress is recorded every few seconds.
//!
//! Invariants:
//! - Once started (the expected supervisors joined), dispatching stays
//!   started.
//! - `writer_behind` is the writer's state at the last dispatch: while it
//!   is set, no queue is read ([`Flow::read_room`] is 0).
//! - `reads_pending` counts the reads asked for and not answered, as the
//!   reader last said plus those asked for since; a tick asks for no more
//!   than brings it to `max_pending_reads`.
//! - `next_progress_ms` is at most `PROGRESS_EVERY_MS` after the last time
//!   progress was due.

use super::settings::Settings;
use super::write_gate::WriteGate;

/// Store reads of domains' queues asked for at once (see `queue_reader`).
const READS_PER_TICK: usize = 64;
/// How often domains' progress is recorded (see `frontier::progress`).
const PROGRESS_EVERY_MS: u64 = 5_000;

pub(crate) struct Flow {
    /// Frontier writes waiting past which the writer is behind.
    max_write_backlog: usize,
    max_pending_reads: usize,
    started_dispatching: bool,
    /// The frontier writer was more than [`Settings::max_write_backlog`]
    /// writes behind at the last `CrawlState::dispatch`: no URL is
    /// leased and no queue is read until it catches up.
    writer_behind: bool,
    /// How many URLs may be leased while the writer is behind.
    write_gate: WriteGate,
    /// The member the next `CrawlState::dispatch` starts with, so that
    /// when the gate lets only a few URLs out, each member gets its turn.
    next_member: usize,
    /// Reads of queues asked for and not answered: the reader's count at
    /// the last tick, plus those asked for since, less those answered.
    reads_pending: usize,
    /// When domains' progress is next recorded (Unix ms).
    next_progress_ms: u64,
}

impl Flow {
    pub(crate) fn new(settings: &Settings, now_ms: u64) -> Flow {
        Flow {
            max_write_backlog: settings.max_write_backlog,
            max_pending_reads: settings.max_pending_reads,
            started_dispatching: false,
            writer_behind: false,
            write_gate: WriteGate::new(settings.max_write_backlog),
            next_member: 0,
            reads_pending: 0,
            next_progress_ms: now_ms.saturating_add(PROGRESS_EVERY_MS),
        }
    }

    /// The frontier writer has `write_backlog` writes waiting (each
    /// dispatch).
    pub(crate) fn writer_at(&mut self, write_backlog: usize) {
        self.writer_behind = write_backlog > self.max_write_backlog;
    }

    pub(crate) fn started(&self) -> bool {
        self.started_dispatching
    }

    /// The expected supervisors joined: dispatching starts, for good.
    pub(crate) fn start(&mut self) {
        self.started_dispatching = true;
    }

    /// URLs that may be leased now (see `WriteGate::room`): call it once a
    /// dispatch.
    pub(crate) fn lease_room(&mut self, write_backlog: usize, out: usize) -> usize {
        self.write_gate.room(write_backlog, out)
    }

    /// The member a dispatch starts with, of `n` (0 with none).
    pub(crate) fn first_member(&self) -> usize {
        self.next_member
    }

    /// Member `s` of `n` was leased URLs: the next dispatch starts after it.
    pub(crate) fn served(&mut self, s: usize, n: usize) {
        self.next_member = (s + 1) % n.max(1);
    }

    /// `results` results were accepted, and brought `writes` writes.
    pub(crate) fn results_wrote(&mut self, results: usize, writes: usize) {
        self.write_gate.observe(results, writes);
    }

    /// The queue reader has `pending` reads not answered (each tick).
    pub(crate) fn reads_pending(&mut self, pending: usize) {
        self.reads_pending = pending;
    }

    /// Reads of queues that may be asked for now: none while the writer
    /// is behind (a store that cannot keep up with the writes gets no
    /// reads either, as nothing is leased then anyway), else a tick's
    /// worth, up to what the reader may have pending.
    pub(crate) fn read_room(&self) -> usize {
        if self.writer_behind {
            return 0;
        }
        let room = self.max_pending_reads.saturating_sub(self.reads_pending);
        READS_PER_TICK.min(room)
    }

    /// Whether the writer was behind at the last dispatch.
    pub(crate) fn writer_behind(&self) -> bool {
        self.writer_behind
    }

    /// A read of a queue was asked for.
    pub(crate) fn read_asked(&mut self) {
        self.reads_pending += 1;
    }

    /// A read of a queue was answered.
    pub(crate) fn read_answered(&mut self) {
        self.reads_pending = self.reads_pending.saturating_sub(1);
    }

    /// Whether domains' progress is due to be recorded at `now_ms` (then
    /// not again for a while).
    pub(crate) fn progress_due(&mut self, now_ms: u64) -> bool {
        if now_ms < self.next_progress_ms {
            return false;
        }
        self.next_progress_ms = now_ms.saturating_add(PROGRESS_EVERY_MS);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        let mut s = crate::state::tests::settings();
        s.max_write_backlog = 100;
        s.max_pending_reads = 70;
        Flow::new(&s, 0)
    }

    #[test]
    fn reads_stop_at_the_pending_bound_and_while_the_writer_is_behind() {
        let mut f = flow();
        assert_eq!(f.read_room(), READS_PER_TICK);
        f.reads_pending(10);
        assert_eq!(f.read_room(), 60);
        f.read_asked();
        assert_eq!(f.read_room(), 59);
        f.read_answered();
        f.read_answered();
        assert_eq!(f.read_room(), 61);
        f.writer_at(101);
        assert!(f.writer_behind());
        assert_eq!(f.read_room(), 0);
        f.writer_at(100);
        assert_eq!(f.read_room(), 61);
    }

    #[test]
    fn members_take_turns_and_dispatching_stays_started() {
        let mut f = flow();
        assert!(!f.started());
        f.start();
        assert!(f.started());
        assert_eq!(f.first_member(), 0);
        f.served(2, 3);
        assert_eq!(f.first_member(), 0);
        f.served(0, 3);
        assert_eq!(f.first_member(), 1);
    }

    #[test]
    fn progress_is_due_once_a_period() {
        let mut f = flow();
        assert!(!f.progress_due(PROGRESS_EVERY_MS - 1));
        assert!(f.progress_due(PROGRESS_EVERY_MS));
        assert!(!f.progress_due(PROGRESS_EVERY_MS + 1));
        assert!(f.progress_due(3 * PROGRESS_EVERY_MS));
    }
}
