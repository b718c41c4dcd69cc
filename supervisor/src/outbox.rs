//! Results on their way to the dispatcher: a result counts as delivered
//! only when the dispatcher acknowledges the message that carried it.
//!
//! A message sent into a connection that has silently died (a cut link:
//! the kernel takes it and never delivers it) is lost with the
//! connection. So every result stays here until an `Ack` names its
//! message (or a later one: the dispatcher reads a connection's messages
//! in order); when the link comes back on a new connection, what was
//! never acknowledged is sent again, first. The dispatcher takes a result
//! again only if its URL is not finished elsewhere (see `adopt` in the
//! dispatcher), and a page is stored once either way.
//!
//! Memory stays bounded: results come only from URLs this supervisor
//! holds, which its credit bounds, and at most [`WINDOW`] messages go out
//! unacknowledged (so a dead connection also swallows at most that many
//! before the sends stop).

use std::collections::VecDeque;

use link::protocol::{self, CrawlResult, FailureKind, Outcome, WorkItem};

/// Messages of results sent and not yet acknowledged, at most: 4 MiB of
/// 64 KiB messages, enough to keep a link of tens of milliseconds busy
/// at thousands of pages a second (acknowledgements come back within one
/// round trip).
pub(crate) const WINDOW: usize = 64;

#[derive(Default)]
pub(crate) struct Outbox {
    /// Not sent on the current connection, oldest first.
    waiting: VecDeque<CrawlResult>,
    /// Sent on the current connection, by the seal counter of their message.
    unacked: VecDeque<(u64, Vec<CrawlResult>)>,
}

impl Outbox {
    pub(crate) fn push(&mut self, r: CrawlResult) {
        self.waiting.push_back(r);
    }

    /// Results not sent yet on this connection.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Results sent and not acknowledged.
    pub(crate) fn unacked(&self) -> usize {
        self.unacked.iter().map(|(_, b)| b.len()).sum()
    }

    /// Every result held (sent or not): their leases are still this
    /// supervisor's, renewed by its heartbeats and listed when it rejoins.
    pub(crate) fn results(&self) -> impl Iterator<Item = &CrawlResult> {
        self.unacked
            .iter()
            .flat_map(|(_, b)| b.iter())
            .chain(self.waiting.iter())
    }

    /// The held results as the work items they answer, for an
    /// introduction: not those handed back unfetched (`Fenced`), which the
    /// dispatcher re-queues when it gives up their old connection.
    pub(crate) fn as_items(&self) -> Vec<WorkItem> {
        self.results()
            .filter(|r| {
                !matches!(
                    r.outcome,
                    Outcome::Failed {
                        kind: FailureKind::Fenced,
                        ..
                    }
                )
            })
            .map(|r| WorkItem {
                server: None,
                lease: r.lease,
                lease_expires_ms: 0,
                leased_ms: 0,
                url: r.url.clone(),
                domain: r.domain.clone(),
                depth: r.depth,
                min_delay_ms: None,
                revisit: None,
            })
            .collect()
    }

    /// The next messages' worth of results to send, as far as the window
    /// allows (in order, each batch within the message size target).
    pub(crate) fn take_batches(&mut self) -> Vec<Vec<CrawlResult>> {
        let room = WINDOW.saturating_sub(self.unacked.len());
        if room == 0 || self.waiting.is_empty() {
            return Vec::new();
        }
        let mut batches = protocol::split_results(std::mem::take(&mut self.waiting).into());
        if batches.len() > room {
            for r in batches.drain(room..).flatten() {
                self.waiting.push_back(r);
            }
        }
        batches
    }

    /// A batch went out in the message sealed with counter `seq`.
    pub(crate) fn sent(&mut self, seq: u64, batch: Vec<CrawlResult>) {
        self.unacked.push_back((seq, batch));
    }

    /// Batches that could not be sent: back to the front, in order.
    pub(crate) fn unsent(&mut self, batches: Vec<Vec<CrawlResult>>) {
        for r in batches.into_iter().flatten().rev() {
            self.waiting.push_front(r);
        }
    }

    /// The dispatcher has read every message up to `seq`: their results
    /// are delivered. How many results that was.
    pub(crate) fn acked(&mut self, seq: u64) -> usize {
        let mut n = 0;
        while self.unacked.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((_, b)) = self.unacked.pop_front() {
                n += b.len();
            }
        }
        n
    }

    /// A new connection: what the old one never acknowledged is sent
    /// again, before anything newer.
    pub(crate) fn reconnected(&mut self) {
        for (_, b) in std::mem::take(&mut self.unacked).into_iter().rev() {
            for r in b.into_iter().rev() {
                self.waiting.push_front(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(lease: u64) -> CrawlResult {
        CrawlResult {
            server: None,
            lease,
            url: format!("http://a.test/{lease}"),
            domain: "a.test".into(),
            depth: 0,
            outcome: Outcome::Disallowed,
            outlinks: Vec::new(),
            sent_ms: 0,
        }
    }

    fn leases(o: &Outbox) -> Vec<u64> {
        o.results().map(|r| r.lease).collect()
    }

    #[test]
    fn results_are_kept_until_acknowledged_and_sent_again_first() {
        let mut o = Outbox::default();
        for i in 1..=3 {
            o.push(r(i));
        }
        let batches = o.take_batches();
        assert_eq!(batches.len(), 1);
        o.sent(7, batches.into_iter().next().unwrap());
        o.push(r(4));
        o.push(r(5));
        let b = o.take_batches().remove(0);
        o.sent(8, b);
        o.push(r(6));
        // Everything is still held: the leases stay ours.
        assert_eq!(leases(&o), vec![1, 2, 3, 4, 5, 6]);
        // The first message is acknowledged, the second is lost with its
        // connection: it goes out again first on the next one.
        assert_eq!(o.acked(7), 3);
        o.reconnected();
        assert_eq!((o.unacked(), o.waiting()), (0, 3));
        let again = o.take_batches();
        let order: Vec<u64> = again.iter().flatten().map(|r| r.lease).collect();
        assert_eq!(order, vec![4, 5, 6]);
        // A send that failed puts them back in order.
        o.unsent(again);
        assert_eq!(leases(&o), vec![4, 5, 6]);
        // An ack of an older message (a late one) takes nothing away.
        assert_eq!(o.acked(3), 0);
        assert_eq!(o.results().count(), 3);
    }

    #[test]
    fn no_more_than_a_window_goes_out_unacknowledged() {
        let mut o = Outbox::default();
        let mut seq = 0;
        let mut push_and_send = |o: &mut Outbox, n: u64| {
            for i in 0..n {
                o.push(r(i));
                for b in o.take_batches() {
                    seq += 1;
                    o.sent(seq, b);
                }
            }
        };
        push_and_send(&mut o, 200);
        assert_eq!(o.unacked.len(), WINDOW);
        assert_eq!(o.waiting(), 200 - WINDOW);
        assert!(o.take_batches().is_empty());
        // An ack opens the window again.
        assert_eq!(o.acked(10), 10);
        assert_eq!(o.take_batches().len(), 1, "small results share one message");
    }
}
