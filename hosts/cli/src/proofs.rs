//! Proof for outsiders on the command line: key pairs, Ed25519 receipts and their check,
//! the log's checkpoints and proofs, bundles. This file reads keys and documents from
//! files or the environment and prints what the component answers; every check is the
//! component's. A key is never printed (but a public one, by keygen) nor put in an error.

use std::io::{Read, Write};
use std::path::Path;

use serde_json::{json, Value};

use crate::cli::{ProveCmd, PublicKeyArgs, SigningKeyArgs};
use crate::output::{report_json, words, Failure};
use crate::{read_input, Ctx};

/// A key's text from `file` or the environment variable `var`.
fn key_from(file: Option<&Path>, var: Option<&str>, what: &str) -> Result<Option<String>, Failure> {
    if let Some(f) = file {
        let text = std::fs::read_to_string(f).map_err(|e| {
            Failure::new(
                2,
                "bad_key",
                format!("cannot read the {what} file {}: {e}", f.display()),
            )
        })?;
        return Ok(Some(text));
    }
    if let Some(v) = var {
        return match std::env::var(v) {
            Ok(text) if !text.is_empty() => Ok(Some(text)),
            _ => Err(Failure::new(
                2,
                "bad_key",
                format!("the environment variable {v} holds no {what}"),
            )),
        };
    }
    Ok(None)
}

/// The private key, if one was given.
pub(crate) fn signing_key(a: &SigningKeyArgs) -> Result<Option<String>, Failure> {
    key_from(
        a.signing_key.as_deref(),
        a.signing_key_env.as_deref(),
        "private key",
    )
}

fn need_signing_key(a: &SigningKeyArgs) -> Result<String, Failure> {
    signing_key(a)?.ok_or_else(|| {
        Failure::new(
            2,
            "bad_key",
            "give the private key: --signing-key FILE or --signing-key-env VAR (interlock keygen makes one)",
        )
    })
}

fn public_key(a: &PublicKeyArgs) -> Result<String, Failure> {
    key_from(
        a.public_key.as_deref(),
        a.public_key_env.as_deref(),
        "public key",
    )?
    .ok_or_else(|| {
        Failure::new(
            2,
            "bad_key",
            "give the public key: --public-key FILE or --public-key-env VAR",
        )
    })
}

/// A new file, owner-only, that must not exist yet (a key is never overwritten).
fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), Failure> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = o.open(path).map_err(|e| {
        Failure::new(
            2,
            "io",
            format!(
                "cannot create {}: {e} (an existing key is never overwritten)",
                path.display()
            ),
        )
    })?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| Failure::from(e).context(format!("cannot write {}", path.display())))
}

pub(crate) fn keygen(
    ctx: &Ctx,
    name: &str,
    private: &Path,
    public: Option<&Path>,
) -> Result<u8, Failure> {
    let mut seed = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut seed))
        .map_err(|e| Failure::from(e).context("cannot read the system's randomness"))?;
    let pair = ctx.gate_for_tools()?.generate_key(name, &seed)?;
    seed.fill(0);
    // Checked before anything is written: both files new.
    for p in [Some(private), public].into_iter().flatten() {
        if p.exists() {
            return Err(Failure::new(
                2,
                "io",
                format!(
                    "{} exists; an existing key is never overwritten",
                    p.display()
                ),
            ));
        }
    }
    write_new(private, &format!("{}\n", pair.signer), 0o600)?;
    if let Some(p) = public {
        write_new(p, &format!("{}\n", pair.verifier), 0o644)?;
    }
    ctx.print(
        json!({"ok": true, "public_key": pair.verifier, "private_key_file": private.display().to_string()}),
        format!(
            "private key written to {} (owner-only; keep it secret)\npublic key: {}",
            private.display(),
            pair.verifier
        ),
    );
    Ok(0)
}

pub(crate) fn signed_receipt(
    ctx: &Ctx,
    dir: &Path,
    effect: &str,
    key: &str,
) -> Result<u8, Failure> {
    let mut gate = ctx.gate(dir)?;
    // JSON already: the same document with or without --json.
    println!("{}", gate.signed_receipt(effect, key)?);
    Ok(0)
}

pub(crate) fn check_receipt(
    ctx: &Ctx,
    file: &Path,
    public: &PublicKeyArgs,
    hmac_key: Option<&Path>,
    journal: Option<&Path>,
) -> Result<u8, Failure> {
    let receipt = read_input(file)?;
    let report = match (hmac_key, journal) {
        (Some(k), Some(dir)) => {
            let key = std::fs::read(k).map_err(|e| {
                Failure::new(
                    2,
                    "bad_key",
                    format!("cannot read the key file {}: {e}", k.display()),
                )
            })?;
            ctx.gate(dir)?.check_receipt(&receipt, &key)?
        }
        (_, Some(dir)) => {
            let key = public_key(public)?;
            ctx.gate(dir)?.check_signed_receipt(&receipt, &key)?
        }
        (_, None) => {
            let key = public_key(public)?;
            let effect = ctx
                .gate_for_tools()?
                .check_receipt_signature(&receipt, &key)?;
            ctx.print(
                json!({"ok": true, "effect_id": effect, "checked": "signature"}),
                format!("ok: the receipt of effect {effect} is signed by the key given (Ed25519; its journal not checked: add --journal DIR)"),
            );
            return Ok(0);
        }
    };
    let code = if report.problems.is_empty() { 0 } else { 1 };
    if ctx.json {
        println!("{}", report_json(&report));
    } else if code == 0 {
        println!("ok: the receipt's signature holds and it matches the journal");
    } else {
        println!("FAILED: {} problem(s)", report.problems.len());
        for p in &report.problems {
            let kind = words(format!("{:?}", p.kind), '-');
            println!("  stream {} seq {}: {kind}: {}", p.stream, p.seq, p.detail);
        }
    }
    Ok(code)
}

