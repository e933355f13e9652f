//! Proof for outsiders: what a party without the gate's secrets can check.
//!
//! - [`keys`]: Ed25519 keys in the C2SP signed-note encoding;
//! - [`note`]: signed notes and the transparency log's checkpoints (c2sp.org/tlog-checkpoint);
//! - [`tree`]: the log's RFC 6962 Merkle tree and its proofs;
//! - here: Ed25519 receipt signatures, the documents a log hands out (inclusion and
//!   consistency proofs) and their checks, receipt bundles and the five answers a bundle's
//!   check gives per effect.
//!
//! The journal side (which receipts go into the log, checkpoints, bundles of a period) is
//! `gate::log`.
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::canon::canonical_object;
use crate::types::GateError;

pub mod answers;
pub mod keys;
pub mod note;
pub mod tree;

pub use keys::{Signer, Verifier};
pub use note::Checkpoint;
use tree::Hash;

/// The format names of what the log hands out; a document naming another is refused.
pub const BUNDLE_FORMAT: &str = "interlock-bundle/1";
pub const INCLUSION_FORMAT: &str = "interlock-inclusion-proof/1";
pub const CONSISTENCY_FORMAT: &str = "interlock-consistency-proof/1";
pub const ED25519: &str = "Ed25519";

/// Why a proof call failed (WIT `proof-error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProofError {
    /// A key is not a signed-note Ed25519 key of the kind asked for.
    BadKey(String),
    /// A signature does not verify under the key given.
    BadSignature(String),
    /// A document is not in its format (truncated, not JSON, a member missing or wrong).
    Malformed(String),
    /// A document names a format version this gate does not read.
    UnknownVersion(String),
    /// A proof does not hold: another tree, another size, a forked log.
    ProofFailed(String),
    /// The gate failed (the journal, an unknown effect, bad input).
    Gate(GateError),
}

impl From<GateError> for ProofError {
    fn from(e: GateError) -> Self {
        ProofError::Gate(e)
    }
}

impl From<crate::journal::JournalError> for ProofError {
    fn from(e: crate::journal::JournalError) -> Self {
        ProofError::Gate(e.into())
    }
}

impl core::fmt::Display for ProofError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProofError::BadKey(m) => write!(f, "bad key: {m}"),
            ProofError::BadSignature(m) => write!(f, "bad signature: {m}"),
            ProofError::Malformed(m) => write!(f, "malformed: {m}"),
            ProofError::UnknownVersion(m) => write!(f, "unknown version: {m}"),
            ProofError::ProofFailed(m) => write!(f, "proof failed: {m}"),
            ProofError::Gate(e) => write!(f, "{e}"),
        }
    }
}

fn malformed(m: impl Into<String>) -> ProofError {
    ProofError::Malformed(m.into())
}

/// A JSON document given to a check: at most `MAX_DOCUMENT` bytes, an object.
pub fn document(text: &str, what: &str) -> Result<Map<String, Value>, ProofError> {
    if text.len() > MAX_DOCUMENT {
        return Err(malformed(format!(
            "{what} is larger than {MAX_DOCUMENT} bytes"
        )));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(malformed(format!("{what} is not a JSON object"))),
        Err(e) => Err(malformed(format!("{what} is not JSON (cut short?): {e}"))),
    }
}

/// A bundle of a busy period is large; a check reads at most this much.
pub const MAX_DOCUMENT: usize = 256 << 20;

/// The format member `key` of `doc` must be `want`.
fn format_of(
    doc: &Map<String, Value>,
    key: &str,
    want: &str,
    what: &str,
) -> Result<(), ProofError> {
    match doc.get(key).and_then(Value::as_str) {
        Some(f) if f == want => Ok(()),
        Some(f) => Err(ProofError::UnknownVersion(format!(
            "{what} is {f:?}; this gate reads {want:?}"
        ))),
        None => Err(malformed(format!(
            "{what} has no {key:?} member naming its format"
        ))),
    }
}

/// SHA-256 of the canonical text of `doc` without its `signature` member: what a
/// receipt's or a bundle's signature covers, and (for a receipt) the log's leaf.
pub fn body_hash(doc: &Map<String, Value>) -> Hash {
    Sha256::digest(body_text(doc).as_bytes()).into()
}

fn body_text(doc: &Map<String, Value>) -> String {
    canonical_object(doc, Some("signature"))
}

/// Sign a receipt or a bundle: `signature: {alg: Ed25519, key: <name>+<id>, value:
/// base64}` over the canonical text without `signature`.
pub fn sign_document(mut doc: Map<String, Value>, signer: &Signer) -> Map<String, Value> {
    doc.remove("signature");
    let sig = signer.sign(body_text(&doc).as_bytes());
    doc.insert(
        "signature".into(),
        json!({"alg": ED25519, "key": signer.label(), "value": B64.encode(sig)}),
    );
    doc
}

