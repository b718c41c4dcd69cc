//! Taking back URLs a child holds but has not sent.
//!
//! A URL waits in a child in several places before its request starts:
//! in its domain's queue, for one of the domain's connections, for the
//! domain's turn (its delay, which a robots.txt Crawl-delay can make
//! seconds long), for its server's turn (`crate::server_pace`), and for a
//! free fetch slot. A recall (a block, a pause, a new delay, a domain
//! moving to another node) and a stop must take hold at once, not after
//! those waits: so the queue is emptied, and every wait of a URL not
//! started yet races a [`Recalls`] signal; the URL that loses goes back
//! to the dispatcher unfetched (`pipeline::hand_back`).

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// A signal that URLs held and not started must come back. Each URL
/// takes a [`Ticket`] when it leaves its queue; any [`Recalls::fire`]
/// after that recalls it.
#[derive(Default)]
pub(crate) struct Recalls {
    generation: AtomicU64,
    fired: Notify,
}

/// When a URL was taken from its queue, in a [`Recalls`]' generations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket(u64);

impl Ticket {
    /// Before any fire: a signal fired once recalls this ticket for good
    /// (the child's stop).
    pub(crate) const FIRST: Ticket = Ticket(0);
}

impl Recalls {
    /// The ticket of a URL leaving its queue now.
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket(self.generation.load(Ordering::SeqCst))
    }

    /// Recalls every URL whose ticket was taken before now.
    pub(crate) fn fire(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.fired.notify_waiters();
    }

    /// Whether the URL of `ticket` was recalled.
    pub(crate) fn recalled(&self, ticket: Ticket) -> bool {
        self.generation.load(Ordering::SeqCst) != ticket.0
    }

    /// Resolves once the URL of `ticket` is recalled (at once if it was).
    pub(crate) async fn wait(&self, ticket: Ticket) {
        loop {
            let fired = self.fired.notified();
            tokio::pin!(fired);
            // Registered before the check, so a fire in between is heard.
            fired.as_mut().enable();
            if self.recalled(ticket) {
                return;
            }
            fired.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_fire_recalls_the_tickets_taken_before_it_and_no_later_one() {
        let r = Arc::new(Recalls::default());
        let before = r.ticket();
        let waiting = tokio::spawn({
            let r = r.clone();
            async move { r.wait(before).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiting.is_finished());
        r.fire();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the waiter heard the fire")
            .unwrap();
        let after = r.ticket();
        assert!(r.recalled(before) && !r.recalled(after));
        assert!(
            r.recalled(Ticket::FIRST),
            "a fire recalls the first ticket for good"
        );
        let later = tokio::time::timeout(Duration::from_millis(20), r.wait(after)).await;
        assert!(later.is_err(), "a ticket taken after the fire waits for the next");
    }
}
