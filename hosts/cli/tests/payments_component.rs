//! Differential: the payments-sim component (dist/payments_sim.wasm) and the native crate
//! it is built from, given the same calls, give the same answers and the same snapshot.
//! A drift here means a host would see other tier rules, or other replies to the gate's
//! steps, than the Rust tests check.
use std::fmt::Debug;
use std::path::PathBuf;

use interlock_cli::payments_component::bindings::exports::interlock::payments_sim::service::{
    BalanceError, ServiceError,
};
use interlock_cli::payments_component::{self as sim, SimError, SimService};
use interlock_payments_sim::{Error as PayError, Payments, Reply, Tier, DEDUPE_WINDOW_MS};
use wasmtime::component::types::ComponentItem;
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

const T0: u64 = 1_800_000_000_000;

/// A fresh instance of the component. A missing .wasm fails the test: it never skips.
fn load() -> SimService {
    let wasm = sim::locate();
    assert!(
        wasm.is_file(),
        "{} is missing: run `bash scripts/build-wasm.sh` from the repo root",
        wasm.display()
    );
    let engine = Engine::new(&Config::new()).unwrap();
    SimService::load(&engine, &wasm).unwrap_or_else(|e| panic!("{e:#}"))
}

/// A service refusal, as the native crate spells it; a trap fails the test.
fn service<T>(r: Result<T, SimError>) -> Result<T, PayError> {
    match r {
        Err(SimError::Trap(e)) => panic!("the component trapped: {e:#}"),
        Err(SimError::Service(e)) => Err(e),
        Ok(v) => Ok(v),
    }
}

/// The native crate and the component side by side; every call goes to both, and the
/// answers and snapshots must match.
struct Both {
    native: Payments,
    wasm: SimService,
    calls: usize,
}

impl Both {
    fn new(tier: Tier) -> Both {
        let mut wasm = load();
        wasm.in_memory(tier).unwrap();
        let mut both = Both {
            native: Payments::in_memory(tier),
            wasm,
            calls: 0,
        };
        both.check("in_memory", Ok(()), Ok(())).unwrap();
        both
    }

    /// Compares one call's answers (by Debug: `Error` holds no PartialEq) and the states.
    fn check<T: Debug>(
        &mut self,
        what: &str,
        native: Result<T, PayError>,
        wasm: Result<T, PayError>,
    ) -> Result<T, PayError> {
        self.calls += 1;
        assert_eq!(
            format!("{native:?}"),
            format!("{wasm:?}"),
            "call {}: {what}",
            self.calls
        );
        let snap = service(self.wasm.snapshot()).unwrap();
        assert_eq!(
            self.native.snapshot(),
            snap,
            "state after call {}: {what}",
            self.calls
        );
        assert_eq!(
            self.native.refund_count(),
            service(self.wasm.refund_count()).unwrap()
        );
        assert_eq!(self.native.tier(), service(self.wasm.tier()).unwrap());
        native
    }

    fn add_order(&mut self, order: &str, paid_cents: u64) {
        let n = self.native.add_order(order, paid_cents);
        let w = service(self.wasm.add_order(order, paid_cents));
        self.check("add_order", n, w).unwrap();
    }

    fn set_eligible(&mut self, order: &str, eligible: bool) -> Result<(), PayError> {
        let n = self.native.set_eligible(order, eligible);
        let w = service(self.wasm.set_eligible(order, eligible));
        self.check("set_eligible", n, w)
    }

    fn refund(
        &mut self,
        order: &str,
        amount_cents: u64,
        key: Option<&str>,
        reference: Option<&str>,
        now_ms: u64,
    ) -> Result<String, PayError> {
        let n = self
            .native
            .refund(order, amount_cents, key, reference, now_ms);
        let w = service(
            self.wasm
                .refund(order, amount_cents, key, reference, now_ms),
        );
        self.check("refund", n, w).map(|r| r.id)
    }

    fn refund_by_hand(&mut self, order: &str, amount_cents: u64, now_ms: u64) -> String {
        let n = self.native.refund_by_hand(order, amount_cents, now_ms);
        let w = service(self.wasm.refund_by_hand(order, amount_cents, now_ms));
        self.check("refund_by_hand", n, w).unwrap().id
    }

