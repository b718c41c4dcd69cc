//! A child slot's two lanes: work, and control (recalls, stops, fences,
//! restarts). Control overtakes queued work, so a recall or a stop takes
//! hold at once however much work waits for the child (issue 63: a block
//! took 2 s under load).
//!
//! Overtaking must not let work of a recalled domain slip past its
//! recall: when a recall comes out, the work queued for the slot before
//! it was sent is looked through and the recalled domains' URLs are taken
//! out, for the slot to hand back unsent ([`Inbox::take_queued`]); at a
//! stop, all of it is. Work sent after the recall stays: it was leased
//! after the dispatcher recalled (a new delay's leases, say).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use link::protocol::WorkItem;
use tokio::sync::mpsc;

use crate::core::SlotCmd;

/// Work messages a slot's queue holds before the supervisor waits.
const WORK_DEPTH: usize = 1024;
/// Control messages a slot's queue holds (they are few and handled at once).
const CONTROL_DEPTH: usize = 64;

/// A command, numbered in the order the supervisor sent it over both lanes.
type Numbered = (u64, SlotCmd);

/// The supervisor's end of a slot's lanes.
#[derive(Clone)]
pub(crate) struct Lanes {
    work: mpsc::Sender<Numbered>,
    control: mpsc::Sender<Numbered>,
    sent: Arc<AtomicU64>,
}

/// The slot's end: commands in order within each lane, control first.
pub(crate) struct Inbox {
    work: mpsc::Receiver<Numbered>,
    control: mpsc::Receiver<Numbered>,
    /// Work taken out of the lane while looking for a recall's domains,
    /// in order, served before the lane.
    queued: VecDeque<Numbered>,
    /// The number of the last control command received.
    control_seq: u64,
}

/// A slot's two lanes.
pub(crate) fn lanes() -> (Lanes, Inbox) {
    let (work_tx, work) = mpsc::channel(WORK_DEPTH);
    let (control_tx, control) = mpsc::channel(CONTROL_DEPTH);
    (
        Lanes {
            work: work_tx,
            control: control_tx,
            sent: Arc::default(),
        },
        Inbox {
            work,
            control,
            queued: VecDeque::new(),
            control_seq: 0,
        },
    )
}

impl Lanes {
    /// Sends `cmd` by its lane, waiting for room.
    pub(crate) async fn send(&self, cmd: SlotCmd) -> Result<(), SlotCmd> {
        let (lane, numbered) = self.numbered(cmd);
        lane.send(numbered).await.map_err(|e| e.0 .1)
    }

    /// Sends `cmd` by its lane if it has room now.
    pub(crate) fn try_send(&self, cmd: SlotCmd) -> Result<(), SlotCmd> {
        let (lane, numbered) = self.numbered(cmd);
        lane.try_send(numbered).map_err(|e| e.into_inner().1)
    }

    fn numbered(&self, cmd: SlotCmd) -> (&mpsc::Sender<Numbered>, Numbered) {
        let lane = match cmd {
            SlotCmd::Work(_) => &self.work,
            SlotCmd::Stop | SlotCmd::Fence(_) | SlotCmd::Recall(_) | SlotCmd::Restart { .. } => &self.control,
        };
        (lane, (self.sent.fetch_add(1, Ordering::SeqCst), cmd))
    }
}

impl Inbox {
    /// The next command: a control one when any waits, else work. `None`
    /// once the supervisor's end is gone. Cancel-safe, as
    /// `mpsc::Receiver::recv` is.
    pub(crate) async fn recv(&mut self) -> Option<SlotCmd> {
        if let Ok((seq, cmd)) = self.control.try_recv() {
            self.control_seq = seq;
            return Some(cmd);
        }
        if let Some((_, cmd)) = self.queued.pop_front() {
            return Some(cmd);
        }
        tokio::select! {
            biased;
            Some((seq, cmd)) = self.control.recv() => {
                self.control_seq = seq;
                Some(cmd)
            }
            cmd = self.work.recv() => cmd.map(|(_, cmd)| cmd),
        }
    }

    /// Takes the queued URLs of `domains` (of every domain when `None`)
    /// sent before the last control command out of the work lane: that
    /// command (a recall, a stop) overtook them, and they must not reach
    /// the child after it.
    pub(crate) fn take_queued(&mut self, domains: Option<&[String]>) -> Vec<WorkItem> {
        while let Ok(cmd) = self.work.try_recv() {
            self.queued.push_back(cmd);
        }
        let before = self.control_seq;
        let mut taken = Vec::new();
        for (seq, cmd) in &mut self.queued {
            if *seq > before {
                break;
            }
            if let SlotCmd::Work(items) = cmd {
                let (out, kept): (Vec<WorkItem>, Vec<WorkItem>) = std::mem::take(items)
                    .into_iter()
                    .partition(|i| domains.is_none_or(|d| d.contains(&i.domain)));
                *items = kept;
                taken.extend(out);
            }
        }
        self.queued
            .retain(|(_, cmd)| !matches!(cmd, SlotCmd::Work(items) if items.is_empty()));
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::tests::item;

    #[tokio::test]
    async fn a_recall_overtakes_queued_work_and_takes_its_domains_out_of_what_was_sent_before_it() {
        let (tx, mut inbox) = lanes();
        tx.send(SlotCmd::Work(vec![item(1, "a.test"), item(2, "b.test")]))
            .await
            .unwrap();
        tx.send(SlotCmd::Work(vec![item(3, "b.test")])).await.unwrap();
        let recall = SlotCmd::Recall(vec!["b.test".into()]);
        tx.send(recall.clone()).await.unwrap();
        // Leased after the recall: it stays.
        tx.send(SlotCmd::Work(vec![item(4, "b.test")])).await.unwrap();
        assert_eq!(inbox.recv().await, Some(recall));
        let taken: Vec<u64> = inbox
            .take_queued(Some(&["b.test".to_string()]))
            .iter()
            .map(|i| i.lease)
            .collect();
        assert_eq!(taken, vec![2, 3]);
        // The rest of the work comes next, in order.
        assert_eq!(inbox.recv().await, Some(SlotCmd::Work(vec![item(1, "a.test")])));
        tx.send(SlotCmd::Stop).await.unwrap();
        assert_eq!(inbox.recv().await, Some(SlotCmd::Stop));
        let taken: Vec<u64> = inbox.take_queued(None).iter().map(|i| i.lease).collect();
        assert_eq!(taken, vec![4]);
    }
}
