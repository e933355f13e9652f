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
    assert_eq!(bad.refusal(Some("Bearer x")).unwrap().status, 500);
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
