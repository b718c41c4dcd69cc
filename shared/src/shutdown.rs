//! Graceful stop on SIGTERM or SIGINT, for every process: finish the work
//! in hand, flush, exit 0. A stopped crawl resumes with the same command.

/// Resolves when the process receives SIGTERM or SIGINT.
pub async fn signalled() {
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
