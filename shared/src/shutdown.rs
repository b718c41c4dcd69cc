//! Graceful stop, for every process: finish the work in hand, flush, exit
//! 0. A stopped crawl resumes with the same command.
//!
//! A role's `run` takes a [`Shutdown`] rather than listening for signals
//! itself, so a test can run the role in-process and stop it, and a binary
//! stops it on SIGTERM or SIGINT ([`Shutdown::on_signals`]).
//!
//! The operator keeps control of a stop: a second SIGTERM or SIGINT ends
//! the process at once, without its last writes (a stop waiting on a store
//! that went away would otherwise wait as long as the store stays away).
//! Before it exits, the process says what it leaves unwritten and how the
//! next run recovers it ([`on_abandon`]).

use std::sync::OnceLock;

use tokio::sync::watch;

/// The exit status of a process ended by a second signal: 128 + SIGINT,
/// as a shell reports an interrupted command.
pub const ABANDONED_EXIT: i32 = 130;

/// What the process says when a second signal ends it (see [`on_abandon`]).
type AbandonNote = Box<dyn Fn() + Send + Sync>;
static ON_ABANDON: OnceLock<AbandonNote> = OnceLock::new();

/// Registers what a process logs when a second signal ends it: what it
/// leaves unwritten, and how the next run recovers it. The first
/// registration holds.
pub fn on_abandon(note: impl Fn() + Send + Sync + 'static) {
    let _ = ON_ABANDON.set(Box::new(note));
}

/// A request to stop, that any number of holders can wait for.
#[derive(Debug, Clone)]
pub struct Shutdown {
    requested: watch::Receiver<bool>,
}

/// The side that asks a [`Shutdown`] to happen. Dropping it asks too: a
/// role whose owner went away has nobody to work for.
#[derive(Debug)]
pub struct Trigger {
    tx: watch::Sender<bool>,
}

impl Trigger {
    /// Asks every holder of the paired [`Shutdown`] to stop.
    pub fn stop(&self) {
        self.tx.send_replace(true);
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        self.tx.send_replace(true);
    }
}

impl Shutdown {
    /// A shutdown that happens when the trigger is pulled (or dropped).
    pub fn new() -> (Trigger, Shutdown) {
        let (tx, requested) = watch::channel(false);
        (Trigger { tx }, Shutdown { requested })
    }

    /// A shutdown that happens on SIGTERM or SIGINT; a second one ends
    /// the process at once ([`ABANDONED_EXIT`]), after the note registered
    /// with [`on_abandon`]. Needs a runtime.
    pub fn on_signals() -> Shutdown {
        let (trigger, shutdown) = Shutdown::new();
        tokio::spawn(async move {
            let Some(mut signals) = Signals::new() else {
                // Without handlers the default action (exit) applies; the
                // trigger is kept, as dropping it would stop the role.
                let _kept = trigger;
                return std::future::pending::<()>().await;
            };
            signals.next().await;
            trigger.stop();
            signals.next().await;
            tracing::error!(
                "a second signal while stopping: exiting now, without waiting for the last writes"
            );
            if let Some(note) = ON_ABANDON.get() {
                note();
            }
            std::process::exit(ABANDONED_EXIT);
        });
        shutdown
    }

    /// Whether a stop has been asked for.
    pub fn is_requested(&self) -> bool {
        *self.requested.borrow()
    }

    /// Resolves once a stop has been asked for (at once if it already was).
    pub async fn requested(&mut self) {
        // An error means every trigger is gone, which asks for a stop too.
        let _ = self.requested.wait_for(|stop| *stop).await;
    }
}

/// SIGTERM and SIGINT, listened for from when they are made: a signal
/// that comes while the first is being handled is not missed.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Option<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(Signals {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
        })
    }

    /// Resolves on the next SIGTERM or SIGINT.
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_reaches_every_holder_and_a_dropped_trigger_stops_too() {
        let (trigger, mut a) = Shutdown::new();
        let mut b = a.clone();
        assert!(!a.is_requested());
        trigger.stop();
        a.requested().await;
        b.requested().await;
        let (trigger, mut c) = Shutdown::new();
        drop(trigger);
        c.requested().await;
        assert!(c.is_requested());
    }
}
