//! Graceful stop, for every process: finish the work in hand, flush, exit
//! 0. A stopped crawl resumes with the same command.
//!
//! A role's `run` takes a [`Shutdown`] rather than listening for signals
//! itself, so a test can run the role in-process and stop it, and a binary
//! stops it on SIGTERM or SIGINT ([`Shutdown::on_signals`]).

use tokio::sync::watch;

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

    /// A shutdown that happens on SIGTERM or SIGINT. Needs a runtime.
    pub fn on_signals() -> Shutdown {
        let (trigger, shutdown) = Shutdown::new();
        tokio::spawn(async move {
            signalled().await;
            trigger.stop();
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

/// Resolves when the process receives SIGTERM or SIGINT.
async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        // Without handlers the default action (exit) applies; never resolve.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
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
