use super::*;
use crate::MemJournal;
use alloc::string::ToString;

const T0: u64 = 1_800_000_000_000;
const TARGETS: &str = r#"{"payments": {
    "apply": {"url": "http://pay.test/refunds"},
    "lookup": {"url": "http://pay.test/refunds?reference={effect_id}"},
    "premises": {"url": "http://pay.test/orders/{order}/premises?excluding={effect_id}"}}}"#;

fn server() -> Server {
    let env = |k: &str| match k {
        "INTERLOCK_TOKEN" => Some("tok".to_string()),
        "INTERLOCK_TARGETS" => Some(TARGETS.to_string()),
        _ => None,
    };
    Server::new(Settings::from_env(env))
}

fn req<'a>(method: &'a str, path: &'a str, body: &'a str) -> Request<'a> {
    Request {
        method,
        path,
        authorization: Some("Bearer tok"),
        headers: &[],
        body: body.as_bytes(),
    }
}

fn refund(key: &str) -> String {
    json!({"agent": "a", "key": key, "target": {"name": "payments", "dedupes": true, "lookup": true},
        "effect": {"order": "o 1", "amount_cents": 2000}, "authority": {"lease": "l"},
        "premises": {"refunded_cents": 0}})
    .to_string()
}

/// Answers every step the server asks for as a payments service would; counts applies.
fn answer(s: &mut Server, j: &mut MemJournal, mut step: ApiStep, applies: &mut u32) -> Response {
    loop {
        let answer = match step.next {
            Next::Respond(r) => return r,
            Next::Sleep(_) => None,
            Next::Fetch(f) if f.method == "POST" => {
                *applies += 1;
                let key = f
                    .headers
                    .iter()
                    .find(|(k, _)| k == "idempotency-key")
                    .unwrap();
                Some(Ok(Fetched {
                    status: 200,
                    body: json!({"reference": key.1}).to_string(),
                }))
            }
            Next::Fetch(_) => Some(Ok(Fetched {
                status: 200,
                body: r#"{"refunded_cents": 0}"#.into(),
            })),
        };
        step = s.resume(j, T0, step.id, answer);
    }
}

#[test]
fn the_target_table_maps_http_answers_to_replies() {
    let apply = Ask::Apply {
        effect_id: "e".into(),
        target: "payments".into(),
        effect: "{}".into(),
        idempotency_key: "k".into(),
        attempt: 0,
    };
    let ok = |status, body: &str| Fetched {
        status,
        body: body.into(),
    };
    assert_eq!(
        target_reply(&apply, Ok(&ok(201, ""))),
        Reply::Applied("null".into())
    );
    assert_eq!(
        target_reply(&apply, Ok(&ok(200, "done"))),
        Reply::Applied("\"done\"".into())
    );
    assert!(matches!(
        target_reply(&apply, Ok(&ok(422, "no"))),
        Reply::Rejected(_)
    ));
    assert!(matches!(
        target_reply(&apply, Ok(&ok(503, ""))),
        Reply::Unknown(_)
    ));
    assert!(matches!(
        target_reply(&apply, Err("timed out")),
        Reply::Unknown(_)
    ));
    let query = Ask::Query {
        effect_id: "e".into(),
        target: "payments".into(),
        effect: "{}".into(),
    };
    assert_eq!(target_reply(&query, Ok(&ok(404, ""))), Reply::NotFound);
    assert!(matches!(
        target_reply(&query, Ok(&ok(500, ""))),
        Reply::Failed(_)
    ));
    let targets = parse_targets(TARGETS).unwrap();
    let f = target_request(&targets, &apply, 1500).unwrap();
    assert_eq!((f.method.as_str(), f.timeout_ms), ("POST", Some(1500)));
    assert!(f.headers.contains(&("idempotency-key".into(), "k".into())));
    // A part that is not configured: failed, never a made-up answer.
    let authorize = Ask::Authorize {
        effect_id: "e".into(),
        target: "payments".into(),
        effect: "{}".into(),
        agent: "a".into(),
    };
    assert!(matches!(
        target_request(&targets, &authorize, 0),
        Err(Reply::Failed(_))
    ));
    assert_eq!(
        fill(
            "http://x/{order}?r={effect_id}&m={missing}",
            "e1",
            &json!({"order": "o 1/2"})
        ),
        "http://x/o%201%2F2?r=e1&m="
    );
}

