//! The simulated world: its parts, how it is made from a seed, its ground truth (the
//! service, the raw journal) and its clock.
use std::collections::BTreeMap;
use std::rc::Rc;

use interlock_core::{effect_id_for, Ask, Gate, Journal};
use interlock_payments_sim::{Payments, Tier};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

use crate::faults::FaultRates;
use crate::{fail, SimJournal, Violation, HOUR, T0};

#[derive(Clone, Debug)]
pub(crate) enum Auth {
    Lease(String),
    Approval(String),
}

/// A refund request an agent decided (identity from the approved key).
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub(crate) key: String,
    pub(crate) order: String,
    pub(crate) amount: u64,
    pub(crate) auth: Auth,
    pub(crate) cap: Option<(String, u64)>,
    /// `refunded_by_others_cents` as a bound: at most this many cents above the decision's.
    pub(crate) slack: Option<u64>,
    pub(crate) host_check: bool,
    /// Approval authority: the proposal declares only `eligible` (the approval sees the rest).
    pub(crate) narrow_premises: bool,
    pub(crate) id: String,
    /// The proposal text, fixed when the agent decides (premises read then).
    pub(crate) text: Option<String>,
    /// The same key, another amount: the model changing its mind on a retry (F4/F5).
    pub(crate) alt: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) enum Pend {
    Ask(Ask),
    /// Waiting for the reply of the request `msgs[i]`.
    Await(usize),
}

#[derive(Clone, Debug)]
pub(crate) struct OpState {
    pub(crate) op: u64,
    pub(crate) effect: String,
    pub(crate) pend: Pend,
    pub(crate) lookup_not_found: bool,
    pub(crate) captured: bool,
    pub(crate) allowed: Option<bool>,
    /// Whether the lease or approval was live when the gate asked for the premises (the
    /// moment it checked authority), and whether a host check came after the capture.
    pub(crate) live_at_recheck: Option<bool>,
    pub(crate) asked_authorize_after_capture: bool,
    /// The claim deadline of this operation's send.
    pub(crate) deadline: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Worker {
    pub(crate) gate: Gate,
    pub(crate) op: Option<OpState>,
}

/// A request sent to the service.
#[derive(Clone, Debug)]
pub(crate) struct Msg {
    pub(crate) effect: String,
    pub(crate) order: String,
    pub(crate) amount: u64,
    pub(crate) key: String,
    pub(crate) deadline: u64,
    /// When it reaches the service (strictly before `deadline`), or never.
    pub(crate) land_at: Option<u64>,
    /// What the service did, once it landed.
    pub(crate) result: Option<Result<String, String>>,
    pub(crate) reply_lost: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Send {
    pub(crate) at: u64,
    pub(crate) deadline: u64,
}

/// The workers' clocks: several machines sharing one journal. Each worker's clock runs
/// ahead of the true time (`World::now`, the admin's clock) by its own offset, at most
/// `max_skew_ms`, and every proposal allows `margin_ms` of skew (`target.clock_skew_ms`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Clocks {
    pub max_skew_ms: u64,
    pub margin_ms: u64,
}

pub struct World {
    pub(crate) seed: u64,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) now: u64,
    /// Per worker: how far its clock runs ahead of `now`.
    pub(crate) skew: Vec<u64>,
    pub(crate) clocks: Clocks,
    pub(crate) tier: Tier,
    pub(crate) timeout_ms: u64,
    pub(crate) j: SimJournal,
    pub(crate) pay: Payments,
    pub(crate) workers: Vec<Worker>,
    pub(crate) admin: Gate,
    pub(crate) orders: Vec<String>,
    pub(crate) leases: Vec<String>,
    pub(crate) requests: Vec<Request>,
    pub(crate) sends: BTreeMap<String, Vec<Send>>,
    pub(crate) msgs: Vec<Msg>,
    /// Receipts handed out: a later verify checks the journal against each.
    pub(crate) anchors: Vec<Anchor>,
    /// The raw journal's streams as last parsed by [`World::raw_stream`]: each stored line
    /// and its value. A line is parsed again only when its text differs from the one kept.
    pub(crate) parsed: BTreeMap<String, Vec<(String, Rc<Value>)>>,
    /// Recorded proposals by effect id (PROPOSED is durable before any send).
    pub(crate) proposals: BTreeMap<String, Value>,
    /// Effects the gate said were REFUSED with `executed: no`: no refund may ever carry them.
    /// The value: whether that outcome was read from an entry no fsync covered yet.
    pub(crate) declared_unsent: BTreeMap<String, bool>,
    pub(crate) faults_on: bool,
    /// Kept per seed, so its report says what it ran under.
    pub(crate) rates: FaultRates,
    /// Caps already found over their limit by a known bug (not counted again).
    pub(crate) caps_over: Vec<String>,
    pub(crate) strict: bool,
    pub(crate) known: Vec<Violation>,
    pub(crate) max_steps: u64,
    pub steps: u64,
    pub events: BTreeMap<&'static str, u64>,
    pub trace: Vec<String>,
}

