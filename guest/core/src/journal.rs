//! Journal storage as the core sees it (wit/journal.wit), and an in-memory backend.
use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// How a journal call failed (wit/journal.wit `journal-error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalError {
    Conflict(u64),
    Io(String),
    Corrupt(String),
    TornTail(String),
    Other(String),
}

impl core::fmt::Display for JournalError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            JournalError::Conflict(n) => write!(f, "append conflict: the stream holds {n} entries"),
            JournalError::Io(m) => write!(f, "storage failed: {m}"),
            JournalError::Corrupt(m) => write!(f, "stored data unreadable: {m}"),
            JournalError::TornTail(m) => write!(f, "torn last write: {m}"),
            JournalError::Other(m) => f.write_str(m),
        }
    }
}

/// Storage for streams of entries; see wit/journal.wit for what a backend must guarantee.
pub trait Journal {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError>;
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError>;
    fn length(&mut self, stream: &str) -> Result<u64, JournalError>;
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError>;
    fn streams(&mut self) -> Result<Vec<String>, JournalError>;
    fn sync(&mut self) -> Result<(), JournalError>;
}

/// An in-memory journal: the reference backend for tests and simulation. It counts the
/// durable writes a real backend would turn into fsyncs.
#[derive(Clone, Debug, Default)]
pub struct MemJournal {
    streams: BTreeMap<String, MemStream>,
    order: Vec<String>,
    /// Appends in order, as a file backend would lay them out: (stream, entry).
    pub log: Vec<(String, String)>,
    pub durable_writes: u64,
    pending: bool,
}

#[derive(Clone, Debug, Default)]
struct MemStream {
    entries: Vec<String>,
    open: bool,
}

impl MemJournal {
    pub fn new() -> Self {
        Self::default()
    }

    /// The journal as a file backend would store it: every entry followed by a newline.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for (_, e) in &self.log {
            out.push_str(e);
            out.push('\n');
        }
        out
    }

    /// Replace one stored entry, for tamper tests.
    pub fn tamper(&mut self, stream: &str, seq: usize, entry: String) {
        let s = self.streams.get_mut(stream).expect("stream exists");
        s.entries[seq] = entry;
    }

    /// Drop the last `n` entries of a stream, for truncation tests.
    pub fn truncate(&mut self, stream: &str, n: usize) {
        let s = self.streams.get_mut(stream).expect("stream exists");
        let keep = s.entries.len().saturating_sub(n);
        s.entries.truncate(keep);
    }
}

impl Journal for MemJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        if !self.streams.contains_key(stream) {
            self.order.push(stream.to_string());
        }
        let s = self.streams.entry(stream.to_string()).or_default();
        let actual = s.entries.len() as u64;
        if actual != expected_len {
            if actual == 0 {
                // Nothing was created: do not leave a phantom stream behind.
                self.streams.remove(stream);
                self.order.pop();
            }
            return Err(JournalError::Conflict(actual));
        }
        s.entries.extend(entries.iter().cloned());
        s.open = open;
        self.log
            .extend(entries.iter().map(|e| (stream.to_string(), e.clone())));
        if durable {
            self.durable_writes += 1;
            self.pending = false;
        } else {
            self.pending = true;
        }
        Ok(())
    }

    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        Ok(self
            .streams
            .get(stream)
            .map(|s| s.entries.iter().skip(start as usize).cloned().collect())
            .unwrap_or_default())
    }

    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        Ok(self
            .streams
            .get(stream)
            .map_or(0, |s| s.entries.len() as u64))
    }

    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        Ok(self
            .order
            .iter()
            .filter(|n| self.streams[*n].open)
            .cloned()
            .collect())
    }

    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        Ok(self.order.clone())
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        if self.pending {
            self.durable_writes += 1;
            self.pending = false;
        }
        Ok(())
    }
}
