//! The gate itself (`interlock-core`, natively) over each shared backend, against the
//! simulated payments service: a submit, a crash and another worker's recovery, two
//! workers on one effect, and many workers recovering at once. A worker is a `Gate` with
//! its own connection to the journal; a crash drops both.
//!
//! Run with `cargo test -p interlock-sql-journal --test gate` (PostgreSQL as in contract.rs).
mod common;

use common::world::{proposal, reply, setup, Crash, Worker, CLAIM_MS, T0};
use common::{Backend, Case};
use interlock_core::{Ask, Executed, Outcome, Reason, State, Step};
use interlock_payments_sim::Tier;

const CASES: &[(&str, Case)] = &[
    (
        "a_submit_is_one_durable_commit",
        a_submit_is_one_durable_commit,
    ),
    (
        "another_worker_recovers_after_a_crash",
        another_worker_recovers_after_a_crash,
    ),
    (
        "two_workers_one_effect_one_send",
        two_workers_one_effect_one_send,
    ),
    (
        "workers_recovering_at_once_send_each_effect_once",
        workers_recovering_at_once_send_each_effect_once,
    ),
];

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let (backends, skipped) = common::backends();
    let trials = common::trials(CASES, &backends, skipped.is_some());
    let conclusion = libtest_mimic::run(&args, trials);
    drop(backends);
    conclusion.exit();
}

fn a_submit_is_one_durable_commit(b: &Backend) {
    for tier in [Tier::ONE, Tier::TWO, Tier::THREE] {
        let (url, pay) = setup(b, tier, 1);
        let mut w = Worker::new(b, &url, &pay);
        let o = w.submit(T0, &proposal(&pay, 0, 2000), None).unwrap();
        assert_eq!(
            (o.state, o.executed),
            (State::Committed, Executed::Yes),
            "{tier:?}"
        );
        assert_eq!(
            w.j.durable_commits(),
            1,
            "one commit waits for the disk on the send path"
        );
        assert_eq!(pay.lock().unwrap().refunded_cents("order_0"), 2000);
        w.verifies();
        // The same request again replays the outcome; nothing is sent twice.
        let again = w.submit(T0 + 10, &proposal(&pay, 0, 2000), None).unwrap();
        assert!(again.replayed && again.state == State::Committed);
        assert_eq!(pay.lock().unwrap().refund_count(), 1);
    }
}

fn another_worker_recovers_after_a_crash(b: &Backend) {
    for (tier, want, crash) in [
        (Tier::ONE, State::Committed, Crash::AfterSend),
        (Tier::TWO, State::Committed, Crash::AfterSend),
        (Tier::THREE, State::Ambiguous, Crash::AfterSend),
        (Tier::TWO, State::Committed, Crash::BeforeSend),
        (Tier::THREE, State::Ambiguous, Crash::BeforeSend),
    ] {
        let (url, pay) = setup(b, tier, 1);
        let mut a = Worker::new(b, &url, &pay);
        assert!(a
            .submit(T0, &proposal(&pay, 0, 2000), Some(crash))
            .is_none());
        drop(a);
        let mut other = Worker::new(b, &url, &pay);
        // While the claim is live nobody sends, not even recovery. A lookup only reads, so
        // a tier-2 refund that landed is closed by it at once (COMMITTED, nothing resent).
        let early = other.recover_all(T0 + CLAIM_MS - 1);
        if tier == Tier::TWO && crash == Crash::AfterSend {
            assert_eq!(early.len(), 1);
            assert_eq!(
                early[0].state,
                State::Committed,
                "found under the live claim"
            );
            assert_eq!(
                pay.lock().unwrap().refund_count(),
                1,
                "the send was never repeated"
            );
            assert!(
                other.recover_all(T0 + 3 * CLAIM_MS).is_empty(),
                "nothing left open"
            );
            other.verifies();
            continue;
        }
        for o in early {
            assert_eq!(
                (o.state, o.reason),
                (State::Dispatched, Some(Reason::ClaimLive))
            );
        }
        let o = other.recover_all(T0 + 2 * CLAIM_MS);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].state, want, "{tier:?}");
        let sent = pay.lock().unwrap().refund_count();
        match crash {
            Crash::AfterSend => assert_eq!(sent, 1, "{tier:?}: the send was never repeated"),
            Crash::BeforeSend if want == State::Committed => assert_eq!(sent, 1),
            Crash::BeforeSend => assert_eq!(sent, 0, "unknown fate: a person decides"),
        }
        assert!(
            other.recover_all(T0 + 3 * CLAIM_MS).is_empty(),
            "nothing left open"
        );
        other.verifies();
    }
}