/// A receipt handed out, the streams it pins (read the way the gate reads them), and whether
/// it pinned entries no fsync covered yet.
pub(crate) struct Anchor {
    pub(crate) receipt: String,
    pub(crate) streams: Vec<String>,
    pub(crate) unsynced: bool,
}

impl Anchor {
    pub(crate) fn new(receipt: String, unsynced: bool) -> Self {
        let streams = interlock_core::pinned_streams(&parse(&receipt));
        Anchor {
            receipt,
            streams,
            unsynced,
        }
    }

    fn pins(&self, stream: &str) -> bool {
        self.streams.iter().any(|s| s == stream)
    }

    /// It pins entries no fsync covered, of one of these streams.
    pub(crate) fn pins_unsynced_of(&self, streams: &[String]) -> bool {
        self.unsynced && streams.iter().any(|s| self.pins(s))
    }

    /// It pins one of these streams.
    pub(crate) fn pins_any(&self, streams: &[String]) -> bool {
        streams.iter().any(|s| self.pins(s))
    }
}

pub(crate) fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("the gate and the harness write JSON")
}

pub(crate) fn state_of(e: &Value) -> &str {
    e.get("state").and_then(Value::as_str).unwrap_or("")
}

impl World {
    /// A world of workers on several machines whose clocks differ ([`Clocks`]). The offsets
    /// come from their own generator, so a seed's world is otherwise the one [`World::new`]
    /// makes.
    pub fn with_clocks(seed: u64, clocks: Clocks) -> World {
        let mut w = World::new(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_c10c);
        w.skew = (0..w.workers.len())
            .map(|_| rng.random_range(0..=clocks.max_skew_ms))
            .collect();
        w.clocks = clocks;
        w.log(format!(
            "clocks: workers ahead by {:?} ms, margin {} ms",
            w.skew, clocks.margin_ms
        ));
        w
    }

    /// Worker `w`'s clock.
    pub(crate) fn clock_of(&self, w: usize) -> u64 {
        self.now + self.skew.get(w).copied().unwrap_or(0)
    }

    pub fn new(seed: u64) -> World {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let tier = [
            Tier::ONE,
            Tier::TWO,
            Tier::THREE,
            Tier {
                dedupes: true,
                lookup: true,
            },
        ][rng.random_range(0..4)];
        let timeout_ms = [1_000, 30_000, 120_000][rng.random_range(0..3)];
        let mut pay = Payments::in_memory(tier);
        let n_orders = rng.random_range(1..=2);
        let orders: Vec<String> = (0..n_orders)
            .map(|i| format!("order_{}", 881 + i))
            .collect();
        for o in &orders {
            pay.add_order(o, [6_000, 10_000][rng.random_range(0..2)])
                .expect("orders are added");
        }
        let n_leases = rng.random_range(1..=2);
        let leases: Vec<String> = (0..n_leases)
            .map(|i| format!("case-{}", 4471 + i))
            .collect();
        let n_workers = rng.random_range(2..=3);
        let mut w = World {
            seed,
            rng,
            now: T0,
            skew: Vec::new(),
            clocks: Clocks::default(),
            tier,
            timeout_ms,
            j: SimJournal::new(),
            pay,
            workers: (0..n_workers).map(|_| Worker::default()).collect(),
            admin: Gate::new(),
            orders,
            leases,
            requests: Vec::new(),
            sends: BTreeMap::new(),
            msgs: Vec::new(),
            anchors: Vec::new(),
            parsed: BTreeMap::new(),
            proposals: BTreeMap::new(),
            declared_unsent: BTreeMap::new(),
            faults_on: true,
            rates: FaultRates::DEFAULT,
            caps_over: Vec::new(),
            strict: false,
            known: Vec::new(),
            max_steps: 0,
            steps: 0,
            events: BTreeMap::new(),
            trace: Vec::new(),
        };
        w.max_steps = w.rng.random_range(40..=160);
        for l in w.leases.clone() {
            let until = T0 + w.rng.random_range(1..=72) * HOUR;
            w.admin
                .grant_lease(&mut w.j, T0, &l, until)
                .expect("the first grant writes");
            w.log(format!("lease {l} granted until +{}h", (until - T0) / HOUR));
        }
        let cap_limits: Vec<u64> = (0..w.orders.len())
            .map(|_| [2_000, 3_000, 5_000][w.rng.random_range(0..3)])
            .collect();
        let n_requests = w.rng.random_range(1..=4);
        for i in 0..n_requests {
            let order = w.orders[w.rng.random_range(0..w.orders.len())].clone();
            let amount = [1_000, 2_000, 3_000][w.rng.random_range(0..3)];
            let auth = if w.rng.random_bool(0.2) {
                Auth::Approval(format!("apr-{i}"))
            } else {
                Auth::Lease(w.leases[w.rng.random_range(0..w.leases.len())].clone())
            };
            // One limit per cap: the orders' caps are fixed when the world is made.
            let cap = w.rng.random_bool(0.35).then(|| {
                let o = w.orders.iter().position(|x| *x == order).unwrap_or(0);
                (format!("{order}-cap"), cap_limits[o])
            });
            let slack = w
                .rng
                .random_bool(0.3)
                .then(|| [0, 500, 1_000, 3_000][w.rng.random_range(0..4)]);
            let key = format!("refund:{order}:{i}");
            let id = effect_id_for(Some(&json!(key)), &json!({}));
            let r = Request {
                key,
                order,
                amount,
                auth,
                cap,
                slack,
                host_check: w.rng.random_bool(0.1),
                narrow_premises: w.rng.random_bool(0.5),
                id,
                text: None,
                alt: None,
            };
            w.log(format!(
                "request {i}: {} {} cents on {}, {:?}, cap {:?}, slack {:?}, host_check {}, effect {}",
                r.key, r.amount, r.order, r.auth, r.cap, r.slack, r.host_check, &r.id[..8]
            ));
            w.requests.push(r);
        }
        w.log(format!(
            "world: tier {}, timeout {} ms, {} workers, {} steps",
            tier.label(),
            timeout_ms,
            n_workers,
            w.max_steps
        ));
        w
    }

