//! Journal entries and their hash chain.
//!
//! An entry is one canonical JSON object: `stream`, `seq` (its position), `open` (whether
//! the stream is open after it), `state`, `at_ms`, `prev` (the hash of the entry before it,
//! or 64 zeros) and `hash` (SHA-256 over the canonical entry without `hash`), plus the
//! fields of its state. Editing an entry breaks its own hash; dropping, duplicating or
//! reordering breaks `seq` and `prev`; a receipt's head pins the end against truncation.
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::{Map, Value};

use crate::authority::Mark;
use crate::canon::{canonical_without, is_with_member, sha256_hex, with_member};
use alloc::sync::Arc;

use crate::journal::{Journal, JournalError};
use crate::receipt::{Problem, ProblemKind};
use crate::types::{GateError, State};

pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// A stream as read from the journal, checked link by link.
#[derive(Clone, Debug)]
pub struct Stream {
    pub name: String,
    /// Shared, never copied: a stream the gate keeps and the one it hands out share them.
    pub entries: Vec<Arc<Map<String, Value>>>,
    pub head: String,
}

/// What an entry's `state` field can hold: an effect's [`State`], or the [`Mark`] of a
/// lease, approval or cap entry. Spelled out only where an entry is written.
pub trait Spelled: Copy {
    fn spelling(self) -> &'static str;
}

impl Spelled for State {
    fn spelling(self) -> &'static str {
        self.as_str()
    }
}

/// An entry's fields (all but `hash`) sealed: its hash, and its stored line (its canonical
/// text with `hash`), from one pass of the canonical writer and one SHA-256.
fn seal(obj: &Map<String, Value>) -> (String, String) {
    let (without, at) = canonical_without(obj, "hash");
    let hash = sha256_hex(without.as_bytes());
    let line = with_member(&without, at, "hash", &Value::String(hash.clone()));
    (hash, line)
}

impl Stream {
    pub fn empty(name: &str) -> Stream {
        Stream {
            name: name.to_string(),
            entries: Vec::new(),
            head: GENESIS.to_string(),
        }
    }

    /// Parse and verify stored entries; the first broken link is reported with its place.
    pub fn parse(name: &str, lines: &[String]) -> Result<Stream, Problem> {
        let mut s = Stream::empty(name);
        for line in lines {
            s.push_stored(line)?;
        }
        Ok(s)
    }

    /// Verify one stored entry as the next link of this stream and keep it.
    fn push_stored(&mut self, line: &str) -> Result<(), Problem> {
        let name = self.name.as_str();
        let seq = self.len();
        let problem = |kind, detail: String| Problem {
            stream: name.to_string(),
            seq,
            kind,
            detail,
        };
        let obj = match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return Err(problem(ProblemKind::Unparsable, "not a JSON object".into())),
            Err(e) => return Err(problem(ProblemKind::Unparsable, e.to_string())),
        };
        let str_field = |k: &str| obj.get(k).and_then(Value::as_str);
        let (Some(stream), Some(state), Some(prev), Some(hash), Some(at_seq), Some(_), Some(_)) = (
            str_field("stream"),
            str_field("state"),
            str_field("prev"),
            str_field("hash"),
            obj.get("seq").and_then(Value::as_u64),
            obj.get("open").and_then(Value::as_bool),
            obj.get("at_ms").and_then(Value::as_u64),
        ) else {
            return Err(problem(
                ProblemKind::Unparsable,
                "missing stream, seq, open, state, at_ms, prev or hash".into(),
            ));
        };
        if stream != name {
            return Err(problem(
                ProblemKind::BadSeq,
                format!("entry belongs to stream {stream}"),
            ));
        }
        if at_seq != seq {
            return Err(problem(
                ProblemKind::BadSeq,
                format!("entry says seq {at_seq} at position {seq}"),
            ));
        }
        // The line must be the canonical form of what it says, or an edit that parses to
        // the same value (an escape spelled another way) would slip past the hash. The text
        // without `hash` is written once, for both checks.
        let (without, at) = canonical_without(&obj, "hash");
        if !is_with_member(line, &without, at, "hash", &Value::String(hash.into())) {
            return Err(problem(
                ProblemKind::HashMismatch,
                format!("{state} entry was edited: it is not in canonical form"),
            ));
        }
        if hash != sha256_hex(without.as_bytes()) {
            return Err(problem(
                ProblemKind::HashMismatch,
                format!("{state} entry was edited: its content does not match its hash"),
            ));
        }
        if prev != self.head {
            return Err(problem(
                ProblemKind::BrokenLink,
                format!("{state} entry does not follow the entry before it"),
            ));
        }
        self.head = hash.to_string();
        self.entries.push(Arc::new(obj));
        Ok(())
    }

    pub fn load(j: &mut dyn Journal, name: &str) -> Result<Stream, GateError> {
        let mut s = Stream::empty(name);
        s.catch_up(j)?;
        Ok(s)
    }

    /// Read and verify what other writers appended since this copy was read. Only the new
    /// entries cross the boundary and are hashed; the verified prefix is kept.
    pub fn catch_up(&mut self, j: &mut dyn Journal) -> Result<(), GateError> {
        let stored = j.length(&self.name)?;
        if stored < self.len() {
            // The stream shrank under us (a truncation or a repair): start over from storage.
            *self = Stream::empty(&self.name);
        }
        if stored == self.len() {
            return Ok(());
        }
        for line in j.read(&self.name, self.len())? {
            self.push_stored(&line).map_err(|p| {
                GateError::CorruptJournal(format!("{} entry {}: {}", p.stream, p.seq, p.detail))
            })?;
        }
        Ok(())
    }

    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// The stream as it stood at the length a receipt pins (`/head/length` of `pin`): its
    /// first entries and their head; `None` for a length this stream does not have.
    pub fn pinned(&self, pin: &Value) -> Option<Stream> {
        let len = pin
            .pointer("/head/length")
            .and_then(Value::as_u64)
            .filter(|l| (1..=self.len()).contains(l))? as usize;
        Some(Stream {
            entries: self.entries[..len].to_vec(),
            head: self.entries[len - 1]["hash"].as_str().unwrap_or("").into(),
            ..self.clone()
        })
    }

    pub fn last(&self) -> Option<&Map<String, Value>> {
        self.entries.last().map(|e| &**e)
    }

    /// The state an effect's entry records; None on another kind of stream (or for a
    /// spelling this version does not know).
    pub fn state_of(e: &Map<String, Value>) -> Option<State> {
        State::parse(Stream::spelling_of(e))
    }

    /// What a lease, approval or cap entry records; None on an effect's stream (or for a
    /// spelling this version does not know).
    pub fn mark_of(e: &Map<String, Value>) -> Option<Mark> {
        Mark::parse(Stream::spelling_of(e))
    }

    /// The `state` field as stored, for what repeats it verbatim (a receipt, an error).
    pub fn spelling_of(e: &Map<String, Value>) -> &str {
        e.get("state").and_then(Value::as_str).unwrap_or("")
    }

    /// Chain `batch` (state, fields) after the head and compare-and-append it at the
    /// stream's current length. On success the stream in memory follows the journal.
    pub fn append(
        &mut self,
        j: &mut dyn Journal,
        batch: Vec<(impl Spelled, Map<String, Value>)>,
        at_ms: u64,
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        // The copy in memory is a chain without gaps, or the batch would be sealed onto the
        // wrong place: its last entry sits at position len - 1 and its hash is the head.
        assert_eq!(
            self.last()
                .and_then(|e| e.get("seq"))
                .and_then(Value::as_u64)
                .map_or(0, |seq| seq + 1),
            self.len(),
            "{}: the last entry is not at the end",
            self.name
        );
        assert_eq!(
            self.last()
                .and_then(|e| e.get("hash"))
                .and_then(Value::as_str)
                .unwrap_or(GENESIS),
            self.head,
            "{}: the head is not the last entry's hash",
            self.name
        );
        let mut head = self.head.clone();
        let mut sealed = Vec::with_capacity(batch.len());
        let mut texts = Vec::with_capacity(batch.len());
        for (i, (state, mut obj)) in batch.into_iter().enumerate() {
            obj.insert("stream".into(), self.name.clone().into());
            obj.insert("seq".into(), (self.len() + i as u64).into());
            obj.insert("open".into(), open.into());
            obj.insert("state".into(), state.spelling().into());
            obj.insert("at_ms".into(), at_ms.into());
            obj.insert("prev".into(), head.clone().into());
            let (hash, line) = seal(&obj);
            obj.insert("hash".into(), hash.clone().into());
            texts.push(line);
            sealed.push(obj);
            head = hash;
        }
        j.append(&self.name, self.len(), &texts, durable, open)?;
        self.entries.extend(sealed.into_iter().map(Arc::new));
        self.head = head;
        Ok(())
    }
}

