use super::*;

const T0: u64 = 1_700_000_000_000;

fn service(tier: Tier) -> Payments {
    let mut p = Payments::in_memory(tier);
    p.add_order("A1", 10_000).unwrap();
    p
}

// ---- tier 1: dedupe by key ----

#[test]
fn tier1_same_key_inside_window_returns_first_refund() {
    let mut p = service(Tier::ONE);
    let first = p
        .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    let again = p
        .refund(
            "A1",
            2_000,
            Some("k1"),
            Some("eff-1"),
            T0 + DEDUPE_WINDOW_MS,
        )
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(first.id, "re_0001");
    assert_eq!(first.idempotency_key.as_deref(), Some("k1"));
    assert_eq!(p.refund_count(), 1);
    assert_eq!(p.refunded_cents("A1"), 2_000);
}

#[test]
fn tier1_replay_is_returned_even_when_order_no_longer_eligible() {
    let mut p = service(Tier::ONE);
    let first = p.refund("A1", 2_000, Some("k1"), None, T0).unwrap();
    p.set_eligible("A1", false).unwrap();
    let again = p.refund("A1", 2_000, Some("k1"), None, T0 + 5).unwrap();
    assert_eq!(first, again);
    assert_eq!(p.refund_count(), 1);
}

#[test]
fn tier1_same_key_other_amount_is_mismatch_and_creates_nothing() {
    let mut p = service(Tier::ONE);
    p.refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    let err = p
        .refund("A1", 3_000, Some("k1"), Some("eff-1"), T0 + 1_000)
        .unwrap_err();
    assert!(
        matches!(err, Error::IdempotencyMismatch { ref key } if key == "k1"),
        "{err:?}"
    );
    assert_eq!(p.refund_count(), 1);
    assert_eq!(p.refunded_cents("A1"), 2_000);
}

#[test]
fn tier1_same_key_other_order_is_mismatch() {
    let mut p = service(Tier::ONE);
    p.add_order("B2", 5_000).unwrap();
    p.refund("A1", 2_000, Some("k1"), None, T0).unwrap();
    let err = p.refund("B2", 2_000, Some("k1"), None, T0 + 1).unwrap_err();
    assert!(matches!(err, Error::IdempotencyMismatch { .. }), "{err:?}");
    assert_eq!(p.refund_count(), 1);
}

#[test]
fn tier1_key_is_forgotten_after_window() {
    let mut p = service(Tier::ONE);
    let first = p.refund("A1", 2_000, Some("k1"), None, T0).unwrap();
    let second = p
        .refund("A1", 2_000, Some("k1"), None, T0 + DEDUPE_WINDOW_MS + 1)
        .unwrap();
    assert_ne!(first.id, second.id);
    assert_eq!(second.id, "re_0002");
    assert_eq!(p.refund_count(), 2);
    assert_eq!(p.refunded_cents("A1"), 4_000);
    // The window now runs from the second use: a replay soon after returns the second.
    let third = p
        .refund("A1", 2_000, Some("k1"), None, T0 + DEDUPE_WINDOW_MS + 10)
        .unwrap();
    assert_eq!(third, second);
    assert_eq!(p.refund_count(), 2);
}

#[test]
fn tier1_other_amount_after_window_is_a_new_refund() {
    let mut p = service(Tier::ONE);
    p.refund("A1", 2_000, Some("k1"), None, T0).unwrap();
    let r = p
        .refund("A1", 3_000, Some("k1"), None, T0 + DEDUPE_WINDOW_MS + 1)
        .unwrap();
    assert_eq!(r.amount_cents, 3_000);
    assert_eq!(p.refund_count(), 2);
}

#[test]
fn tier1_without_key_does_not_dedupe() {
    let mut p = service(Tier::ONE);
    p.refund("A1", 2_000, None, None, T0).unwrap();
    p.refund("A1", 2_000, None, None, T0).unwrap();
    assert_eq!(p.refund_count(), 2);
}

// ---- tier 2 / lookup ----

