//! How often each fault strikes. The journal's own faults are injected by [`SimJournal`]
//! once armed here; the host's and the network's by the harness, at these rates.
use std::fmt;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::world::World;
use crate::{CrashKind, Fault};

/// The probability of each fault. Every seed runs under [`FaultRates::DEFAULT`] today; a
/// seed's report carries the rates it ran under, so a failure replays under the same ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FaultRates {
    /// A worker's gate call runs with a journal fault armed.
    pub journal_fault: f64,
    /// What an armed journal fault is, by weight: write error, read error, process crash,
    /// power loss.
    pub journal_fault_kinds: [i32; 4],
    /// A crash strikes at one of the first this many journal calls of the gate call ...
    pub crash_within_calls: u32,
    /// ... after that call wrote (and before its fsync returned) rather than before it.
    pub crash_after_write: f64,
    /// A submit carries another amount under the same key (F4/F5: the model changed its mind).
    pub changed_amount: f64,
    /// An operator's lease or approval record fails to write.
    pub admin_write_error: f64,
    /// The host cannot read the premises.
    pub premise_read_fails: f64,
    /// The host's own check allows the effect.
    pub host_check_allows: f64,
    /// The target's lookup fails.
    pub lookup_fails: f64,
    /// What becomes of a request to the service, by weight: it lands and its reply comes
    /// back, its reply is lost, the request is lost, it lands late (before its claim ends).
    pub send_fates: [i32; 4],
    /// A request that lands late loses its reply too.
    pub late_reply_lost: f64,
    /// A reply that came in time is handed to the gate (else the host gives up on it).
    pub reply_handed_over: f64,
    /// Without a reply, the host waits (up to the claim's end) rather than give up at once.
    pub host_waits: f64,
}

impl FaultRates {
    pub const DEFAULT: FaultRates = FaultRates {
        journal_fault: 0.12,
        journal_fault_kinds: [8, 3, 6, 3],
        crash_within_calls: 6,
        crash_after_write: 0.5,
        changed_amount: 0.08,
        admin_write_error: 0.1,
        premise_read_fails: 0.07,
        host_check_allows: 0.85,
        lookup_fails: 0.07,
        send_fates: [12, 2, 2, 4],
        late_reply_lost: 0.3,
        reply_handed_over: 0.95,
        host_waits: 0.5,
    };
}

/// A fate picked by weight: the index of the weight the draw falls under.
pub(crate) fn pick_weighted(rng: &mut ChaCha8Rng, weights: &[i32]) -> usize {
    let mut r = rng.random_range(0..weights.iter().sum::<i32>());
    for (i, w) in weights.iter().enumerate() {
        if r < *w {
            return i;
        }
        r -= w;
    }
    unreachable!("the weights cover the range")
}

impl fmt::Display for FaultRates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tenths of a percent at most, so 0.07 prints as 7%, not 7.000000000000001%.
        let pct = |p: f64| format!("{}%", (p * 1000.0).round() / 10.0);
        let shares = |w: &[i32], names: &[&str]| {
            let total: i32 = w.iter().sum();
            names
                .iter()
                .zip(w)
                .map(|(n, w)| format!("{n} {}", pct(f64::from(*w) / f64::from(total))))
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "journal fault in {} of worker calls ({}; a crash strikes one of the first {} \
             journal calls, after its write {}), another amount submitted {}, admin write \
             error {}, premise read fails {}, host check allows {}, lookup fails {}, \
             requests: {} (of the late, reply lost {}), a reply in time handed over {}, \
             host waits for a missing reply {}",
            pct(self.journal_fault),
            shares(
                &self.journal_fault_kinds,
                &["write error", "read error", "process crash", "power loss"]
            ),
            self.crash_within_calls,
            pct(self.crash_after_write),
            pct(self.changed_amount),
            pct(self.admin_write_error),
            pct(self.premise_read_fails),
            pct(self.host_check_allows),
            pct(self.lookup_fails),
            shares(
                &self.send_fates,
                &["delivered", "reply lost", "request lost", "late"]
            ),
            pct(self.late_reply_lost),
            pct(self.reply_handed_over),
            pct(self.host_waits),
        )
    }
}

impl World {
    /// Maybe arm a journal fault for the next gate call of a worker.
    pub(crate) fn arm_fault(&mut self) {
        let r = self.rates;
        if !self.faults_on || !self.chance(r.journal_fault) {
            return;
        }
        let f = match pick_weighted(&mut self.rng, &r.journal_fault_kinds) {
            0 => Fault::WriteError,
            1 => Fault::ReadError,
            kind => Fault::Crash {
                at: self.rng.random_range(0..r.crash_within_calls),
                after: self.rng.random_bool(r.crash_after_write),
                kind: if kind == 2 {
                    CrashKind::Process
                } else {
                    CrashKind::Power
                },
            },
        };
        self.j.arm(f);
    }
}
