//! `interlock:gate/journal`: storage for the gate's entries, over any backend of the core's
//! one journal trait (the file journal adapter, or memory for fast tests).
//!
//! The host stores entries byte for byte; it never interprets them. Hash chains, seq
//! numbers and verification are the gate's.

use std::sync::{Arc, Mutex, MutexGuard};

use interlock_core::{Journal as CoreJournal, JournalError as CoreError};

use crate::bindings::interlock::gate::journal::{Host, JournalError};

/// A journal backend: the core's one journal trait (the WIT `journal` interface with its
/// guarantees: compare-and-append, durability before return when `durable`, append order
/// kept across streams, nothing of a failed append left visible), sendable to a thread.
pub trait JournalBackend: CoreJournal + Send {}
impl<T: CoreJournal + Send> JournalBackend for T {}

/// The import as the component sees it: whichever backend the host chose.
pub struct Journal(pub Box<dyn JournalBackend>);

/// The WIT error for the core's journal error (the same cases).
fn wit_error(e: CoreError) -> JournalError {
    match e {
        CoreError::Conflict(actual) => JournalError::Conflict(actual),
        CoreError::Io(m) => JournalError::Io(m),
        CoreError::Corrupt(m) => JournalError::Corrupt(m),
        CoreError::TornTail(m) => JournalError::TornTail(m),
        CoreError::Other(m) => JournalError::Other(m),
    }
}

impl Host for Journal {
    fn append(
        &mut self,
        stream: String,
        expected_length: u64,
        entries: Vec<String>,
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        self.0
            .append(&stream, expected_length, &entries, durable, open)
            .map_err(wit_error)
    }

    fn read(&mut self, stream: String, start: u64) -> Result<Vec<String>, JournalError> {
        self.0.read(&stream, start).map_err(wit_error)
    }

    fn length(&mut self, stream: String) -> Result<u64, JournalError> {
        self.0.length(&stream).map_err(wit_error)
    }

    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.0.open_streams().map_err(wit_error)
    }

    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.0.streams().map_err(wit_error)
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        self.0.sync().map_err(wit_error)
    }
}

/// An in-memory journal for tests. Clones share one journal, so a test can drop a
/// "crashed" host and start a fresh one on the same entries. Every append counts as
/// durable: there is no process death to lose buffered entries in.
#[derive(Clone, Default)]
pub struct MemoryJournal {
    inner: Arc<Mutex<Vec<MemoryStream>>>,
}

struct MemoryStream {
    name: String,
    entries: Vec<String>,
    open: bool,
}

impl MemoryJournal {
    pub fn new() -> MemoryJournal {
        MemoryJournal::default()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<MemoryStream>> {
        // A panic elsewhere while holding the lock left whole appends only (each append
        // is one push of prepared data), so the data is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Overwrites one stored entry, as an attacker editing the journal would (for tests
    /// of verification).
    pub fn tamper(&self, stream: &str, seq: usize, entry: String) {
        let mut streams = self.lock();
        if let Some(s) = streams.iter_mut().find(|s| s.name == stream) {
            s.entries[seq] = entry;
        }
    }
}

impl CoreJournal for MemoryJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_length: u64,
        entries: &[String],
        _durable: bool,
        open: bool,
    ) -> Result<(), CoreError> {
        let mut streams = self.lock();
        let actual = streams
            .iter()
            .find(|s| s.name == stream)
            .map_or(0, |s| s.entries.len() as u64);
        if actual != expected_length {
            return Err(CoreError::Conflict(actual));
        }
        match streams.iter_mut().find(|s| s.name == stream) {
            Some(s) => {
                s.entries.extend_from_slice(entries);
                s.open = open;
            }
            None => streams.push(MemoryStream {
                name: stream.to_string(),
                entries: entries.to_vec(),
                open,
            }),
        }
        Ok(())
    }

    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, CoreError> {
        let streams = self.lock();
        Ok(streams
            .iter()
            .find(|s| s.name == stream)
            .map(|s| s.entries.iter().skip(start as usize).cloned().collect())
            .unwrap_or_default())
    }

    fn length(&mut self, stream: &str) -> Result<u64, CoreError> {
        let streams = self.lock();
        Ok(streams
            .iter()
            .find(|s| s.name == stream)
            .map_or(0, |s| s.entries.len() as u64))
    }

    fn open_streams(&mut self) -> Result<Vec<String>, CoreError> {
        let streams = self.lock();
        Ok(streams
            .iter()
            .filter(|s| s.open)
            .map(|s| s.name.clone())
            .collect())
    }

    fn streams(&mut self) -> Result<Vec<String>, CoreError> {
        let streams = self.lock();
        Ok(streams.iter().map(|s| s.name.clone()).collect())
    }

    fn sync(&mut self) -> Result<(), CoreError> {
        Ok(())
    }
}

/// One journal shared by several gate instances in one process (workers racing each
/// other, or a restarted worker beside a dead one), which can also be closed and reopened
/// underneath them. While closed, every call fails with `other("journal is closed")`.
#[derive(Clone, Default)]
pub struct SharedJournal {
    inner: Arc<Mutex<Option<Box<dyn JournalBackend>>>>,
}

impl SharedJournal {
    pub fn new(store: Box<dyn JournalBackend>) -> SharedJournal {
        SharedJournal {
            inner: Arc::new(Mutex::new(Some(store))),
        }
    }

    /// Closes the journal (a file journal releases its lock).
    pub fn close(&self) {
        *self.lock() = None;
    }

    /// Puts a (re)opened store behind every handle.
    pub fn replace(&self, store: Box<dyn JournalBackend>) {
        *self.lock() = Some(store);
    }

    fn lock(&self) -> MutexGuard<'_, Option<Box<dyn JournalBackend>>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn JournalBackend) -> Result<T, CoreError>,
    ) -> Result<T, CoreError> {
        match self.lock().as_mut() {
            Some(store) => f(store.as_mut()),
            None => Err(CoreError::Other("journal is closed".into())),
        }
    }
}

impl CoreJournal for SharedJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_length: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), CoreError> {
        self.with(|s| s.append(stream, expected_length, entries, durable, open))
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, CoreError> {
        self.with(|s| s.read(stream, start))
    }
    fn length(&mut self, stream: &str) -> Result<u64, CoreError> {
        self.with(|s| s.length(stream))
    }
    fn open_streams(&mut self) -> Result<Vec<String>, CoreError> {
        self.with(|s| s.open_streams())
    }
    fn streams(&mut self) -> Result<Vec<String>, CoreError> {
        self.with(|s| s.streams())
    }
    fn sync(&mut self) -> Result<(), CoreError> {
        self.with(|s| s.sync())
    }
}
