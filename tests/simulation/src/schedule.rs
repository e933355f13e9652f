//! The scheduler: one seeded pick per step among what the workers can do next and what
//! the world can do to them.
use interlock_core::Gate;
use rand::Rng;
use serde_json::json;

use crate::world::{Auth, OpState, Pend, Worker, World};
use crate::{Violation, HOUR};

#[derive(Clone, Copy, Debug)]
enum Action {
    Submit(usize),
    Recover(usize),
    TwoRecover,
    Perform(usize),
    Resolve(usize),
    CrashWorker(usize),
    HandRefund,
    Eligibility,
    RevokeLease,
    GrantLease,
    RevokeApproval,
    Jump,
    PowerLoss,
    Receipt,
}

impl World {
    pub fn run(&mut self) -> Result<(), Violation> {
        while self.steps < self.max_steps {
            self.steps += 1;
            let dt = self.rng.random_range(0..=self.timeout_ms / 4);
            self.advance(dt)?;
            let a = self.pick();
            self.act(a)?;
            self.check_step()?;
        }
        self.settle()
    }

    fn pick(&mut self) -> Action {
        let mut c: Vec<(u32, Action)> = Vec::new();
        let mut idle = 0;
        for (i, w) in self.workers.iter().enumerate() {
            match &w.op {
                None => {
                    idle += 1;
                    c.push((4, Action::Submit(i)));
                    c.push((3, Action::Recover(i)));
                }
                Some(OpState {
                    pend: Pend::Ask(_), ..
                }) => c.push((10, Action::Perform(i))),
                Some(OpState {
                    pend: Pend::Await(_),
                    ..
                }) => c.push((6, Action::Resolve(i))),
            }
            c.push((1, Action::CrashWorker(i)));
        }
        if idle >= 2 {
            c.push((2, Action::TwoRecover));
        }
        c.extend([
            (1, Action::HandRefund),
            (1, Action::Eligibility),
            (1, Action::RevokeLease),
            (1, Action::GrantLease),
            (1, Action::RevokeApproval),
            (2, Action::Jump),
            (1, Action::PowerLoss),
            (1, Action::Receipt),
        ]);
        let total: u32 = c.iter().map(|x| x.0).sum();
        let mut r = self.rng.random_range(0..total);
        for (wgt, a) in c {
            if r < wgt {
                return a;
            }
            r -= wgt;
        }
        unreachable!("the weights cover the range")
    }

    fn act(&mut self, a: Action) -> Result<(), Violation> {
        match a {
            Action::Submit(w) => self.submit(w),
            Action::Recover(w) => {
                let open = self.open_effects();
                if open.is_empty() {
                    return Ok(());
                }
                let id = open[self.rng.random_range(0..open.len())].clone();
                self.recover(w, &id)
            }
            Action::TwoRecover => {
                let open = self.open_effects();
                if open.is_empty() {
                    return Ok(());
                }
                let id = open[self.rng.random_range(0..open.len())].clone();
                let idle: Vec<usize> = (0..self.workers.len())
                    .filter(|i| self.workers[*i].op.is_none())
                    .collect();
                self.ev("two_workers_recover_one_effect");
                self.recover(idle[0], &id)?;
                // A power loss inside the first recovery can take the effect's only
                // (unsynced) line with it: then there is nothing left to race over.
                if !self.open_effects().contains(&id) {
                    return Ok(());
                }
                self.recover(idle[1], &id)
            }
            Action::Perform(w) => self.perform(w),
            Action::Resolve(w) => self.resolve(w),
            Action::CrashWorker(w) => {
                let what = match &self.workers[w].op {
                    None => "idle".to_string(),
                    Some(o) => format!("{:?}", o.pend)
                        .split(['{', '('])
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" "),
                };
                self.ev("crash_worker");
                self.log(format!("CRASH worker {w} (was {what})"));
                self.workers[w] = Worker::default();
                Ok(())
            }
            Action::HandRefund => {
                let order = self.orders[self.rng.random_range(0..self.orders.len())].clone();
                let amount = [500, 1_000, 2_000][self.rng.random_range(0..3)];
                if self.pay.refund_by_hand(&order, amount, self.now).is_ok() {
                    self.ev("hand_refund");
                    self.log(format!(
                        "a person refunds {amount} cents on {order} by hand"
                    ));
                }
                Ok(())
            }
            Action::Eligibility => {
                let order = self.orders[self.rng.random_range(0..self.orders.len())].clone();
                let now_eligible = self.premises(&order, None)["eligible"] == json!(true);
                self.pay
                    .set_eligible(&order, !now_eligible)
                    .expect("the order exists");
                self.ev("eligibility_changed");
                self.log(format!("{order} eligible: {}", !now_eligible));
                Ok(())
            }
            Action::RevokeLease => {
                let l = self.leases[self.rng.random_range(0..self.leases.len())].clone();
                self.admin_call("revoke_lease", |g, j, now| g.revoke_lease(j, now, &l))
            }
            Action::GrantLease => {
                let l = self.leases[self.rng.random_range(0..self.leases.len())].clone();
                let until = self.now + self.rng.random_range(1..=48) * HOUR;
                self.admin_call("grant_lease", |g, j, now| g.grant_lease(j, now, &l, until))
            }
            Action::RevokeApproval => {
                let aprs: Vec<String> = self
                    .requests
                    .iter()
                    .filter(|r| r.text.is_some())
                    .filter_map(|r| match &r.auth {
                        Auth::Approval(a) => Some(a.clone()),
                        _ => None,
                    })
                    .collect();
                if aprs.is_empty() {
                    return Ok(());
                }
                let a = aprs[self.rng.random_range(0..aprs.len())].clone();
                self.admin_call("revoke_approval", |g, j, now| g.revoke_approval(j, now, &a))
            }
            Action::Jump => {
                let (kind, dt) = match self.rng.random_range(0..10) {
                    0..=4 => (
                        "clock_jump_claim",
                        self.timeout_ms + self.rng.random_range(0..self.timeout_ms),
                    ),
                    5..=7 => ("clock_jump_hours", self.rng.random_range(1..=6) * HOUR),
                    _ => (
                        "clock_jump_past_dedupe_window",
                        25 * HOUR + self.rng.random_range(0..HOUR),
                    ),
                };
                self.ev(kind);
                self.log(format!("clock jumps {} ms ({kind})", dt));
                self.advance(dt)
            }
            Action::PowerLoss => {
                self.ev("power_loss");
                let keep = self.rng.random_range(self.j.synced..=self.j.len());
                let lost = self.j.power_cut(keep);
                if lost > 0 {
                    self.ev("power_loss_lost_lines");
                }
                self.log(format!(
                    "POWER LOSS: every worker dies, {lost} unsynced journal lines lost"
                ));
                for w in &mut self.workers {
                    *w = Worker::default();
                }
                // The admin's process dies too (its gate keeps verified streams in memory,
                // which assume no line it saw is ever lost while it lives).
                self.admin = Gate::new();
                self.proposals.clear();
                Ok(())
            }
            Action::Receipt => self.take_receipt(),
        }
    }
}
