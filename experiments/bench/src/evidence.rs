//! Proof for outsiders, measured (results/evidence.md): the cost per effect of signing and
//! checking a receipt (Ed25519 beside HMAC) and of the log's append, through the gate
//! component as every host runs it, and the size of the log's proofs at 1k and 1M effects.
//!
//!   cargo run -p interlock-bench --bin interlock-evidence [-- --quick] [--out DIR]
//!
//! The component is the release wasm (cranelift compiles it the same in any build of this
//! binary); the proof sizes come from the core's tree natively.
// Shared with interlock-bench, which uses the rest of it.
#[allow(dead_code)]
#[path = "common.rs"]
mod common;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use interlock_cli::{Clock, GateHost, Runtime, Storage};
use interlock_core::proof::tree::Tree;

use common::{proposal, NullTarget, LEASE, LEASE_UNTIL_MS, T0_MS};

fn per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed())
}

type Step<'a> = dyn FnMut(&mut GateHost, &str) -> Result<()> + 'a;

/// `f` once per effect; its mean time is the row `what`.
fn run(
    host: &mut GateHost,
    ids: &[String],
    rows: &mut Vec<(String, f64)>,
    n: usize,
    what: &str,
    f: &mut Step<'_>,
) -> Result<()> {
    let t = Instant::now();
    for id in ids {
        f(host, id)?;
    }
    rows.push((what.into(), per(t.elapsed(), n)));
    Ok(())
}