#[test]
fn tier2_find_by_reference_finds_the_refund() {
    let mut p = service(Tier::TWO);
    p.refund("A1", 1_000, None, Some("eff-0"), T0).unwrap();
    let r = p
        .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    assert_eq!(r.idempotency_key, None, "tier 2 ignores keys");
    assert_eq!(p.find_by_reference("eff-1").unwrap(), Some(r));
    assert_eq!(p.find_by_reference("eff-9").unwrap(), None);
}

#[test]
fn tier1_plus_lookup_dedupes_and_finds() {
    let tier = Tier::parse("1+lookup").unwrap();
    let mut p = service(tier);
    let r = p
        .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    let again = p
        .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0 + 1)
        .unwrap();
    assert_eq!(again, r);
    assert_eq!(p.refund_count(), 1);
    // F10: past the window the key is gone, but lookup still finds the refund.
    assert_eq!(p.find_by_reference("eff-1").unwrap(), Some(r));
}

#[test]
fn lookup_unsupported_on_tier1_and_tier3() {
    for tier in [Tier::ONE, Tier::THREE] {
        let mut p = service(tier);
        p.refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
            .unwrap();
        let err = p.find_by_reference("eff-1").unwrap_err();
        assert!(matches!(err, Error::LookupUnsupported), "{tier:?}: {err:?}");
    }
}

// ---- tier 3 ----

#[test]
fn tier3_key_does_not_dedupe() {
    let mut p = service(Tier::THREE);
    let a = p
        .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    let b = p
        .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0 + 1)
        .unwrap();
    assert_ne!(a.id, b.id);
    assert_eq!(p.refund_count(), 2);
    assert_eq!(p.refunded_cents("A1"), 4_000);
    assert_eq!(a.reference.as_deref(), Some("eff-1"), "reference is stored");
    // A different amount under the same key is no mismatch either.
    p.refund("A1", 3_000, Some("k1"), None, T0 + 2).unwrap();
    assert_eq!(p.refund_count(), 3);
}

// ---- premises ----

#[test]
fn premises_exclude_own_reference_but_count_hand_refunds() {
    let mut p = service(Tier::THREE);
    p.refund("A1", 2_000, None, Some("eff-1"), T0).unwrap();
    p.refund("A1", 500, None, Some("eff-2"), T0).unwrap();
    let hand = p.refund_by_hand("A1", 1_200, T0).unwrap();
    assert!(hand.by_hand);
    assert_eq!(hand.reference, None);
    assert_eq!(hand.idempotency_key, None);

    let v = p.premises("A1", Some("eff-1")).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"eligible": true, "refunded_by_others_cents": 1_700})
    );
    let all = p.premises("A1", None).unwrap();
    assert_eq!(all["refunded_by_others_cents"], 3_700);

    p.set_eligible("A1", false).unwrap();
    assert_eq!(p.premises("A1", Some("eff-1")).unwrap()["eligible"], false);
}

#[test]
fn premises_only_count_the_named_order() {
    let mut p = service(Tier::ONE);
    p.add_order("B2", 5_000).unwrap();
    p.refund_by_hand("B2", 4_000, T0).unwrap();
    assert_eq!(
        p.premises("A1", None).unwrap()["refunded_by_others_cents"],
        0
    );
    assert!(matches!(
        p.premises("ZZ", None).unwrap_err(),
        Error::UnknownOrder(o) if o == "ZZ"
    ));
}

// ---- checks ----

