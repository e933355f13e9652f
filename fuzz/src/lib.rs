//! The fuzz harnesses, as a library: the cargo-fuzz targets (fuzz_targets/) call these, and
//! tests/regressions.rs replays every input kept in regressions/ in a plain `cargo test`.
//!
//! The rule under test is invariant 10 of ARCHITECTURE.md: every input problem is a typed
//! error, never a panic (in the component a panic is a trap). So a harness only drives the
//! code and ignores the errors; a panic anywhere is the finding.
use std::path::PathBuf;
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use hmac::{Hmac, Mac};
use interlock_core::{canonical, Ask, Gate, Journal, MemJournal, Reply, Step};
use interlock_file_journal::{Error as FileError, FileJournal};
use serde_json::{json, Map, Value};
use sha2::Sha256;

/// The wall clock the harnesses run at (2027-01-15).
pub const T0_MS: u64 = 1_800_000_000_000;
pub const LEASE: &str = "case-4471";

/// The support case's proposal at a tier: the effect the seed corpus journals hold.
pub fn case_proposal(dedupes: bool, lookup: bool) -> String {
    json!({
        "agent": "refund-agent",
        "target": {"name": "payments", "dedupes": dedupes, "lookup": lookup,
                   "dedupe_window_ms": 86_400_000u64, "timeout_ms": 1000},
        "key": "refund:order_881",
        "effect": {"order": "order_881", "amount_cents": 2000},
        "authority": {"lease": LEASE},
        "premises": {"eligible": true, "refunded_by_others_cents": 0},
        "cap": {"name": "order_881", "limit_cents": 3000, "amount_cents": 2000},
    })
    .to_string()
}

/// How a harness answers the gate's steps.
#[derive(Clone, Copy, Debug, Arbitrary)]
pub enum Replies {
    /// Premises unchanged, the service applies, lookup finds nothing.
    Happy,
    /// The send's fate is unknown; lookup fails.
    Unknown,
    /// A premise changed; lookup finds the refund.
    Changed,
    /// Reads fail; the service rejects.
    Failing,
}

fn reply_to(ask: &Ask, replies: Replies) -> Reply {
    let premises = |others: u64| {
        Reply::Captured(json!({"eligible": true, "refunded_by_others_cents": others}).to_string())
    };
    let refund = || json!({"refund_id": "re_0001", "amount_cents": 2000}).to_string();
    match (ask, replies) {
        (Ask::Capture { .. }, Replies::Changed) => premises(2000),
        (Ask::Capture { .. }, Replies::Failing) => Reply::Failed("read failed".into()),
        (Ask::Capture { .. }, _) => premises(0),
        (Ask::Authorize { .. }, r) => Reply::Allowed(!matches!(r, Replies::Failing)),
        (Ask::Apply { .. }, Replies::Unknown) => Reply::Unknown("timeout".into()),
        (Ask::Apply { .. }, Replies::Failing) => Reply::Rejected("exceeds balance".into()),
        (Ask::Apply { .. }, _) => Reply::Applied(refund()),
        (Ask::Query { .. }, Replies::Changed) => Reply::Found(refund()),
        (Ask::Query { .. }, Replies::Unknown | Replies::Failing) => {
            Reply::Failed("lookup failed".into())
        }
        (Ask::Query { .. }, Replies::Happy) => Reply::NotFound,
        (Ask::Sleep(_), _) => Reply::Slept,
        (Ask::Crash(_), _) => unreachable!("the fuzz targets set no crash point"),
        (Ask::Done(_), _) => unreachable!("a done step is not answered"),
    }
}

/// Drives an operation to its end (or its first error), at most `limit` steps.
fn drive(gate: &mut Gate, j: &mut dyn Journal, now_ms: u64, first: Step, replies: Replies) {
    let mut step = first;
    for _ in 0..32 {
        if let Ask::Done(_) = step.ask {
            return;
        }
        let reply = reply_to(&step.ask, replies);
        match gate.resume(j, now_ms, step.op, reply) {
            Ok(next) => step = next,
            Err(_) => {
                gate.cancel(step.op);
                return;
            }
        }
    }
    panic!("an operation took more than 32 steps");
}

