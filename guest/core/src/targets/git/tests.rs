//! The git targets' tables, answer by answer (the real repository is the hosts' tests').
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Value};

use super::*;
use crate::targets::testing::{cx, play, ID};

const A: &str = "1111111111111111111111111111111111111111";
const B: &str = "2222222222222222222222222222222222222222";
const C: &str = "3333333333333333333333333333333333333333";

fn run(status: i64, stdout: &str, stderr: &str) -> ServiceAnswer {
    ServiceAnswer::Returned(json!({"status": status, "stdout": stdout, "stderr": stderr}))
}

fn args(c: &ServiceCall) -> Vec<&str> {
    c.params["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect()
}

fn commit() -> Value {
    json!({"branch": "main", "files": {"src/lib.rs": "fn a() {}\n", "old.txt": null},
           "message": "Fix a", "reads": ["symbol:src/parse.rs#parse", "ref:release"]})
}

const RUST: &str = "use x;\n\n/// Parses.\npub fn parse(s: &str) -> u32 {\n    if s.is_empty() {\n        0\n    } else {\n        1\n    }\n}\n\nfn other() {}\n";
const PYTHON: &str = "import x\n\nclass Parser:\n    def parse(self, s):\n        if s:\n            return 1\n\n        return 0\n\n    def other(self):\n        pass\n\nX = 1\n";

#[test]
fn a_symbol_is_its_declaration_to_the_end_of_its_block() {
    assert_eq!(
        symbol(RUST, "parse").as_deref(),
        Some("pub fn parse(s: &str) -> u32 {\n    if s.is_empty() {\n        0\n    } else {\n        1\n    }\n}")
    );
    assert_eq!(symbol(RUST, "other").as_deref(), Some("fn other() {}"));
    assert_eq!(
        symbol(PYTHON, "parse").as_deref(),
        Some("    def parse(self, s):\n        if s:\n            return 1\n\n        return 0")
    );
    assert_eq!(symbol(PYTHON, "Parser").unwrap().lines().count(), 9);
    assert_eq!(
        symbol("const LIMIT: u32 = 30;\nfn f() {}\n", "LIMIT").as_deref(),
        Some("const LIMIT: u32 = 30;")
    );
    assert_eq!(symbol(RUST, "pars"), None);
    assert_eq!(symbol(RUST, "x"), None); // a use is not a declaration
}

#[test]
fn the_trailer_ends_the_message_in_its_trailer_block() {
    assert_eq!(
        with_trailer("Fix a\n", ID),
        format!("Fix a\n\nInterlock-Effect: {ID}\n")
    );
    assert_eq!(
        with_trailer("Fix a\n\nWhy.\n\nSigned-off-by: A <a@x>\n", ID),
        format!("Fix a\n\nWhy.\n\nSigned-off-by: A <a@x>\nInterlock-Effect: {ID}\n")
    );
    // A subject line that looks like a trailer is not a trailer block.
    assert_eq!(
        with_trailer("fix: a", ID),
        format!("fix: a\n\nInterlock-Effect: {ID}\n")
    );
}

#[test]
fn the_effects_are_checked_at_their_pointer() {
    COMMIT.check_effect(&commit()).unwrap();
    let bad = |t: &dyn Target, e: Value| match t.check_effect(&e) {
        Err(GateError::InvalidField { field, .. }) => field,
        other => panic!("{e} was not refused: {other:?}"),
    };
    let files = |f: Value| json!({"branch": "main", "files": f, "message": "m"});
    for p in [
        "../x",
        "/abs",
        ".git/config",
        "a//b",
        "\"q",
        "a\nb",
        "src/./x",
    ] {
        assert_eq!(
            bad(&COMMIT, files(json!({ p: "x" }))),
            pointer("/effect/files", p),
            "{p}"
        );
    }
    assert_eq!(bad(&COMMIT, files(json!({}))), "/effect/files");
    assert_eq!(bad(&COMMIT, files(json!({"a": 1}))), "/effect/files/a");
    for b in ["-x", "a..b", "a b", "x.lock", "a/.b", "@", "a~1"] {
        assert_eq!(
            bad(
                &COMMIT,
                json!({"branch": b, "files": {"a": "x"}, "message": "m"})
            ),
            "/effect/branch",
            "{b}"
        );
    }
    assert_eq!(
        bad(
            &COMMIT,
            json!({"branch": "m", "files": {"a": "x"}, "message": " "})
        ),
        "/effect/message"
    );
    assert_eq!(
        bad(
            &COMMIT,
            json!({"branch": "m", "files": {"a": "x"}, "message": "m", "base": "abc"})
        ),
        "/effect/base"
    );
    assert_eq!(
        bad(
            &COMMIT,
            json!({"branch": "m", "files": {"a": "x"}, "message": "m", "reads": ["sym:a"]})
        ),
        "/effect/reads/0"
    );
    assert_eq!(
        bad(
            &COMMIT,
            json!({"branch": "m", "files": {"a": "x"}, "message": "m", "author": {"name": "a <b>", "email": "e"}})
        ),
        "/effect/author/name"
    );
    assert_eq!(
        bad(&MERGE, json!({"branch": "main", "from": "main"})),
        "/effect/from"
    );
    assert_eq!(
        bad(
            &PUSH,
            json!({"remote": "--upload-pack=x", "branch": "main", "commit": A})
        ),
        "/effect/remote"
    );
    assert_eq!(
        bad(&PUSH, json!({"remote": "origin", "branch": "main"})),
        "/effect/commit"
    );
}

#[test]
fn a_commit_rests_on_the_files_it_writes_and_what_it_read() {
    assert_eq!(
        COMMIT.premises_of(&commit()),
        [
            "file:old.txt",
            "file:src/lib.rs",
            "symbol:src/parse.rs#parse",
            "ref:release"
        ]
    );
    assert_eq!(
        MERGE.premises_of(&json!({"branch": "main", "from": "agent-a"})),
        ["ref:agent-a"]
    );
    assert_eq!(
        PUSH.premises_of(&json!({"remote": "origin", "branch": "main", "commit": A})),
        ["remote:origin/main"]
    );
}

#[test]
fn premises_are_read_from_the_tree_the_files_and_the_refs() {
    let e = commit();
    let names = COMMIT.premises_of(&e);
    let (calls, reply) = play(&COMMIT, Phase::Premises, &cx(&e, &names), |c| {
        match args(c)[..] {
            ["--literal-pathspecs", "ls-tree", "-z", "refs/heads/main", "--", ..] => run(
                0,
                &format!("100644 blob {A}\tsrc/lib.rs\0100644 blob {B}\tsrc/parse.rs\0"),
                "",
            ),
            ["cat-file", "blob", oid] if oid == B => run(0, RUST, ""),
            ["for-each-ref", _, "refs/heads/release"] => run(
                0,
                &format!("refs/heads/release\0{C}\nrefs/heads/release/x\0{A}\n"),
                "",
            ),
            _ => panic!("unexpected {c:?}"),
        }
    });
    assert_eq!(calls.len(), 3);
    assert_eq!(
        args(&calls[0]),
        [
            "--literal-pathspecs",
            "ls-tree",
            "-z",
            "refs/heads/main",
            "--",
            "old.txt",
            "src/lib.rs",
            "src/parse.rs"
        ]
    );
    let Reply::Captured(v) = reply else {
        panic!("{reply:?}")
    };
    let v: Value = serde_json::from_str(&v).unwrap();
    assert_eq!(
        v,
        json!({"file:old.txt": null, "file:src/lib.rs": A, "ref:release": C,
               "symbol:src/parse.rs#parse": symbol(RUST, "parse").unwrap()})
    );
    // Every call runs with git's own words.
    assert!(calls
        .iter()
        .all(|c| c.params["env"] == json!({"LC_ALL": "C"})));
}

#[test]
fn the_decision_reads_files_as_of_the_base_and_a_recheck_reads_the_branch() {
    let mut e = commit();
    e["base"] = json!(C);
    let names = vec![String::from("file:src/lib.rs")];
    let mut at_decision = cx(&e, &names);
    at_decision.decision = true;
    let Turn::Call(c) = COMMIT.turn(Phase::Premises, &at_decision, &[]) else {
        panic!()
    };
    assert_eq!(args(&c)[3], C);
    let Turn::Call(c) = COMMIT.turn(Phase::Premises, &cx(&e, &names), &[]) else {
        panic!()
    };
    assert_eq!(args(&c)[3], "refs/heads/main");
}

#[test]
fn a_premise_read_that_cannot_be_trusted_fails() {
    let e = commit();
    let names = COMMIT.premises_of(&e);
    for bad in [
        run(128, "", "fatal: not a tree object"),
        run(0, "garbage", ""),
        run(0, "100644 blob nothex\tsrc/lib.rs\0", ""),
        ServiceAnswer::Returned(json!({"status": 0})),
        ServiceAnswer::NoAnswer("git could not be started".into()),
    ] {
        let (_, r) = play(&COMMIT, Phase::Premises, &cx(&e, &names), |_| bad.clone());
        assert_eq!(r.kind(), "failed", "{bad:?}");
    }
}

#[test]
fn a_commit_is_one_fast_import_on_the_tip_with_the_trailer() {
    let e = json!({"branch": "main", "files": {"é.txt": "naïve\n", "old.txt": null}, "message": "Fix",
                   "author": {"name": "Agent A", "email": "a@shop"}});
    let Turn::Call(c) = COMMIT.turn(Phase::Send, &cx(&e, &[]), &[]) else {
        panic!()
    };
    assert_eq!(
        args(&c),
        ["fast-import", "--quiet", "--date-format=now", "--done"]
    );
    assert_eq!(c.timeout_ms, Some(30_000));
    let message = format!("Fix\n\nInterlock-Effect: {ID}\n");
    assert_eq!(
        c.params["stdin"],
        format!(
            "commit refs/heads/main\nmark :1\nauthor Agent A <a@shop> now\ncommitter Agent A <a@shop> now\n\
             data {}\n{message}\nfrom refs/heads/main^0\nD old.txt\nM 100644 inline é.txt\ndata 7\nnaïve\n\n\nget-mark :1\ndone\n",
            message.len()
        )
    );
}

#[test]
fn every_answer_to_fast_import_maps_to_one_reply() {
    let e = commit();
    assert_eq!(
        fast_import_reply(&run(0, &format!("{A}\n"), ""), &e),
        Reply::Applied(format!(r#"{{"branch":"main","commit":"{A}"}}"#))
    );
    for (a, want) in [
        (
            run(
                1,
                &format!("{A}\n"),
                &format!(
                    "warning: Not updating refs/heads/main (new tip {A} does not contain {B})"
                ),
            ),
            "unknown",
        ),
        (
            run(
                128,
                "",
                "fatal: Invalid ref name or SHA1 expression: refs/heads/main^0",
            ),
            "rejected",
        ),
        (run(0, "", ""), "unknown"),
        (
            run(
                128,
                "",
                "fatal: Unable to create '.git/refs/heads/main.lock': File exists.",
            ),
            "unknown",
        ),
        (
            ServiceAnswer::NoAnswer("killed after 30000 ms".into()),
            "unknown",
        ),
        (ServiceAnswer::Returned(json!("nope")), "unknown"),
    ] {
        assert_eq!(fast_import_reply(&a, &e).kind(), want, "{a:?}");
    }
}

#[test]
fn a_merge_is_computed_on_one_tip_and_written_on_that_tip_only() {
    let e = json!({"branch": "main", "from": "agent-a"});
    let (calls, reply) = play(&MERGE, Phase::Send, &cx(&e, &[]), |c| match args(c)[0] {
        "rev-parse" => run(0, &format!("{A}\n{B}\n"), ""),
        "merge-tree" => run(0, &format!("{C}\0"), ""),
        "fast-import" => run(0, &format!("{A}\n"), ""),
        _ => panic!("{c:?}"),
    });
    assert_eq!(reply.kind(), "applied");
    assert_eq!(
        args(&calls[1]),
        ["merge-tree", "--write-tree", "-z", "--name-only", A, B]
    );
    let stdin = calls[2].params["stdin"].as_str().unwrap();
    assert!(
        stdin.contains(&format!("from {A}\nmerge {B}\nM 040000 {C} \"\"\n")),
        "{stdin}"
    );
    assert!(
        stdin.contains(&format!(
            "Merge branch 'agent-a' into main\n\nInterlock-Effect: {ID}\n"
        )),
        "{stdin}"
    );
    // The three runs share the send's time.
    assert!(calls.iter().all(|c| c.timeout_ms == Some(10_000)));

    let conflict = |c: &ServiceCall| match args(c)[0] {
        "rev-parse" => run(0, &format!("{A}\n{B}\n"), ""),
        _ => run(1, &format!("{C}\0src/lib.rs\0\0messages"), ""),
    };
    let (calls, reply) = play(&MERGE, Phase::Send, &cx(&e, &[]), conflict);
    assert_eq!(calls.len(), 2, "nothing written");
    assert_eq!(
        reply,
        Reply::Rejected(
            "merging agent-a into main conflicts in src/lib.rs; nothing was written".into()
        )
    );
    let (calls, reply) = play(&MERGE, Phase::Send, &cx(&e, &[]), |_| {
        run(128, "", "fatal: ambiguous argument 'refs/heads/agent-a^{commit}': unknown revision or path not in the working tree.")
    });
    assert_eq!(
        args(&calls[0]),
        [
            "rev-parse",
            "refs/heads/main^{commit}",
            "refs/heads/agent-a^{commit}"
        ]
    );
    assert_eq!(reply.kind(), "rejected");
}

#[test]
fn a_push_is_applied_refused_by_the_remote_or_unknown() {
    let e = json!({"remote": "origin", "branch": "main", "commit": A});
    let send = |a: ServiceAnswer| play(&PUSH, Phase::Send, &cx(&e, &[]), |_| a.clone());
    let (calls, r) = send(run(0, "To x\n \tA:refs/heads/main\t[new]\nDone\n", ""));
    assert_eq!(
        args(&calls[0]),
        [
            "push",
            "--porcelain",
            "origin",
            &format!("{A}:refs/heads/main")
        ]
    );
    assert_eq!(r.kind(), "applied");
    assert_eq!(
        send(run(
            1,
            "To x\n!\tA:refs/heads/main\t[rejected] (fetch first)\nDone\n",
            ""
        ))
        .1
        .kind(),
        "rejected"
    );
    assert_eq!(
        send(run(
            1,
            "To x\n!\tA:refs/heads/main\t[remote rejected] (hook declined)\nDone\n",
            ""
        ))
        .1
        .kind(),
        "rejected"
    );
    assert_eq!(
        send(run(128, "", "fatal: the remote end hung up unexpectedly"))
            .1
            .kind(),
        "unknown"
    );
    assert_eq!(
        send(ServiceAnswer::NoAnswer("killed".into())).1.kind(),
        "unknown"
    );
}

#[test]
fn a_lookup_finds_the_exact_trailer_line_in_the_branch() {
    let e = commit();
    let look = |out: String| play(&COMMIT, Phase::Lookup, &cx(&e, &[]), |_| run(0, &out, "")).1;
    let (calls, _) = play(&COMMIT, Phase::Lookup, &cx(&e, &[]), |_| run(0, "", ""));
    assert_eq!(
        args(&calls[0]),
        [
            "log",
            "-F",
            &format!("--grep=Interlock-Effect: {ID}"),
            "--format=%H%x00%B%x00",
            "refs/heads/main",
            "--"
        ]
    );
    assert_eq!(look(String::new()), Reply::NotFound);
    assert_eq!(
        look(format!("{B}\0Fix\n\nInterlock-Effect: {ID}\n\0\n")),
        Reply::Found(format!(r#"{{"branch":"main","commit":"{B}"}}"#))
    );
    // Mentioned, not carried: a revert's message quoting the trailer inside a line.
    assert_eq!(
        look(format!(
            "{B}\0Revert\n\nThis reverts Interlock-Effect: {ID}.\n\0\n"
        )),
        Reply::NotFound
    );
    let (_, r) = play(&COMMIT, Phase::Lookup, &cx(&e, &[]), |_| {
        run(128, "", "fatal: bad revision")
    });
    assert_eq!(r.kind(), "failed");
}

#[test]
fn a_push_lookup_asks_the_remote() {
    let e = json!({"remote": "origin", "branch": "main", "commit": A});
    let look = |tip: Option<&str>, ancestor: i64| {
        play(&PUSH, Phase::Lookup, &cx(&e, &[]), |c| match args(c)[0] {
            "ls-remote" => run(
                0,
                &tip.map(|t| format!("{t}\trefs/heads/main\n"))
                    .unwrap_or_default(),
                "",
            ),
            "fetch" => run(0, "", ""),
            "merge-base" => run(ancestor, "", ""),
            _ => panic!("{c:?}"),
        })
    };
    assert_eq!(look(None, 0).1, Reply::NotFound);
    assert_eq!(look(Some(A), 0).0.len(), 1);
    assert_eq!(look(Some(A), 0).1.kind(), "found");
    assert_eq!(look(Some(B), 0).1.kind(), "found");
    assert_eq!(look(Some(B), 1).1, Reply::NotFound);
    assert_eq!(look(Some(B), 128).1.kind(), "failed");
}
