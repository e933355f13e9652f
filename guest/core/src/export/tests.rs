use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{json, Value};
use std::format;

use super::*;
use crate::journal::MemJournal;
use crate::{Ask, Gate, Reply, State};

const T0: u64 = 1_800_000_000_000;

/// Submits a refund of `cents` under lease `case`; `reply` answers the send (none: leave
/// it DISPATCHED).
fn refund(
    g: &mut Gate,
    j: &mut MemJournal,
    order: &str,
    cents: u64,
    reply: Option<Reply>,
) -> String {
    let p = json!({"agent": "refund-agent", "target": {"name": "payments", "dedupes": true},
                   "key": format!("refund:{order}"), "effect": {"order": order, "amount_cents": cents},
                   "authority": {"lease": "case"}});
    let step = g.submit(j, T0 + 10, &p.to_string()).unwrap();
    let Ask::Apply { effect_id, .. } = step.ask else {
        panic!("{:?}", step.ask)
    };
    if let Some(r) = reply {
        let done = g.resume(j, T0 + 250, step.op, r).unwrap();
        assert!(matches!(done.ask, Ask::Done(_)));
    }
    effect_id
}

fn journal() -> (Gate, MemJournal, Vec<String>) {
    let (mut g, mut j) = (Gate::new(), MemJournal::new());
    g.grant_lease(&mut j, T0, "case", T0 + 3_600_000).unwrap();
    let a = refund(
        &mut g,
        &mut j,
        "o1",
        2000,
        Some(Reply::Applied(r#"{"refund_id":"re_1"}"#.into())),
    );
    let b = refund(
        &mut g,
        &mut j,
        "o2",
        500,
        Some(Reply::Rejected("no".into())),
    );
    let c = refund(&mut g, &mut j, "o3", 700, None);
    (g, j, alloc::vec![a, b, c])
}

fn target(to: &str, out: Option<&str>) -> Target {
    parse_target(to, out).unwrap()
}

fn open(j: &mut MemJournal, to: &str, out: Option<&str>, file: Option<u64>) -> (Exporter, Opened) {
    Exporter::open(j, target(to, out), None, false, file).unwrap()
}

fn drain(j: &mut MemJournal, e: &mut Exporter, max: usize) -> Vec<String> {
    let mut all = Vec::new();
    let mut len = 0;
    while let Some(b) = e.next(j, T0 + 9, max).unwrap() {
        len += b.records.iter().map(|r| r.len() as u64 + 1).sum::<u64>();
        all.extend(b.records.clone());
        e.sent(j, T0 + 9, b.id, e.sink().is_file().then_some(len))
            .unwrap();
    }
    all
}

#[test]
fn a_file_sink_gets_a_record_per_entry_and_nothing_twice() {
    let (_, mut j, _) = journal();
    let entries = j.log.len();
    let (mut e, o) = open(&mut j, "bigquery", Some("rows.jsonl"), None);
    assert_eq!((o.exported, o.truncate_to, o.in_doubt), (0, None, None));
    let rows = drain(&mut j, &mut e, 3);
    assert_eq!(rows.len(), entries);
    let ids: std::collections::BTreeSet<String> = rows
        .iter()
        .map(|r| {
            serde_json::from_str::<Value>(r).unwrap()["insert_id"]
                .as_str()
                .unwrap()
                .into()
        })
        .collect();
    assert_eq!(
        ids.len(),
        entries,
        "every insert_id is the entry's own hash"
    );
    // Caught up: nothing more, and its own SENDING/SENT entries are never exported.
    assert!(e.next(&mut j, T0, 10).unwrap().is_none());
    let len = rows.iter().map(|r| r.len() as u64 + 1).sum::<u64>();
    let (mut again, o) = open(&mut j, "bigquery", Some("rows.jsonl"), Some(len));
    assert_eq!(o.exported, entries as u64);
    assert!(again.next(&mut j, T0, 10).unwrap().is_none());
}

#[test]
fn otlp_gets_a_span_per_closed_effect_and_the_open_one_when_it_closes() {
    let (mut g, mut j, ids) = journal();
    let (mut e, _) = open(&mut j, "otlp=http://127.0.0.1:4318", None, None);
    let recs: Vec<Value> = drain(&mut j, &mut e, 10)
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    let spans: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "span").collect();
    assert_eq!(spans.len(), 2, "{recs:?}");
    assert_eq!(spans[0]["name"], "execute_tool payments");
    assert_eq!(spans[0]["trace_id"], ids[0].as_str());
    assert_eq!(
        spans[0]["attributes"]["gen_ai.operation.name"],
        "execute_tool"
    );
    assert_eq!(
        spans[0]["attributes"]["gen_ai.tool.call.id"],
        ids[0].as_str()
    );
    assert_eq!(spans[0]["attributes"]["interlock.state"], "COMMITTED");
    assert!(
        spans[0]["attributes"]
            .get("gen_ai.tool.call.arguments")
            .is_none(),
        "opt-in"
    );
    let events: Vec<&str> = spans[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["PROPOSED", "AUTHORIZED", "DISPATCHED", "COMMITTED"]
    );
    assert_eq!(spans[1]["status"], "error");
    assert_eq!(spans[1]["attributes"]["error.type"], "target_rejected");
    let metric = recs.iter().find(|r| r["kind"] == "metric").unwrap();
    assert_eq!(metric["name"], "gen_ai.execute_tool.duration");
    assert_eq!(metric["unit"], "s");
    let count: u64 = metric["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(count, 2);
    // The open effect closes later: its span comes then, the histogram counts 3 in all.
    let step = g.recover(&mut j, T0 + 600_000, &ids[2]).unwrap();
    assert!(
        matches!(step.ask, Ask::Query { .. } | Ask::Apply { .. }),
        "{:?}",
        step.ask
    );
    let step = g
        .resume(&mut j, T0 + 600_001, step.op, Reply::Applied("{}".into()))
        .unwrap();
    assert!(matches!(step.ask, Ask::Done(ref o) if o.state == State::Committed));
    let more: Vec<Value> = drain(&mut j, &mut e, 10)
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    assert_eq!(more[0]["trace_id"], ids[2].as_str());
    let count: u64 = more[1]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(count, 3, "cumulative: {}", more[1]);
}

#[test]
fn a_batch_left_in_doubt_is_sent_again_the_same_then_the_rest_once() {
    for sink in ["otlp=http://127.0.0.1:4318", "siem", "cloud-logging"] {
        let (_, mut j, _) = journal();
        let out = (!sink.starts_with("otlp")).then_some("out.jsonl");
        let (mut e, _) = open(&mut j, sink, out, None);
        let first = e.next(&mut j, T0, 2).unwrap().unwrap();
        assert!(!first.resend);
        // The process dies here: the receiver may have the batch, SENT was never written.
        drop(e);
        let written = first
            .records
            .iter()
            .map(|r| r.len() as u64 + 1)
            .sum::<u64>();
        let (mut e, o) = open(&mut j, sink, out, out.map(|_| written + 7));
        assert_eq!(o.in_doubt, Some(first.records.len() as u64), "{sink}");
        assert_eq!(
            o.truncate_to,
            out.map(|_| 0),
            "{sink}: the file is cut to before the batch"
        );
        let again = e.next(&mut j, T0, 50).unwrap().unwrap();
        assert!(again.resend);
        assert_eq!(
            again.records, first.records,
            "{sink}: the same records, the same ids"
        );
        let mut all = again.records.clone();
        e.sent(&mut j, T0, again.id, out.map(|_| written)).unwrap();
        let mut len = written;
        while let Some(b) = e.next(&mut j, T0, 2).unwrap() {
            assert!(!b.resend);
            len += b.records.iter().map(|r| r.len() as u64 + 1).sum::<u64>();
            all.extend(b.records.clone());
            e.sent(&mut j, T0, b.id, out.map(|_| len)).unwrap();
        }
        // The whole export from scratch, under another name: the same records.
        let (mut fresh, _) = Exporter::open(
            &mut j,
            target(sink, out.map(|_| "other.jsonl")),
            Some("fresh"),
            false,
            None,
        )
        .unwrap();
        let whole = drain(&mut j, &mut fresh, 1000);
        if sink.starts_with("otlp") {
            // Batches carry the metric as it stood; the spans are the same, once each.
            let spans = |v: &[String]| {
                v.iter()
                    .filter(|r| r.contains(r#""kind":"span""#))
                    .cloned()
                    .collect::<Vec<_>>()
            };
            assert_eq!(spans(&all), spans(&whole));
        } else {
            assert_eq!(all, whole, "{sink}: no gap, no duplicate");
        }
    }
}

#[test]
fn a_file_that_does_not_hold_what_was_written_is_refused() {
    let (_, mut j, _) = journal();
    let t = || target("siem", Some("events.jsonl"));
    let e = Exporter::open(&mut j, t(), None, false, Some(10))
        .err()
        .unwrap();
    assert!(
        matches!(e, ExportError::FileMismatch(ref m) if m.contains("exported nothing")),
        "{e}"
    );
    let (mut ex, _) = Exporter::open(&mut j, t(), None, false, None).unwrap();
    let all = drain(&mut j, &mut ex, 100);
    let len = all.iter().map(|r| r.len() as u64 + 1).sum::<u64>();
    for (have, what) in [
        (Some(len - 1), "shorter"),
        (None, "shorter"),
        (Some(len + 1), "longer"),
    ] {
        let e = Exporter::open(&mut j, t(), None, false, have)
            .err()
            .unwrap();
        assert!(
            matches!(e, ExportError::FileMismatch(ref m) if m.contains(what)),
            "{e}"
        );
    }
    let e = Exporter::open(
        &mut j,
        target("siem", Some("elsewhere.jsonl")),
        None,
        false,
        None,
    )
    .err()
    .unwrap();
    assert!(matches!(e, ExportError::Elsewhere { .. }), "{e}");
    // A host that reports another length than the batch's is refused; nothing recorded.
    let (_, mut j, _) = journal();
    let (mut ex, _) = Exporter::open(&mut j, t(), None, false, None).unwrap();
    let b = ex.next(&mut j, T0, 2).unwrap().unwrap();
    let e = ex.sent(&mut j, T0, b.id, Some(3)).unwrap_err();
    assert!(matches!(e, ExportError::FileMismatch(_)), "{e}");
    assert_eq!(
        ex.sent(&mut j, T0, b.id + 1, b.file_length).unwrap_err(),
        ExportError::UnknownBatch(b.id + 1)
    );
}

#[test]
fn targets_are_read_once_here() {
    assert_eq!(
        parse_target("otlp=https://collector:4318/base", None)
            .unwrap()
            .destination,
        "https://collector:4318/base"
    );
    assert_eq!(otlp_urls("http://h:4318/").0, "http://h:4318/v1/traces");
    for (to, out) in [
        ("splunk", None),
        ("otlp", None),
        ("otlp=ftp://h", None),
        ("otlp=http://", None),
        ("otlp=http://h:99999", None),
        ("otlp=http://h:4318", Some("f")),
        ("bigquery", None),
        ("bigquery=x", Some("f")),
    ] {
        assert!(parse_target(to, out).is_err(), "{to} {out:?}");
    }
    assert!(matches!(
        parse_target("splunk", None),
        Err(ExportError::UnknownSink(_))
    ));
    let (_, mut j, _) = journal();
    let e = Exporter::open(
        &mut j,
        target("siem", Some("f")),
        Some("Bad Name"),
        false,
        None,
    )
    .err()
    .unwrap();
    assert!(matches!(e, ExportError::InvalidName(_)));
}

#[test]
fn an_edited_entry_is_never_exported() {
    // Another value (the hash no longer covers it); the same value spelled another way, or
    // the hash moved out of its place (not the canonical form the hash was taken over).
    for (edit, why) in [
        ("\"amount_cents\":50000", "hash"),
        ("\"amount_cents\":5e2", "canonical"),
        ("\"amount_cents\": 500", "canonical"),
    ] {
        let (_, mut j, ids) = journal();
        let stream = format!("effect:{}", ids[1]);
        let line = j.read(&stream, 0).unwrap()[0].replace("\"amount_cents\":500", edit);
        let at = j.log.iter().position(|(s, _)| *s == stream).unwrap();
        j.log[at].1 = line.clone();
        j.tamper(&stream, 0, line);
        let (mut e, _) = open(&mut j, "bigquery", Some("f"), None);
        let mut err = None;
        for _ in 0..10 {
            match e.next(&mut j, T0, 1) {
                Ok(Some(b)) => e.sent(&mut j, T0, b.id, b.file_length).unwrap(),
                Ok(None) => break,
                Err(x) => {
                    err = Some(x);
                    break;
                }
            }
        }
        assert!(
            matches!(err, Some(ExportError::CorruptJournal(ref m)) if m.contains(why)),
            "{edit}: {err:?}"
        );
    }
    // The hash member moved to the front: the rest is canonical, the whole is not.
    let (_, mut j, ids) = journal();
    let stream = format!("effect:{}", ids[1]);
    let line = j.read(&stream, 0).unwrap()[0].clone();
    let Value::Object(obj) = serde_json::from_str::<Value>(&line).unwrap() else {
        panic!()
    };
    let hash = obj["hash"].as_str().unwrap();
    let member = format!(",\"hash\":\"{hash}\"");
    let moved = line
        .replacen(&member, "", 1)
        .replacen('{', &format!("{{{},", &member[1..]), 1);
    assert_ne!(moved, line);
    let at = j.log.iter().position(|(s, _)| *s == stream).unwrap();
    j.log[at].1 = moved.clone();
    j.tamper(&stream, 0, moved);
    let (mut e, _) = open(&mut j, "siem", Some("f"), None);
    let err = e.next(&mut j, T0, 512).err();
    assert!(
        matches!(err, Some(ExportError::CorruptJournal(ref m)) if m.contains("canonical")),
        "{err:?}"
    );
}

#[test]
fn timestamps_are_rfc3339() {
    assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339_ms(T0 + 7), "2027-01-15T08:00:00.007Z");
    assert_eq!(rfc3339_ms(951_782_400_000), "2000-02-29T00:00:00.000Z");
}

#[test]
fn records_follow_their_schemas() {
    let (_, mut j, _) = journal();
    for (sink, keys) in [
        (
            "bigquery",
            &[
                "insert_id",
                "timestamp",
                "stream",
                "state",
                "entry",
                "hash",
                "prev",
            ][..],
        ),
        (
            "cloud-logging",
            &["insertId", "timestamp", "severity", "jsonPayload", "labels"][..],
        ),
        (
            "siem",
            &[
                "class_uid",
                "activity_id",
                "type_uid",
                "time",
                "severity_id",
                "metadata",
                "actor",
                "src_endpoint",
                "api",
            ][..],
        ),
    ] {
        let (mut e, _) =
            Exporter::open(&mut j, target(sink, Some(sink)), None, false, None).unwrap();
        for r in drain(&mut j, &mut e, 100) {
            let v: Value = serde_json::from_str(&r).unwrap();
            for k in keys {
                assert!(v.get(*k).is_some(), "{sink}: {k} missing in {r}");
            }
        }
    }
    let _ = String::new().to_string();
}

#[test]
#[ignore = "a measurement: cargo test --release -p interlock-core --lib export::tests::walk_cost -- --ignored --nocapture (INTERLOCK_WALK_EFFECTS, default 2000)"]
fn walk_cost() {
    let (mut g, mut j) = (Gate::new(), MemJournal::new());
    g.grant_lease(&mut j, T0, "case", T0 + 3_600_000).unwrap();
    let effects: usize = std::env::var("INTERLOCK_WALK_EFFECTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000);
    for i in 0..effects {
        refund(
            &mut g,
            &mut j,
            &format!("o{i}"),
            100,
            Some(Reply::Applied("{}".into())),
        );
    }
    for (name, to) in [
        ("bq", "bigquery"),
        ("cl", "cloud-logging"),
        ("siem", "siem"),
        ("otlp", "otlp=http://h:1"),
    ] {
        let out = (!to.starts_with("otlp")).then_some("f");
        let (mut e, _) = Exporter::open(&mut j, target(to, out), Some(name), false, None).unwrap();
        let t = std::time::Instant::now();
        let n = drain(&mut j, &mut e, 512).len();
        std::println!(
            "{to}: {n} records of {} entries in {:?}",
            j.log.len(),
            t.elapsed()
        );
    }
}
