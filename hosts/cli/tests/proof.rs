//! Proof for outsiders on the command line, as the README shows it: a key pair, a receipt
//! signed with it and checked with the public key alone, a checkpoint of the log and an
//! inclusion proof checked with the public key; then a dropped REVOKED caught by `verify`
//! with the receipt (its anchor), a forked log caught by `check-consistency`, and bad input
//! (a private key where the public one goes, a cut-short bundle, an unknown version):
//! exit 2 or 1 with a typed error, nothing written. Run as the real binary on real folders.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// `interlock ARGS` in `dir`, with the fake clock.
fn interlock(dir: &Path, args: &[&str]) -> Output {
    common::runtime();
    Command::new(env!("CARGO_BIN_EXE_interlock"))
        .current_dir(dir)
        .arg("--clock-ms")
        .arg(common::T0_MS.to_string())
        .args(args)
        .output()
        .expect("run interlock")
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = interlock(dir, args);
    assert!(
        out.status.success(),
        "interlock {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn effect_id(journal: &Path) -> String {
    let text = std::fs::read_to_string(journal.join("journal.jsonl")).unwrap();
    let at = text.find("\"stream\":\"effect:").unwrap() + 17;
    text[at..at + 32].to_string()
}

#[test]
fn the_readme_receipt_and_inclusion_proof_checked_with_the_public_key_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["demo", "2", "--dir", "shop"]);
    let id = effect_id(&d.join("shop"));
    // The README's snippet, command for command.
    ok(
        d,
        &[
            "keygen",
            "shop.example/interlock",
            "--private-key",
            "shop.key",
            "--public-key",
            "shop.pub",
        ],
    );
    write(
        d,
        "receipt.json",
        &ok(d, &["receipt", "shop", &id, "--signing-key", "shop.key"]),
    );
    let checked = ok(
        d,
        &["check-receipt", "receipt.json", "--public-key", "shop.pub"],
    );
    assert!(
        checked.starts_with(&format!("ok: the receipt of effect {id} is signed")),
        "{checked}"
    );
    let against = ok(
        d,
        &[
            "check-receipt",
            "receipt.json",
            "--public-key",
            "shop.pub",
            "--journal",
            "shop",
        ],
    );
    assert!(against.contains("matches the journal"), "{against}");
    write(
        d,
        "checkpoint.txt",
        &ok(d, &["checkpoint", "shop", "--signing-key", "shop.key"]),
    );
    write(
        d,
        "proof.json",
        &ok(d, &["prove", "inclusion", "shop", &id]),
    );
    let included = ok(
        d,
        &["check-inclusion", "proof.json", "--public-key", "shop.pub"],
    );
    assert!(
        included.starts_with(&format!(
            "ok: effect {id}'s receipt is leaf 0 of the shop.example/interlock log of 1 leaves"
        )),
        "{included}"
    );
    // The private key is owner-only, and never printed.
    let private = std::fs::read_to_string(d.join("shop.key")).unwrap();
    let secret = private.trim().splitn(5, '+').nth(4).unwrap().to_string();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.join("shop.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let bad = interlock(
        d,
        &[
            "--json",
            "check-receipt",
            "receipt.json",
            "--public-key",
            "shop.key",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    let text = String::from_utf8_lossy(&bad.stdout);
    let err: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(err["error"]["kind"], "bad_key", "{text}");
    assert!(!text.contains(&secret), "the key is never echoed");
    // Another key over the same receipt: exit 1, the signature does not hold.
    ok(
        d,
        &[
            "keygen",
            "shop.example/interlock",
            "--private-key",
            "other.key",
            "--public-key",
            "other.pub",
        ],
    );
    let other = interlock(
        d,
        &["check-receipt", "receipt.json", "--public-key", "other.pub"],
    );
    assert_eq!(
        other.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    // keygen never overwrites a key.
    let again = interlock(d, &["keygen", "x", "--private-key", "shop.key"]);
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(d.join("shop.key")).unwrap(),
        private
    );
}

#[test]
fn a_dropped_revocation_a_forked_log_and_bad_documents_are_caught() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(d, &["demo", "2", "--dir", "shop"]);
    let id = effect_id(&d.join("shop"));
    ok(
        d,
        &[
            "keygen",
            "shop.example/interlock",
            "--private-key",
            "shop.key",
            "--public-key",
            "shop.pub",
        ],
    );
    ok(d, &["lease", "revoke", "shop", "case-4471"]);
    write(
        d,
        "receipt.json",
        &ok(d, &["receipt", "shop", &id, "--signing-key", "shop.key"]),
    );
    write(
        d,
        "c1.txt",
        &ok(d, &["checkpoint", "shop", "--signing-key", "shop.key"]),
    );
    ok(
        d,
        &[
            "verify",
            "shop",
            "--receipt",
            "receipt.json",
            "--checkpoint",
            "c1.txt",
        ],
    );

    // Drop the REVOKED (the journal's last line): verify with the receipt says where.
    let journal = d.join("shop/journal.jsonl");
    let full = std::fs::read_to_string(&journal).unwrap();
    let lines: Vec<&str> = full
        .lines()
        .filter(|l| !l.contains("\"state\":\"REVOKED\""))
        .collect();
    assert_eq!(lines.len() + 1, full.lines().count());
    std::fs::write(
        &journal,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let caught = interlock(
        d,
        &["--json", "verify", "shop", "--receipt", "receipt.json"],
    );
    assert_eq!(caught.status.code(), Some(1));
    let rep: Value = serde_json::from_slice(&caught.stdout).unwrap();
    let p = &rep["problems"][0];
    assert_eq!(
        (p["stream"].as_str(), p["seq"].as_u64(), p["kind"].as_str()),
        (Some("lease:case-4471"), Some(1), Some("truncated")),
        "{rep}"
    );
    std::fs::write(&journal, &full).unwrap();

    // A bundle cut short, of an unknown version: exit 2, typed.
    let bundle = ok(d, &["bundle", "shop", "--signing-key", "shop.key"]);
    write(d, "cut.json", &bundle[..bundle.len() / 2]);
    write(
        d,
        "v9.json",
        &bundle.replace("interlock-bundle/1", "interlock-bundle/9"),
    );
    for (file, kind) in [("cut.json", "malformed"), ("v9.json", "unknown_version")] {
        let out = interlock(
            d,
            &["--json", "check-bundle", file, "--public-key", "shop.pub"],
        );
        assert_eq!(out.status.code(), Some(2));
        let e: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(e["error"]["kind"], kind);
    }
    write(d, "bundle.json", &bundle);
    let answers = ok(
        d,
        &["check-bundle", "bundle.json", "--public-key", "shop.pub"],
    );
    assert!(answers.contains("happened_once          yes"), "{answers}");

    // A forked log: another journal's log under the same key, checked from the checkpoint
    // held (of this one).
    ok(d, &["demo", "1", "--dir", "fork"]);
    ok(d, &["checkpoint", "fork", "--signing-key", "shop.key"]);
    write(
        d,
        "cons.json",
        &ok(d, &["prove", "consistency", "fork", "--old-size", "1"]),
    );
    let forked = interlock(
        d,
        &[
            "check-consistency",
            "cons.json",
            "--old-checkpoint",
            "c1.txt",
            "--public-key",
            "shop.pub",
        ],
    );
    assert_eq!(
        forked.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&forked.stdout)
    );
    assert!(String::from_utf8_lossy(&forked.stderr).contains("forked"));
    // A proof for a tree no checkpoint signed: exit 1, nothing written.
    let before = std::fs::read(d.join("fork/journal.jsonl")).unwrap();
    let bad = interlock(d, &["prove", "inclusion", "fork", &id, "--tree-size", "5"]);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(
        std::fs::read(d.join("fork/journal.jsonl")).unwrap(),
        before,
        "nothing written"
    );
}
