//! The standing authority and the defaults hosts read from the core (docs/host-api.md).
use interlock_core::{defaults, Ask, Gate, GateError, Journal, MemJournal, Reply, State};
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;

fn proposal(lease: &str, timeout: Option<u64>) -> String {
    let mut target = json!({"name": "payments", "dedupes": true});
    if let Some(t) = timeout {
        target["timeout_ms"] = t.into();
    }
    json!({"agent": "refund-agent", "target": target, "key": "refund:order_881",
           "effect": {"order": "order_881", "amount_cents": 2000},
           "authority": {"lease": lease}})
    .to_string()
}

fn lease_entries(j: &mut MemJournal, lease: &str) -> Vec<Value> {
    j.read(&format!("lease:{lease}"), 0)
        .unwrap()
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

#[test]
fn the_standing_lease_is_granted_once_recorded_and_authorizes() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    let name = gate
        .grant_standing_lease(&mut j, T0, "refund-agent")
        .unwrap();
    assert_eq!(name, "refund-agent-standing");
    let entries = lease_entries(&mut j, &name);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["state"], "GRANTED");
    assert_eq!(
        entries[0]["expires_at_ms"],
        T0 + defaults::STANDING_LEASE_MS
    );
    // Asked again: the same name, nothing more written.
    assert_eq!(
        gate.grant_standing_lease(&mut j, T0 + 5, "refund-agent")
            .unwrap(),
        name
    );
    assert_eq!(lease_entries(&mut j, &name).len(), 1);

    let step = gate.submit(&mut j, T0, &proposal(&name, None)).unwrap();
    let Ask::Apply { .. } = step.ask else {
        panic!("expected a send, got {:?}", step.ask)
    };
    let done = gate
        .resume(&mut j, T0, step.op, Reply::Applied("{}".into()))
        .unwrap();
    let Ask::Done(o) = done.ask else { panic!() };
    assert_eq!(o.state, State::Committed);
}

#[test]
fn a_revoked_standing_lease_is_never_granted_again() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    let name = gate.grant_standing_lease(&mut j, T0, "agent").unwrap();
    gate.revoke_lease(&mut j, T0 + 1, &name).unwrap();
    gate.grant_standing_lease(&mut j, T0 + 2, "agent").unwrap();
    let entries = lease_entries(&mut j, &name);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["state"], "REVOKED");
}

#[test]
fn a_bad_agent_name_grants_nothing() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    let e = gate.grant_standing_lease(&mut j, T0, "").unwrap_err();
    assert!(matches!(e, GateError::InvalidField { .. }), "{e:?}");
    assert!(j.streams().unwrap().is_empty());
}

#[test]
fn the_send_timeout_is_the_recorded_proposals_with_the_default_filled_in() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    gate.grant_lease(&mut j, T0, "case", T0 + 60_000).unwrap();
    let mut ids = vec![];
    for (order, t) in [("order_881", None), ("order_882", Some(1234))] {
        let p = proposal("case", t).replace("order_881", order);
        ids.push(gate.effect_id_of(&p).unwrap());
        let step = gate.submit(&mut j, T0, &p).unwrap();
        gate.cancel(step.op);
    }
    assert_eq!(
        gate.send_timeout_ms(&mut j, &ids[0]).unwrap(),
        defaults::DEFAULT_TIMEOUT_MS
    );
    assert_eq!(gate.send_timeout_ms(&mut j, &ids[1]).unwrap(), 1234);
    let unknown = "0".repeat(32);
    assert!(matches!(
        gate.send_timeout_ms(&mut j, &unknown),
        Err(GateError::UnknownEffect(_))
    ));
}

/// A proposal that names no authority (the original's decorator and its MCP config do not).
fn unnamed() -> String {
    let mut p: Value = serde_json::from_str(&proposal("x", None)).unwrap();
    p.as_object_mut().unwrap().remove("authority");
    p.to_string()
}

#[test]
fn a_proposal_naming_no_authority_runs_under_the_standing_lease_granted_at_first_use() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    let step = gate.submit(&mut j, T0, &unnamed()).unwrap();
    let Ask::Apply { .. } = step.ask else {
        panic!("expected a send, got {:?}", step.ask)
    };
    // Granted, recorded, once; and the recorded proposal names it.
    let grants = lease_entries(&mut j, "refund-agent-standing");
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0]["state"], "GRANTED");
    let done = gate
        .resume(&mut j, T0, step.op, Reply::Applied("{}".into()))
        .unwrap();
    let Ask::Done(o) = done.ask else { panic!() };
    assert_eq!(o.state, State::Committed);
    let receipt: Value =
        serde_json::from_str(&gate.receipt(&mut j, &o.effect_id, None).unwrap()).unwrap();
    assert_eq!(
        receipt["proposed"]["authority"],
        json!({"lease": "refund-agent-standing"})
    );
    // A second effect: nothing more granted.
    let other = unnamed().replace("order_881", "order_882");
    let step = gate.submit(&mut j, T0 + 1, &other).unwrap();
    gate.cancel(step.op);
    assert_eq!(lease_entries(&mut j, "refund-agent-standing").len(), 1);
}

#[test]
fn strict_authority_refuses_a_proposal_naming_none_and_records_nothing() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    gate.set_strict_authority(true);
    match gate.submit(&mut j, T0, &unnamed()) {
        Err(GateError::InvalidField { field, problem }) => {
            assert_eq!(field, "/authority");
            assert!(problem.contains("interlock lease grant"), "{problem}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(j.streams().unwrap().is_empty());
}

#[test]
fn a_revoked_standing_lease_refuses_what_names_no_authority() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    let name = gate
        .grant_standing_lease(&mut j, T0, "refund-agent")
        .unwrap();
    gate.revoke_lease(&mut j, T0 + 1, &name).unwrap();
    let step = gate.submit(&mut j, T0 + 2, &unnamed()).unwrap();
    let Ask::Done(o) = step.ask else {
        panic!("expected a refusal, got {:?}", step.ask)
    };
    assert_eq!(o.state, State::Refused);
    assert_eq!(lease_entries(&mut j, &name).len(), 2);
}

#[test]
fn a_bad_proposal_naming_no_authority_grants_nothing() {
    let (mut gate, mut j) = (Gate::new(), MemJournal::new());
    let bad = unnamed().replace("\"dedupes\":true", "\"dedupes\":true,\"dedupe\":true");
    assert!(matches!(
        gate.submit(&mut j, T0, &bad),
        Err(GateError::InvalidField { .. })
    ));
    assert!(j.streams().unwrap().is_empty());
}
