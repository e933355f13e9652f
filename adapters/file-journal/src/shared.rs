//! [`SharedFileJournal`]: one native file journal for many threads, with group commit.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use interlock_journal::{Files, JOURNAL_FILE};

use crate::{Error, FileJournal, StdFiles};

/// A [`FileJournal`] shared by threads. Clones share it.
///
/// Appends are compare-and-append under one lock, as with a single handle; a durable
/// append then waits for `fdatasync` *outside* the lock (the store's group commit), so the
/// appends of every thread that arrive while one sync runs are made durable by the next
/// one. Order is kept: an append is durable only once every append before it in the file
/// is.
#[derive(Clone)]
pub struct SharedFileJournal {
    journal: Arc<Mutex<FileJournal>>,
    files: StdFiles,
}

impl SharedFileJournal {
    /// Shares an open journal.
    pub fn new(journal: FileJournal) -> SharedFileJournal {
        let files = journal.files().clone();
        SharedFileJournal {
            journal: Arc::new(Mutex::new(journal)),
            files,
        }
    }

    /// Opens the journal in `dir` ([`FileJournal::open`]) and shares it.
    pub fn open(dir: &Path) -> Result<SharedFileJournal, Error> {
        Ok(SharedFileJournal::new(FileJournal::open(dir)?))
    }

    fn lock(&self) -> MutexGuard<'_, FileJournal> {
        // The journal keeps its index consistent with the file at every return.
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`FileJournal::append`], with the durable wait shared between threads.
    pub fn append(
        &self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), Error> {
        self.lock()
            .append(stream, expected_len, entries, false, open)?;
        if durable {
            self.sync()?;
        }
        Ok(())
    }

    /// [`FileJournal::sync`]: every append so far made durable (sharing a running sync).
    pub fn sync(&self) -> Result<(), Error> {
        let mut files = self.files.clone();
        files
            .file_sync(JOURNAL_FILE)
            .map_err(|e| Error::Io(std::io::Error::other(e.to_string())))
    }

    pub fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, Error> {
        self.lock().read(stream, start)
    }

    pub fn try_length(&self, stream: &str) -> Result<u64, Error> {
        self.lock().try_length(stream)
    }

    pub fn length(&self, stream: &str) -> Result<u64, Error> {
        self.try_length(stream)
    }

    pub fn try_open_streams(&self) -> Result<Vec<String>, Error> {
        self.lock().try_open_streams()
    }

    pub fn open_streams(&self) -> Vec<String> {
        self.lock().open_streams()
    }

    pub fn try_streams(&self) -> Result<Vec<String>, Error> {
        self.lock().try_streams()
    }

    pub fn streams(&self) -> Result<Vec<String>, Error> {
        self.try_streams()
    }

    /// [`FileJournal::checkpoint`].
    pub fn checkpoint(&self) -> Result<(), Error> {
        self.lock().checkpoint()
    }

    /// `fdatasync` calls made on this journal by every thread.
    pub fn fsyncs(&self) -> u64 {
        self.files.fsyncs()
    }

    /// The store (to give the gate component, or another journal).
    pub fn files(&self) -> &StdFiles {
        &self.files
    }
}
