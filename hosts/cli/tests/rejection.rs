//! A refund the payments service refuses: the journal records the service's code as the
//! REFUSED entry's `detail`, the same text the Node and Python hosts record for the same
//! run (hosts/node/test/payments.test.js, hosts/python/tests/test_payments_target.py
//! check the same line), since all three take the reply from interlock-payments-sim.
mod common;

use interlock_cli::conformance::{self, Runner, Vector};

/// The order was paid 1000 cents; the agent refunds 2000. The premises hold (eligible,
/// nothing refunded), so the gate sends, and the service refuses: over the balance.
const VECTOR: &str = r#"{
  "id": "rejected-t1", "fault": "-", "title": "the service refuses the refund (over the balance)",
  "tier": "1", "paid_cents": 1000,
  "steps": [{"op": "decide", "task": "t1", "amount_cents": 2000}, {"op": "send", "task": "t1"}],
  "expect": {"refunded_cents": 0, "refund_records": 0,
             "tasks": {"t1": {"state": "REFUSED", "reason": "target_rejected", "executed": "no"}}}
}"#;

const DETAIL: &str =
    r#""detail":"exceeds_balance: order=\"order_881\" requested_cents=2000 remaining_cents=1000""#;

#[test]
fn a_refusal_records_the_services_code() {
    let v = Vector::parse(VECTOR).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runner = Runner::load(&conformance::locate(), common::runtime()).unwrap();
    let report = runner.run(&v, "{}", false, dir.path()).unwrap();
    assert_eq!(report.failures, Vec::<String>::new());
    let journal = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
    let refused: Vec<&str> = journal.lines().filter(|l| l.contains("REFUSED")).collect();
    assert_eq!(refused.len(), 1, "{journal}");
    assert!(refused[0].contains(DETAIL), "{}", refused[0]);
}