/// Why a document's Ed25519 signature does not hold under `verifier` (None: it holds).
pub fn signature_problem(doc: &Map<String, Value>, verifier: &Verifier) -> Option<String> {
    let Some(sig) = doc.get("signature").and_then(Value::as_object) else {
        return Some("it carries no signature".into());
    };
    if sig.get("alg").and_then(Value::as_str) != Some(ED25519) {
        return Some(format!(
            "its signature is {}, not Ed25519: check it with the secret it was made with",
            sig.get("alg").map(Value::to_string).unwrap_or_default()
        ));
    }
    let key = sig.get("key").and_then(Value::as_str).unwrap_or("");
    if key != verifier.label() {
        return Some(format!(
            "it is signed by key {key}, not by {} (the key given)",
            verifier.label()
        ));
    }
    let value = sig
        .get("value")
        .and_then(Value::as_str)
        .and_then(|v| B64.decode(v).ok());
    match value {
        Some(v) if verifier.holds(body_text(doc).as_bytes(), &v) => None,
        _ => Some(format!(
            "its Ed25519 signature by {} does not match its content: it was changed after signing",
            verifier.label()
        )),
    }
}

/// A proof's hashes, base64 each, as a list.
fn hashes_json(path: &[Hash]) -> Value {
    Value::Array(path.iter().map(|h| B64.encode(h).into()).collect())
}

fn hashes_of(doc: &Map<String, Value>) -> Result<Vec<Hash>, ProofError> {
    let list = doc
        .get("hashes")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("the proof has no \"hashes\" list"))?;
    if list.len() > 64 {
        return Err(malformed("a proof has at most 64 hashes"));
    }
    list.iter()
        .map(|h| {
            h.as_str()
                .and_then(|s| B64.decode(s).ok())
                .and_then(|b| <Hash>::try_from(b).ok())
                .ok_or_else(|| malformed("each of a proof's hashes is 32 bytes in standard base64"))
        })
        .collect()
}

fn u64_of(doc: &Map<String, Value>, k: &str) -> Result<u64, ProofError> {
    doc.get(k)
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed(format!("the proof has no whole number {k:?}")))
}

fn str_of<'a>(doc: &'a Map<String, Value>, k: &str) -> Result<&'a str, ProofError> {
    doc.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| malformed(format!("the proof has no text {k:?}")))
}

/// An inclusion proof of `receipt` (unsigned) as leaf `index` of the tree a checkpoint
/// signed (`note`).
pub fn inclusion_document(
    receipt: Value,
    index: u64,
    size: u64,
    path: &[Hash],
    note: &str,
) -> Value {
    json!({"proof": INCLUSION_FORMAT, "leaf_index": index, "tree_size": size,
           "hashes": hashes_json(path), "receipt": receipt, "checkpoint": note})
}

