//! Proof for outsiders, on the journal: Ed25519-signed receipts and their check, the
//! transparency log of receipts (stream `log:receipts`) with its signed checkpoints and
//! proofs, and bundles of a period's receipts.
//!
//! **Where the log lives.** In the journal, as one more stream, appended only when asked
//! (`checkpoint`): the receipt of every effect closed since (or closed again: a CONFIRMED
//! after a COMMITTED) becomes a `LOGGED` entry (its SHA-256, the leaf, and the streams it
//! pins with their heads), in the journal's stream order, and a `CHECKPOINT` entry carries
//! the signed checkpoint of the tree so far, all in one durable append. Closing an effect
//! writes nothing more, so the send path keeps its one fsync and every vector's journal
//! bytes stay as they were; a server calls `checkpoint` on a schedule.
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Map, Value};

use super::receipts::{pinned_heads, pins_of, receipt_from, Pins};
use super::streams::Plan;
use super::Gate;
use crate::canon::canonical;
use crate::entry::{Spelled, Stream};
use crate::journal::Journal;
use crate::proof::tree::{Hash, Tree};
use crate::proof::{self, note, Checkpoint, ProofError, Signer, Verifier};
use crate::receipt::{Problem, ProblemKind, Streams, VerifyReport};
use crate::types::GateError;

pub(crate) const LOG_STREAM: &str = "log:receipts";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LogMark {
    /// A receipt's hash appended to the tree as its next leaf.
    Logged,
    /// The tree's size and root, signed (a C2SP checkpoint note).
    Checkpoint,
}

impl Spelled for LogMark {
    fn spelling(self) -> &'static str {
        match self {
            LogMark::Logged => "LOGGED",
            LogMark::Checkpoint => "CHECKPOINT",
        }
    }
}

/// One leaf of the log, as its `LOGGED` entry records it.
#[derive(Clone, Debug)]
struct Leaf {
    seq: u64,
    effect_id: String,
    receipt: Hash,
    /// The entry itself, shared with the stream: `pins` is read from it, never copied.
    entry: Arc<Map<String, Value>>,
}

impl Leaf {
    /// `{stream, head}` of every stream the receipt pins.
    fn pins(&self) -> &[Value] {
        self.entry
            .get("pins")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
}

#[derive(Clone, Debug)]
struct Signed {
    seq: u64,
    size: u64,
    root: Hash,
    note: String,
}

#[derive(Clone, Debug, Default)]
struct LogView {
    leaves: Vec<Leaf>,
    checkpoints: Vec<Signed>,
    /// Per effect logged: its latest leaf and the length of its own stream that leaf pins.
    logged: BTreeMap<String, (usize, u64)>,
}

impl LogView {
    fn checkpoint_of(&self, size: u64) -> Option<&Signed> {
        self.checkpoints.iter().rev().find(|c| c.size == size)
    }

    /// The latest leaf of `effect_id` among the first `size` leaves.
    fn leaf_of(&self, effect_id: &str, size: u64) -> Option<(usize, &Leaf)> {
        match self.logged.get(effect_id) {
            Some(&(i, _)) if (i as u64) < size => Some((i, &self.leaves[i])),
            None => None,
            Some(_) => self
                .leaves
                .iter()
                .enumerate()
                .take(size as usize)
                .rev()
                .find(|(_, l)| l.effect_id == effect_id),
        }
    }
}

impl KeptLog {
    /// `proof` of the tree of the first `size` leaves: the kept tree itself when that is
    /// its size (the latest checkpoint's), else its prefix rebuilt.
    fn path_in(
        &self,
        size: u64,
        proof: impl Fn(&Tree) -> Result<Vec<Hash>, ProofError>,
    ) -> Result<Vec<Hash>, ProofError> {
        if size == self.tree.len() {
            proof(&self.tree)
        } else {
            proof(&self.tree.prefix(size))
        }
    }
}

/// The log as a gate instance last read it, kept between calls: the view of its first
/// `entries` entries (the last of them hashed `head`) and the tree of their leaves.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeptLog {
    entries: u64,
    head: String,
    view: LogView,
    tree: Tree,
}

fn hash32(text: Option<&str>, hex_form: bool) -> Option<Hash> {
    let bytes = if hex_form {
        hex::decode(text?).ok()?
    } else {
        B64.decode(text?).ok()?
    };
    bytes.try_into().ok()
}

