//! The end of a run: faults stop, everything open is driven to its end, and the journal
//! must verify under every receipt handed out.
use interlock_core::State;
use serde_json::json;

use crate::world::{state_of, Anchor, OpState, Pend, Worker, World};
use crate::{fail, Violation};

impl World {
    /// Faults stop; the clock passes every claim; every agent resubmits its request and
    /// recovery runs on whatever is open. Then everything must be terminal and check.
    pub(crate) fn settle(&mut self) -> Result<(), Violation> {
        self.log("SETTLE: faults stop, workers restart, the clock passes every claim".into());
        self.faults_on = false;
        for w in &mut self.workers {
            *w = Worker::default();
        }
        let last_deadline = self.msgs.iter().map(|m| m.deadline).max().unwrap_or(0);
        // A claim lasts its margin more, and worker 0's clock may run behind its writer's.
        let wait = last_deadline.saturating_sub(self.now)
            + 1
            + self.clocks.max_skew_ms
            + self.clocks.margin_ms;
        self.advance(wait)?;
        for round in 0..4 {
            for i in 0..self.requests.len() {
                self.decide(i)?;
                let text = self.requests[i].text.clone().expect("decided");
                let id = self.requests[i].id.clone();
                self.log(format!("settle round {round}: agent resubmits request {i}"));
                let before = self.j.len();
                let step = self.call(0, "submit", |g, j, now| g.submit(j, now, &text))?;
                self.on_step(0, &id, step, before)?;
                self.drive(0)?;
            }
            for id in self.open_effects() {
                self.recover(0, &id)?;
                self.drive(0)?;
            }
            self.check_step()?;
            if self.open_effects().is_empty() {
                break;
            }
            self.advance(self.timeout_ms + 1)?;
        }
        let open = self.open_effects();
        if !open.is_empty() {
            return fail(
                "effect_left_open",
                format!("open after settling: {:?}", open),
            );
        }
        // Every effect is terminal; its receipt checks; the journal verifies under every
        // receipt handed out, then and now.
        for id in self.effect_ids() {
            let s = self.raw_stream(&format!("effect:{id}"));
            let last = s.last().map(|e| state_of(e)).unwrap_or("").to_string();
            if !State::parse(&last).is_some_and(State::is_terminal) {
                let closed = s.last().is_some_and(|e| e["open"] == json!(false));
                let r = fail(
                    if closed {
                        "torn_close_hides_open_effect"
                    } else {
                        "effect_not_terminal"
                    },
                    format!(
                        "{} ends {last} with open={}, not listed by open_effects",
                        &id[..8],
                        !closed
                    ),
                );
                self.soft(r)?;
                continue;
            }
            let executed = s.last().and_then(|e| e["executed"].as_str()).unwrap_or("");
            let refunds = self.refunds_with(&id);
            if last == "COMMITTED" && refunds == 0 {
                return fail("committed_without_refund", id);
            }
            if last == "REFUSED" && executed == "no" && refunds > 0 {
                return fail("refused_unsent_but_refunded", id);
            }
            let r = self.checked_receipt(&id)?;
            self.anchors.push(Anchor::new(r, false));
        }
        self.ev("settled");
        self.verify_journal(true)
    }

    /// Drive worker `w`'s operation to its end with a perfect host (no faults).
    fn drive(&mut self, w: usize) -> Result<(), Violation> {
        for _ in 0..32 {
            match &self.workers[w].op {
                None => return Ok(()),
                Some(OpState {
                    pend: Pend::Ask(_), ..
                }) => self.perform(w)?,
                Some(OpState {
                    pend: Pend::Await(_),
                    ..
                }) => self.resolve(w)?,
            }
        }
        fail("operation_never_ends", "32 steps without an outcome")
    }
}
