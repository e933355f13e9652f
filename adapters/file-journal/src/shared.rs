//! [`SharedFileJournal`]: one file journal for many threads, with group commit.

use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::commit::GroupCommit;
use crate::{Error, FileJournal};

/// A [`FileJournal`] shared by threads (one gate instance each). Clones share it.
///
/// Appends are compare-and-append under one lock, as with a single handle; a durable
/// append then waits for `fdatasync` *outside* the lock, so the appends of every thread
/// that arrive while one sync runs are made durable by the next one (group commit). Order
/// is kept: an append is durable only once every append before it in the file is.
#[derive(Clone)]
pub struct SharedFileJournal {
    journal: Arc<Mutex<FileJournal>>,
    commit: Arc<GroupCommit>,
}

impl SharedFileJournal {
    /// Shares an open journal.
    pub fn new(journal: FileJournal) -> SharedFileJournal {
        let commit = journal.commit.clone();
        SharedFileJournal {
            journal: Arc::new(Mutex::new(journal)),
            commit,
        }
    }

    /// Opens the journal in `dir` ([`FileJournal::open`]) and shares it.
    pub fn open(dir: &Path) -> Result<SharedFileJournal, Error> {
        Ok(SharedFileJournal::new(FileJournal::open(dir)?))
    }

    fn lock(&self) -> MutexGuard<'_, FileJournal> {
        // FileJournal keeps its index consistent with the file at every return; a panic
        // while holding the lock (a bug) leaves at worst a poisoned handle.
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
        let end = {
            let mut j = self.lock();
            j.append(stream, expected_len, entries, false, open)?;
            j.len
        };
        if durable {
            self.sync_to(end)?;
        }
        Ok(())
    }

    fn sync_to(&self, end: u64) -> Result<(), Error> {
        self.commit.sync_to(end).map_err(|why| {
            self.lock().failed_sync(why.clone());
            Error::Io(io::Error::other(why))
        })
    }

    /// [`FileJournal::sync`]: every append so far made durable (sharing a running sync).
    pub fn sync(&self) -> Result<(), Error> {
        let end = {
            let j = self.lock();
            j.check_poisoned()?;
            j.len
        };
        self.sync_to(end)
    }

    pub fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, Error> {
        self.lock().read(stream, start)
    }

    pub fn length(&self, stream: &str) -> Result<u64, Error> {
        self.lock().try_length(stream)
    }

    pub fn open_streams(&self) -> Vec<String> {
        self.lock().open_streams()
    }

    pub fn streams(&self) -> Result<Vec<String>, Error> {
        self.lock().try_streams()
    }

    /// [`FileJournal::checkpoint`].
    pub fn checkpoint(&self) -> Result<(), Error> {
        self.lock().checkpoint()
    }

    /// `fdatasync` calls made on this journal by every thread.
    pub fn fsyncs(&self) -> u64 {
        self.commit.fsyncs()
    }
}