    fn find(&mut self, reference: &str) -> Result<Option<String>, PayError> {
        let n = self.native.find_by_reference(reference);
        let w = service(self.wasm.find_by_reference(reference));
        self.check("find_by_reference", n, w)
            .map(|r| r.map(|r| r.id))
    }

    fn premises(&mut self, order: &str, excluding: Option<&str>) -> Result<(bool, u64), PayError> {
        let n = self.native.premises(order, excluding);
        let w = service(self.wasm.premises(order, excluding));
        self.check("premises", n, w).map(|v| {
            (
                v["eligible"].as_bool().unwrap(),
                v["refunded_by_others_cents"].as_u64().unwrap(),
            )
        })
    }

    fn refunded_cents(&mut self, order: &str) -> u64 {
        let n = Ok(self.native.refunded_cents(order));
        let w = service(self.wasm.refunded_cents(order));
        self.check("refunded_cents", n, w).unwrap()
    }

    fn capture(&mut self, effect_id: &str, effect: &str, names: &[&str]) -> Reply {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let n = Ok(self.native.capture(effect_id, effect, &names));
        let w = service(self.wasm.capture(effect_id, effect, &names));
        self.check("capture", n, w).unwrap()
    }

    fn apply(&mut self, effect_id: &str, effect: &str, key: &str, now_ms: u64) -> Reply {
        let n = Ok(self.native.apply(effect_id, effect, key, now_ms));
        let w = service(self.wasm.apply(effect_id, effect, key, now_ms));
        self.check("apply", n, w).unwrap()
    }

    fn query(&mut self, effect_id: &str, effect: &str) -> Reply {
        let n = Ok(self.native.query(effect_id, effect));
        let w = service(self.wasm.query(effect_id, effect));
        self.check("query", n, w).unwrap()
    }
}

fn kind(e: PayError) -> &'static str {
    match e {
        PayError::UnknownOrder(_) => "unknown-order",
        PayError::ExceedsBalance { .. } => "exceeds-balance",
        PayError::IdempotencyMismatch { .. } => "idempotency-mismatch",
        PayError::LookupUnsupported => "lookup-unsupported",
        PayError::BadTier(_) => "bad-tier",
        PayError::Corrupt(_) => "corrupt",
        PayError::InvalidJson(_) => "invalid-json",
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn tier1_dedupe_in_and_past_the_window_and_mismatch() {
    let mut b = Both::new(Tier::ONE);
    b.add_order("order_881", 10_000);
    let first = b
        .refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    // Inside the window (inclusive): the first refund, nothing new.
    let again = b
        .refund(
            "order_881",
            2_000,
            Some("k1"),
            Some("eff-1"),
            T0 + DEDUPE_WINDOW_MS,
        )
        .unwrap();
    assert_eq!(again, first);
    // Same key, other amount: mismatch, nothing new.
    let e = b
        .refund("order_881", 3_000, Some("k1"), Some("eff-1"), T0 + 1)
        .unwrap_err();
    assert_eq!(kind(e), "idempotency-mismatch");
    // Past the window: forgotten, a second refund.
    let later = b
        .refund(
            "order_881",
            2_000,
            Some("k1"),
            Some("eff-1"),
            T0 + DEDUPE_WINDOW_MS + 1,
        )
        .unwrap();
    assert_eq!(later, "re_0002");
    assert_eq!(b.refunded_cents("order_881"), 4_000);
    // Tier 1 has no lookup.
    assert_eq!(kind(b.find("eff-1").unwrap_err()), "lookup-unsupported");
    // Ineligible orders still pay out (eligibility is the gate's premise, F7).
    b.set_eligible("order_881", false).unwrap();
    b.refund("order_881", 100, Some("k2"), None, T0 + 2)
        .unwrap();
    assert_eq!(b.premises("order_881", None).unwrap(), (false, 4_100));
}

#[test]
fn tier2_lookup_and_tier1_plus_lookup() {
    let mut b = Both::new(Tier::TWO);
    b.add_order("order_881", 10_000);
    let id = b
        .refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    // Tier 2 ignores the key: the same call makes a second refund.
    b.refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0 + 1)
        .unwrap();
    assert_eq!(b.find("eff-1").unwrap(), Some(id));
    assert_eq!(b.find("eff-9").unwrap(), None);

    let mut b = Both::new(Tier::parse("1+lookup").unwrap());
    b.add_order("order_881", 10_000);
    let id = b
        .refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    // F10: 25 hours later the key is gone, lookup still finds the refund.
    assert_eq!(b.find("eff-1").unwrap(), Some(id));
}