#[test]
fn exceeds_balance() {
    let mut p = service(Tier::THREE);
    p.refund("A1", 8_000, None, None, T0).unwrap();
    let err = p.refund("A1", 2_001, None, None, T0).unwrap_err();
    match err {
        Error::ExceedsBalance {
            order,
            requested_cents,
            remaining_cents,
        } => {
            assert_eq!(order, "A1");
            assert_eq!(requested_cents, 2_001);
            assert_eq!(remaining_cents, 2_000);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.refund_count(), 1);
    // Exactly the remainder is fine; hand refunds obey the balance too.
    p.refund("A1", 2_000, None, None, T0).unwrap();
    assert!(matches!(
        p.refund_by_hand("A1", 1, T0).unwrap_err(),
        Error::ExceedsBalance { .. }
    ));
}

#[test]
fn refund_ignores_eligibility() {
    // Eligibility is the order system's fact (a premise the gate re-checks), not the
    // payments API's rule: without a gate, an ineligible order still pays out (F7).
    let mut p = service(Tier::ONE);
    p.set_eligible("A1", false).unwrap();
    let r = p.refund("A1", 100, Some("k"), None, T0).unwrap();
    assert_eq!(r.amount_cents, 100);
    assert_eq!(p.refund_count(), 1);
    assert_eq!(p.premises("A1", None).unwrap()["eligible"], false);
    // The balance still holds on an ineligible order.
    assert!(matches!(
        p.refund("A1", 9_901, None, None, T0).unwrap_err(),
        Error::ExceedsBalance {
            remaining_cents: 9_900,
            ..
        }
    ));
}

#[test]
fn unknown_order() {
    let mut p = service(Tier::ONE);
    for err in [
        p.refund("nope", 100, None, None, T0).unwrap_err(),
        p.refund_by_hand("nope", 100, T0).unwrap_err(),
        p.set_eligible("nope", false).unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::UnknownOrder(ref o) if o == "nope"),
            "{err:?}"
        );
    }
    assert_eq!(p.refund_count(), 0);
    assert!(p.refunds("nope").is_empty());
    assert_eq!(p.refunded_cents("nope"), 0);
}

#[test]
fn ids_are_sequential_across_orders() {
    let mut p = service(Tier::THREE);
    p.add_order("B2", 5_000).unwrap();
    let a = p.refund("A1", 1, None, None, T0).unwrap();
    let b = p.refund_by_hand("B2", 1, T0).unwrap();
    let c = p.refund("A1", 1, None, None, T0).unwrap();
    assert_eq!([a.id, b.id, c.id], ["re_0001", "re_0002", "re_0003"]);
    assert_eq!(p.refunds("A1").len(), 2);
    assert_eq!(p.refunds("B2").len(), 1);
}

// ---- persistence ----

#[cfg(feature = "std")]
#[test]
fn persistence_survives_drop_and_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("payments.json");
    let r = {
        let mut p = Payments::create(&path, Tier::ONE).unwrap();
        p.add_order("A1", 10_000).unwrap();
        p.set_eligible("A1", false).unwrap();
        p.set_eligible("A1", true).unwrap();
        let r = p
            .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
            .unwrap();
        p.refund_by_hand("A1", 500, T0 + 1).unwrap();
        r
    };
    assert!(!dir.path().join("payments.json.tmp").exists());
    let mut p = Payments::open(&path).unwrap();
    assert_eq!(p.tier(), Tier::ONE);
    assert_eq!(p.refund_count(), 2);
    assert_eq!(p.refunds("A1")[0], r);
    assert_eq!(p.refunded_cents("A1"), 2_500);
    // The key is still remembered after the restart, and ids continue.
    assert_eq!(
        p.refund("A1", 2_000, Some("k1"), Some("eff-1"), T0 + 60_000)
            .unwrap(),
        r
    );
    assert_eq!(p.refund("A1", 1, None, None, T0).unwrap().id, "re_0003");
    drop(p);
    assert_eq!(Payments::open(&path).unwrap().refund_count(), 3);
}

#[cfg(feature = "std")]
#[test]
fn create_persists_empty_service_and_tier() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    Payments::create(&path, Tier::TWO).unwrap();
    let p = Payments::open(&path).unwrap();
    assert_eq!(p.tier(), Tier::TWO);
    assert_eq!(p.refund_count(), 0);
}