/// f3 between two workers: both read the premises; the first to write its intent sends, the
/// second sees the live claim and sends nothing.
fn two_workers_one_effect_one_send(b: &Backend) {
    let (url, pay) = setup(b, Tier::TWO, 1);
    let mut a = Worker::new(b, &url, &pay);
    let mut c = Worker::new(b, &url, &pay);
    let p = proposal(&pay, 0, 2000).to_string();
    let sa = a.gate.submit(&mut *a.j, T0, &p).unwrap();
    let sc = c.gate.submit(&mut *c.j, T0, &p).unwrap();
    let captured = |s: &Step| match &s.ask {
        Ask::Capture {
            effect_id,
            effect,
            names,
            ..
        } => reply(pay.lock().unwrap().capture(effect_id, effect, names)),
        other => panic!("{other:?}"),
    };
    let (ra, rc) = (captured(&sa), captured(&sc));
    let sa = a.gate.resume(&mut *a.j, T0, sa.op, ra).unwrap();
    let sc = c.gate.resume(&mut *c.j, T0, sc.op, rc).unwrap();
    assert!(matches!(sa.ask, Ask::Apply { .. }), "{:?}", sa.ask);
    match sc.ask {
        Ask::Done(o) => assert_eq!(o.reason, Some(Reason::ClaimLive)),
        other => panic!("the second worker must not send: {other:?}"),
    }
    assert_eq!(a.drive(T0, sa, None).unwrap().state, State::Committed);
    assert_eq!(pay.lock().unwrap().refund_count(), 1);
    c.verifies();
}

/// Twelve effects left open by a crashed worker; four workers recover them all at once on
/// their own threads and connections. The service does not dedupe: only compare-and-append
/// keeps each effect to one send.
fn workers_recovering_at_once_send_each_effect_once(b: &Backend) {
    const EFFECTS: usize = 12;
    let (url, pay) = setup(b, Tier::TWO, EFFECTS);
    let mut crashed = Worker::new(b, &url, &pay);
    for i in 0..EFFECTS {
        assert!(crashed
            .submit(T0, &proposal(&pay, i, 1000), Some(Crash::BeforeSend))
            .is_none());
    }
    drop(crashed);
    let now = T0 + 2 * CLAIM_MS;
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (url, pay) = (&url, &pay);
                scope.spawn(move || Worker::new(b, url, pay).recover_all(now))
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let committed = outcomes
        .iter()
        .filter(|o| o.state == State::Committed && !o.replayed)
        .count();
    assert_eq!(
        committed, EFFECTS,
        "each effect recovered by exactly one worker: {outcomes:?}"
    );
    for o in &outcomes {
        let lost_race = o.state == State::Dispatched && o.reason == Some(Reason::ClaimLive);
        let replay = o.state == State::Committed && o.replayed;
        assert!(
            lost_race || replay || (o.state == State::Committed && !o.replayed),
            "{o:?}"
        );
    }
    let p = pay.lock().unwrap();
    assert_eq!(p.refund_count(), EFFECTS, "one send per effect");
    for i in 0..EFFECTS {
        assert_eq!(p.refunded_cents(&format!("order_{i}")), 1000);
    }
    drop(p);
    let mut w = Worker::new(b, &url, &pay);
    assert!(w.recover_all(now + 10 * CLAIM_MS).is_empty());
    w.verifies();
}