fn main() -> Result<()> {
    let mut quick = false;
    let mut out = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--out" => out = Some(PathBuf::from(args.next().context("--out needs a folder")?)),
            other => anyhow::bail!(
                "unknown argument {other}; usage: interlock-evidence [--quick] [--out DIR]"
            ),
        }
    }
    let wasm = interlock_cli::runtime::locate(None)?;
    let rt = Runtime::load(&wasm)?;
    let n: usize = if quick { 100 } else { 1000 };
    let g = |e: interlock_cli::Error| anyhow::anyhow!("{e}");
    let mut host = GateHost::new(&rt, Storage::memory(), Clock::fake(T0_MS)).map_err(g)?;
    host.grant_lease(LEASE, LEASE_UNTIL_MS).map_err(g)?;
    let pair = host
        .generate_key("evidence.example/log", &[7; 32])
        .map_err(g)?;
    let mut ids = Vec::new();
    let (_, submit) = timed(|| -> Result<()> {
        for i in 0..n as u64 {
            let o = host.submit(&proposal(i), &mut NullTarget).map_err(g)?;
            ids.push(o.effect_id);
        }
        Ok(())
    });
    let mut rows: Vec<(String, f64)> = vec![(
        "submit (committed, in-memory journal), for scale".into(),
        per(submit, n),
    )];
    let mut hmac = Vec::new();
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "receipt, unsigned",
        &mut |h, id| h.receipt(id, None).map(drop).map_err(g),
    )?;
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "receipt, HMAC-SHA256",
        &mut |h, id| {
            hmac.push(h.receipt(id, Some(b"k")).map_err(g)?);
            Ok(())
        },
    )?;
    let mut signed = Vec::new();
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "receipt, Ed25519",
        &mut |h, id| {
            signed.push(h.signed_receipt(id, &pair.signer).map_err(g)?);
            Ok(())
        },
    )?;
    // Where an Ed25519 receipt's time goes: the signer key is parsed on every call (its
    // public half, for the key id, is a base-point multiplication), then the signature.
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "verifier-key: parse a signer key (derives its public key)",
        &mut |h, _| h.verifier_key(&pair.signer).map(drop).map_err(g),
    )?;
    let (mut hi, mut si) = (hmac.iter(), signed.iter());
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "check-receipt, HMAC, against the journal",
        &mut |h, _| {
            h.check_receipt(hi.next().unwrap(), b"k")
                .map(drop)
                .map_err(g)
        },
    )?;
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "check-receipt, Ed25519, against the journal",
        &mut |h, _| {
            h.check_signed_receipt(si.next().unwrap(), &pair.verifier)
                .map(drop)
                .map_err(g)
        },
    )?;
    let mut si = signed.iter();
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "check-receipt-signature, Ed25519, the public key alone",
        &mut |h, _| {
            h.check_receipt_signature(si.next().unwrap(), &pair.verifier)
                .map(drop)
                .map_err(g)
        },
    )?;
    let (c, first) = timed(|| host.checkpoint(&pair.signer));
    c.map_err(g)?;
    rows.push((
        format!("log append: one checkpoint of {n} closed effects, per effect"),
        per(first, n),
    ));
    let k = 10;
    for i in 0..k {
        host.submit(&proposal(n as u64 + i), &mut NullTarget)
            .map_err(g)?;
    }
    let (c, again) = timed(|| host.checkpoint(&pair.signer));
    c.map_err(g)?;
    rows.push((
        format!("log append: {k} more effects onto {n}, per effect"),
        per(again, k as usize),
    ));
    let mut proofs = Vec::new();
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "prove-inclusion (rebuilds the logged receipt)",
        &mut |h, id| {
            proofs.push(h.prove_inclusion(id, None).map_err(g)?);
            Ok(())
        },
    )?;
    let mut pi = proofs.iter();
    run(
        &mut host,
        &ids,
        &mut rows,
        n,
        "check-inclusion, the public key alone",
        &mut |h, _| {
            h.check_inclusion(pi.next().unwrap(), None, &pair.verifier)
                .map(drop)
                .map_err(g)
        },
    )?;
    let (b, bundle_t) = timed(|| host.bundle(0, u64::MAX >> 12, &pair.signer));
    let bundle = b.map_err(g)?;
    rows.push((
        format!("bundle of {} effects, per effect", n + k as usize),
        per(bundle_t, n + k as usize),
    ));
    let (a, check_t) = timed(|| host.check_bundle(&bundle, &pair.verifier));
    a.map_err(g)?;
    rows.push((
        "check-bundle (signature, five answers), per effect".into(),
        per(check_t, n + k as usize),
    ));

    // Proof sizes: the tree's audit paths at 1k and 1M leaves (the core's tree, natively).
    let sizes: &[u64] = if quick {
        &[1_000, 65_536]
    } else {
        &[1_000, 1_000_000]
    };
    let mut size_rows = String::new();
    for &size in sizes {
        let mut t = Tree::new();
        let (_, build) = timed(|| {
            for i in 0..size {
                let mut leaf = [0u8; 32];
                leaf[..8].copy_from_slice(&i.to_be_bytes());
                t.push(leaf);
            }
        });
        let last = t.inclusion(size - 1).expect("in the tree").len();
        let mid = t.inclusion(size / 2).expect("in the tree").len();
        let ((), prove) = timed(|| {
            for i in 0..100 {
                t.inclusion(i * (size / 100)).expect("in the tree");
            }
        });
        let cons = t.consistency(size / 2 + 1).expect("a prefix").len();
        let _ = writeln!(
            size_rows,
            "| {size} | {mid} hashes, {} B ({} B base64 in the proof) | {last} hashes | {cons} hashes, {} B | {:.2} s | {:.1} µs |",
            mid * 32,
            mid * 44 + mid * 3,
            cons * 32,
            build.as_secs_f64(),
            per(prove, 100),
        );
    }

    let mut md = String::new();
    md.push_str("# Evidence: proof for outsiders, measured\n\n");
    let _ = writeln!(
        md,
        "Through the gate component as every host runs it (`{}`, wasmtime 48, an in-memory journal, a fake clock), {n} effects; \
         a {} build of the host (the component is the release wasm either way). Command: \
         `cargo run -p interlock-bench --bin interlock-evidence{}`. One run on a shared 2-core machine: compare rows within it.\n",
        wasm.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default(),
        if cfg!(debug_assertions) { "debug" } else { "release" },
        if quick { " -- --quick" } else { "" }
    );
    md.push_str("| per effect | µs |\n|---|---|\n");
    for (what, us) in &rows {
        let _ = writeln!(md, "| {what} | {us:.1} |");
    }
    md.push_str("\n## Proof sizes\n\nThe log's RFC 6962 tree (the core's, natively), a leaf per closed effect. An inclusion proof carries its audit path (32-byte hashes, base64 in the JSON) beside the receipt and the checkpoint note; a consistency proof from the middle of the log to its end, the hashes and the new checkpoint.\n\n");
    md.push_str("| effects | inclusion proof (a middle leaf) | (the last leaf) | consistency proof (from half + 1) | tree build | one inclusion proof |\n|---|---|---|---|---|---|\n");
    md.push_str(&size_rows);
    md.push_str("\n## Export throughput\n\nSee branch `export` (the exporters are built there).\n");
    println!("{md}");
    // The full run writes results/evidence.md; the quick one (CI) only prints, unless told.
    let out = out.or_else(|| {
        (!quick).then(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../results")))
    });
    if let Some(dir) = out {
        let file = dir.join("evidence.md");
        std::fs::write(&file, md).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(())
}
