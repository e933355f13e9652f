//! Issue 14, the mapping in one place: the gate component's `tools` export (a tool call to a
//! premise read, a proposal, a send and a lookup) through wasmtime, as every host calls it.
//! The rules themselves are tested in guest/core/src/tools.rs; this checks the export
//! carries them, bad input included, and that its proposal is one the gate takes.
mod common;

use common::{runtime, T0_MS};
use interlock_cli::{Clock, Error, GateError, GateHost, Storage};
use serde_json::{json, Value};

const CONFIG: &str = r#"{"journal_dir": ".interlock/mcp",
  "tools": {"create_refund": {
    "key": ["order_id"],
    "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"}, "fields": ["refunded_total"]},
    "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
    "idempotency_argument": "reference",
    "dedupes": false}}}"#;

fn host() -> GateHost {
    GateHost::new(runtime(), Storage::memory(), Clock::fake(T0_MS)).unwrap()
}

fn field(e: Error) -> String {
    match e {
        Error::Gate(GateError::InvalidField(f)) => f.field,
        other => panic!("not invalid-field: {other:?}"),
    }
}

#[test]
fn the_component_maps_a_tool_call_and_the_gate_takes_its_proposal() {
    let mut gate = host();
    assert_eq!(
        gate.tools().check_config(CONFIG).unwrap(),
        ["create_refund"]
    );
    let args = r#"{"order_id": "o1", "amount_cents": 2000}"#;
    let (tool, read) = gate
        .tools()
        .premise_call(CONFIG, "create_refund", args)
        .unwrap()
        .unwrap();
    assert_eq!(tool, "get_order");
    let read: Value = serde_json::from_str(&read).unwrap();
    let id = read["excluding"].as_str().unwrap().to_string();
    let lease = json!({"lease": "case-4471"}).to_string();
    let proposal = gate
        .tools()
        .proposal(
            CONFIG,
            "create_refund",
            args,
            Some(r#"{"refunded_total": 0}"#),
            "agent",
            Some(&lease),
        )
        .unwrap();
    assert_eq!(gate.effect_id_of(&proposal).unwrap(), id);
    let (_, send) = gate
        .tools()
        .send_call(CONFIG, "create_refund", args, &id)
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&send).unwrap()["reference"],
        json!(id)
    );
    let effect = serde_json::from_str::<Value>(&proposal).unwrap()["effect"].to_string();
    let (tool, look) = gate
        .tools()
        .lookup_call(CONFIG, "create_refund", &id, &effect)
        .unwrap()
        .unwrap();
    assert_eq!(
        (tool.as_str(), serde_json::from_str::<Value>(&look).unwrap()),
        ("find_refund", json!({"reference": id}))
    );
    assert!(gate
        .tools()
        .found(CONFIG, "create_refund", r#"{"found": {"id": "re_1"}}"#)
        .unwrap());
    assert!(!gate
        .tools()
        .found(CONFIG, "create_refund", r#"{"found": null}"#)
        .unwrap());
}

#[test]
fn bad_input_is_invalid_field_at_its_pointer_across_the_boundary() {
    let mut gate = host();
    let bad =
        r#"{"tools": {"create_refund": {"key": ["order_id"], "premises": {"tool": "get_order"}}}}"#;
    assert_eq!(
        field(gate.tools().check_config(bad).unwrap_err()),
        "/tools/create_refund/premises/fields"
    );
    let e = gate
        .tools()
        .premise_call(CONFIG, "create_refund", r#"{"amount_cents": 2000}"#)
        .unwrap_err();
    assert_eq!(field(e), "/arguments/order_id");
    let e = gate
        .tools()
        .proposal(
            CONFIG,
            "create_refund",
            r#"{"order_id": "o1"}"#,
            Some(r#"{"total": 0}"#),
            "agent",
            Some(r#"{"lease": "l"}"#),
        )
        .unwrap_err();
    assert_eq!(field(e), "/premises/refunded_total");
    // No authority in the config nor from the host: the proposal names none (the gate
    // runs it under the agent's standing lease), and the start check says which tools
    // will, or refuses them under strict authority.
    let p = gate
        .tools()
        .proposal(
            CONFIG,
            "create_refund",
            r#"{"order_id": "o1"}"#,
            Some(r#"{"refunded_total": 0}"#),
            "agent",
            None,
        )
        .unwrap();
    assert!(!p.contains("authority"), "{p}");
    assert_eq!(
        gate.tools().check_authority(CONFIG, None, false).unwrap(),
        ["create_refund"]
    );
    let e = gate
        .tools()
        .check_authority(CONFIG, None, true)
        .unwrap_err();
    assert_eq!(field(e), "/tools/create_refund/authority");
    assert!(matches!(
        gate.tools()
            .send_call(CONFIG, "create_refund", "{not json", "k"),
        Err(Error::Gate(GateError::InvalidJson(_)))
    ));
}
