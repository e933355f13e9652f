//! Many gate instances on one file journal (one store, `StdFiles`, shared by every instance:
//! each its own index, compare-and-append at the file's length, group commit), one thread
//! each: distinct effects all commit with their durable writes shared, and workers racing
//! one effect send it once.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};

use common::*;
use interlock_cli::{
    ApplyRequest, AuthorizeRequest, CaptureRequest, Clock, GateHost, QueryRequest, Reason, Reply,
    State, Targets,
};
use interlock_file_journal::StdFiles;
use serde_json::json;

/// Answers at once and counts the sends per effect; premises always hold.
#[derive(Clone, Default)]
struct Counting {
    sends: Arc<Mutex<HashMap<String, u32>>>,
}

impl Targets for Counting {
    fn routes(&self) -> Vec<String> {
        vec!["payments".into()]
    }
    fn capture(&mut self, _: &CaptureRequest) -> Reply {
        Reply::Captured(r#"{"eligible":true}"#.into())
    }
    fn authorize(&mut self, _: &AuthorizeRequest) -> Reply {
        Reply::Allowed(true)
    }
    fn apply(&mut self, req: &ApplyRequest) -> Reply {
        *self
            .sends
            .lock()
            .unwrap()
            .entry(req.effect_id.clone())
            .or_default() += 1;
        Reply::Applied(r#"{"ok":true}"#.into())
    }
    fn query(&mut self, _: &QueryRequest) -> Reply {
        Reply::NotFound
    }
}

fn refund(order: u64) -> String {
    json!({
        "agent": "refund-agent",
        "target": {"name": "payments", "dedupes": true, "lookup": true, "timeout_ms": 1000},
        "key": format!("refund:order_{order}"),
        "effect": {"order": format!("order_{order}"), "amount_cents": 100},
        "authority": {"lease": LEASE},
        "premises": {"eligible": true},
    })
    .to_string()
}

fn host(shared: &StdFiles, clock: &Clock) -> GateHost {
    GateHost::new(runtime(), shared.clone(), clock.clone()).unwrap()
}

#[test]
fn threads_commit_distinct_effects_and_share_fsyncs() {
    const THREADS: u64 = 8;
    const EACH: u64 = 10;
    let dir = tempfile::tempdir().unwrap();
    let shared = StdFiles::at(dir.path()).unwrap();
    let clock = Clock::fake(T0_MS);
    host(&shared, &clock)
        .grant_lease(LEASE, T0_MS + HOUR_MS)
        .unwrap();
    let target = Counting::default();
    let fsyncs_before = shared.fsyncs();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (shared, clock, mut target) = (shared.clone(), clock.clone(), target.clone());
            scope.spawn(move || {
                let mut h = host(&shared, &clock);
                for i in 0..EACH {
                    let o = h.submit(&refund(t * 1000 + i), &mut target).unwrap();
                    assert_eq!(o.state, State::Committed, "{o:?}");
                }
            });
        }
    });
    let sends = target.sends.lock().unwrap();
    assert_eq!(sends.len() as u64, THREADS * EACH);
    assert!(sends.values().all(|&n| n == 1));
    // One durable batch per effect at most; group commit may merge them.
    assert!(shared.fsyncs() - fsyncs_before <= THREADS * EACH);
    drop(shared);
    let mut reopened = GateHost::new(runtime(), StdFiles::at(dir.path()).unwrap(), clock).unwrap();
    let report = reopened.verify(&[]).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(reopened.open_effects().unwrap(), Vec::<String>::new());
}

#[test]
fn workers_racing_one_effect_send_it_once() {
    const WORKERS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let shared = StdFiles::at(dir.path()).unwrap();
    let clock = Clock::fake(T0_MS);
    host(&shared, &clock)
        .grant_lease(LEASE, T0_MS + HOUR_MS)
        .unwrap();
    let target = Counting::default();
    let start = Arc::new(Barrier::new(WORKERS));
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (shared, clock, mut target) = (shared.clone(), clock.clone(), target.clone());
                let start = start.clone();
                scope.spawn(move || {
                    let mut h = host(&shared, &clock);
                    start.wait();
                    h.submit(&refund(7), &mut target).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let sends: u32 = target.sends.lock().unwrap().values().sum();
    assert_eq!(sends, 1, "one send whoever wins: {outcomes:?}");
    // The winner commits; a loser reports the recorded outcome or the winner's live claim.
    let committed = outcomes
        .iter()
        .filter(|o| o.state == State::Committed && !o.replayed)
        .count();
    assert_eq!(committed, 1, "{outcomes:?}");
    for o in &outcomes {
        let fine = o.state == State::Committed
            || (o.state == State::Dispatched && o.reason == Some(Reason::ClaimLive));
        assert!(fine, "{o:?}");
    }
}