/// Lines of text as stored entries: each goes to the stream it names (as the file
/// backend's index does), or to the support case effect's stream when it names none.
fn journal_of(text: &str, fallback_stream: &str) -> MemJournal {
    let mut j = MemJournal::new();
    for line in text.split('\n').filter(|l| !l.is_empty()) {
        let head: Option<Value> = serde_json::from_str(line).ok();
        let stream = head
            .as_ref()
            .and_then(|v| v.get("stream"))
            .and_then(Value::as_str)
            .unwrap_or(fallback_stream)
            .to_string();
        let open = head
            .as_ref()
            .and_then(|v| v.get("open"))
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let len = j.length(&stream).expect("memory journal");
        j.append(&stream, len, &[line.to_string()], false, open)
            .expect("memory journal");
    }
    j
}

/// Target (a): arbitrary bytes as journal entries, through verify, recover, submit, receipt.
pub fn journal(data: &[u8]) {
    let (replies, text) = match data.split_first() {
        Some((b, rest)) => (
            [
                Replies::Happy,
                Replies::Unknown,
                Replies::Changed,
                Replies::Failing,
            ][usize::from(*b % 4)],
            String::from_utf8_lossy(rest),
        ),
        None => (Replies::Happy, "".into()),
    };
    let dedupes = data.len().is_multiple_of(2);
    let lookup = data.len().is_multiple_of(3);
    let proposal = case_proposal(dedupes, lookup);
    let mut gate = Gate::new();
    let id = gate
        .effect_id_of(&proposal)
        .expect("the case proposal parses");
    let mut j = journal_of(&text, &format!("effect:{id}"));

    let _ = gate.verify(&mut j, &[]);
    let streams = j.streams().expect("memory journal");
    // Each effect stream as a receipt, and that receipt as an anchor.
    let mut anchors = Vec::new();
    for s in &streams {
        if let Some(eid) = s.strip_prefix("effect:") {
            if let Ok(r) = gate.receipt(&mut j, eid, Some(b"key")) {
                let _ = gate.check_receipt(&mut j, &r, b"key");
                anchors.push(r);
            }
        }
    }
    let _ = gate.verify(&mut j, &anchors);
    // Recovery of every open effect, at a time inside and past the claims.
    for now in [T0_MS, T0_MS + 2_000, T0_MS + 90_000_000] {
        if let Ok(open) = gate.open_effects(&mut j) {
            for eid in open {
                if let Ok(first) = gate.recover(&mut j, now, &eid) {
                    drive(&mut gate, &mut j, now, first, replies);
                }
            }
        }
    }
    if let Ok(first) = gate.submit(&mut j, T0_MS + 5_000, &proposal) {
        drive(&mut gate, &mut j, T0_MS + 5_000, first, replies);
    }
    let _ = gate.confirm(&mut j, T0_MS + 6_000, &id, "{\"by\":\"fuzz\"}");
    let _ = gate.receipt(&mut j, &id, None);
}

/// A JSON value built from fuzz input, small and of every shape.
#[derive(Debug)]
pub struct ArbJson(pub Value);

impl<'a> Arbitrary<'a> for ArbJson {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        fn value(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Value> {
            let kinds = if depth >= 3 { 6 } else { 8 };
            Ok(match u.int_in_range(0..=kinds - 1)? {
                0 => Value::Null,
                1 => Value::Bool(u.arbitrary()?),
                2 => Value::from(u.arbitrary::<u64>()?),
                3 => Value::from(u.arbitrary::<i64>()?),
                4 => {
                    serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number)
                }
                5 => Value::String(u.arbitrary()?),
                6 => {
                    let n = u.int_in_range(0..=4)?;
                    Value::Array(
                        (0..n)
                            .map(|_| value(u, depth + 1))
                            .collect::<Result<_, _>>()?,
                    )
                }
                _ => {
                    let n = u.int_in_range(0..=4)?;
                    let mut m = Map::new();
                    for _ in 0..n {
                        m.insert(u.arbitrary()?, value(u, depth + 1)?);
                    }
                    Value::Object(m)
                }
            })
        }
        Ok(ArbJson(value(u, 0)?))
    }
}