pub(crate) fn checkpoint(ctx: &Ctx, dir: &Path, signing: &SigningKeyArgs) -> Result<u8, Failure> {
    let key = need_signing_key(signing)?;
    let answer: Value = serde_json::from_str(&ctx.gate(dir)?.checkpoint(&key)?)
        .expect("the component answers JSON");
    // The note itself is what an auditor keeps: printed as is.
    ctx.print(
        answer.clone(),
        answer["checkpoint"].as_str().unwrap_or("").trim_end(),
    );
    Ok(0)
}

pub(crate) fn prove(ctx: &Ctx, what: ProveCmd) -> Result<u8, Failure> {
    let text = match what {
        ProveCmd::Inclusion {
            dir,
            effect,
            tree_size,
        } => ctx.gate(&dir)?.prove_inclusion(&effect, tree_size)?,
        ProveCmd::Consistency {
            dir,
            old_checkpoint,
            old_size,
            tree_size,
        } => {
            let old = match (old_size, old_checkpoint) {
                (Some(n), _) => n,
                (None, Some(f)) => {
                    // Its size, as the component reads the note.
                    let note = read_input(&f)?;
                    checkpoint_size(&note).ok_or_else(|| {
                        Failure::new(
                            2,
                            "malformed",
                            format!("{} is not a checkpoint", f.display()),
                        )
                    })?
                }
                (None, None) => unreachable!("clap requires one"),
            };
            ctx.gate(&dir)?.prove_consistency(old, tree_size)?
        }
    };
    println!("{text}");
    Ok(0)
}

/// A checkpoint note's tree size, for picking the proof to ask for, read by the core's
/// own reader (the check of the note is the component's, in check-consistency).
fn checkpoint_size(note: &str) -> Option<u64> {
    interlock_core::proof::Checkpoint::unsigned(note)
        .ok()
        .map(|c| c.size)
}

pub(crate) fn check_inclusion(
    ctx: &Ctx,
    file: &Path,
    public: &PublicKeyArgs,
    checkpoint: Option<&Path>,
) -> Result<u8, Failure> {
    let proof = read_input(file)?;
    let held = checkpoint.map(read_input).transpose()?;
    let key = public_key(public)?;
    let out: Value = serde_json::from_str(&ctx.gate_for_tools()?.check_inclusion(
        &proof,
        held.as_deref(),
        &key,
    )?)
    .expect("the component answers JSON");
    ctx.print(
        json!({"ok": true, "included": out}),
        format!(
            "ok: effect {}'s receipt is leaf {} of the {} log of {} leaves (checkpoint signed by the key given)",
            out["effect_id"].as_str().unwrap_or(""),
            out["leaf_index"],
            out["origin"].as_str().unwrap_or(""),
            out["tree_size"]
        ),
    );
    Ok(0)
}

pub(crate) fn check_consistency(
    ctx: &Ctx,
    file: &Path,
    old: &Path,
    public: &PublicKeyArgs,
) -> Result<u8, Failure> {
    let proof = read_input(file)?;
    let old = read_input(old)?;
    let key = public_key(public)?;
    let out: Value = serde_json::from_str(
        &ctx.gate_for_tools()?
            .check_consistency(&proof, &old, &key)?,
    )
    .expect("the component answers JSON");
    ctx.print(
        json!({"ok": true, "checkpoint": out}),
        format!(
            "ok: the {} log of {} leaves extends the checkpoint held; nothing before it was rewritten",
            out["origin"].as_str().unwrap_or(""),
            out["tree_size"]
        ),
    );
    Ok(0)
}

pub(crate) fn bundle(
    ctx: &Ctx,
    dir: &Path,
    from_ms: u64,
    to_ms: Option<u64>,
    signing: &SigningKeyArgs,
) -> Result<u8, Failure> {
    let key = need_signing_key(signing)?;
    let to = to_ms.unwrap_or_else(|| ctx.clock.now_ms() + 1);
    println!("{}", ctx.gate(dir)?.bundle(from_ms, to, &key)?);
    Ok(0)
}

pub(crate) fn check_bundle(ctx: &Ctx, file: &Path, public: &PublicKeyArgs) -> Result<u8, Failure> {
    let bundle = read_input(file)?;
    let key = public_key(public)?;
    let out: Value = serde_json::from_str(&ctx.gate_for_tools()?.check_bundle(&bundle, &key)?)
        .expect("the component answers JSON");
    if ctx.json {
        println!("{out}");
        return Ok(0);
    }
    println!(
        "ok: bundle of {} receipt(s), signed by {}",
        out["count"],
        out["signed_by"].as_str().unwrap_or("")
    );
    for e in out["effects"].as_array().into_iter().flatten() {
        println!(
            "effect {} {}",
            e["effect_id"].as_str().unwrap_or(""),
            e["final"].as_str().unwrap_or("")
        );
        for q in [
            "happened_once",
            "authorized_when_fired",
            "premises_held",
            "service_confirmed",
        ] {
            println!(
                "  {:<22} {:<9} {}",
                q,
                e[q]["answer"].as_str().unwrap_or(""),
                e[q]["why"].as_str().unwrap_or("")
            );
        }
        println!(
            "  {:<22} {}",
            "who_decided",
            e["who_decided"]["why"].as_str().unwrap_or("")
        );
    }
    Ok(0)
}
