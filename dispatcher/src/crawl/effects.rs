//! Effects carried out: what the state machine asked for (`crate::state`'s
//! `Effect`), in order: messages queued for supervisors, the frontier
//! writer's inserts and outcomes, the queue reader's reads, halts and an
//! operator's changes recorded in the store.

use std::time::Instant;

use bson::{doc, Document};
use link::protocol::ToSupervisor;
use shared::timing::Op;
use store::docs::DomainHalt;

use super::{now_ms, Dispatcher};
use crate::persist::NewUrl;
use crate::state::Effect;

impl Dispatcher {
    /// Carries out what the state machine asked for, in order, and what
    /// that asks for in turn (a supervisor dropped for not reading is
    /// given up, which re-queues its URLs). Nothing here waits for a
    /// peer: messages are queued for each peer's own writer.
    pub(super) async fn apply(&mut self) -> anyhow::Result<()> {
        loop {
            let effects = self.state.take_effects();
            if effects.is_empty() {
                return Ok(());
            }
            for effect in effects {
                self.apply_one(effect);
            }
        }
    }

    fn apply_one(&mut self, effect: Effect) {
        match effect {
            Effect::Send(s, msg) => {
                let work = match &msg {
                    ToSupervisor::Work(items) => Some(items.len()),
                    _ => None,
                };
                let start = Instant::now();
                self.send_sealed(s, &msg);
                if let Some(n) = work {
                    self.timing.record_batch(Op::Dispatch, start.elapsed(), "ok", n);
                }
            }
            Effect::Insert {
                url,
                domain,
                depth,
                seq,
                confirm,
            } => self.writer.insert(NewUrl {
                url,
                domain,
                depth,
                seq,
                deferred: None,
                confirm,
            }),
            Effect::Defer {
                url,
                domain,
                depth,
                seq,
                why,
            } => self.writer.insert(NewUrl {
                url,
                domain,
                depth,
                seq,
                deferred: Some(why),
                confirm: false,
            }),
            Effect::Ended {
                url,
                seq,
                state,
                failure,
            } => self.writer.outcome(url, seq, state, failure),
            Effect::Progress(domains) => self.writer.progress(domains),
            Effect::Read(r) => self.reader.read(r),
            Effect::ReadDue(r) => self.reader.due(r),
            Effect::LookUp(s, held) => self.reader.look_up(s, held),
            Effect::ReadLinks(urls) => self.reader.links(urls),
            Effect::CheckStored(ended) => self.reader.check_stored(ended),
            Effect::RecordHalt { domain, reason } => self.record_halt(&domain, reason.as_deref()),
            Effect::RecordControl(doc) => self.record_control(doc),
            Effect::StoreSeeds(seeds) => self.store_seeds(seeds),
            Effect::Gone(id) => {
                if let Ok(mut v) = self.view.lock() {
                    if let Some(sv) = v.supervisors.get_mut(&id) {
                        sv.live = false;
                        sv.children.clear();
                    }
                }
            }
        }
    }

    /// Writes (or clears, with `None`) a domain's halt in the second store,
    /// so a restarted dispatcher keeps it halted.
    fn record_halt(&self, domain: &str, reason: Option<&str>) {
        let Ok(update) = halt_update(reason) else {
            return;
        };
        let domains = self.stores.domains();
        let domain = domain.to_string();
        tokio::spawn(async move {
            store::until_taken("recording a domain halt", || {
                domains
                    .update_one(doc! {"_id": &domain}, update.clone())
                    .upsert(true)
            })
            .await;
        });
    }
}

/// The `$set` that records a domain's halt (`Some(reason)`) or clears it.
pub(super) fn halt_update(reason: Option<&str>) -> bson::ser::Result<Document> {
    let halt = DomainHalt {
        halted: reason.is_some(),
        halted_reason: reason.unwrap_or_default().to_string(),
        halted_at_ms: reason.map(|_| now_ms() as i64),
    };
    Ok(doc! {"$set": bson::to_document(&halt)?})
}