/// Where a field of a template is replaced (a JSON pointer into the template).
const PROPOSAL_FIELDS: &[&str] = &[
    "",
    "/agent",
    "/target",
    "/target/name",
    "/target/dedupes",
    "/target/lookup",
    "/target/dedupe_window_ms",
    "/target/timeout_ms",
    "/key",
    "/effect",
    "/effect/amount_cents",
    "/authority",
    "/authority/lease",
    "/authority/approval",
    "/authority/host_check",
    "/premises",
    "/premises/eligible",
    "/bounds",
    "/bounds/refunded_by_others_cents",
    "/bounds/refunded_by_others_cents/at_most",
    "/cap",
    "/cap/limit_cents",
    "/cap/amount_cents",
    "/cap/name",
    "/extra",
];

const APPROVAL_FIELDS: &[&str] = &[
    "",
    "/approval",
    "/approver",
    "/request",
    "/request/key",
    "/request/effect",
    "/premises_seen",
    "/expires_at_ms",
    "/extra",
];

fn proposal_template() -> Value {
    let mut v: Value = serde_json::from_str(&case_proposal(true, true)).expect("json");
    v["bounds"] = json!({"refunded_by_others_cents": {"at_most": 1000}});
    v
}

fn approval_template() -> Value {
    json!({"approval": "apr-7", "approver": "manager@shop",
           "request": {"key": "refund:order_881", "effect": {"order": "order_881", "amount_cents": 2000}},
           "premises_seen": {"eligible": true}, "expires_at_ms": T0_MS + 3_600_000})
}

/// Sets (or removes, with `None`) the member at `pointer`, creating nothing on the way.
fn set_at(mut v: Value, pointer: &str, to: Option<Value>) -> Value {
    if pointer.is_empty() {
        return to.unwrap_or(Value::Null);
    }
    let (parent, last) = pointer.rsplit_once('/').expect("a pointer");
    if let Some(Value::Object(m)) = v.pointer_mut(parent) {
        match to {
            Some(x) => {
                m.insert(last.to_string(), x);
            }
            None => {
                m.remove(last);
            }
        }
    }
    v
}

/// Text for a JSON input: raw fuzz text, or a template with one field changed or removed.
#[derive(Debug, Arbitrary)]
pub enum Input {
    Raw(String),
    Edit {
        field: u8,
        value: Option<ArbJson>,
    },
    /// A second edit on top of a first (two fields wrong at once).
    Edit2 {
        a: u8,
        va: Option<ArbJson>,
        b: u8,
        vb: Option<ArbJson>,
    },
}

impl Input {
    fn text(self, template: fn() -> Value, fields: &[&str]) -> String {
        let pick = |i: u8| fields[usize::from(i) % fields.len()];
        match self {
            Input::Raw(s) => s,
            Input::Edit { field, value } => {
                set_at(template(), pick(field), value.map(|v| v.0)).to_string()
            }
            Input::Edit2 { a, va, b, vb } => {
                let v = set_at(template(), pick(a), va.map(|v| v.0));
                set_at(v, pick(b), vb.map(|v| v.0)).to_string()
            }
        }
    }
}

#[derive(Debug, Arbitrary)]
pub enum ArbReply {
    Captured(Input),
    Allowed(bool),
    Applied(Input),
    Rejected(String),
    Unknown(String),
    Found(Input),
    NotFound,
    Failed(String),
}

fn premises_template() -> Value {
    json!({"eligible": true, "refunded_by_others_cents": 0})
}

const PREMISE_FIELDS: &[&str] = &["", "/eligible", "/refunded_by_others_cents", "/other"];

