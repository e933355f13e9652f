//! `interlock:gate/journal`: storage for the gate's entries, over a [`JournalStore`]
//! backend (the file journal adapter, or memory for fast tests).
//!
//! The host stores entries byte for byte; it never interprets them. Hash chains, seq
//! numbers and verification are the gate's.

use std::sync::{Arc, Mutex, MutexGuard};

use interlock_file_journal::{Error as FileError, FileJournal, SharedFileJournal};

use crate::bindings::interlock::gate::journal::{Host, JournalError};

/// A journal backend: the six functions of the WIT `journal` interface, with its
/// guarantees (compare-and-append, durability before return when `durable`, append order
/// kept across streams, nothing of a failed append left visible).
pub trait JournalStore: Send {
    fn append(
        &mut self,
        stream: &str,
        expected_length: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError>;
    fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, JournalError>;
    fn length(&self, stream: &str) -> Result<u64, JournalError>;
    fn open_streams(&self) -> Result<Vec<String>, JournalError>;
    fn streams(&self) -> Result<Vec<String>, JournalError>;
    fn sync(&mut self) -> Result<(), JournalError>;
}

/// The import as the component sees it: whichever backend the host chose.
pub struct Journal(pub Box<dyn JournalStore>);

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
    }

    fn read(&mut self, stream: String, start: u64) -> Result<Vec<String>, JournalError> {
        self.0.read(&stream, start)
    }

    fn length(&mut self, stream: String) -> Result<u64, JournalError> {
        self.0.length(&stream)
    }

    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.0.open_streams()
    }

    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.0.streams()
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        self.0.sync()
    }
}

/// The WIT error for a file journal error. A conflict keeps its actual length, because
/// the gate re-reads from there; everything else is reported with the adapter's message.
pub fn file_error(e: FileError) -> JournalError {
    match e {
        FileError::Conflict { actual } => JournalError::Conflict(actual),
        FileError::Corrupt { .. } => JournalError::Corrupt(e.to_string()),
        FileError::TornTail { .. } => JournalError::TornTail(e.to_string()),
        FileError::Io(_) => JournalError::Io(e.to_string()),
        other => JournalError::Other(other.to_string()),
    }
}

/// The file backend, single-handed (`FileJournal`) or shared by threads with group commit
/// (`SharedFileJournal`: one [`crate::GateHost`] per thread or per submit in flight, each
/// with a clone, so the send path's one durable write costs a fraction of an fsync under
/// load). Both have the same operations; `length`/`streams` are the fallible forms.
macro_rules! file_store {
    ($ty:ty, $length:ident, $streams:ident) => {
        impl JournalStore for $ty {
            fn append(
                &mut self,
                stream: &str,
                expected_length: u64,
                entries: &[String],
                durable: bool,
                open: bool,
            ) -> Result<(), JournalError> {
                <$ty>::append(self, stream, expected_length, entries, durable, open)
                    .map_err(file_error)
            }
            fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
                <$ty>::read(self, stream, start).map_err(file_error)
            }
            fn length(&self, stream: &str) -> Result<u64, JournalError> {
                <$ty>::$length(self, stream).map_err(file_error)
            }
            fn open_streams(&self) -> Result<Vec<String>, JournalError> {
                Ok(<$ty>::open_streams(self))
            }
            fn streams(&self) -> Result<Vec<String>, JournalError> {
                <$ty>::$streams(self).map_err(file_error)
            }
            fn sync(&mut self) -> Result<(), JournalError> {
                <$ty>::sync(self).map_err(file_error)
            }
        }
    };
}

file_store!(FileJournal, try_length, try_streams);
file_store!(SharedFileJournal, length, streams);

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

impl JournalStore for MemoryJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_length: u64,
        entries: &[String],
        _durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        let mut streams = self.lock();
        let actual = streams
            .iter()
            .find(|s| s.name == stream)
            .map_or(0, |s| s.entries.len() as u64);
        if actual != expected_length {
            return Err(JournalError::Conflict(actual));
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

    fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        let streams = self.lock();
        Ok(streams
            .iter()
            .find(|s| s.name == stream)
            .map(|s| s.entries.iter().skip(start as usize).cloned().collect())
            .unwrap_or_default())
    }

    fn length(&self, stream: &str) -> Result<u64, JournalError> {
        let streams = self.lock();
        Ok(streams
            .iter()
            .find(|s| s.name == stream)
            .map_or(0, |s| s.entries.len() as u64))
    }

    fn open_streams(&self) -> Result<Vec<String>, JournalError> {
        let streams = self.lock();
        Ok(streams
            .iter()
            .filter(|s| s.open)
            .map(|s| s.name.clone())
            .collect())
    }

    fn streams(&self) -> Result<Vec<String>, JournalError> {
        let streams = self.lock();
        Ok(streams.iter().map(|s| s.name.clone()).collect())
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        Ok(())
    }
}

/// One journal shared by several gate instances in one process (workers racing each
/// other, or a restarted worker beside a dead one), which can also be closed and reopened
/// underneath them. While closed, every call fails with `other("journal is closed")`.
#[derive(Clone, Default)]
pub struct SharedJournal {
    inner: Arc<Mutex<Option<Box<dyn JournalStore>>>>,
}

impl SharedJournal {
    pub fn new(store: Box<dyn JournalStore>) -> SharedJournal {
        SharedJournal {
            inner: Arc::new(Mutex::new(Some(store))),
        }
    }

    /// Closes the journal (a file journal releases its lock).
    pub fn close(&self) {
        *self.lock() = None;
    }

    /// Puts a (re)opened store behind every handle.
    pub fn replace(&self, store: Box<dyn JournalStore>) {
        *self.lock() = Some(store);
    }

    fn lock(&self) -> MutexGuard<'_, Option<Box<dyn JournalStore>>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn JournalStore) -> Result<T, JournalError>,
    ) -> Result<T, JournalError> {
        match self.lock().as_mut() {
            Some(store) => f(store.as_mut()),
            None => Err(JournalError::Other("journal is closed".into())),
        }
    }
}

impl JournalStore for SharedJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_length: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        self.with(|s| s.append(stream, expected_length, entries, durable, open))
    }
    fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        self.with(|s| s.read(stream, start))
    }
    fn length(&self, stream: &str) -> Result<u64, JournalError> {
        self.with(|s| s.length(stream))
    }
    fn open_streams(&self) -> Result<Vec<String>, JournalError> {
        self.with(|s| s.open_streams())
    }
    fn streams(&self) -> Result<Vec<String>, JournalError> {
        self.with(|s| s.streams())
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        self.with(|s| s.sync())
    }
}
