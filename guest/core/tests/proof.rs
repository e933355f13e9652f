//! Proof for outsiders (guest/core/src/proof, src/gate/proofs.rs): Ed25519 receipts checked
//! with the public key alone, receipts that anchor the authority streams they relied on,
//! the transparency log (checkpoints, inclusion and consistency proofs) and bundles.
use interlock_core::proof::{self, ProofError, Signer, Verifier};
use interlock_core::{Ask, Gate, Journal, MemJournal, ProblemKind, Reply, VerifyReport};
use serde_json::{json, Value};

const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;

fn keys(name: &str, seed: u8) -> (Signer, Verifier) {
    let s = Signer::generate(name, &[seed; 32]).unwrap();
    let v = Verifier::parse(&s.verifier().text()).unwrap();
    (s, v)
}

fn proposal(order: &str, cents: u64, lease: &str, cap: bool) -> String {
    let mut p = json!({"agent": "refund-agent", "target": {"name": "payments", "dedupes": true},
           "key": format!("refund:{order}:{cents}"),
           "effect": {"order": order, "amount_cents": cents},
           "authority": {"lease": lease}, "premises": {"refunded": 0}});
    if cap {
        p["cap"] = json!({"name": order, "limit_cents": 5000, "amount_cents": cents});
    }
    p.to_string()
}