impl ArbReply {
    fn reply(self) -> Reply {
        match self {
            ArbReply::Captured(i) => Reply::Captured(i.text(premises_template, PREMISE_FIELDS)),
            ArbReply::Allowed(b) => Reply::Allowed(b),
            ArbReply::Applied(i) => Reply::Applied(i.text(premises_template, PREMISE_FIELDS)),
            ArbReply::Rejected(s) => Reply::Rejected(s),
            ArbReply::Unknown(s) => Reply::Unknown(s),
            ArbReply::Found(i) => Reply::Found(i.text(premises_template, PREMISE_FIELDS)),
            ArbReply::NotFound => Reply::NotFound,
            ArbReply::Failed(s) => Reply::Failed(s),
        }
    }
}

/// One call into the gate.
#[derive(Debug, Arbitrary)]
pub enum Call {
    Submit(Input),
    EffectIdOf(Input),
    Approve(Input),
    /// Answer an operation in progress (by index among them) or any op number.
    Resume {
        op: u8,
        reply: ArbReply,
    },
    /// Answer the latest operation's step as the happy path would.
    Happy,
    Recover(String),
    RecoverSeed,
    Confirm {
        effect: String,
        evidence: Input,
    },
    Receipt(String),
    /// A receipt of the case effect with one field changed, signed with the key, so the
    /// checks behind the signature are reached.
    CheckReceipt {
        field: u8,
        value: Option<ArbJson>,
        sign: bool,
    },
    CheckReceiptRaw(String),
    Verify(Vec<String>),
    GrantLease {
        lease: String,
        until_ms: u64,
    },
    RevokeLease(String),
    RevokeApproval(String),
    Cancel(u64),
    /// Let time pass.
    Wait(u32),
}

const RECEIPT_FIELDS: &[&str] = &[
    "",
    "/head",
    "/head/length",
    "/head/hash",
    "/stream",
    "/entries",
    "/final",
    "/effect_id",
    "/signature",
    "/signature/value",
];