#[cfg(feature = "std")]
#[test]
fn corrupt_file_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    fs::write(&path, b"{ not json").unwrap();
    match Payments::open(&path).unwrap_err() {
        Error::Corrupt(msg) => assert!(msg.contains("p.json"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[cfg(feature = "std")]
#[test]
fn missing_file_is_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Payments::open(&dir.path().join("absent.json")).unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err:?}");
}

// ---- snapshot / restore ----

#[test]
fn snapshot_restore_round_trip_keeps_keys_and_ids() {
    let mut p = service(Tier::parse("1+lookup").unwrap());
    let r = p
        .refund("A1", 2_000, Some("k1"), Some("eff-1"), T0)
        .unwrap();
    p.set_eligible("A1", false).unwrap();
    let snap = p.snapshot();
    let mut q = Payments::restore(&snap).unwrap();
    assert_eq!(q.snapshot(), snap);
    assert_eq!(q.tier(), p.tier());
    assert_eq!(q.premises("A1", None).unwrap()["eligible"], false);
    // The key is still remembered and ids continue, as after `open`.
    assert_eq!(
        q.refund("A1", 2_000, Some("k1"), Some("eff-1"), T0 + 1)
            .unwrap(),
        r
    );
    assert_eq!(q.refund_by_hand("A1", 1, T0).unwrap().id, "re_0002");
}

#[test]
fn restore_tells_not_json_from_corrupt() {
    for text in ["", "{ not json", "[1, 2"] {
        let err = Payments::restore(text).unwrap_err();
        assert!(matches!(err, Error::InvalidJson(_)), "{text:?}: {err:?}");
    }
    let good: serde_json::Value = serde_json::from_str(&service(Tier::ONE).snapshot()).unwrap();
    let mut bad_version = good.clone();
    bad_version["version"] = 2.into();
    let mut dangling = good.clone();
    dangling["last_seq"] = 1.into();
    dangling["refunds"] = serde_json::json!([{"id": "re_0001", "order": "ZZ",
        "amount_cents": 1, "reference": null, "idempotency_key": null,
        "created_ms": 0, "by_hand": true}]);
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("tier");
    for (what, v) in [
        ("version", bad_version),
        ("dangling", dangling),
        ("missing", missing),
    ] {
        let err = Payments::restore(&v.to_string()).unwrap_err();
        assert!(matches!(err, Error::Corrupt(_)), "{what}: {err:?}");
    }
}

#[cfg(feature = "std")]
#[test]
fn snapshot_is_the_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.json");
    let mut p = Payments::create(&path, Tier::TWO).unwrap();
    p.add_order("A1", 10_000).unwrap();
    p.refund("A1", 2_000, None, Some("eff-1"), T0).unwrap();
    let file = fs::read_to_string(&path).unwrap();
    assert_eq!(file, format!("{}\n", p.snapshot()));
    // And a snapshot written by a host opens like the crate's own file.
    let other = dir.path().join("q.json");
    write_state_file(&other, &p.snapshot()).unwrap();
    assert_eq!(Payments::open(&other).unwrap().snapshot(), p.snapshot());
}

// ---- tiers ----

#[test]
fn tier_parse_all_forms_and_label_round_trip() {
    assert_eq!(Tier::parse("1").unwrap(), Tier::ONE);
    assert_eq!(Tier::parse("2").unwrap(), Tier::TWO);
    assert_eq!(Tier::parse("3").unwrap(), Tier::THREE);
    assert_eq!(
        Tier::parse("1+lookup").unwrap(),
        Tier {
            dedupes: true,
            lookup: true
        }
    );
    assert_eq!(
        Tier::ONE,
        Tier {
            dedupes: true,
            lookup: false
        }
    );
    assert_eq!(
        Tier::TWO,
        Tier {
            dedupes: false,
            lookup: true
        }
    );
    assert_eq!(
        Tier::THREE,
        Tier {
            dedupes: false,
            lookup: false
        }
    );
    for s in ["1", "2", "3", "1+lookup"] {
        assert_eq!(Tier::parse(s).unwrap().label(), s);
    }
}

#[test]
fn tier_parse_rejects_bad_input() {
    for s in ["4", "", "one", "2+lookup", "1+dedupe"] {
        match Tier::parse(s) {
            Err(Error::BadTier(b)) => assert_eq!(b, s),
            other => panic!("{s:?}: {other:?}"),
        }
    }
}

// ---- the gate's steps (target.rs) ----

const EFFECT: &str = r#"{"order":"A1","amount_cents":2000}"#;

fn names(ns: &[&str]) -> Vec<String> {
    ns.iter().map(|n| n.to_string()).collect()
}

