//! `postgres.insert`'s table, answer by answer.
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Value};

use super::*;
use crate::targets::testing::{cx, play, ID};
use crate::targets::ServiceError;

fn effect() -> Value {
    json!({"table": "shop.refunds", "row": {"order_id": "order_881", "amount_cents": 2000},
           "premises": {
               "refunded_by_others_cents": {"select": "sum", "column": "amount_cents", "where": {"order_id": "order_881"}},
               "refunds_by_others": {"select": "count", "where": {"order_id": "order_881", "voided_at": null}},
               "eligible": {"sql": "SELECT paid FROM orders WHERE id = $1 AND $2 <> ''", "params": ["order_881", "$effect_id"]}}})
}

fn names(e: &Value) -> Vec<String> {
    Insert.premises_of(e)
}

fn rows(statements: Vec<Vec<Vec<Option<&str>>>>) -> ServiceAnswer {
    ServiceAnswer::Returned(json!({ "rows": statements }))
}

fn raised(sqlstate: &str) -> ServiceAnswer {
    ServiceAnswer::Raised(ServiceError {
        error_type: Some("postgres".into()),
        status: None,
        code: Some(sqlstate.into()),
        message: "m".into(),
    })
}

fn invalid(e: Value) -> String {
    match Insert.check_effect(&e) {
        Err(GateError::InvalidField { field, .. }) => field,
        other => panic!("{e} was not refused: {other:?}"),
    }
}

#[test]
fn the_effect_is_checked_at_its_pointer() {
    Insert.check_effect(&effect()).unwrap();
    assert_eq!(
        invalid(json!({"table": "refunds;drop", "row": {"a": 1}})),
        "/effect/table"
    );
    assert_eq!(
        invalid(json!({"table": "a.b.c", "row": {"a": 1}})),
        "/effect/table"
    );
    assert_eq!(invalid(json!({"table": "t", "row": {}})), "/effect/row");
    assert_eq!(
        invalid(json!({"table": "t", "row": {"a b": 1}})),
        "/effect/row/a b"
    );
    // The key column is the gate's.
    assert_eq!(
        invalid(json!({"table": "t", "row": {"interlock_effect_id": "x"}})),
        "/effect/row/interlock_effect_id"
    );
    assert_eq!(
        invalid(
            json!({"table": "t", "row": {"a": 1}, "premises": {"p": {"select": "max", "column": "a"}}})
        ),
        "/effect/premises/p/select"
    );
    assert_eq!(
        invalid(json!({"table": "t", "row": {"a": 1}, "premises": {"p": {"sql": "SELECT 1;"}}})),
        "/effect/premises/p/sql"
    );
    assert_eq!(
        invalid(
            json!({"table": "t", "row": {"a": 1}, "premises": {"p": {"select": "count", "where": {"a": [1]}}}})
        ),
        "/effect/premises/p/where/a"
    );
    assert_eq!(
        invalid(json!({"table": "t", "row": {"a": 1}, "colums": 1})),
        "/effect/colums"
    );
}

