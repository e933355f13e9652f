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

/// A line appended by a checking writer is read by its structure alone: the same head as
/// the full parse, or none (then the full parse decides); never another head.
#[test]
fn appended_heads_agree_with_the_full_parse() {
    let mut lines: Vec<Vec<u8>> = vec![
        entry("a", 0, true).into_bytes(),
        br#"{"at_ms":1,"checks":{"lease":{"live_until_ms":2,"stream":"x","seq":9}},"open":false,"prev":"00","seq":12,"state":"AUTHORIZED","stream":"effect:\u00e9\"q\""}"#.to_vec(),
        br#"{ "stream" : "s" , "seq" : 0 , "open" : true , "x" : [1, {"y": "}]"}] }"#.to_vec(),
        br#"{"open":true,"seq":9007199254740993,"stream":"a"}"#.to_vec(),
        br#"{"open":true,"seq":01,"stream":"a"}"#.to_vec(),
        br#"{"open":true,"seq":1.0,"stream":"a"}"#.to_vec(),
        br#"{"open":true,"seq":-1,"stream":"a"}"#.to_vec(),
        br#"{"open":true,"seq":1e0,"stream":"a"}"#.to_vec(),
        br#"{"open":true,"seq":18446744073709551616,"stream":"a"}"#.to_vec(),
        br#"{"open":tru,"seq":1,"stream":"a"}"#.to_vec(),
        br#"{"open":true,"seq":1,"stream":"a","stream":"b"}"#.to_vec(),
        br#"{"open":true,"seq":1,"str\u0065am":"a"}"#.to_vec(),
        br#"{"open":true,"seq":1,"stream":"a"} x"#.to_vec(),
        br#"{"open":true,"seq":1,"stream":"a"}   "#.to_vec(),
        br#"{"open":true,"seq":1}"#.to_vec(),
        br#"["a",1,true]"#.to_vec(),
        br#"{}"#.to_vec(),
        br#"{"open":true,"seq":1,"stream":"a",}"#.to_vec(),
        b"{\"open\":true,\"seq\":1,\"stream\":\"\xff\"}".to_vec(),
    ];
    for dir in ["seeds", "regressions"] {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/");
        let Ok(files) = std::fs::read_dir(alloc::format!("{root}{dir}/file_journal")) else {
            continue;
        };
        for f in files {
            let bytes = std::fs::read(f.unwrap().path()).unwrap();
            lines.extend(bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec));
        }
    }
    let mut quick = 0;
    for line in &lines {
        match (parse_head(line), appended_head(line)) {
            (Ok(full), Some(fast)) => {
                assert_eq!(full, fast, "{}", String::from_utf8_lossy(line));
                quick += 1;
            }
            (Ok(_), None) => {}
            // Read by structure only: a line that is not JSON past its head (`"x":NaN`, a
            // bare `tru`): a checking writer never appends one, and open never reads so.
            (Err(_), Some(_)) => {}
            (Err(_), None) => {}
        }
    }
    assert!(quick >= 5, "{quick}");
}