/// Check a signed receipt's Ed25519 signature alone (no journal): its effect id when it
/// holds.
pub fn check_receipt_signature(text: &str, verifier: &Verifier) -> Result<String, ProofError> {
    let doc = document(text, "the receipt")?;
    if let Some(why) = signature_problem(&doc, verifier) {
        return Err(ProofError::BadSignature(format!("the receipt: {why}")));
    }
    Ok(doc
        .get("effect_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string())
}

/// What an inclusion proof shows once it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Included {
    pub effect_id: String,
    pub leaf_index: u64,
    pub tree_size: u64,
    pub origin: String,
}

impl Included {
    pub fn to_json(&self) -> Value {
        json!({"effect_id": self.effect_id, "leaf_index": self.leaf_index,
               "tree_size": self.tree_size, "origin": self.origin})
    }
}

/// Check an inclusion proof: its checkpoint signed by `verifier`, and its receipt's hash
/// at `leaf_index` of that tree. `checkpoint` (the auditor's own, when given) replaces the
/// one the proof carries.
pub fn check_inclusion(
    proof: &str,
    checkpoint: Option<&str>,
    verifier: &Verifier,
) -> Result<Included, ProofError> {
    let doc = document(proof, "the inclusion proof")?;
    format_of(&doc, "proof", INCLUSION_FORMAT, "the inclusion proof")?;
    let note = match checkpoint {
        Some(c) => c,
        None => str_of(&doc, "checkpoint")?,
    };
    let c = Checkpoint::open(note, verifier)?;
    let (index, size) = (u64_of(&doc, "leaf_index")?, u64_of(&doc, "tree_size")?);
    if size != c.size {
        return Err(ProofError::ProofFailed(format!(
            "the proof is for a tree of {size} leaves; the checkpoint is of {}: a proof for another tree",
            c.size
        )));
    }
    let receipt = doc
        .get("receipt")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("the inclusion proof has no receipt"))?;
    let leaf = body_hash(receipt);
    tree::check_inclusion(&leaf, index, size, &hashes_of(&doc)?, &c.root)?;
    Ok(Included {
        effect_id: receipt
            .get("effect_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        leaf_index: index,
        tree_size: size,
        origin: c.origin,
    })
}

pub fn consistency_document(old_size: u64, new_size: u64, path: &[Hash], note: &str) -> Value {
    json!({"proof": CONSISTENCY_FORMAT, "old_size": old_size, "new_size": new_size,
           "hashes": hashes_json(path), "checkpoint": note})
}

/// Check a consistency proof: the auditor's old checkpoint and the proof's new one both
/// signed by `verifier`, the old tree a prefix of the new (nothing earlier rewritten).
/// Answers the new checkpoint.
pub fn check_consistency(
    proof: &str,
    old_checkpoint: &str,
    verifier: &Verifier,
) -> Result<Checkpoint, ProofError> {
    let doc = document(proof, "the consistency proof")?;
    format_of(&doc, "proof", CONSISTENCY_FORMAT, "the consistency proof")?;
    let old = Checkpoint::open(old_checkpoint, verifier)?;
    let new = Checkpoint::open(str_of(&doc, "checkpoint")?, verifier)?;
    let (from, to) = (u64_of(&doc, "old_size")?, u64_of(&doc, "new_size")?);
    if (from, to) != (old.size, new.size) {
        return Err(ProofError::ProofFailed(format!(
            "the proof goes from {from} to {to} leaves; the checkpoints are of {} and {}: a proof for other trees",
            old.size, new.size
        )));
    }
    tree::check_consistency(old.size, &old.root, new.size, &new.root, &hashes_of(&doc)?)?;
    Ok(new)
}

/// The questions a bundle answers per effect, in the order of its `answers`.
pub const QUESTIONS: [&str; 5] = [
    "happened_once",
    "authorized_when_fired",
    "premises_held",
    "who_decided",
    "service_confirmed",
];

/// A signed bundle of `receipts` (unsigned bodies) of the period `[from_ms, to_ms)`, with
/// the five answers for each, so a reader sees what the gate concluded and a checker can
/// hold it to the receipts.
pub fn bundle_document(
    receipts: Vec<Value>,
    from_ms: u64,
    to_ms: u64,
    made_at_ms: u64,
    checkpoint: Option<&str>,
    signer: &Signer,
) -> Value {
    let mut b = Map::new();
    b.insert("bundle".into(), BUNDLE_FORMAT.into());
    b.insert("period".into(), json!({"from_ms": from_ms, "to_ms": to_ms}));
    b.insert("made_at_ms".into(), made_at_ms.into());
    b.insert("count".into(), (receipts.len() as u64).into());
    let answers = receipts
        .iter()
        .filter_map(Value::as_object)
        .map(answers::five)
        .collect();
    b.insert("receipts".into(), Value::Array(receipts));
    b.insert("answers".into(), Value::Array(answers));
    if let Some(c) = checkpoint {
        b.insert("checkpoint".into(), c.into());
    }
    Value::Object(sign_document(b, signer))
}

/// Check a bundle (its format, its signature under `verifier`, whole), answer the five
/// questions for each effect in it from its receipt, and hold the bundle's own answers to
/// them: a bundle signed with answers its receipts do not give is refused.
pub fn check_bundle(text: &str, verifier: &Verifier) -> Result<Value, ProofError> {
    let doc = document(text, "the bundle")?;
    format_of(&doc, "bundle", BUNDLE_FORMAT, "the bundle")?;
    if let Some(why) = signature_problem(&doc, verifier) {
        return Err(ProofError::BadSignature(format!("the bundle: {why}")));
    }
    let receipts = doc
        .get("receipts")
        .and_then(Value::as_array)
        .ok_or_else(|| malformed("the bundle has no \"receipts\" list"))?;
    if doc.get("count").and_then(Value::as_u64) != Some(receipts.len() as u64) {
        return Err(malformed("the bundle's count does not match its receipts"));
    }
    let said = doc
        .get("answers")
        .and_then(Value::as_array)
        .filter(|a| a.len() == receipts.len())
        .ok_or_else(|| malformed("the bundle has no \"answers\" list, one per receipt"))?;
    let mut effects = Vec::new();
    for (i, (r, said)) in receipts.iter().zip(said).enumerate() {
        let r = r
            .as_object()
            .ok_or_else(|| malformed(format!("the bundle's receipt {i} is not an object")))?;
        let five = answers::five(r);
        if let Some(q) = ["effect_id", "final", "executed"]
            .into_iter()
            .chain(QUESTIONS)
            .find(|q| said.get(q) != five.get(q))
        {
            return Err(ProofError::ProofFailed(format!(
                "the bundle's answer {q} for effect {} is {}, but its receipt gives {}: the answers were changed",
                five["effect_id"],
                said.get(q).unwrap_or(&Value::Null),
                five[q]
            )));
        }
        effects.push(five);
    }
    Ok(
        json!({"bundle": BUNDLE_FORMAT, "period": doc.get("period").cloned().unwrap_or(Value::Null),
              "signed_by": verifier.label(), "count": receipts.len(), "effects": effects}),
    )
}