#[test]
fn tier3_hand_refund_premises_and_balance() {
    let mut b = Both::new(Tier::THREE);
    b.add_order("order_881", 10_000);
    b.add_order("order_2", 5_000);
    b.refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    b.refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0 + 1)
        .unwrap();
    b.refund("order_881", 500, None, Some("eff-2"), T0 + 2)
        .unwrap();
    let hand = b.refund_by_hand("order_881", 1_200, T0 + 3);
    assert_eq!(hand, "re_0004");
    b.refund_by_hand("order_2", 4_000, T0 + 4);
    assert_eq!(kind(b.find("eff-1").unwrap_err()), "lookup-unsupported");
    // The effect's own refunds never count against it; the hand refund always does.
    assert_eq!(
        b.premises("order_881", Some("eff-1")).unwrap(),
        (true, 1_700)
    );
    assert_eq!(b.premises("order_881", None).unwrap(), (true, 5_700));
    assert_eq!(kind(b.premises("nope", None).unwrap_err()), "unknown-order");
    // Balance: 10 000 - 5 700 = 4 300 left.
    let e = b
        .refund("order_881", 4_301, None, None, T0 + 5)
        .unwrap_err();
    assert!(
        matches!(
            e,
            PayError::ExceedsBalance {
                requested_cents: 4_301,
                remaining_cents: 4_300,
                ..
            }
        ),
        "{e:?}"
    );
    b.refund("order_881", 4_300, None, None, T0 + 5).unwrap();
    assert_eq!(
        kind(b.refund("nope", 1, None, None, T0).unwrap_err()),
        "unknown-order"
    );
    assert_eq!(
        kind(b.set_eligible("nope", true).unwrap_err()),
        "unknown-order"
    );
    assert_eq!(b.refunded_cents("nope"), 0);
}

#[test]
fn snapshots_cross_between_native_and_component() {
    let mut native = Payments::in_memory(Tier::ONE);
    native.add_order("order_881", 10_000).unwrap();
    let r = native
        .refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    let mut wasm = load();
    wasm.restore(&native.snapshot()).unwrap();
    assert_eq!(wasm.snapshot().unwrap(), native.snapshot());
    // The restored component remembers the key and continues the ids.
    assert_eq!(
        wasm.refund("order_881", 2_000, Some("k1"), Some("eff-1"), T0 + 1)
            .unwrap(),
        r
    );
    assert_eq!(
        wasm.refund_by_hand("order_881", 1, T0).unwrap().id,
        "re_0002"
    );
    let back = Payments::restore(&wasm.snapshot().unwrap()).unwrap();
    assert_eq!(back.snapshot(), wasm.snapshot().unwrap());

    // The same refusals for bad state and bad tiers; a failed restore keeps the service.
    for text in ["{ not json", r#"{"version": 1}"#] {
        let n = Payments::restore(text).unwrap_err();
        let w = service(wasm.restore(text)).unwrap_err();
        assert_eq!(format!("{n:?}"), format!("{w:?}"));
    }
    assert_eq!(wasm.refund_count().unwrap(), 2);
}