#[test]
fn targets_and_settings_are_read_strictly() {
    let at = |t: &str| parse_targets(t).unwrap_err();
    let e = at(r#"{"p": {"apply": {"url": "http://x", "methd": "POST"}}}"#);
    assert!(
        e.starts_with("/p/apply/methd is not a field of an endpoint"),
        "{e}"
    );
    assert!(e.contains("did you mean \"method\"?"), "{e}");
    assert!(at(r#"{"p": {"aply": {"url": "http://x"}}}"#).starts_with("/p/aply "));
    assert!(at(r#"{"p": {"apply": {"url": "ftp://x"}}}"#).starts_with("/p/apply/url "));
    let strict = |v: &str| {
        Settings::from_env(|k| (k == "INTERLOCK_STRICT_AUTHORITY").then(|| v.to_string()))
    };
    assert!(strict("1").unwrap().strict_authority);
    assert!(!strict("0").unwrap().strict_authority);
    assert!(strict("yes").is_err());
}

#[test]
fn bad_settings_and_missing_tokens_are_refused_before_anything_is_read() {
    let bad = Server::new(Settings::from_env(|k| {
        (k == "INTERLOCK_TARGETS").then(|| r#"{"p": {}}"#.into())
    }));
    assert_eq!(
        bad.refusal("/v1/journals/a/entries", Some("Bearer x"))
            .unwrap()
            .status,
        500
    );
    let mut s = server();
    let mut j = MemJournal::new();
    for auth in [
        None,
        Some("Bearer tok2"),
        Some("Basic tok"),
        Some("Bearer "),
    ] {
        let r = Request {
            authorization: auth,
            ..req("PUT", "/v1/journals/a/leases/l", r#"{"expires_at_ms": 1}"#)
        };
        let step = s.handle(&mut j, T0, &r);
        assert!(matches!(
            step.next,
            Next::Respond(Response {
                status: 401,
                challenge: true,
                ..
            })
        ));
    }
    assert!(j.to_jsonl().is_empty(), "nothing recorded");
    let step = s.handle(&mut j, T0, &req("GET", "/v1/journals/../entries", ""));
    assert!(matches!(
        step.next,
        Next::Respond(Response { status: 404, .. })
    ));
}

#[test]
fn the_bearer_scheme_is_case_insensitive_and_takes_spaces_before_the_token() {
    let t = Some("tok");
    for ok in [
        "Bearer tok",
        "bearer tok",
        "BEARER tok",
        "bEaReR tok",
        "Bearer   tok",
    ] {
        assert!(authorized(t, Some(ok)), "{ok:?}");
    }
    for no in [
        "Bearer",
        "Bearer ",
        "Bearer  ",
        "Bearertok",
        "Bearer\ttok",
        "Bearer tok x",
        "Bearer tok2",
        "Bearer to",
        " Bearer tok",
        "Basic tok",
        "Bearers tok",
        "tok",
    ] {
        assert!(!authorized(t, Some(no)), "{no:?}");
    }
    assert!(!authorized(None, Some("Bearer tok")), "no token configured");
    assert!(!authorized(t, None));
    let mut s = server();
    let mut j = MemJournal::new();
    let far = r#"{"expires_at_ms": 4102444800000}"#;
    let r = Request {
        authorization: Some("bearer  tok"),
        ..req("PUT", "/v1/journals/a/leases/l", far)
    };
    let step = s.handle(&mut j, T0, &r);
    assert!(matches!(
        step.next,
        Next::Respond(Response { status: 204, .. })
    ));
}

#[test]
fn a_body_that_is_not_utf8_is_refused_and_nothing_is_recorded() {
    let mut s = server();
    let mut j = MemJournal::new();
    let far = br#"{"expires_at_ms": 4102444800000}"#;
    let step = s.handle(
        &mut j,
        T0,
        &Request {
            body: far,
            ..req("PUT", "/v1/journals/a/leases/l", "")
        },
    );
    answer(&mut s, &mut j, step, &mut 0);
    let before = j.to_jsonl();
    let mut body = refund("k9").into_bytes();
    let at = body.windows(3).position(|w| w == b"\"a\"").unwrap() + 1;
    body.splice(at..at + 1, [0xff, 0xfe]);
    for path in ["/v1/journals/a/effects", "/v1/journals/a/submit"] {
        let step = s.handle(
            &mut j,
            T0,
            &Request {
                body: &body,
                ..req("POST", path, "")
            },
        );
        let Next::Respond(r) = step.next else {
            panic!("{step:?}")
        };
        assert_eq!(r.status, 400, "{}", r.body);
        let e: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(e["error"]["kind"], "invalid-body", "{}", r.body);
        assert!(
            e["error"]["message"].as_str().unwrap().contains("UTF-8"),
            "{}",
            r.body
        );
    }
    assert_eq!(j.to_jsonl(), before, "nothing recorded");
}

#[test]
fn a_served_effect_is_sent_once_and_replayed() {
    let mut s = server();
    let mut j = MemJournal::new();
    let far = r#"{"expires_at_ms": 4102444800000}"#;
    let step = s.handle(&mut j, T0, &req("PUT", "/v1/journals/a/leases/l", far));
    let r = answer(&mut s, &mut j, step, &mut 0);
    assert_eq!(r.status, 204);
    let mut applies = 0;
    let body = refund("k1");
    for _ in 0..2 {
        let step = s.handle(&mut j, T0, &req("POST", "/v1/journals/a/effects", &body));
        let r = answer(&mut s, &mut j, step, &mut applies);
        let o: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(
            (r.status, o["state"].as_str()),
            (200, Some("COMMITTED")),
            "{}",
            r.body
        );
    }
    assert_eq!(
        applies, 1,
        "the same request again is answered from the journal"
    );
    let other = json!({"target": {"name": "mail"}}).to_string();
    let step = s.handle(&mut j, T0, &req("POST", "/v1/journals/a/effects", &other));
    assert!(matches!(
        step.next,
        Next::Respond(Response { status: 422, .. })
    ));
}

#[test]
fn a_crash_after_the_send_is_recovered_by_lookup() {
    let mut s = server();
    let mut j = MemJournal::new();
    let far = r#"{"expires_at_ms": 4102444800000}"#;
    let step = s.handle(&mut j, T0, &req("PUT", "/v1/journals/a/leases/l", far));
    answer(&mut s, &mut j, step, &mut 0);
    // Run the request to its send, then drop the server: the process died.
    let mut step = s.handle(
        &mut j,
        T0,
        &req("POST", "/v1/journals/a/effects", &refund("k2")),
    );
    while !matches!(&step.next, Next::Fetch(f) if f.method == "POST") {
        let ok = Fetched {
            status: 200,
            body: r#"{"refunded_cents": 0}"#.into(),
        };
        step = s.resume(&mut j, T0, step.id, Some(Ok(ok)));
    }
    drop(s);
    let mut s = server();
    let later = T0 + 60_000; // the claim has expired
    let step = s.handle(&mut j, later, &req("POST", "/v1/journals/a/recover", ""));
    let Next::Fetch(lookup) = &step.next else {
        panic!("{step:?}")
    };
    assert_eq!(lookup.method, "GET");
    let found = Fetched {
        status: 200,
        body: r#"{"reference": "x"}"#.into(),
    };
    let step = s.resume(&mut j, later, step.id, Some(Ok(found)));
    let Next::Respond(r) = step.next else {
        panic!("{step:?}")
    };
    let all: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(all[0]["outcome"]["state"], "COMMITTED", "{}", r.body);
}

mod people {
    use super::*;
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};

    const RULES: &str = r#"{"rules": [{"name": "large", "when": [{"field": "/effect/amount_cents", "over": 5000}],
        "then": "person", "route": "finance"}],
        "routes": {"finance": {"primary_approvers": ["alice@shop"], "duration_before_expiry_ms": 86400000}}}"#;

    fn server() -> Server {
        let digest = hex::encode(Sha256::digest(b"bob-token"));
        let deciders = json!({"alice@shop": "alice-token", "bob@shop": format!("sha256:{digest}")});
        let env = move |k: &str| match k {
            "INTERLOCK_TOKEN" => Some("tok".to_string()),
            "INTERLOCK_TARGETS" => Some(TARGETS.to_string()),
            "INTERLOCK_DECIDERS" => Some(deciders.to_string()),
            "INTERLOCK_WEBHOOK_SECRETS" => Some(r#"{"stripe": "whsec_test"}"#.to_string()),
            _ => None,
        };
        Server::new(Settings::from_env(env))
    }

    fn as_<'a>(who: &'a str, r: Request<'a>) -> Request<'a> {
        Request {
            authorization: Some(who),
            ..r
        }
    }

    /// `method path` with `body`, as the holder of `authorization`.
    fn call(
        s: &mut Server,
        j: &mut MemJournal,
        authorization: &str,
        method: &str,
        path: &str,
        body: &str,
    ) -> Response {
        respond(s, j, &as_(authorization, req(method, path, body)))
    }

    fn kind(r: &Response) -> (u16, Value) {
        (r.status, body(r)["error"]["kind"].clone())
    }

    fn respond(s: &mut Server, j: &mut MemJournal, r: &Request) -> Response {
        let mut applies = 0;
        let step = s.handle(j, T0, r);
        answer(s, j, step, &mut applies)
    }

    fn body(r: &Response) -> Value {
        serde_json::from_str(&r.body).unwrap()
    }

    fn large(key: &str) -> String {
        let mut v: Value = serde_json::from_str(&refund(key)).unwrap();
        v["effect"]["amount_cents"] = json!(9000);
        v.to_string()
    }

    /// A server with the rules, alice's lease, and one large refund waiting in the inbox.
    fn waiting() -> (Server, MemJournal, String) {
        let mut s = server();
        let mut j = MemJournal::new();
        let far = r#"{"expires_at_ms": 4102444800000}"#;
        for r in [
            req("PUT", "/v1/journals/a/approval-rules", RULES),
            req("PUT", "/v1/journals/a/leases/l", far),
            req("PUT", "/v1/journals/a/leases/alice@shop", far),
            req("PUT", "/v1/journals/a/leases/bob@shop", far),
        ] {
            let got = respond(&mut s, &mut j, &r);
            assert!(got.status < 300, "{}", got.body);
        }
        let proposal = large("k1");
        let out = respond(
            &mut s,
            &mut j,
            &req("POST", "/v1/journals/a/effects", &proposal),
        );
        let out = body(&out);
        assert_eq!(out["reason"], "approval_pending", "{out}");
        (s, j, out["effect_id"].as_str().unwrap().to_string())
    }

    #[test]
    fn a_decider_lists_the_inbox_and_decides_in_their_own_name_then_the_effect_goes_out() {
        let (mut s, mut j, id) = waiting();
        let inbox = call(
            &mut s,
            &mut j,
            "Bearer alice-token",
            "GET",
            "/v1/journals/a/inbox",
            "",
        );
        assert_eq!(inbox.status, 200);
        let items = body(&inbox);
        assert_eq!(items[0]["item"], json!(id));
        assert_eq!(items[0]["approvers"], json!(["alice@shop"]));
        // The server's token reads the inbox too, but cannot decide: a decision is a person's.
        let path = format!("/v1/journals/a/inbox/{id}/decision");
        let path = path.as_str();
        let r = respond(
            &mut s,
            &mut j,
            &req("POST", path, r#"{"verdict": "approve"}"#),
        );
        assert_eq!(kind(&r), (403, json!("decider-required")));
        // A decider cannot decide under another name.
        let r = call(
            &mut s,
            &mut j,
            "Bearer alice-token",
            "POST",
            path,
            r#"{"verdict": "approve", "decider": "bob@shop"}"#,
        );
        assert_eq!(kind(&r), (403, json!("not-your-name")));
        // Bob (a token given as its SHA-256) is not on the route: refused by the gate, saying who may.
        let r = call(
            &mut s,
            &mut j,
            "Bearer bob-token",
            "POST",
            path,
            r#"{"verdict": "approve"}"#,
        );
        assert_eq!(r.status, 400);
        assert!(
            r.body
                .contains("bob@shop is not an approver of route finance"),
            "{}",
            r.body
        );
        // A decider's token opens nothing else.
        let r = call(
            &mut s,
            &mut j,
            "Bearer alice-token",
            "GET",
            "/v1/journals/a/entries",
            "",
        );
        assert_eq!(r.status, 403);
        let r = call(
            &mut s,
            &mut j,
            "Bearer alice-token",
            "POST",
            path,
            r#"{"verdict": "approve", "why": "checked the order"}"#,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(body(&r)["decisions"][0]["decider"], "alice@shop");
        // The agent's next submit goes out, once.
        let mut applies = 0;
        let step = s.handle(
            &mut j,
            T0,
            &req("POST", "/v1/journals/a/effects", &large("k1")),
        );
        let out = body(&answer(&mut s, &mut j, step, &mut applies));
        assert_eq!(
            (out["state"].clone(), applies),
            (json!("COMMITTED"), 1),
            "{out}"
        );
        let board = body(&call(
            &mut s,
            &mut j,
            "Bearer alice-token",
            "GET",
            "/v1/journals/a/scoreboard",
            "",
        ));
        assert_eq!(board["routes"]["finance"]["approved"], 1, "{board}");
        assert_eq!(board["routes"]["finance"]["decided"], 1);
        let rules = body(&respond(
            &mut s,
            &mut j,
            &req("GET", "/v1/journals/a/approval-rules", ""),
        ));
        assert_eq!(
            rules["routes"]["finance"]["primary_approvers"],
            json!(["alice@shop"])
        );
    }

    #[test]
    fn a_webhook_is_authenticated_by_its_signature_not_a_token() {
        let (mut s, mut j, id) = waiting();
        let event =
            json!({"id": "evt_1", "type": "refund.updated", "data": {"object": {"object": "refund",
            "status": "succeeded", "metadata": {"interlock_effect_id": id}}}})
            .to_string();
        let t = T0 / 1000;
        let mut m = Hmac::<Sha256>::new_from_slice(b"whsec_test").unwrap();
        m.update(format!("{t}.{event}").as_bytes());
        let sig = format!("t={t},v1={}", hex::encode(m.finalize().into_bytes()));
        let headers = [("stripe-signature".to_string(), sig)];
        fn hook<'a>(headers: &'a [(String, String)], body: &'a str) -> Request<'a> {
            Request {
                method: "POST",
                path: "/v1/journals/a/webhooks/stripe",
                authorization: None,
                headers,
                body: body.as_bytes(),
            }
        }
        assert!(s.refusal("/v1/journals/a/webhooks/stripe", None).is_none());
        let before = j.to_jsonl();
        let tampered = event.replace("succeeded", "failed");
        let r = respond(&mut s, &mut j, &hook(&headers, &tampered));
        assert_eq!(r.status, 400);
        assert!(r.body.contains("no signature matches"), "{}", r.body);
        assert_eq!(j.to_jsonl(), before, "a bad webhook records nothing");
        // The effect is not in the journal yet (it waits for approval): nothing recorded.
        let r = respond(&mut s, &mut j, &hook(&headers, &event));
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(r.body.contains("no effect"), "{}", r.body);
        assert_eq!(j.to_jsonl(), before);
        let r = respond(
            &mut s,
            &mut j,
            &Request {
                path: "/v1/journals/a/webhooks/paypal",
                ..hook(&headers, &event)
            },
        );
        assert_eq!(r.status, 404);
        let r = respond(
            &mut s,
            &mut j,
            &Request {
                path: "/v1/journals/a/webhooks/standard-webhooks",
                ..hook(&headers, &event)
            },
        );
        assert_eq!(r.status, 404, "no secret configured for it");
        assert!(r.body.contains("INTERLOCK_WEBHOOK_SECRETS"));
        // Approved and sent: the service's confirmation is recorded, once.
        let path = format!("/v1/journals/a/inbox/{id}/decision");
        let r = call(
            &mut s,
            &mut j,
            "Bearer alice-token",
            "POST",
            &path,
            r#"{"verdict": "approve"}"#,
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let proposal = large("k1");
        let out = respond(
            &mut s,
            &mut j,
            &req("POST", "/v1/journals/a/effects", &proposal),
        );
        assert_eq!(body(&out)["state"], "COMMITTED");
        let r = respond(&mut s, &mut j, &hook(&headers, &event));
        assert_eq!(
            (r.status, body(&r)["recorded"].clone()),
            (200, json!("confirmed")),
            "{}",
            r.body
        );
        let r = respond(&mut s, &mut j, &hook(&headers, &event));
        assert_eq!(r.status, 400);
        assert!(r.body.contains("a replay"), "{}", r.body);
        let receipt = body(&respond(
            &mut s,
            &mut j,
            &req("GET", &format!("/v1/journals/a/effects/{id}/receipt"), ""),
        ));
        assert_eq!(receipt["final"], "CONFIRMED", "{receipt}");
    }

    #[test]
    fn notices_are_signed_delivered_once_per_event_and_due_again_until_a_receiver_takes_them() {
        const NOTIFY: &str = r#"{"rules": [{"name": "large", "when": [{"field": "/effect/amount_cents", "over": 5000}],
            "then": "person", "route": "finance"}],
            "routes": {"finance": {"primary_approvers": ["alice@shop"], "escalation_approvers": ["cfo@shop"],
                "duration_before_escalation_ms": 3600000, "duration_before_expiry_ms": 86400000,
                "notify_url": "http://hooks.test/inbox"}}}"#;
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let env = move |k: &str| match k {
            "INTERLOCK_TOKEN" => Some("tok".to_string()),
            "INTERLOCK_NOTIFY_SECRET" => Some(secret.to_string()),
            _ => None,
        };
        let mut s = Server::new(Settings::from_env(env));
        let mut j = MemJournal::new();
        let far = r#"{"expires_at_ms": 4102444800000}"#;
        for r in [
            req("PUT", "/v1/journals/a/approval-rules", NOTIFY),
            req("PUT", "/v1/journals/a/leases/l", far),
        ] {
            assert!(respond(&mut s, &mut j, &r).status < 300);
        }
        let proposal = large("k1");
        let step = s.handle(&mut j, T0, &req("POST", "/v1/journals/a/submit", &proposal));
        let Next::Respond(r) = step.next else {
            panic!()
        };
        assert_eq!(
            body(&r)["outcome"]["reason"],
            "approval_pending",
            "{}",
            r.body
        );
        // Delivers each due notice; `status` is what the receiver answers.
        let deliver =
            |s: &mut Server, j: &mut MemJournal, now: u64, status: u16| -> (Value, Vec<Fetch>) {
                let mut sent = Vec::new();
                let mut step = s.handle(j, now, &req("POST", "/v1/journals/a/notices", ""));
                loop {
                    match step.next {
                        Next::Respond(r) => return (body(&r), sent),
                        Next::Fetch(f) => {
                            sent.push(f);
                            let ok = Ok(Fetched {
                                status,
                                body: String::new(),
                            });
                            step = s.resume(j, now, step.id, Some(ok));
                        }
                        Next::Sleep(_) => panic!("no sleep"),
                    }
                }
            };
        let (out, sent) = deliver(&mut s, &mut j, T0 + 1000, 503);
        assert_eq!(out[0]["delivered"], false, "{out}");
        let (out, sent2) = deliver(&mut s, &mut j, T0 + 2000, 204);
        assert_eq!(out[0]["delivered"], true, "{out}");
        assert_eq!(
            sent[0].headers[1], sent2[0].headers[1],
            "the same webhook-id on a retry"
        );
        let f = &sent2[0];
        assert_eq!(f.url, "http://hooks.test/inbox");
        let body_text = f.body.clone().unwrap();
        // What a receiver's library checks: the Standard Webhooks signature.
        let id = crate::webhooks::verify_standard(
            &f.headers,
            body_text.as_bytes(),
            secret,
            (T0 + 2000) / 1000,
            300,
        )
        .unwrap();
        assert!(id.ends_with(".approval.entered.0"), "{id}");
        let msg: Value = serde_json::from_str(&body_text).unwrap();
        assert_eq!(msg["type"], "interlock.approval.entered");
        assert_eq!(msg["timestamp"], "2027-01-15T08:00:02.000Z");
        assert_eq!(msg["data"]["route"], "finance");
        // Delivered: not again. Past the escalation time: the escalation, once.
        assert_eq!(deliver(&mut s, &mut j, T0 + 3000, 200).0, json!([]));
        let (out, _) = deliver(&mut s, &mut j, T0 + 3_600_000, 200);
        assert_eq!(out.as_array().unwrap().len(), 1, "{out}");
        assert_eq!(out[0]["event"], "approval.escalated");
        let (out, _) = deliver(&mut s, &mut j, T0 + 86_400_000, 200);
        assert_eq!(out[0]["event"], "approval.expired", "{out}");
        assert_eq!(deliver(&mut s, &mut j, T0 + 86_500_000, 200).0, json!([]));
        // Without a secret nothing can be signed: said, nothing sent.
        let mut plain = super::server();
        let r = respond(
            &mut plain,
            &mut j,
            &req("POST", "/v1/journals/a/notices", ""),
        );
        assert_eq!(r.status, 409);
        assert!(r.body.contains("INTERLOCK_NOTIFY_SECRET"));
    }

    #[test]
    fn decider_and_webhook_settings_are_read_strictly() {
        let with = |k: &'static str, v: &'static str| {
            Settings::from_env(move |key| (key == k).then(|| v.to_string()))
        };
        assert!(with("INTERLOCK_DECIDERS", "[1]")
            .unwrap_err()
            .contains("INTERLOCK_DECIDERS"));
        assert!(with("INTERLOCK_DECIDERS", r#"{"a": ""}"#).is_err());
        assert!(with("INTERLOCK_WEBHOOK_SECRETS", r#"{"paypal": "x"}"#)
            .unwrap_err()
            .contains("not a webhook scheme"));
        assert!(with("INTERLOCK_NOTIFY_SECRET", "whsec_!!").is_err());
    }
}