fn run(g: &mut Gate, j: &mut MemJournal, now: u64, p: &str) -> String {
    let mut step = g.submit(j, now, p).unwrap();
    loop {
        let reply = match &step.ask {
            Ask::Done(o) => return o.effect_id.clone(),
            Ask::Capture { .. } => Reply::Captured(r#"{"refunded":0}"#.into()),
            Ask::Authorize { .. } => Reply::Allowed(true),
            Ask::Apply { .. } => Reply::Applied(r#"{"refund":"re_1"}"#.into()),
            Ask::Query { .. } => Reply::NotFound,
            other => panic!("unexpected {other:?}"),
        };
        step = g.resume(j, now, step.op, reply).unwrap();
    }
}

/// A lease, a capped refund committed, a second refund refused after the lease was revoked.
fn journal() -> (Gate, MemJournal, String, String) {
    let (mut g, mut j) = (Gate::new(), MemJournal::new());
    g.grant_lease(&mut j, T0, "case", T0 + 48 * HOUR).unwrap();
    let a = run(&mut g, &mut j, T0 + 1, &proposal("o1", 2000, "case", true));
    g.revoke_lease(&mut j, T0 + 2, "case").unwrap();
    let b = run(&mut g, &mut j, T0 + 3, &proposal("o2", 700, "case", false));
    (g, j, a, b)
}

fn located(r: &VerifyReport, stream: &str, seq: u64) -> bool {
    r.problems
        .iter()
        .any(|p| p.stream == stream && p.seq == seq)
}

#[test]
fn a_signed_receipt_checks_with_the_public_key_alone_and_nothing_else() {
    let (mut g, mut j, a, _) = journal();
    let (s, v) = keys("shop.example/interlock", 1);
    let r = g.signed_receipt(&mut j, &a, &s).unwrap();
    let doc: Value = serde_json::from_str(&r).unwrap();
    assert_eq!(doc["signature"]["alg"], "Ed25519");
    assert_eq!(doc["signature"]["key"], v.label());
    assert!(g
        .check_signed_receipt(&mut j, &r, &v)
        .unwrap()
        .problems
        .is_empty());
    // Without the journal: the signature alone.
    assert!(proof::signature_problem(doc.as_object().unwrap(), &v).is_none());
    // Another key, an edit: each a located problem.
    let (_, other) = keys("shop.example/interlock", 2);
    let p = g.check_signed_receipt(&mut j, &r, &other).unwrap().problems;
    assert!(
        p[0].detail.contains("not by shop.example/interlock+"),
        "{p:?}"
    );
    let edited = r.replace("\"amount_cents\":2000", "\"amount_cents\":20000");
    assert_ne!(edited, r);
    let p = g
        .check_signed_receipt(&mut j, &edited, &v)
        .unwrap()
        .problems;
    assert!(
        p.iter().any(|p| p.detail.contains("changed after signing")),
        "{p:?}"
    );
    // HMAC receipts work as before, and an Ed25519 one is no HMAC one.
    let h = g.receipt(&mut j, &a, Some(b"secret")).unwrap();
    assert!(g
        .check_receipt(&mut j, &h, b"secret")
        .unwrap()
        .problems
        .is_empty());
    assert!(!g
        .check_receipt(&mut j, &r, b"secret")
        .unwrap()
        .problems
        .is_empty());
    let p = g.check_signed_receipt(&mut j, &h, &v).unwrap().problems;
    assert!(p[0].detail.contains("not Ed25519"), "{p:?}");
    // Not JSON: a typed error, nothing else.
    assert!(matches!(
        g.check_signed_receipt(&mut j, &r[..r.len() / 2], &v),
        Err(ProofError::Malformed(_))
    ));
}

#[test]
fn a_receipt_anchors_the_authority_it_relied_on() {
    let (mut g, mut j, a, b) = journal();
    let ra = g.receipt(&mut j, &a, None).unwrap();
    let rb = g.receipt(&mut j, &b, None).unwrap();
    let va: Value = serde_json::from_str(&ra).unwrap();
    let streams: Vec<&str> = va["anchors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["stream"].as_str().unwrap())
        .collect();
    assert_eq!(streams, ["cap:o1", "lease:case"]);
    assert_eq!(va["anchors"][1]["head"]["length"], 2, "GRANTED, REVOKED");
    assert!(g
        .verify(&mut j, &[ra.clone(), rb.clone()])
        .unwrap()
        .problems
        .is_empty());

    // The REVOKED dropped: without anchors nothing shows, with the receipts it is caught.
    let mut dropped = j.clone();
    dropped.truncate("lease:case", 1);
    assert!(Gate::new()
        .verify(&mut dropped, &[])
        .unwrap()
        .problems
        .is_empty());
    let rep = Gate::new()
        .verify(&mut dropped, std::slice::from_ref(&rb))
        .unwrap();
    assert!(located(&rep, "lease:case", 1), "{:?}", rep.problems);
    assert_eq!(rep.problems[0].kind, ProblemKind::Truncated);
    let rep = Gate::new().check_receipt(&mut dropped, &rb, b"").unwrap();
    assert!(located(&rep, "lease:case", 1), "{:?}", rep.problems);

    // The RESERVED dropped: its cap stream is gone.
    let mut dropped = j.clone();
    dropped.truncate("cap:o1", 1);
    let rep = Gate::new()
        .verify(&mut dropped, std::slice::from_ref(&ra))
        .unwrap();
    assert!(located(&rep, "cap:o1", 0), "{:?}", rep.problems);

    // A receipt made before anchors (none in it) still checks.
    let mut old = va.clone();
    old.as_object_mut().unwrap().remove("anchors");
    let old = interlock_core::canonical(&old);
    assert!(g
        .check_receipt(&mut j, &old, b"")
        .unwrap()
        .problems
        .iter()
        .all(|p| p.detail.contains("signature")));
    // A receipt whose anchors were edited does not.
    let forged = ra.replace("\"length\":2", "\"length\":1");
    let rep = g.check_receipt(&mut j, &forged, b"").unwrap();
    assert!(located(&rep, "lease:case", 0), "{:?}", rep.problems);
}

#[test]
fn the_log_proves_inclusion_and_consistency_and_catches_a_rewrite() {
    let (mut g, mut j, a, _) = journal();
    let (s, v) = keys("shop.example/log", 3);
    let before = j.to_jsonl();
    let c1 = g.checkpoint(&mut j, T0 + 10, &s).unwrap();
    assert_eq!(
        (c1["tree_size"].as_u64(), c1["appended"].as_u64()),
        (Some(2), Some(2))
    );
    let note1 = c1["checkpoint"].as_str().unwrap().to_string();
    assert!(note1.starts_with("shop.example/log\n2\n"), "{note1}");
    assert!(j.to_jsonl().starts_with(&before), "the log only appends");
    // Nothing new, same key: nothing written.
    let len = j.length("log:receipts").unwrap();
    let again = g.checkpoint(&mut j, T0 + 11, &s).unwrap();
    assert_eq!(
        (
            again["appended"].as_u64(),
            j.length("log:receipts").unwrap()
        ),
        (Some(0), len)
    );
    assert_eq!(again["checkpoint"], c1["checkpoint"]);

    let p = g.prove_inclusion(&mut j, &a, None).unwrap();
    let inc = proof::check_inclusion(&p, None, &v).unwrap();
    assert_eq!(
        (inc.effect_id.as_str(), inc.leaf_index, inc.tree_size),
        (a.as_str(), 0, 2)
    );
    // Another key, another tree, a changed receipt: refused.
    let (_, other) = keys("shop.example/log", 4);
    assert!(matches!(
        proof::check_inclusion(&p, None, &other),
        Err(ProofError::BadSignature(_))
    ));
    let changed = p.replace("\"amount_cents\":2000", "\"amount_cents\":2001");
    assert!(matches!(
        proof::check_inclusion(&changed, None, &v),
        Err(ProofError::ProofFailed(_))
    ));
    let unknown = p.replace(proof::INCLUSION_FORMAT, "interlock-inclusion-proof/9");
    assert!(matches!(
        proof::check_inclusion(&unknown, None, &v),
        Err(ProofError::UnknownVersion(_))
    ));

    // More effects, a second checkpoint: consistent with the first.
    g.grant_lease(&mut j, T0 + 20, "case2", T0 + 48 * HOUR)
        .unwrap();
    let c = run(
        &mut g,
        &mut j,
        T0 + 21,
        &proposal("o3", 300, "case2", false),
    );
    let c2 = g.checkpoint(&mut j, T0 + 22, &s).unwrap();
    assert_eq!(c2["tree_size"], 3);
    let cons = g.prove_consistency(&mut j, 2, None).unwrap();
    let new = proof::check_consistency(&cons, &note1, &v).unwrap();
    assert_eq!(new.size, 3);
    let p3 = g.prove_inclusion(&mut j, &c, None).unwrap();
    assert_eq!(proof::check_inclusion(&p3, None, &v).unwrap().leaf_index, 2);
    // The older proof against the new checkpoint: a proof for another tree.
    let err = proof::check_inclusion(&p, Some(c2["checkpoint"].as_str().unwrap()), &v).unwrap_err();
    assert!(
        matches!(err, ProofError::ProofFailed(ref m) if m.contains("another tree")),
        "{err:?}"
    );
    // The journal verifies, with the old checkpoint held.
    let held = json!({"checkpoint": note1}).to_string();
    assert!(g
        .verify(&mut j, std::slice::from_ref(&held))
        .unwrap()
        .problems
        .is_empty());

    // A forked log: the same journal, but b's receipt logged differently (a rewrite of
    // history re-signed with the log's own key). Consistency from the old checkpoint fails.
    let (mut g2, mut j2, _, _) = journal();
    // (the lease extended before the checkpoint: every receipt anchoring it differs)
    g2.grant_lease(&mut j2, T0 + 5, "case", T0 + HOUR).unwrap();
    let forked = g2.checkpoint(&mut j2, T0 + 10, &s).unwrap();
    let note_f = forked["checkpoint"].as_str().unwrap();
    assert_ne!(note_f, note1);
    g2.grant_lease(&mut j2, T0 + 20, "case2", T0 + 48 * HOUR)
        .unwrap();
    run(
        &mut g2,
        &mut j2,
        T0 + 21,
        &proposal("o3", 300, "case2", false),
    );
    g2.checkpoint(&mut j2, T0 + 22, &s).unwrap();
    let cons_f = g2.prove_consistency(&mut j2, 2, None).unwrap();
    let err = proof::check_consistency(&cons_f, &note1, &v).unwrap_err();
    assert!(
        matches!(err, ProofError::ProofFailed(ref m) if m.contains("forked")),
        "{err:?}"
    );
    // And verify of that journal with the auditor's old checkpoint points at the log.
    let rep = g2.verify(&mut j2, &[held]).unwrap();
    assert!(
        rep.problems.iter().any(|p| p.stream == "log:receipts"),
        "{:?}",
        rep.problems
    );

    // An authority tail dropped under a logged receipt: verify alone catches it (the log
    // pins it), located at the lease stream.
    let mut cut = j.clone();
    cut.truncate("lease:case", 1);
    let rep = Gate::new().verify(&mut cut, &[]).unwrap();
    assert!(located(&rep, "lease:case", 1), "{:?}", rep.problems);
    // The log's own tail cut: the checkpoint held says more.
    let mut cut = j.clone();
    cut.truncate("log:receipts", 3);
    let rep = Gate::new()
        .verify(
            &mut cut,
            &[json!({"checkpoint": c2["checkpoint"]}).to_string()],
        )
        .unwrap();
    assert!(
        rep.problems
            .iter()
            .any(|p| p.stream == "log:receipts" && p.kind == ProblemKind::Truncated),
        "{:?}",
        rep.problems
    );
}

#[test]
fn a_bundle_answers_the_five_questions_and_refuses_bad_input() {
    let (mut g, mut j, a, b) = journal();
    let (s, v) = keys("shop.example/interlock", 5);
    let bundle = g.bundle(&mut j, T0 + 10, T0, T0 + HOUR, &s).unwrap();
    let answers = proof::check_bundle(&bundle, &v).unwrap();
    assert_eq!(answers["count"], 2);
    let e = &answers["effects"];
    assert_eq!(e[0]["effect_id"], a.as_str());
    for q in [
        "happened_once",
        "authorized_when_fired",
        "premises_held",
        "service_confirmed",
    ] {
        assert_eq!(e[0][q]["answer"], "yes", "{q}: {}", e[0][q]);
    }
    assert_eq!(e[0]["who_decided"]["answer"], json!(["refund-agent"]));
    assert!(e[0]["authorized_when_fired"]["why"]
        .as_str()
        .unwrap()
        .contains("lease case"));
    assert_eq!(e[1]["effect_id"], b.as_str());
    assert_eq!(e[1]["happened_once"]["answer"], "no");
    assert_eq!(e[1]["authorized_when_fired"]["answer"], "not_fired");

    let truncated = &bundle[..bundle.len() - 10];
    assert!(matches!(
        proof::check_bundle(truncated, &v),
        Err(ProofError::Malformed(_))
    ));
    let unknown = bundle.replace(proof::BUNDLE_FORMAT, "interlock-bundle/2");
    assert!(matches!(
        proof::check_bundle(&unknown, &v),
        Err(ProofError::UnknownVersion(_))
    ));
    let (_, other) = keys("shop.example/interlock", 6);
    assert!(matches!(
        proof::check_bundle(&bundle, &other),
        Err(ProofError::BadSignature(_))
    ));
    let edited = bundle.replace("\"amount_cents\":700", "\"amount_cents\":70");
    assert!(matches!(
        proof::check_bundle(&edited, &v),
        Err(ProofError::BadSignature(_))
    ));
    // Answers the receipts do not give, signed again with the right key: refused.
    let mut doc: serde_json::Map<String, Value> = serde_json::from_str(&bundle).unwrap();
    doc["answers"][1]["happened_once"]["answer"] = json!("yes");
    let resigned = serde_json::to_string(&proof::sign_document(doc.clone(), &s)).unwrap();
    match proof::check_bundle(&resigned, &v) {
        Err(ProofError::ProofFailed(m)) => {
            assert!(m.contains("happened_once") && m.contains(b.as_str()), "{m}")
        }
        other => panic!("{other:?}"),
    }
    doc.remove("answers");
    let none = serde_json::to_string(&proof::sign_document(doc, &s)).unwrap();
    assert!(matches!(
        proof::check_bundle(&none, &v),
        Err(ProofError::Malformed(_))
    ));
    // A period with nothing in it is an empty bundle, still signed.
    let empty = g
        .bundle(&mut j, T0 + 10, T0 + HOUR, T0 + 2 * HOUR, &s)
        .unwrap();
    assert_eq!(proof::check_bundle(&empty, &v).unwrap()["count"], 0);
}

/// Drives `p` to its end, answering each ask with `reply` (premises captured as `{"refunded": 0}`
/// unless `reply` says otherwise). Answers the effect id.
fn drive(
    g: &mut Gate,
    j: &mut MemJournal,
    now: u64,
    p: &str,
    reply: impl Fn(&Ask) -> Option<Reply>,
) -> String {
    let mut step = g.submit(j, now, p).unwrap();
    loop {
        if let Ask::Done(o) = &step.ask {
            return o.effect_id.clone();
        }
        let r = reply(&step.ask).unwrap_or_else(|| match &step.ask {
            Ask::Capture { .. } => Reply::Captured(r#"{"refunded":0}"#.into()),
            Ask::Authorize { .. } => Reply::Allowed(true),
            Ask::Apply { .. } => Reply::Applied(r#"{"refund":"re_1"}"#.into()),
            Ask::Query { .. } => Reply::NotFound,
            other => panic!("unexpected {other:?}"),
        });
        step = g.resume(j, now, step.op, r).unwrap();
    }
}

/// A bundle with every kind of answer, made here (a fixed key and clock, so the same bytes
/// each run) and kept as tests/outside/fixture/bundle.json: the outside checkers must
/// recompute each of its answers from its receipts (hosts/python/tests/test_proof.py,
/// hosts/node/test/proof.test.js). `INTERLOCK_WRITE_FIXTURE=1` writes it anew.
#[test]
fn a_bundle_of_every_kind_of_answer_is_the_outside_fixture() {
    let (mut g, mut j) = (Gate::new(), MemJournal::new());
    for who in ["case", "alice", "bob", "ops"] {
        g.grant_lease(&mut j, T0, who, T0 + 48 * HOUR).unwrap();
    }
    g.set_approval_rules(
        &mut j,
        T0,
        &json!({"rules": [{"name": "large", "target": "payments",
                           "when": [{"field": "/effect/amount_cents", "over": 5000}],
                           "then": "person", "route": "finance", "approvers_needed": 2}],
                "routes": {"finance": {"primary_approvers": ["alice", "bob"]}}})
        .to_string(),
    )
    .unwrap();
    let refund = |order: &str, cents: u64, lookup: bool| {
        json!({"agent": "refund-agent",
               "target": {"name": "payments", "lookup": lookup, "timeout_ms": 30_000},
               "key": format!("refund:{order}"), "effect": {"order": order, "amount_cents": cents},
               "authority": {"lease": "case"}, "premises": {"refunded": 0}})
        .to_string()
    };
    let mail = |to: &str| {
        json!({"agent": "mail-agent", "target": {"name": "mail"}, "key": format!("mail:{to}"),
               "effect": {"to": to}, "authority": {"lease": "case"}})
        .to_string()
    };
    let none = |_: &Ask| None;
    let lost = |a: &Ask| matches!(a, Ask::Apply { .. }).then(|| Reply::Unknown("timeout".into()));
    // Sent once and applied.
    drive(&mut g, &mut j, T0 + 1, &refund("o1", 100, true), none);
    // The reply lost; recovery's lookup finds it.
    let b = drive(&mut g, &mut j, T0 + 2, &refund("o2", 200, true), lost);
    let step = g.recover(&mut j, T0 + 60_000, &b).unwrap();
    assert!(matches!(step.ask, Ask::Query { .. }), "{:?}", step.ask);
    let s = g
        .resume(
            &mut j,
            T0 + 60_000,
            step.op,
            Reply::Found(r#"{"refund":"re_2"}"#.into()),
        )
        .unwrap();
    assert!(matches!(s.ask, Ask::Done(_)));
    // A premise changed: refused, never sent.
    drive(&mut g, &mut j, T0 + 3, &refund("o3", 300, true), |a| {
        matches!(a, Ask::Capture { .. }).then(|| Reply::Captured(r#"{"refunded":50}"#.into()))
    });
    // The service rejected it.
    drive(&mut g, &mut j, T0 + 4, &refund("o4", 400, true), |a| {
        matches!(a, Ask::Apply { .. }).then(|| Reply::Rejected("card expired".into()))
    });
    // Two people approved it, then it went out.
    let large = refund("o5", 9000, true);
    drive(&mut g, &mut j, T0 + 5, &large, none);
    let inbox = g.inbox(&mut j, T0 + 5).unwrap();
    let item = inbox
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["kind"] == "approval")
        .unwrap_or_else(|| panic!("no approval in {inbox}"))["item"]
        .clone();
    for who in ["alice", "bob"] {
        g.decide(
            &mut j,
            T0 + 6,
            &json!({"item": item, "decider": who, "verdict": "approve"}).to_string(),
        )
        .unwrap();
    }
    drive(&mut g, &mut j, T0 + 7, &large, none);
    // Sent, no answer, no lookup: ambiguous; a person finds it happened (CONFIRMED), and
    // another one stays unknown.
    for (to, settle) in [("x@shop", true), ("y@shop", false)] {
        let id = drive(&mut g, &mut j, T0 + 8, &mail(to), lost);
        g.recover(&mut j, T0 + 20 * 60_000, &id).unwrap();
        if settle {
            g.decide(
                &mut j,
                T0 + 21 * 60_000,
                &json!({"item": id, "decider": "ops", "verdict": "happened",
                                                     "evidence": {"mail_log": "250 OK id 17"}})
                .to_string(),
            )
            .unwrap();
        }
    }
    // The lease revoked first: refused.
    g.revoke_lease(&mut j, T0 + 22 * 60_000, "case").unwrap();
    drive(
        &mut g,
        &mut j,
        T0 + 22 * 60_000,
        &refund("o6", 600, true),
        none,
    );

    let (s, v) = keys("fixture.example/interlock", 42);
    g.checkpoint(&mut j, T0 + HOUR, &s).unwrap();
    let bundle = g.bundle(&mut j, T0 + HOUR, T0, T0 + HOUR, &s).unwrap();
    let checked = proof::check_bundle(&bundle, &v).unwrap();
    let effects = checked["effects"].as_array().unwrap();
    assert_eq!(effects.len(), 8);
    // Every kind of answer is in it.
    let mut seen = std::collections::BTreeSet::new();
    for e in effects {
        for q in proof::QUESTIONS {
            if let Some(a) = e[q]["answer"].as_str() {
                seen.insert(format!("{q}={a}"));
            }
        }
        seen.insert(format!("who_decided={}", e["who_decided"]["answer"]));
    }
    for want in [
        "happened_once=yes",
        "happened_once=no",
        "happened_once=unknown",
        "authorized_when_fired=yes",
        "authorized_when_fired=not_fired",
        "premises_held=yes",
        "premises_held=no",
        "premises_held=not_fired",
        "service_confirmed=yes",
        "service_confirmed=no",
        "service_confirmed=unknown",
        "service_confirmed=not_fired",
        r#"who_decided=["refund-agent","alice","bob"]"#,
        r#"who_decided=["mail-agent","ops"]"#,
    ] {
        assert!(seen.contains(want), "{want} not in {seen:?}");
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/outside/fixture");
    let (file, key) = (format!("{dir}/bundle.json"), format!("{dir}/bundle.pub"));
    if std::env::var_os("INTERLOCK_WRITE_FIXTURE").is_some() {
        std::fs::write(&file, &bundle).unwrap();
        std::fs::write(&key, format!("{}\n", v.text())).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap_or_default(),
        bundle,
        "{file} is not the bundle this test makes: INTERLOCK_WRITE_FIXTURE=1 writes it"
    );
    assert_eq!(
        std::fs::read_to_string(&key).unwrap(),
        format!("{}\n", v.text())
    );
}
