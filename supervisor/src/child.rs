//! One child slot: keeps a `crawler-child` running (a process; in tests
//! perhaps a task, see `launch.rs`).
//!
//! The slot starts the child, configures it, feeds it work and relays what
//! it says. When the child exits unexpectedly or stops talking for longer
//! than the hang timeout, the slot kills it and reports the loss; the
//! supervisor's core decides (`core::restarts`) whether and after what
//! backoff a new child starts, and hands the dead one's URLs to it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::core::restarts::MAX_BACKOFF;
use crate::core::{SlotCmd, SlotEvent};
use crate::lane::Inbox;
use crate::launch::{ChildCommand, Launch, Running};
use link::fence::Fence;
use link::framing::{read_frame, write_frame};
use link::protocol::{CrawlPolicy, CrawlResult, FailureKind, FromChild, Outcome, ToChild, WorkItem};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// How a slot's child is started.
#[derive(Clone, Debug)]
pub(crate) struct ChildSpec {
    pub(crate) program: PathBuf,
    pub(crate) args: Vec<String>,
    /// Secrets (store URIs, the debug token): given in the environment,
    /// which only the child's user can read, never in `args`.
    pub(crate) env: Vec<(&'static str, String)>,
    pub(crate) policy: CrawlPolicy,
    /// No frame (not even a heartbeat) for this long means the child hangs.
    pub(crate) hang_timeout: Duration,
}

/// How long a stopping child may take to finish, report and exit before
/// it is killed. Part of the supervisor's stop bound (`core::STOP_WAIT`).
const STOP_GRACE: Duration = Duration::from_secs(15);
/// See [`send`].
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// `fence`: the right's latest end, which each new child is told right
/// after its configuration, before any work.
pub(crate) async fn run_slot(
    slot: usize,
    spec: ChildSpec,
    launcher: Arc<dyn Launch>,
    fence: Fence,
    mut cmds: Inbox,
    events: mpsc::Sender<SlotEvent>,
) {
    // Work sent while no child ran, for the next one.
    let mut waiting = Vec::new();
    loop {
        let started = Instant::now();
        let outcome = match start(&spec, launcher.as_ref()) {
            Ok((child, input, frames)) => {
                let first = std::mem::take(&mut waiting);
                supervise(
                    slot, &spec, &fence, first, child, input, frames, &mut cmds, &events,
                )
                .await
            }
            Err(e) => Incarnation::Lost(format!("cannot start {}: {e}", spec.program.display())),
        };
        match outcome {
            Incarnation::Stopped => {
                let _ = events.send(SlotEvent::Stopped { slot }).await;
                return;
            }
            Incarnation::Lost(why) => {
                let lived = started.elapsed();
                // The supervisor gives everything this slot held to the
                // next child (or fails it), so nothing is kept from before.
                waiting.clear();
                let _ = events.send(SlotEvent::Exited { slot, why, lived }).await;
                if !between_children(slot, &mut waiting, &mut cmds, &events).await {
                    return;
                }
            }
        }
    }
}

/// Between a child's death and the next: waits for the supervisor's word
/// and the backoff it names, taking commands meanwhile. Work that arrives
/// is kept in `waiting` for the next child: the supervisor placed it on
/// this slot, and handing it back would only bring it here again. Whether
/// to start the next child (false: the slot stopped).
async fn between_children(
    slot: usize,
    waiting: &mut Vec<WorkItem>,
    cmds: &mut Inbox,
    events: &mpsc::Sender<SlotEvent>,
) -> bool {
    // The supervisor answers at once; a supervisor too busy to is not
    // waited for longer than the longest backoff it would name.
    let wait = tokio::time::sleep(MAX_BACKOFF);
    tokio::pin!(wait);
    loop {
        tokio::select! {
            _ = &mut wait => return true,
            cmd = cmds.recv() => match cmd {
                Some(SlotCmd::Restart { after }) => {
                    wait.as_mut().reset(tokio::time::Instant::now() + after);
                }
                Some(SlotCmd::Stop) | None => {
                    let _ = events.send(SlotEvent::Stopped { slot }).await;
                    return false;
                }
                Some(SlotCmd::Work(items)) => waiting.extend(items),
                // What waits here has not started: handed back as a child
                // would (see `ToChild::Recall`).
                Some(SlotCmd::Recall(domains)) => {
                    let (mut recalled, kept): (Vec<WorkItem>, Vec<WorkItem>) = std::mem::take(waiting)
                        .into_iter()
                        .partition(|item| domains.contains(&item.domain));
                    *waiting = kept;
                    recalled.extend(cmds.take_queued(Some(&domains)));
                    hand_back(slot, recalled, RECALLED, events).await;
                }
                // The next child is told the latest right as it starts.
                Some(SlotCmd::Fence(_)) => {}
            },
        }
    }
}

/// Why URLs that never reached a child come back.
const RECALLED: &str = "recalled (its domain was blocked, paused, given a new delay or moved)";
const STOPPING: &str = "not started: the crawl stops";

/// Hands `items` back unsent, as `Recalled` results, as a child would
/// (see `ToChild::Recall`).
async fn hand_back(slot: usize, items: Vec<WorkItem>, why: &str, events: &mpsc::Sender<SlotEvent>) {
    for item in items {
        let r = CrawlResult::without_page(&item, Outcome::failed(FailureKind::Recalled, why));
        let _ = events.send(SlotEvent::Message(slot, FromChild::Result(r))).await;
    }
}

enum Incarnation {
    Stopped,
    Lost(String),
}

type Frames = mpsc::Receiver<FromChild>;

/// What the slot writes the child's `ToChild` frames to.
type Input = Box<dyn AsyncWrite + Send + Unpin>;

/// Starts a child and a task that reads its frames.
fn start(spec: &ChildSpec, launcher: &dyn Launch) -> std::io::Result<(Running, Input, Frames)> {
    let launched = launcher.launch(&ChildCommand {
        program: &spec.program,
        args: &spec.args,
        env: &spec.env,
    })?;
    let mut output = launched.output;
    let (tx, rx) = mpsc::channel(1024);
    // Frames are read in their own task: reading is not cancel-safe, so it
    // must not sit in a select! with other branches.
    tokio::spawn(async move {
        while let Ok(Some(msg)) = read_frame::<_, FromChild>(&mut output).await {
            if tx.send(msg).await.is_err() {
                break;
            }
        }
    });
    Ok((launched.running, launched.input, rx))
}

#[allow(clippy::too_many_arguments)]
async fn supervise(
    slot: usize,
    spec: &ChildSpec,
    fence: &Fence,
    first: Vec<WorkItem>,
    mut child: Running,
    mut stdin: Input,
    mut frames: Frames,
    cmds: &mut Inbox,
    events: &mpsc::Sender<SlotEvent>,
) -> Incarnation {
    if let Err(e) = send(&mut stdin, &ToChild::Configure(spec.policy.clone())).await {
        return Incarnation::Lost(format!("configure failed: {e}"));
    }
    let until_mono_ms = fence.until();
    if let Err(e) = send(&mut stdin, &ToChild::Fence { until_mono_ms }).await {
        return Incarnation::Lost(format!("telling its right to crawl failed: {e}"));
    }
    if !first.is_empty() {
        if let Err(e) = send(&mut stdin, &ToChild::Work(first)).await {
            return Incarnation::Lost(format!("handing it the waiting work failed: {e}"));
        }
    }
    let mut last_heard = Instant::now();
    let mut watchdog = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            msg = frames.recv() => match msg {
                Some(msg) => {
                    last_heard = Instant::now();
                    let _ = events.send(SlotEvent::Message(slot, msg)).await;
                }
                None => {
                    // Its stdout closed: it exited or is about to; a child
                    // that closed stdout and lives on is killed.
                    let status = match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                        Ok(Ok(exit)) => exit.to_string(),
                        Ok(Err(e)) => format!("not known ({e})"),
                        Err(_) => {
                            child.start_kill();
                            "closed its output, killed".to_string()
                        }
                    };
                    return Incarnation::Lost(format!("exited: {status}"));
                }
            },
            cmd = cmds.recv() => {
                let msg = match cmd {
                    Some(SlotCmd::Work(items)) => ToChild::Work(items),
                    Some(SlotCmd::Fence(until_mono_ms)) => ToChild::Fence { until_mono_ms },
                    // Work sent before the recall and overtaken by it
                    // (see `crate::lane`) comes back without reaching the child.
                    Some(SlotCmd::Recall(domains)) => {
                        hand_back(slot, cmds.take_queued(Some(&domains)), RECALLED, events).await;
                        ToChild::Recall { domains }
                    }
                    // Meant for a slot between children: this one lives.
                    Some(SlotCmd::Restart { .. }) => continue,
                    Some(SlotCmd::Stop) | None => {
                        hand_back(slot, cmds.take_queued(None), STOPPING, events).await;
                        return stop(slot, child, stdin, frames, events).await;
                    }
                };
                if let Err(e) = send(&mut stdin, &msg).await {
                    child.start_kill();
                    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                    return Incarnation::Lost(format!("write failed: {e}"));
                }
            }
            _ = watchdog.tick() => {
                if last_heard.elapsed() > spec.hang_timeout {
                    child.start_kill();
                    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                    return Incarnation::Lost(format!("silent for {:?}, killed", spec.hang_timeout));
                }
            }
        }
    }
}