    pub(crate) fn log(&mut self, s: String) {
        let t = self.now - T0;
        self.trace
            .push(format!("[{:>5}.{:03}s] {s}", t / 1000, t % 1000));
    }

    pub(crate) fn ev(&mut self, kind: &'static str) {
        *self.events.entry(kind).or_default() += 1;
    }

    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    // ----- the world's ground truth -----

    pub(crate) fn premises(&self, order: &str, excluding: Option<&str>) -> Value {
        self.pay
            .premises(order, excluding)
            .expect("the order exists")
    }

    /// A stream of the raw journal, each entry as the JSON its line holds (the oracle's own
    /// reading, not the gate's). Lines whose text is what was parsed before are not parsed
    /// again: the same text is the same value.
    pub(crate) fn raw_stream(&mut self, name: &str) -> Vec<Rc<Value>> {
        let lines = self.j.raw().read(name, 0).expect("memory reads");
        let kept = self.parsed.entry(name.to_string()).or_default();
        let same = kept
            .iter()
            .zip(&lines)
            .take_while(|(k, l)| k.0 == **l)
            .count();
        kept.truncate(same);
        for line in lines.into_iter().skip(same) {
            let v = Rc::new(parse(&line));
            kept.push((line, v));
        }
        kept.iter().map(|(_, v)| Rc::clone(v)).collect()
    }

    pub(crate) fn open_effects(&mut self) -> Vec<String> {
        self.j
            .raw()
            .open_streams()
            .expect("memory reads")
            .into_iter()
            .filter_map(|s| s.strip_prefix("effect:").map(String::from))
            .collect()
    }

    pub(crate) fn effect_ids(&mut self) -> Vec<String> {
        self.j
            .raw()
            .streams()
            .expect("memory reads")
            .into_iter()
            .filter_map(|s| s.strip_prefix("effect:").map(String::from))
            .collect()
    }

    /// The proposal as recorded in PROPOSED (the decision that stands).
    pub(crate) fn recorded_proposal(&mut self, id: &str) -> Option<Value> {
        if let Some(p) = self.proposals.get(id) {
            return Some(p.clone());
        }
        let first = self.j.raw().read(&format!("effect:{id}"), 0).ok()?;
        let p = parse(first.first()?)["proposal"].clone();
        self.proposals.insert(id.to_string(), p.clone());
        Some(p)
    }

    pub(crate) fn refunds_with(&self, id: &str) -> usize {
        self.orders
            .iter()
            .flat_map(|o| self.pay.refunds(o))
            .filter(|r| r.reference.as_deref() == Some(id))
            .count()
    }

    /// Move the clock, landing every request in flight at its landing time on the way.
    pub(crate) fn advance(&mut self, dt: u64) -> Result<(), Violation> {
        let target = self.now + dt;
        loop {
            let next = self
                .msgs
                .iter()
                .enumerate()
                .filter(|(_, m)| m.result.is_none() && m.land_at.is_some_and(|t| t <= target))
                .min_by_key(|(i, m)| (m.land_at, *i))
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            let at = self.msgs[i].land_at.expect("filtered");
            self.now = self.now.max(at);
            self.land(i)?;
        }
        self.now = target;
        Ok(())
    }

    pub(crate) fn land(&mut self, i: usize) -> Result<(), Violation> {
        let m = self.msgs[i].clone();
        let at = m.land_at.expect("only requests that land");
        if at >= m.deadline {
            return fail(
                "harness_lands_after_claim",
                format!("request {i} would land at {at}, claim until {}", m.deadline),
            );
        }
        let r = self
            .pay
            .refund(&m.order, m.amount, Some(&m.key), Some(&m.effect), at);
        let res = match r {
            Ok(r) => {
                self.ev("service_applied");
                Ok(json!({"refund_id": r.id}).to_string())
            }
            Err(e) => {
                self.ev("service_rejected");
                Err(e.to_string())
            }
        };
        self.log(format!(
            "request {i} lands at the service for {}: {:?}",
            &m.effect[..8],
            res
        ));
        self.msgs[i].result = Some(res);
        Ok(())
    }
}
