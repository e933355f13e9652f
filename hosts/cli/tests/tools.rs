//! The tool-gating machine in one place: the gate component's `tools` export (start, call,
//! resume) through wasmtime, as every host drives it. The machine's rules are tested in
//! guest/core/src/tools; this checks the export carries them across the boundary: the
//! tools it names, the answers it reads, the reply to the model, bad input at its pointer.
mod common;

use common::{runtime, T0_MS};
use interlock_cli::gate::{CallAnswer, Results, ToolOptions, ToolStep};
use interlock_cli::{Clock, Error, GateError, GateHost, State, Storage};
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

fn options(authority: Option<&str>, strict: bool) -> ToolOptions {
    ToolOptions {
        agent: "agent".into(),
        authority: authority.map(String::from),
        strict,
        results: Results::Mcp,
        wait: None,
    }
}

fn field(e: Error) -> String {
    match e {
        Error::Gate(GateError::InvalidField(f)) => f.field,
        other => panic!("not invalid-field: {other:?}"),
    }
}

/// An MCP `CallToolResult` with `value` as its structured content.
fn mcp(value: Value) -> CallAnswer {
    CallAnswer::Returned(
        json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value})
            .to_string(),
    )
}

#[test]
fn a_gated_call_goes_through_the_machine_across_the_boundary() {
    let mut gate = host();
    gate.grant_lease("case-4471", T0_MS + 3_600_000).unwrap();
    let started = gate
        .tools()
        .start(CONFIG, &options(Some(r#"{"lease": "case-4471"}"#), false))
        .unwrap();
    assert_eq!(started.gated, ["create_refund"]);
    assert!(started.standing.is_empty());
    assert_eq!(started.journal_dir, ".interlock/mcp");
    gate.tools()
        .check_tools(&[
            "create_refund".into(),
            "get_order".into(),
            "find_refund".into(),
        ])
        .unwrap();

    let mut calls = Vec::new();
    let mut step = gate
        .tools()
        .call(
            "create_refund",
            r#"{"order_id": "o1", "amount_cents": 2000}"#,
        )
        .unwrap();
    let done = loop {
        step = match step {
            ToolStep::Done(d) => break d,
            ToolStep::Call(req) => {
                let args: Value = serde_json::from_str(&req.call.arguments).unwrap();
                calls.push((req.call.tool.clone(), args.clone(), req.timeout_ms));
                let answer = match req.call.tool.as_str() {
                    "get_order" => mcp(json!({"refunded_total": 0})),
                    "create_refund" => mcp(json!({"refund_id": "re_1"})),
                    other => panic!("asked to call {other}"),
                };
                gate.tools().resume(req.id, &answer).unwrap()
            }
            other => panic!("{other:?}"),
        };
    };
    let o = done.outcome.expect("the gate was asked");
    assert_eq!(o.state, State::Committed);
    assert!(!done.reply.is_error && done.reply.message.contains("happened once"));
    let tools: Vec<&str> = calls.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(tools, ["get_order", "get_order", "create_refund"]);
    assert_eq!(calls[0].1["excluding"], json!(o.effect_id));
    assert_eq!(
        calls[2].1["reference"],
        json!(o.effect_id),
        "the gate's key"
    );
    assert!(calls[2].2.is_some(), "a send carries its timeout");
}

#[test]
fn bad_input_is_invalid_field_at_its_pointer_across_the_boundary() {
    let mut gate = host();
    let bad =
        r#"{"tools": {"create_refund": {"key": ["order_id"], "premises": {"tool": "get_order"}}}}"#;
    assert_eq!(
        field(gate.tools().start(bad, &options(None, false)).unwrap_err()),
        "/tools/create_refund/premises/fields"
    );
    // No authority anywhere: the standing lease, said at start; strict refuses.
    let started = gate.tools().start(CONFIG, &options(None, false)).unwrap();
    assert_eq!(started.standing, ["create_refund"]);
    assert_eq!(
        field(
            gate.tools()
                .start(CONFIG, &options(None, true))
                .unwrap_err()
        ),
        "/tools/create_refund/authority"
    );
    gate.tools().start(CONFIG, &options(None, false)).unwrap();
    assert_eq!(
        field(
            gate.tools()
                .check_tools(&["create_refund".into()])
                .unwrap_err()
        ),
        "/tools/create_refund/premises/tool"
    );
    // A bad call: refused before the gate is asked, at its pointer, for the model.
    let ToolStep::Done(d) = gate
        .tools()
        .call("create_refund", r#"{"amount_cents": 2000}"#)
        .unwrap()
    else {
        panic!("a bad call asks nothing")
    };
    assert!(d.outcome.is_none() && d.reply.is_error);
    let detail: Value = serde_json::from_str(&d.reply.outcome).unwrap();
    assert_eq!(detail["error"]["field"], "/arguments/order_id");
    assert!(
        d.reply.message.contains("nothing was recorded"),
        "{}",
        d.reply.message
    );
    assert!(matches!(
        gate.tools().resume(99, &CallAnswer::Slept),
        Err(Error::Gate(GateError::UnknownOperation(99)))
    ));
}
