//! The native file journals behind the gate's one journal trait ([`interlock_core::Journal`],
//! the WIT `journal` interface as Rust sees it): `FileJournal` single-handed, and
//! `SharedFileJournal` shared by threads with group commit.
use interlock_core::{Journal, JournalError};

use crate::{Error, FileJournal, SharedFileJournal};

/// The gate's error for a file journal error. A conflict keeps its actual length, because
/// the gate re-reads from there; everything else carries the adapter's message.
pub fn journal_error(e: Error) -> JournalError {
    match e {
        Error::Conflict { actual } => JournalError::Conflict(actual),
        Error::Corrupt { .. } => JournalError::Corrupt(e.to_string()),
        Error::TornTail { .. } => JournalError::TornTail(e.to_string()),
        Error::Io(_) => JournalError::Io(e.to_string()),
        other => JournalError::Other(other.to_string()),
    }
}

macro_rules! gate_journal {
    ($ty:ty) => {
        impl Journal for $ty {
            fn append(
                &mut self,
                stream: &str,
                expected_len: u64,
                entries: &[String],
                durable: bool,
                open: bool,
            ) -> Result<(), JournalError> {
                <$ty>::append(self, stream, expected_len, entries, durable, open)
                    .map_err(journal_error)
            }
            fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
                <$ty>::read(self, stream, start).map_err(journal_error)
            }
            fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
                <$ty>::try_length(self, stream).map_err(journal_error)
            }
            fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
                <$ty>::try_open_streams(self).map_err(journal_error)
            }
            fn streams(&mut self) -> Result<Vec<String>, JournalError> {
                <$ty>::try_streams(self).map_err(journal_error)
            }
            fn sync(&mut self) -> Result<(), JournalError> {
                <$ty>::sync(self).map_err(journal_error)
            }
        }
    };
}

gate_journal!(FileJournal);
gate_journal!(SharedFileJournal);