#[test]
fn premises_are_one_read_only_transaction_that_leaves_the_effects_own_row_out() {
    let e = effect();
    let names = names(&e);
    assert_eq!(
        names,
        ["eligible", "refunded_by_others_cents", "refunds_by_others"]
    );
    let Turn::Call(c) = Insert.turn(Phase::Premises, &cx(&e, &names), &[]) else {
        panic!()
    };
    assert_eq!(c.operation, "transaction");
    let s = &c.params["statements"];
    assert_eq!(
        s[0],
        json!({"sql": "SET TRANSACTION READ ONLY", "params": []})
    );
    assert_eq!(
        s[1],
        json!({"sql": "SELECT to_jsonb(q.*)::text FROM (SELECT paid FROM orders WHERE id = $1 AND $2 <> '') AS q",
               "params": ["order_881", ID]})
    );
    assert_eq!(
        s[2],
        json!({"sql": "SELECT to_jsonb(v)::text FROM (SELECT coalesce(sum(\"amount_cents\"), 0) AS v FROM \"shop\".\"refunds\" \
                       WHERE \"interlock_effect_id\" IS DISTINCT FROM $1::text AND \"order_id\"::text = $2::text) AS q",
               "params": [ID, "order_881"]})
    );
    assert_eq!(
        s[3],
        json!({"sql": "SELECT to_jsonb(v)::text FROM (SELECT count(*) AS v FROM \"shop\".\"refunds\" \
                       WHERE \"interlock_effect_id\" IS DISTINCT FROM $1::text AND \"order_id\"::text = $2::text \
                       AND \"voided_at\" IS NULL) AS q",
               "params": [ID, "order_881"]})
    );
    let answer = rows(vec![
        vec![],
        vec![vec![Some(r#"{"paid": true}"#)]],
        vec![vec![Some("2000")]],
        vec![vec![Some("1")]],
    ]);
    assert_eq!(
        play(&Insert, Phase::Premises, &cx(&e, &names), |_| answer
            .clone())
        .1,
        Reply::Captured(
            r#"{"eligible":true,"refunded_by_others_cents":2000,"refunds_by_others":1}"#.into()
        )
    );
}

#[test]
fn a_premise_read_that_cannot_be_trusted_fails() {
    let e = effect();
    let one = vec![String::from("eligible")];
    let read = |a: ServiceAnswer| play(&Insert, Phase::Premises, &cx(&e, &one), |_| a.clone()).1;
    // No row is a value: null.
    assert_eq!(
        read(rows(vec![vec![], vec![]])),
        Reply::Captured(r#"{"eligible":null}"#.into())
    );
    for bad in [
        rows(vec![
            vec![],
            vec![
                vec![Some(r#"{"paid": true}"#)],
                vec![Some(r#"{"paid": false}"#)],
            ],
        ]),
        rows(vec![
            vec![],
            vec![vec![Some(r#"{"paid": true, "other": 1}"#)]],
        ]),
        rows(vec![vec![], vec![vec![Some("not json")]]]),
        rows(vec![vec![]]),
        ServiceAnswer::Returned(json!({"rows": "x"})),
        raised("42P01"),
        ServiceAnswer::NoAnswer("timed out".into()),
    ] {
        assert_eq!(read(bad.clone()).kind(), "failed", "{bad:?}");
    }
    let asked = vec![String::from("nothing_like_it")];
    assert_eq!(Insert.turn(Phase::Premises, &cx(&e, &asked), &[]), Turn::Reply(Reply::Failed(
        "postgres.insert reads no premise \"nothing_like_it\" (the effect names eligible, refunded_by_others_cents, refunds_by_others)".into()
    )));
}

#[test]
fn a_send_is_the_insert_keyed_by_the_effect_id_then_the_row_read_back() {
    let e = effect();
    let Turn::Call(c) = Insert.turn(Phase::Send, &cx(&e, &[]), &[]) else {
        panic!()
    };
    assert_eq!(c.timeout_ms, Some(30_000));
    let s = c.params["statements"].as_array().unwrap();
    assert_eq!(s[0]["sql"], "SET LOCAL statement_timeout = 30000");
    assert_eq!(
        s[1]["sql"],
        "INSERT INTO \"shop\".\"refunds\" AS t (\"amount_cents\", \"interlock_effect_id\", \"order_id\") \
         SELECT \"amount_cents\", \"interlock_effect_id\", \"order_id\" FROM jsonb_populate_record(NULL::\"shop\".\"refunds\", $1::text::jsonb) \
         ON CONFLICT (\"interlock_effect_id\") DO NOTHING RETURNING to_jsonb(t.*)::text"
    );
    assert_eq!(
        s[1]["params"],
        json!([format!(
            r#"{{"amount_cents":2000,"interlock_effect_id":"{ID}","order_id":"order_881"}}"#
        )])
    );
    assert_eq!(s[2]["params"], json!([ID]));
}

#[test]
fn every_answer_to_a_send_maps_to_one_reply() {
    let row = r#"{"id": 7, "interlock_effect_id": "x"}"#;
    assert_eq!(
        send_reply(&rows(vec![
            vec![],
            vec![vec![Some(row)]],
            vec![vec![Some(row)]]
        ])),
        Reply::Applied(r#"{"inserted":true,"row":{"id":7,"interlock_effect_id":"x"}}"#.into())
    );
    // Already there: an earlier send landed.
    assert_eq!(
        send_reply(&rows(vec![vec![], vec![], vec![vec![Some(row)]]])),
        Reply::Applied(r#"{"inserted":false,"row":{"id":7,"interlock_effect_id":"x"}}"#.into())
    );
    let kind = |a: ServiceAnswer| send_reply(&a).kind();
    for (a, want) in [
        (rows(vec![vec![], vec![], vec![]]), "unknown"),
        (rows(vec![vec![vec![Some("x")]]]), "unknown"),
        (ServiceAnswer::Returned(json!({"nothing": 1})), "unknown"),
        (raised("23502"), "rejected"), // not-null violation
        (raised("23514"), "rejected"), // check violation
        (raised("22P02"), "rejected"), // invalid text for a column
        (raised("42P01"), "rejected"), // no such table
        (raised("42P10"), "rejected"), // no unique constraint on the key
        (raised("42501"), "rejected"), // no privilege
        (raised("P0001"), "rejected"), // a trigger's RAISE EXCEPTION
        (raised("40001"), "unknown"),  // serialization failure: sent again after the lookup
        (raised("40P01"), "unknown"),  // deadlock
        (raised("57014"), "unknown"),  // statement timeout
        (raised("57P01"), "unknown"),  // the server shutting down
        (raised("08006"), "unknown"),  // connection failure
        (raised("XX000"), "unknown"),  // internal error
        (raised("53100"), "unknown"),  // disk full
        (
            ServiceAnswer::NoAnswer("the commit was not acknowledged".into()),
            "unknown",
        ),
    ] {
        assert_eq!(kind(a.clone()), want, "{a:?}");
    }
}

#[test]
fn a_lookup_finds_the_one_row_under_the_key() {
    let e = effect();
    let look = |a: ServiceAnswer| play(&Insert, Phase::Lookup, &cx(&e, &[]), |_| a.clone()).1;
    assert_eq!(look(rows(vec![vec![]])), Reply::NotFound);
    assert_eq!(
        look(rows(vec![vec![vec![Some(r#"{"id": 1}"#)]]])),
        Reply::Found(r#"{"row":{"id":1}}"#.into())
    );
    for bad in [
        rows(vec![vec![vec![Some("{}")], vec![Some("{}")]]]),
        rows(vec![vec![vec![Some("{"), None]]]),
        raised("42P01"),
        ServiceAnswer::NoAnswer("lost".into()),
    ] {
        assert_eq!(look(bad.clone()).kind(), "failed", "{bad:?}");
    }
}