#[test]
fn apply_makes_the_refund_and_a_replay_answers_the_same() {
    let mut p = service(Tier::ONE);
    let first = p.apply("eff-1", EFFECT, "eff-1", T0);
    assert_eq!(
        first,
        Reply::Applied(r#"{"amount_cents":2000,"refund_id":"re_0001"}"#.into())
    );
    // The key is the idempotency key, the effect id the reference a lookup finds.
    let r = &p.refunds("A1")[0];
    assert_eq!(r.idempotency_key.as_deref(), Some("eff-1"));
    assert_eq!(r.reference.as_deref(), Some("eff-1"));
    assert_eq!(p.apply("eff-1", EFFECT, "eff-1", T0 + 1), first);
    assert_eq!(p.refund_count(), 1);
}

#[test]
fn apply_rejects_each_refusal_of_the_service_with_its_code() {
    let mut p = service(Tier::ONE);
    p.add_order("B2", 5_000).unwrap();
    let cases = [
        (
            r#"{"order":"nope","amount_cents":100}"#,
            "k-unknown",
            r#"unknown_order: order="nope""#,
        ),
        (
            r#"{"order":"A1","amount_cents":10001}"#,
            "k-over",
            r#"exceeds_balance: order="A1" requested_cents=10001 remaining_cents=10000"#,
        ),
    ];
    for (effect, key, code) in cases {
        assert_eq!(
            p.apply("eff-x", effect, key, T0),
            Reply::Rejected(code.into()),
            "{effect}"
        );
    }
    assert_eq!(p.refund_count(), 0);
    // Tier 1: the same key with another order inside the window (Stripe's 400).
    p.apply("eff-1", EFFECT, "k1", T0);
    assert_eq!(
        p.apply(
            "eff-2",
            r#"{"order":"B2","amount_cents":2000}"#,
            "k1",
            T0 + 1
        ),
        Reply::Rejected(r#"idempotency_mismatch: key="k1""#.into())
    );
    assert_eq!(p.refund_count(), 1);
}

#[test]
fn a_malformed_effect_is_rejected_at_apply_and_failed_at_capture_and_query() {
    let mut p = service(Tier::TWO);
    let cases = [
        ("{not json", "invalid_effect: not_json"),
        ("[1]", r#"invalid_effect: field="/order""#),
        (r#"{"amount_cents":1}"#, r#"invalid_effect: field="/order""#),
        (
            r#"{"order":7,"amount_cents":1}"#,
            r#"invalid_effect: field="/order""#,
        ),
        (
            r#"{"order":"A1"}"#,
            r#"invalid_effect: field="/amount_cents""#,
        ),
        (
            r#"{"order":"A1","amount_cents":-1}"#,
            r#"invalid_effect: field="/amount_cents""#,
        ),
        (
            r#"{"order":"A1","amount_cents":1.5}"#,
            r#"invalid_effect: field="/amount_cents""#,
        ),
        (
            r#"{"order":"A1","amount_cents":"1"}"#,
            r#"invalid_effect: field="/amount_cents""#,
        ),
    ];
    for (effect, code) in cases {
        // Nothing was sent, so the refusal is definitive.
        assert_eq!(
            p.apply("eff-1", effect, "k", T0),
            Reply::Rejected(code.into()),
            "{effect}"
        );
        let asked = names(&["eligible"]);
        assert_eq!(
            p.capture("eff-1", effect, &asked),
            Reply::Failed(code.into()),
            "{effect}"
        );
        assert_eq!(
            p.query("eff-1", effect),
            Reply::Failed(code.into()),
            "{effect}"
        );
    }
    assert_eq!(p.refund_count(), 0);
}

#[cfg(feature = "std")]
#[test]
fn apply_is_unknown_when_the_state_cannot_be_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = Payments::create(&dir.path().join("payments.json"), Tier::ONE).unwrap();
    p.add_order("A1", 10_000).unwrap();
    std::fs::remove_dir_all(dir.path()).unwrap();
    match p.apply("eff-1", EFFECT, "eff-1", T0) {
        Reply::Unknown(code) => assert!(code.starts_with("state_io: message=\""), "{code}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_error_kind_is_judged() {
    // Definitive: the service checked the call and made nothing.
    for e in [
        Error::UnknownOrder("A1".into()),
        Error::ExceedsBalance {
            order: "A1".into(),
            requested_cents: 2,
            remaining_cents: 1,
        },
        Error::IdempotencyMismatch { key: "k".into() },
    ] {
        assert!(target::definitive(&e), "{e:?}");
    }
    for e in [
        Error::LookupUnsupported,
        Error::BadTier("9".into()),
        Error::Corrupt("x".into()),
        Error::InvalidJson("x".into()),
    ] {
        assert!(!target::definitive(&e), "{e:?}");
    }
    // A storage failure may come after the refund was made.
    #[cfg(feature = "std")]
    assert!(!target::definitive(&Error::Io(std::io::Error::other(
        "disk full"
    ))));
}

#[test]
fn details_are_codes_with_quoted_fields() {
    let cases = [
        (
            Error::UnknownOrder("A \"1\"".into()),
            r#"unknown_order: order="A \"1\"""#,
        ),
        (
            Error::ExceedsBalance {
                order: "A1".into(),
                requested_cents: 3_000,
                remaining_cents: 2_000,
            },
            r#"exceeds_balance: order="A1" requested_cents=3000 remaining_cents=2000"#,
        ),
        (
            Error::IdempotencyMismatch { key: "k1".into() },
            r#"idempotency_mismatch: key="k1""#,
        ),
        (Error::LookupUnsupported, "lookup_unsupported"),
        (Error::BadTier("9".into()), r#"bad_tier: tier="9""#),
        (
            Error::Corrupt("bad".into()),
            r#"corrupt_state: message="bad""#,
        ),
        (
            Error::InvalidJson("eof".into()),
            r#"state_not_json: message="eof""#,
        ),
    ];
    for (e, code) in cases {
        assert_eq!(e.detail(), code);
    }
    #[cfg(feature = "std")]
    assert_eq!(
        Error::Io(std::io::Error::other("disk full")).detail(),
        r#"state_io: message="disk full""#
    );
}

#[test]
fn capture_reads_the_asked_premises_without_the_effects_own_refund() {
    let mut p = service(Tier::TWO);
    p.apply("eff-1", EFFECT, "eff-1", T0);
    p.refund_by_hand("A1", 500, T0).unwrap();
    p.set_eligible("A1", false).unwrap();
    // Keys sorted, whatever order they were asked in.
    assert_eq!(
        p.capture(
            "eff-1",
            EFFECT,
            &names(&["refunded_by_others_cents", "eligible"])
        ),
        Reply::Captured(r#"{"eligible":false,"refunded_by_others_cents":500}"#.into())
    );
    assert_eq!(
        p.capture("eff-2", EFFECT, &names(&["refunded_by_others_cents"])),
        Reply::Captured(r#"{"refunded_by_others_cents":2500}"#.into())
    );
    assert_eq!(
        p.capture("eff-1", EFFECT, &[]),
        Reply::Captured("{}".into())
    );
    assert_eq!(
        p.capture("eff-1", EFFECT, &names(&["eligible", "mood"])),
        Reply::Failed(r#"unknown_premise: name="mood""#.into())
    );
    assert_eq!(
        p.capture(
            "eff-1",
            r#"{"order":"nope","amount_cents":1}"#,
            &names(&["eligible"])
        ),
        Reply::Failed(r#"unknown_order: order="nope""#.into())
    );
}

#[test]
fn query_finds_by_the_effect_id_where_the_tier_offers_lookup() {
    let mut p = service(Tier::TWO);
    p.apply("eff-1", EFFECT, "eff-1", T0);
    assert_eq!(
        p.query("eff-1", EFFECT),
        Reply::Found(r#"{"amount_cents":2000,"refund_id":"re_0001"}"#.into())
    );
    assert_eq!(p.query("eff-2", EFFECT), Reply::NotFound);
    for tier in [Tier::ONE, Tier::THREE] {
        assert_eq!(
            service(tier).query("eff-1", EFFECT),
            Reply::Failed("lookup_unsupported".into())
        );
    }
}