/// Shorthand for building entry fields.
#[macro_export]
#[doc(hidden)]
macro_rules! fields {
    ($($k:literal => $v:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut m = serde_json::Map::new();
        $( m.insert(alloc::string::String::from($k), serde_json::Value::from($v)); )*
        m
    }};
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::MemJournal;

    fn three() -> (MemJournal, Stream) {
        let mut j = MemJournal::new();
        let mut s = Stream::empty("effect:x");
        s.append(
            &mut j,
            alloc::vec![
                (State::Proposed, fields!("amount_cents" => 2000)),
                (State::Authorized, fields!())
            ],
            5,
            true,
            true,
        )
        .unwrap();
        s.append(
            &mut j,
            alloc::vec![(State::Committed, fields!())],
            6,
            false,
            false,
        )
        .unwrap();
        (j, s)
    }

    #[test]
    fn a_written_chain_verifies_and_rereads_equal() {
        let (mut j, s) = three();
        let back = Stream::load(&mut j, "effect:x").unwrap();
        assert_eq!(back.head, s.head);
        assert_eq!(back.len(), 3);
        assert_eq!(j.open_streams().unwrap().len(), 0);
    }

    #[test]
    fn edit_drop_swap_are_caught_where_they_are() {
        let (mut j, _) = three();
        let lines = j.read("effect:x", 0).unwrap();
        let edited: Vec<String> = lines.iter().map(|l| l.replace("2000", "200000")).collect();
        let p = Stream::parse("effect:x", &edited).unwrap_err();
        assert_eq!((p.seq, p.kind), (0, ProblemKind::HashMismatch));
        let dropped = alloc::vec![lines[0].clone(), lines[2].clone()];
        assert_eq!(Stream::parse("effect:x", &dropped).unwrap_err().seq, 1);
        let swapped = alloc::vec![lines[1].clone(), lines[0].clone(), lines[2].clone()];
        assert_eq!(
            Stream::parse("effect:x", &swapped).unwrap_err().kind,
            ProblemKind::BadSeq
        );
    }

    #[test]
    fn compare_and_append_refuses_a_stale_writer() {
        let (mut j, _) = three();
        let mut stale = Stream::empty("effect:x");
        let err = stale
            .append(
                &mut j,
                alloc::vec![(State::Proposed, fields!())],
                7,
                true,
                true,
            )
            .unwrap_err();
        assert_eq!(err, JournalError::Conflict(3));
    }
}
