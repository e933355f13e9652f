use super::*;
use alloc::vec;

fn entry(stream: &str, seq: u64, open: bool) -> String {
    format!(r#"{{"data":"x","open":{open},"seq":{seq},"stream":"{stream}"}}"#)
}

#[test]
fn a_head_is_three_typed_members_of_an_object() {
    let h = parse_head(entry("a", 3, true).as_bytes()).unwrap();
    assert_eq!((h.stream.as_str(), h.seq, h.open), ("a", 3, true));
    for (bad, why) in [
        (&b"[\"a\",0,true]"[..], "not a JSON object"),
        (b"{\"stream\":\"a\",\"seq\":0}", "missing field `open`"),
        (
            b"{\"stream\":\"a\",\"seq\":-1,\"open\":true}",
            "invalid value",
        ),
        (
            b"{\"stream\":\"a\",\"seq\":1.0,\"open\":true}",
            "invalid type",
        ),
        (
            b"{\"stream\":\"a\",\"seq\":0,\"open\":true} x",
            "trailing characters",
        ),
        (
            b"{\"stream\":\"a\",\"stream\":\"b\",\"seq\":0,\"open\":true}",
            "duplicate field",
        ),
        (b"\xff", "not UTF-8"),
    ] {
        let got = parse_head(bad).unwrap_err();
        assert!(got.contains(why), "{got:?} should say {why:?}");
    }
    // Beyond 2^53 is still a u64: the Rust rule, which JS and Python now share.
    let big = parse_head(br#"{"stream":"a","seq":9007199254740993,"open":false}"#).unwrap();
    assert_eq!(big.seq, 9_007_199_254_740_993);
}

#[test]
fn an_append_batch_is_checked_entry_by_entry() {
    let batch = vec![entry("a", 2, true), entry("a", 3, true)];
    assert_eq!(validate_append(&batch, "a", 2, true), Ok(()));
    let cases = [
        (
            vec![entry("a", 2, true), entry("a", 5, true)],
            "entry 1 of the batch (seq 3): its seq member is 5 but should be 3",
        ),
        (
            vec![entry("b", 2, true)],
            "its stream member is \"b\" but the append is to stream \"a\"",
        ),
        (
            vec![entry("a", 2, false)],
            "its open member is false but the append says open=true",
        ),
        (
            vec![format!("{}\n", entry("a", 2, true))],
            "contains a newline",
        ),
    ];
    for (batch, why) in cases {
        let e = validate_append(&batch, "a", 2, true).unwrap_err();
        assert!(e.to_string().starts_with("invalid journal entry: "), "{e}");
        assert!(e.to_string().contains(why), "{e} should say {why:?}");
    }
}

#[test]
fn a_scan_finds_entries_torn_tails_and_corrupt_lines() {
    let a0 = entry("a", 0, true);
    let b0 = entry("b", 0, false);
    let a1 = entry("a", 1, false);
    let text = format!("{a0}\n{b0}\n{a1}\n");
    let got = scan(text.as_bytes()).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(
        (got[1].offset, got[1].len),
        (a0.len() as u64 + 1, b0.len() as u32)
    );
    assert_eq!(got[2].head.stream, "a");

    let torn = format!("{a0}\n{{\"str");
    assert_eq!(
        scan(torn.as_bytes()),
        Err(FormatError::TornTail {
            offset: a0.len() as u64 + 1,
            bytes: 5
        })
    );
    let gap = format!("{a0}\n{b0}\n{}\n", entry("a", 2, true));
    let e = scan(gap.as_bytes()).unwrap_err();
    assert_eq!(
        e,
        FormatError::Corrupt {
            line: 3,
            detail: "seq is 2 but stream \"a\" has 1 entries before this line".into()
        }
    );
    assert!(e
        .to_string()
        .starts_with("corrupt journal: journal.jsonl line 3 is not a valid entry: "));
    assert!(matches!(
        scan(b"\n"),
        Err(FormatError::Corrupt { line: 1, .. })
    ));
    assert_eq!(scan(b""), Ok(vec![]));
}

#[test]
fn a_scanner_resumes_after_a_checkpoint() {
    let line = format!("{}\n", entry("a", 7, true));
    let mut s = Scanner::new(100, 4);
    let e = s.line(line.as_bytes()).unwrap();
    assert_eq!(e.offset, 100);
    assert_eq!(s.offset(), 100 + line.len() as u64);
    assert_eq!(s.check_seq(&e, 7), Ok(()));
    assert!(matches!(
        s.check_seq(&e, 6),
        Err(FormatError::Corrupt { line: 5, .. })
    ));
}

#[test]
fn repair_keeps_complete_lines_and_names_side_files_without_overwriting() {
    assert_eq!(complete_prefix(b"ab\ncd"), 3);
    assert_eq!(complete_prefix(b"abcd"), 0);
    assert_eq!(complete_prefix(b"ab\n"), 3);
    assert_eq!(torn_file_name(42, 0), "journal.torn-42");
    assert_eq!(torn_file_name(42, 2), "journal.torn-42.2");
}

#[test]
fn the_format_file_names_exactly_a_known_version() {
    assert_eq!(format_file_text(), "interlock-journal 1\n");
    assert_eq!(check_format_file(&format_file_text()), Ok(1));
    let newer = check_format_file("interlock-journal 2\n").unwrap_err();
    assert_eq!(newer, FormatError::NewerVersion { version: 2 });
    assert_eq!(
        newer.to_string(),
        "journal format version 2 is newer than this reader understands (1); upgrade Interlock"
    );
    for bad in [
        "",
        "interlock-journal 1",
        "interlock-journal 1\n\n",
        "interlock-journal 01\n",
        "interlock-journal 0\n",
        "interlock-journal +1\n",
        "interlock-journal  1\n",
        "interlock-journal 99999999999999999999999\n",
        "other 1\n",
    ] {
        let e = check_format_file(bad).unwrap_err();
        assert!(
            matches!(e, FormatError::BadFormatFile { .. }),
            "{bad:?}: {e:?}"
        );
        assert!(e
            .to_string()
            .starts_with("journal format file journal.format is not valid: "));
    }
}