fn hmac_hex(key: &[u8], body: &Value) -> String {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    m.update(canonical(body).as_bytes());
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Target (b): a sequence of calls with arbitrary inputs and replies on one gate.
pub fn proposal(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut gate = Gate::new();
    let mut j = MemJournal::new();
    let mut now = T0_MS;
    gate.grant_lease(&mut j, now, LEASE, now + 3_600_000)
        .expect("the case lease");
    let case = case_proposal(true, true);
    let case_id = gate.effect_id_of(&case).expect("the case proposal parses");
    let key = b"receipt-key";
    let mut ops: Vec<Step> = Vec::new();
    for _ in 0..24 {
        let Ok(call) = Call::arbitrary(&mut u) else {
            break;
        };
        match call {
            Call::Submit(i) => {
                if let Ok(s) = gate.submit(&mut j, now, &i.text(proposal_template, PROPOSAL_FIELDS))
                {
                    ops.push(s);
                }
            }
            Call::EffectIdOf(i) => {
                let _ = gate.effect_id_of(&i.text(proposal_template, PROPOSAL_FIELDS));
            }
            Call::Approve(i) => {
                let _ = gate.approve(&mut j, now, &i.text(approval_template, APPROVAL_FIELDS));
            }
            Call::Resume { op, reply } => {
                let op = if ops.is_empty() {
                    u64::from(op)
                } else {
                    ops[usize::from(op) % ops.len()].op
                };
                if let Ok(s) = gate.resume(&mut j, now, op, reply.reply()) {
                    ops.push(s);
                }
            }
            Call::Happy => {
                if let Some(s) = ops.pop() {
                    if !matches!(s.ask, Ask::Done(_)) {
                        if let Ok(next) =
                            gate.resume(&mut j, now, s.op, reply_to(&s.ask, Replies::Happy))
                        {
                            ops.push(next);
                        }
                    }
                }
            }
            Call::Recover(id) => {
                if let Ok(s) = gate.recover(&mut j, now, &id) {
                    ops.push(s);
                }
            }
            Call::RecoverSeed => {
                if let Ok(s) = gate.recover(&mut j, now, &case_id) {
                    ops.push(s);
                }
            }
            Call::Confirm { effect, evidence } => {
                let ev = evidence.text(premises_template, PREMISE_FIELDS);
                let _ = gate.confirm(&mut j, now, &effect, &ev);
                let _ = gate.confirm(&mut j, now, &case_id, &ev);
            }
            Call::Receipt(id) => {
                let _ = gate.receipt(&mut j, &id, Some(key));
            }
            Call::CheckReceipt { field, value, sign } => {
                let base = gate
                    .receipt(&mut j, &case_id, None)
                    .ok()
                    .and_then(|r| serde_json::from_str::<Value>(&r).ok())
                    .unwrap_or_else(|| json!({"stream": format!("effect:{case_id}")}));
                let f = RECEIPT_FIELDS[usize::from(field) % RECEIPT_FIELDS.len()];
                let mut body = set_at(base, f, value.map(|v| v.0));
                if sign {
                    if let Value::Object(m) = &mut body {
                        m.remove("signature");
                        let sig = hmac_hex(key, &Value::Object(m.clone()));
                        m.insert(
                            "signature".into(),
                            json!({"alg": "HMAC-SHA256", "value": sig}),
                        );
                    }
                }
                let text = body.to_string();
                let _ = gate.check_receipt(&mut j, &text, key);
                let _ = gate.verify(&mut j, &[text]);
            }
            Call::CheckReceiptRaw(text) => {
                let _ = gate.check_receipt(&mut j, &text, key);
            }
            Call::Verify(anchors) => {
                let _ = gate.verify(&mut j, &anchors);
            }
            Call::GrantLease { lease, until_ms } => {
                let _ = gate.grant_lease(&mut j, now, &lease, until_ms);
            }
            Call::RevokeLease(lease) => {
                let _ = gate.revoke_lease(&mut j, now, &lease);
                let _ = gate.revoke_lease(&mut j, now, LEASE);
            }
            Call::RevokeApproval(a) => {
                let _ = gate.revoke_approval(&mut j, now, &a);
            }
            Call::Cancel(op) => gate.cancel(op),
            Call::Wait(ms) => now = now.saturating_add(u64::from(ms)),
        }
    }
    let _ = gate.verify(&mut j, &[]);
}

fn scratch_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("interlock-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    })
}

/// Target (c): arbitrary bytes as journal.jsonl, through FileJournal::open, its reads, an
/// append, and repair. The adapter must answer with its typed errors, and after a repair
/// a journal is never torn.
pub fn file_journal(data: &[u8]) {
    let dir = scratch_dir();
    for e in std::fs::read_dir(dir).expect("scratch dir").flatten() {
        let _ = std::fs::remove_file(e.path());
    }
    std::fs::write(dir.join("journal.jsonl"), data).expect("write journal.jsonl");
    let journal = match FileJournal::open(dir) {
        Ok(j) => Some(j),
        Err(FileError::TornTail { .. }) => {
            FileJournal::repair(dir).expect("repair a torn journal");
            match FileJournal::open(dir) {
                Ok(j) => Some(j),
                Err(FileError::TornTail { .. }) => panic!("still torn after repair"),
                Err(_) => None,
            }
        }
        Err(FileError::Corrupt { .. }) => None,
        Err(e) => panic!("unexpected error opening a journal: {e}"),
    };
    let Some(mut j) = journal else {
        return;
    };
    for s in j.streams() {
        let n = j.length(&s);
        let entries = j.read(&s, 0).expect("read an indexed stream");
        assert_eq!(
            entries.len() as u64,
            n,
            "stream {s}: length and read disagree"
        );
        let _ = j.read(&s, n / 2);
    }
    let _ = j.open_streams();
    // An append after whatever was there, then a reopen: the file must still be whole.
    let stream = "effect:fuzz";
    let len = j.length(stream);
    let entry =
        json!({"stream": stream, "seq": len, "open": true, "state": "PROPOSED"}).to_string();
    j.append(stream, len, &[entry], true, true)
        .expect("append to a journal that opened");
    drop(j);
    let j = FileJournal::open(dir).expect("reopen after an append");
    assert_eq!(j.length(stream), len + 1);
}