fn pins_map(pins: &[Value]) -> Pins {
    pins_of(&json!({"anchors": pins}))
}

/// The log stream read into leaves and checkpoints; an entry that does not read is the
/// problem at its place.
fn read_log(s: &Stream) -> Result<LogView, Problem> {
    let mut view = LogView::default();
    extend_log(&mut view, s, 0)?;
    Ok(view)
}

/// `view` (of the log's first `from` entries) extended by the rest of `s`.
fn extend_log(view: &mut LogView, s: &Stream, from: u64) -> Result<(), Problem> {
    for (seq, e) in s.entries.iter().enumerate().skip(from as usize) {
        let seq = seq as u64;
        let bad = |detail: &str| Problem {
            stream: LOG_STREAM.into(),
            seq,
            kind: ProblemKind::Unparsable,
            detail: detail.into(),
        };
        match Stream::spelling_of(e) {
            "LOGGED" => {
                let (Some(effect_id), Some(receipt), Some(_)) = (
                    e.get("effect_id").and_then(Value::as_str),
                    hash32(e.get("receipt_sha256").and_then(Value::as_str), true),
                    e.get("pins").and_then(Value::as_array),
                ) else {
                    return Err(bad("a LOGGED entry has effect_id, receipt_sha256 and pins"));
                };
                if e.get("index").and_then(Value::as_u64) != Some(view.leaves.len() as u64) {
                    return Err(Problem {
                        kind: ProblemKind::BadSeq,
                        ..bad("a LOGGED entry's index is not its place among the leaves")
                    });
                }
                let leaf = Leaf {
                    seq,
                    effect_id: effect_id.into(),
                    receipt,
                    entry: e.clone(),
                };
                let own = crate::authority::effect_stream(effect_id);
                let len = leaf
                    .pins()
                    .iter()
                    .find(|p| p.get("stream").and_then(Value::as_str) == Some(own.as_str()))
                    .and_then(|p| p.pointer("/head/length"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                view.logged
                    .insert(effect_id.into(), (view.leaves.len(), len));
                view.leaves.push(leaf);
            }
            "CHECKPOINT" => {
                let (Some(size), Some(root), Some(note)) = (
                    e.get("tree_size").and_then(Value::as_u64),
                    hash32(e.get("root_hash").and_then(Value::as_str), false),
                    e.get("note").and_then(Value::as_str),
                ) else {
                    return Err(bad("a CHECKPOINT entry has tree_size, root_hash and note"));
                };
                view.checkpoints.push(Signed {
                    seq,
                    size,
                    root,
                    note: note.into(),
                });
            }
            _ => return Err(bad("a log entry is LOGGED or CHECKPOINT")),
        }
    }
    Ok(())
}

fn corrupt(p: Problem) -> GateError {
    GateError::CorruptJournal(format!("{} entry {}: {}", p.stream, p.seq, p.detail))
}

impl Gate {
    /// The log at `s` (its stream as stored, verified): the kept view and tree extended by
    /// the entries appended since, or read anew when `s` is not the stream kept (another
    /// worker's rewrite, a repair).
    fn log_at(&mut self, s: &Stream) -> Result<&KeptLog, GateError> {
        let kept = self.log.take().filter(|k| {
            k.entries <= s.len()
                && (k.entries == 0
                    || s.entries[k.entries as usize - 1]
                        .get("hash")
                        .and_then(Value::as_str)
                        == Some(k.head.as_str()))
        });
        let mut k = kept.unwrap_or_default();
        extend_log(&mut k.view, s, k.entries).map_err(corrupt)?;
        for l in &k.view.leaves[k.tree.len() as usize..] {
            k.tree.push(l.receipt);
        }
        k.entries = s.len();
        k.head.clone_from(&s.head);
        Ok(self.log.insert(k))
    }

    /// The log as stored now, verified.
    fn log_now(&mut self, j: &mut dyn Journal) -> Result<&KeptLog, GateError> {
        let s = self.load(j, LOG_STREAM)?;
        self.log_at(&s)
    }

    /// An Ed25519-signed receipt: anyone with the public key checks it.
    pub fn signed_receipt(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
        signer: &Signer,
    ) -> Result<String, ProofError> {
        let Value::Object(r) = self.receipt_now(j, effect_id)? else {
            unreachable!("a receipt is an object")
        };
        Ok(canonical(&Value::Object(proof::sign_document(r, signer))))
    }

    /// Check an Ed25519-signed receipt with the public key, and against the journal.
    pub fn check_signed_receipt(
        &mut self,
        j: &mut dyn Journal,
        receipt_text: &str,
        verifier: &Verifier,
    ) -> Result<VerifyReport, ProofError> {
        let doc = proof::document(receipt_text, "the receipt")?;
        let r = Value::Object(doc.clone());
        let mut report = self.check_against_journal(j, &r)?;
        if let Some(why) = proof::signature_problem(&doc, verifier) {
            report.problems.push(Problem {
                stream: doc
                    .get("stream")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                seq: 0,
                kind: ProblemKind::HashMismatch,
                detail: format!("the receipt's signature: {why}"),
            });
        }
        Ok(report)
    }

    /// Append to the log the receipts of every effect closed since the last checkpoint,
    /// in journal order, and sign a checkpoint of the tree (durable on return). With
    /// nothing new and the latest checkpoint signed by this key, writes nothing.
    /// Answers `{"checkpoint", "tree_size", "appended"}`.
    pub fn checkpoint(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        signer: &Signer,
    ) -> Result<Value, ProofError> {
        // The receipts pin what is durable only.
        j.sync()?;
        let verifier = signer.verifier();
        let (answer, s) = self.compare_and_append(
            j,
            LOG_STREAM,
            now_ms,
            true,
            |gate, j, s| {
                let kept = gate.log_at(s)?;
                let view = &kept.view;
                // The tree grows only once the batch is in: extended on a copy.
                let mut tree = kept.tree.clone();
                let mut batch = Vec::new();
                // What closed since: every effect stream longer than its latest leaf pins
                // and closed. The journal has no feed of what changed since a position,
                // and a closed effect can be closed again (a CONFIRMED after a COMMITTED),
                // so each effect stream's length is asked (ARCHITECTURE.md, "Proof for
                // outsiders"); only a stream that grew is read, its last entry only.
                for name in j.streams()? {
                    let Some(id) = name.strip_prefix("effect:") else {
                        continue;
                    };
                    let len = j.length(&name)?;
                    if len <= view.logged.get(id).map_or(0, |l| l.1) {
                        continue;
                    }
                    let last = j.read(&name, len - 1)?;
                    let open = last
                        .first()
                        .and_then(|l| serde_json::from_str::<Value>(l).ok())
                        .and_then(|e| e.get("open").and_then(Value::as_bool));
                    if open != Some(false) {
                        continue;
                    }
                    let Some((r, _)) = receipt_from(j, id, None, None)? else {
                        continue;
                    };
                    let leaf = proof::body_hash(r.as_object().expect("a receipt is an object"));
                    let heads = pinned_heads(&r);
                    batch.push((
                        LogMark::Logged,
                        crate::fields!("effect_id" => id, "index" => tree.len(), "receipt_sha256" => hex::encode(leaf), "pins" => Value::Array(heads)),
                    ));
                    tree.push(leaf);
                }
                let size = tree.len();
                if batch.is_empty() {
                    if let Some(c) = view.checkpoints.last().filter(|c| {
                        c.size == size && note::open(&c.note, &verifier).is_ok()
                    }) {
                        let answer = json!({"checkpoint": c.note, "tree_size": size, "appended": 0});
                        return Ok(Plan::Done(answer));
                    }
                }
                let text = Checkpoint {
                    origin: signer.name.clone(),
                    size,
                    root: tree.root(),
                }
                .text();
                let signed = note::sign(&text, signer).expect("a checkpoint's text is a note's");
                let appended = batch.len();
                batch.push((
                    LogMark::Checkpoint,
                    crate::fields!("tree_size" => size, "root_hash" => B64.encode(tree.root()), "note" => signed.clone()),
                ));
                Ok(Plan::Append(
                    batch,
                    json!({"checkpoint": signed, "tree_size": size, "appended": appended}),
                ))
            },
            || "another worker kept appending to the log".into(),
        )?;
        self.remember(&s);
        Ok(answer)
    }

    /// The latest signed checkpoint (none before the first `checkpoint`).
    pub fn latest_checkpoint(&mut self, j: &mut dyn Journal) -> Result<Option<String>, ProofError> {
        Ok(self
            .log_now(j)?
            .view
            .checkpoints
            .last()
            .map(|c| c.note.clone()))
    }

    /// The size of the tree to prove against: `size`, or the latest checkpoint's; a
    /// checkpoint of that size must have been signed.
    fn signed_at(view: &LogView, size: Option<u64>) -> Result<Signed, ProofError> {
        let last = view.checkpoints.last().ok_or_else(|| {
            ProofError::ProofFailed("the log has no checkpoint yet: run checkpoint first".into())
        })?;
        let size = size.unwrap_or(last.size);
        view.checkpoint_of(size).cloned().ok_or_else(|| {
            let sizes: Vec<String> = view
                .checkpoints
                .iter()
                .map(|c| c.size.to_string())
                .collect();
            ProofError::ProofFailed(format!(
                "no checkpoint of {size} leaves was signed (signed: {})",
                sizes.join(", ")
            ))
        })
    }

    /// The inclusion proof of `effect_id`'s latest logged receipt in the tree of `size`
    /// leaves (none: the latest checkpoint's), with that receipt and checkpoint.
    pub fn prove_inclusion(
        &mut self,
        j: &mut dyn Journal,
        effect_id: &str,
        size: Option<u64>,
    ) -> Result<String, ProofError> {
        crate::proposal::check_effect_id(effect_id)?;
        let kept = self.log_now(j)?;
        let signed = Gate::signed_at(&kept.view, size)?;
        let (index, leaf) = kept
            .view
            .leaf_of(effect_id, signed.size)
            .ok_or_else(|| {
                ProofError::ProofFailed(format!(
                    "effect {effect_id} is not in the log's first {} leaves (run checkpoint after it closes)",
                    signed.size
                ))
            })?;
        let leaf = leaf.clone();
        let path = kept.path_in(signed.size, |t| t.inclusion(index as u64))?;
        let rebuilt = receipt_from(j, effect_id, Some(&pins_map(leaf.pins())), None)?;
        let receipt = rebuilt
            .map(|(r, _)| r)
            .filter(|r| proof::body_hash(r.as_object().expect("an object")) == leaf.receipt)
            .ok_or_else(|| {
                GateError::CorruptJournal(format!(
                    "{LOG_STREAM} entry {}: the receipt of {effect_id} no longer rebuilds to its leaf: a stream under it changed",
                    leaf.seq
                ))
            })?;
        Ok(canonical(&proof::inclusion_document(
            receipt,
            index as u64,
            signed.size,
            &path,
            &signed.note,
        )))
    }

    /// The consistency proof from the tree of `old_size` leaves to that of `new_size`
    /// (none: the latest checkpoint's), with the new checkpoint.
    pub fn prove_consistency(
        &mut self,
        j: &mut dyn Journal,
        old_size: u64,
        new_size: Option<u64>,
    ) -> Result<String, ProofError> {
        let kept = self.log_now(j)?;
        let signed = Gate::signed_at(&kept.view, new_size)?;
        if old_size > signed.size {
            return Err(ProofError::ProofFailed(format!(
                "a tree of {old_size} leaves is larger than the checkpoint's {}: a checkpoint of another log?",
                signed.size
            )));
        }
        let path = kept.path_in(signed.size, |t| t.consistency(old_size))?;
        Ok(canonical(&proof::consistency_document(
            old_size,
            signed.size,
            &path,
            &signed.note,
        )))
    }

    /// A signed bundle of the receipts of every effect proposed in `[from_ms, to_ms)`.
    pub fn bundle(
        &mut self,
        j: &mut dyn Journal,
        now_ms: u64,
        from_ms: u64,
        to_ms: u64,
        signer: &Signer,
    ) -> Result<String, ProofError> {
        if from_ms > to_ms {
            return Err(ProofError::Gate(GateError::InvalidField {
                field: "/from_ms".into(),
                problem: "the period starts after it ends".into(),
            }));
        }
        j.sync()?;
        let mut receipts = Vec::new();
        for name in j.streams()? {
            let Some(id) = name.strip_prefix("effect:") else {
                continue;
            };
            let first = j.read(&name, 0)?;
            let at = first
                .first()
                .and_then(|l| serde_json::from_str::<Value>(l).ok())
                .and_then(|e| e.get("at_ms").and_then(Value::as_u64));
            if !at.is_some_and(|at| (from_ms..to_ms).contains(&at)) {
                continue;
            }
            if let Some((r, _)) = self.receipt_at(j, id, None)? {
                receipts.push(r);
            }
        }
        let checkpoint = self.latest_checkpoint(j)?;
        Ok(canonical(&proof::bundle_document(
            receipts,
            from_ms,
            to_ms,
            now_ms,
            checkpoint.as_deref(),
            signer,
        )))
    }

    /// `verify`'s part for the log: every leaf's receipt rebuilds to its hash, every
    /// checkpoint is the tree of the leaves before it, and each checkpoint an auditor holds
    /// (`{"checkpoint": note}` among the anchors) is a prefix of the journal's log.
    pub(super) fn verify_log(
        &mut self,
        j: &mut dyn Journal,
        read: &Streams,
        held: &[Value],
        report: &mut VerifyReport,
    ) -> Result<(), GateError> {
        if report.problems.iter().any(|p| p.stream == LOG_STREAM) {
            return Ok(());
        }
        let empty = Stream::empty(LOG_STREAM);
        let s = match read.result(LOG_STREAM) {
            Some(Err(_)) => return Ok(()),
            Some(Ok(s)) => s,
            None => &empty,
        };
        let view = match read_log(s) {
            Ok(v) => v,
            Err(p) => {
                report.problems.push(p);
                return Ok(());
            }
        };
        let problem = |seq, kind, detail: String| Problem {
            stream: LOG_STREAM.into(),
            seq,
            kind,
            detail,
        };
        let mut tree = Tree::new();
        let mut leaves = view.leaves.iter().peekable();
        for c in &view.checkpoints {
            while let Some(l) = leaves.next_if(|l| l.seq < c.seq) {
                tree.push(l.receipt);
            }
            if c.size != tree.len() || c.root != tree.root() {
                report.problems.push(problem(
                    c.seq,
                    ProblemKind::HashMismatch,
                    format!(
                        "the checkpoint says {} leaves with another root than the {} leaves before it",
                        c.size,
                        tree.len()
                    ),
                ));
            }
        }
        for l in leaves {
            tree.push(l.receipt);
        }
        for l in &view.leaves {
            let pins = pins_map(l.pins());
            if report.problems.iter().any(|p| pins.contains_key(&p.stream)) {
                continue;
            }
            let held = match receipt_from(j, &l.effect_id, Some(&pins), Some(read)) {
                Ok(Some((r, _))) => {
                    proof::body_hash(r.as_object().expect("an object")) == l.receipt
                }
                Ok(None) | Err(GateError::CorruptJournal(_)) => false,
                Err(e) => return Err(e),
            };
            if !held {
                report.problems.push(problem(
                    l.seq,
                    ProblemKind::HashMismatch,
                    format!(
                        "leaf {} (effect {}): the journal under it no longer gives the receipt it logged",
                        l.seq, l.effect_id
                    ),
                ));
            }
        }
        for h in held {
            let Some(c) = h
                .get("checkpoint")
                .and_then(Value::as_str)
                .and_then(|n| Checkpoint::unsigned(n).ok())
            else {
                report.problems.push(problem(
                    0,
                    ProblemKind::Unparsable,
                    "a checkpoint given to verify is not a checkpoint note".into(),
                ));
                continue;
            };
            // Every checkpoint the gate signed is in the log: the one held must be there,
            // with its root.
            match view.checkpoint_of(c.size) {
                Some(signed) if signed.root == c.root => {}
                Some(signed) => report.problems.push(problem(
                    signed.seq,
                    ProblemKind::HashMismatch,
                    format!(
                        "the log's checkpoint of {} leaves has another root than the one held: the log was rewritten",
                        c.size
                    ),
                )),
                None if c.size <= tree.len() && tree.prefix(c.size).root() != c.root => {
                    report.problems.push(problem(
                        0,
                        ProblemKind::HashMismatch,
                        format!(
                            "the log's first {} leaves are not those of the checkpoint held: the log was rewritten",
                            c.size
                        ),
                    ))
                }
                None => report.problems.push(problem(
                    s.len(),
                    ProblemKind::Truncated,
                    format!(
                        "the checkpoint held ({} leaves) is not in the journal's log ({} leaves): its tail was cut",
                        c.size,
                        tree.len()
                    ),
                )),
            }
        }
        Ok(())
    }
}

/// The `{stream, head}` of every stream the log's leaves pin (the log as `verify` read it):
/// anchors for `verify`.
pub(super) fn log_pins(read: &Streams) -> Vec<Value> {
    read.get(LOG_STREAM)
        .and_then(|s| read_log(s).ok())
        .map(|v| v.leaves.iter().flat_map(|l| l.pins().to_vec()).collect())
        .unwrap_or_default()
}