/// Asks the child to finish, relays its last results, waits for it to exit;
/// a child still there after [`STOP_GRACE`] (stuck, frozen, or ignoring
/// Stop) is killed. The child itself drains for at most 10 s, so a healthy
/// one is never killed here.
async fn stop(
    slot: usize,
    mut child: Running,
    mut stdin: Input,
    mut frames: Frames,
    events: &mpsc::Sender<SlotEvent>,
) -> Incarnation {
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    let _ = tokio::time::timeout_at(deadline, send(&mut stdin, &ToChild::Stop)).await;
    drop(stdin);
    let relay = async {
        while let Some(msg) = frames.recv().await {
            let _ = events.send(SlotEvent::Message(slot, msg)).await;
        }
        child.wait().await
    };
    match tokio::time::timeout_at(deadline, relay).await {
        Ok(Ok(exit)) if exit.success() => {}
        Ok(other) => tracing::warn!(slot, status = ?other, "child slot ended badly on stop"),
        Err(_) => {
            tracing::warn!(slot, grace = ?STOP_GRACE, "child slot did not stop in time; killing it");
            child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        }
    }
    Incarnation::Stopped
}

/// Writes one message to the child. Its stdin is read by a task that does
/// nothing else, so a child that takes no frame for [`WRITE_TIMEOUT`] is
/// stuck (or frozen): the error makes the slot kill and replace it instead
/// of waiting on a full pipe forever.
async fn send(stdin: &mut Input, msg: &ToChild) -> std::io::Result<()> {
    let write = async {
        write_frame(stdin, msg).await?;
        stdin.flush().await
    };
    tokio::time::timeout(WRITE_TIMEOUT, write)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "child took no input for 10 s"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tests::item;

    /// Between children the slot keeps work for the next child, and hands
    /// back what a recall names, as a child would.
    #[tokio::test]
    async fn a_slot_between_children_keeps_work_and_answers_recalls() {
        let (lanes, mut cmds) = crate::lane::lanes();
        let (events, mut heard) = mpsc::channel(8);
        let mut waiting = vec![item(1, "a.test"), item(2, "b.test")];
        lanes.send(SlotCmd::Recall(vec!["b.test".into()])).await.unwrap();
        lanes.send(SlotCmd::Work(vec![item(3, "b.test")])).await.unwrap();
        lanes
            .send(SlotCmd::Restart {
                after: Duration::ZERO,
            })
            .await
            .unwrap();
        assert!(between_children(0, &mut waiting, &mut cmds, &events).await);
        // Work 3 came after the recall: kept, for the next child (in
        // `waiting`, or still in its lane, which the restart overtook).
        let mut leases: Vec<u64> = waiting.iter().map(|i| i.lease).collect();
        leases.extend(cmds.take_queued(None).iter().map(|i| i.lease));
        leases.sort_unstable();
        assert_eq!(leases, vec![1, 3]);
        match heard.try_recv() {
            Ok(SlotEvent::Message(0, FromChild::Result(r))) => {
                assert_eq!(r.lease, 2);
                assert!(matches!(
                    r.outcome,
                    Outcome::Failed {
                        kind: FailureKind::Recalled,
                        ..
                    }
                ));
            }
            other => panic!("expected the recalled URL back, got {other:?}"),
        }
        assert!(heard.try_recv().is_err(), "one URL was recalled");
        // A stop ends the slot; what waited is the supervisor's to hand in.
        lanes.send(SlotCmd::Stop).await.unwrap();
        assert!(!between_children(0, &mut waiting, &mut cmds, &events).await);
        assert!(matches!(heard.try_recv(), Ok(SlotEvent::Stopped { slot: 0 })));
    }
}