#[test]
fn file_kept_by_the_host_opens_natively_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("payments.json");
    let mut wasm = load();
    wasm.create(&path, Tier::TWO).unwrap();
    wasm.add_order("order_881", 10_000).unwrap();
    wasm.refund("order_881", 2_000, None, Some("eff-1"), T0)
        .unwrap();
    // A crash of the host loses nothing the service returned: the file has it.
    let snap = wasm.snapshot().unwrap();
    drop(wasm);
    let mut native = Payments::open(&path).unwrap();
    assert_eq!(native.snapshot(), snap);
    native.refund_by_hand("order_881", 300, T0 + 1).unwrap();
    let mut again = load();
    again.open(&path).unwrap();
    assert_eq!(again.snapshot().unwrap(), native.snapshot());
    assert_eq!(again.path(), Some(path.as_path()));
    // A refused call writes nothing.
    let before = std::fs::read_to_string(&path).unwrap();
    again
        .refund("order_881", 1_000_000, None, None, T0)
        .unwrap_err();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    // Corrupt files are named, as natively.
    std::fs::write(&path, "{ not json").unwrap();
    match service(load().open(&path)).unwrap_err() {
        PayError::Corrupt(m) => assert!(m.contains("payments.json"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_call_before_create_traps() {
    let mut wasm = load();
    assert!(matches!(wasm.snapshot(), Err(SimError::Trap(_))));
    let mut wasm = load();
    wasm.in_memory(Tier::THREE).unwrap();
    assert_eq!(wasm.tier().unwrap(), Tier::THREE);
}

const EFFECT: &str = r#"{"order":"order_881","amount_cents":2000}"#;

#[test]
fn the_gates_steps_get_the_same_replies_at_every_tier() {
    for tier in [Tier::ONE, Tier::TWO, Tier::THREE, Tier::ONE_LOOKUP] {
        let mut b = Both::new(tier);
        b.add_order("order_881", 10_000);
        b.add_order("order_2", 5_000);
        let applied = b.apply("eff-1", EFFECT, "eff-1", T0);
        assert_eq!(
            applied,
            Reply::Applied(r#"{"amount_cents":2000,"refund_id":"re_0001"}"#.into()),
            "{tier:?}"
        );
        // A resend: deduped on tiers 1, a second refund elsewhere.
        b.apply("eff-1", EFFECT, "eff-1", T0 + 1);
        // Tier 1: the key with another order is refused; elsewhere a refund is made.
        b.apply(
            "eff-2",
            r#"{"order":"order_2","amount_cents":2000}"#,
            "eff-1",
            T0 + 2,
        );
        b.refund_by_hand("order_881", 700, T0 + 3);
        b.set_eligible("order_881", false).unwrap();
        b.capture("eff-1", EFFECT, &["refunded_by_others_cents", "eligible"]);
        b.capture("eff-9", EFFECT, &["eligible", "refunded_by_others_cents"]);
        b.capture("eff-1", EFFECT, &["mood"]);
        b.query("eff-1", EFFECT);
        b.query("eff-9", EFFECT);
    }
}

#[test]
fn every_refusal_and_malformed_effect_gets_the_same_code() {
    let mut b = Both::new(Tier::ONE);
    b.add_order("order_881", 10_000);
    let refusals = [
        (
            r#"{"order":"nope","amount_cents":1}"#,
            r#"unknown_order: order="nope""#,
        ),
        (
            r#"{"order":"order_881","amount_cents":10001}"#,
            r#"exceeds_balance: order="order_881" requested_cents=10001 remaining_cents=10000"#,
        ),
        ("{not json", "invalid_effect: not_json"),
        (r#"{"amount_cents":1}"#, r#"invalid_effect: field="/order""#),
        (
            r#"{"order":"order_881","amount_cents":-5}"#,
            r#"invalid_effect: field="/amount_cents""#,
        ),
    ];
    for (effect, code) in refusals {
        assert_eq!(
            b.apply("eff-1", effect, "k1", T0),
            Reply::Rejected(code.into())
        );
        // A malformed effect at a read step is a failed read, with the same code.
        if code.starts_with("invalid_effect") {
            assert_eq!(
                b.capture("eff-1", effect, &["eligible"]),
                Reply::Failed(code.into())
            );
            assert_eq!(b.query("eff-1", effect), Reply::Failed(code.into()));
        }
    }
    assert_eq!(
        b.capture(
            "eff-1",
            r#"{"order":"nope","amount_cents":1}"#,
            &["eligible"]
        ),
        Reply::Failed(r#"unknown_order: order="nope""#.into())
    );
    b.apply("eff-1", EFFECT, "k1", T0);
    assert_eq!(
        b.apply(
            "eff-2",
            r#"{"order":"order_881","amount_cents":1}"#,
            "k1",
            T0 + 1
        ),
        Reply::Rejected(r#"idempotency_mismatch: key="k1""#.into())
    );
    assert_eq!(
        b.query("eff-1", EFFECT),
        Reply::Failed("lookup_unsupported".into())
    );
    assert_eq!(b.native.refund_count(), 1);
}

#[test]
fn the_component_says_each_error_in_the_crates_words() {
    let mut wasm = load();
    wasm.in_memory(Tier::ONE).unwrap();
    let errors = [
        ServiceError::UnknownOrder("order_881".into()),
        ServiceError::ExceedsBalance(BalanceError {
            order: "order_881".into(),
            requested_cents: 3_000,
            remaining_cents: 2_000,
        }),
        ServiceError::IdempotencyMismatch("k1".into()),
        ServiceError::LookupUnsupported,
        ServiceError::BadTier("9".into()),
        ServiceError::Corrupt("bad".into()),
        ServiceError::InvalidJson("eof".into()),
    ];
    for e in errors {
        let said = wasm.message(&e).unwrap();
        let native = match sim::service_error(e) {
            SimError::Service(n) => n.to_string(),
            SimError::Trap(t) => panic!("{t:#}"),
        };
        assert_eq!(said, native);
    }
}

/// The payments WIT copies the gate's step records and reply (a `use` across packages
/// would make the component import the gate's interfaces): they must stay equal.
#[test]
fn the_target_records_are_the_gates() {
    let engine = Engine::new(&Config::new()).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let gate_wasm = std::env::var_os("INTERLOCK_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("dist/interlock_gate.wasm"));
    let gate = Component::from_file(&engine, &gate_wasm).unwrap();
    let payments = Component::from_file(&engine, sim::locate()).unwrap();
    let instance =
        |item: Option<wasmtime::component::types::ComponentExtern<'_>>, what: &str| match item
            .map(|e| e.ty)
        {
            Some(ComponentItem::ComponentInstance(i)) => i,
            other => panic!("{what}: {other:?}"),
        };
    let gate_ty = gate.component_type();
    let theirs = instance(
        gate_ty.get_import(&engine, "interlock:gate/target@0.1.0"),
        "the gate's target",
    );
    let pay_ty = payments.component_type();
    let ours = instance(
        pay_ty.get_export(&engine, "interlock:payments-sim/target@0.1.0"),
        "the payments target",
    );
    let ty = |i: &wasmtime::component::types::ComponentInstance, name: &str| match i
        .get_export(&engine, name)
        .map(|e| e.ty)
    {
        Some(ComponentItem::Type(t)) => t,
        other => panic!("{name}: {other:?}"),
    };
    for name in ["capture-request", "apply-request", "query-request", "reply"] {
        assert_eq!(ty(&ours, name), ty(&theirs, name), "{name}");
    }
    // And the functions take and return them.
    let func = |name: &str| match ours.get_export(&engine, name).map(|e| e.ty) {
        Some(ComponentItem::ComponentFunc(f)) => f,
        other => panic!("{name}: {other:?}"),
    };
    for (name, request) in [
        ("capture", "capture-request"),
        ("apply", "apply-request"),
        ("query", "query-request"),
    ] {
        let f = func(name);
        assert_eq!(f.params().next().unwrap().1, ty(&theirs, request), "{name}");
        assert_eq!(
            f.results().collect::<Vec<_>>(),
            [ty(&theirs, "reply")],
            "{name}"
        );
    }
}

#[test]
fn an_apply_whose_state_cannot_be_kept_is_unknown_as_natively() {
    let dir = tempfile::tempdir().unwrap();
    let native_dir = dir.path().join("native");
    let wasm_dir = dir.path().join("wasm");
    std::fs::create_dir_all(&native_dir).unwrap();
    std::fs::create_dir_all(&wasm_dir).unwrap();
    let mut native = Payments::create(&native_dir.join("payments.json"), Tier::ONE).unwrap();
    native.add_order("order_881", 10_000).unwrap();
    let mut wasm = load();
    wasm.create(&wasm_dir.join("payments.json"), Tier::ONE)
        .unwrap();
    wasm.add_order("order_881", 10_000).unwrap();
    std::fs::remove_dir_all(&native_dir).unwrap();
    std::fs::remove_dir_all(&wasm_dir).unwrap();
    let n = native.apply("eff-1", EFFECT, "eff-1", T0);
    let w = wasm.apply("eff-1", EFFECT, "eff-1", T0).unwrap();
    assert!(
        matches!(&n, Reply::Unknown(code) if code.starts_with("state_io: ")),
        "{n:?}"
    );
    assert_eq!(w, n);
    // Neither keeps a refund it could not store.
    assert_eq!(wasm.snapshot().unwrap(), native.snapshot());
}
