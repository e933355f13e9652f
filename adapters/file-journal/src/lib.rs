//! The file journal on a disk: [`StdFiles`], the host's side of a file journal (the
//! `Files` of `interlock-journal` over one folder: its lock, owner-only files, appends at a
//! known length, group commit, whole files by rename), and [`FileJournal`], the journal
//! itself natively (the rules of `interlock-journal` over `StdFiles`), for native users:
//! tests, the simulation, benches, fuzzing.
//!
//! The gate component runs the same rules over the same `StdFiles` when the CLI hosts it
//! (world `gate-storage`): the bytes, the index, the checkpoint, the torn-tail rules and
//! their texts are `interlock-journal`'s, written once.
//!
//! A journal is a directory holding `journal.jsonl` (every entry followed by `\n`, all
//! streams interleaved), `journal.format`, `journal.lock` (flock-ed for the life of a
//! [`StdFiles`] and its clones: one writer per directory), and optionally `journal.index`
//! and `journal.torn-<offset>` (ARCHITECTURE.md, "The file format, written once").
//!
//! Durability: all streams share one file, so a single `fdatasync` makes every earlier
//! append durable (ordered group commit). Clones of a [`StdFiles`] (the gate instances of
//! one process, or [`SharedFileJournal`]'s threads) share each `fdatasync`.

#![cfg(unix)]

use std::cell::RefCell;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use interlock_journal::{self as journal, StorageError};
use interlock_journal_format::{self as format, FormatError};

mod commit;
mod gate_journal;
mod shared;
mod std_files;

pub use gate_journal::journal_error;
pub use shared::SharedFileJournal;
pub use std_files::StdFiles;

pub use interlock_journal::{
    CHECKPOINT_AFTER_BYTES, FORMAT_FILE, INDEX_FILE, JOURNAL_FILE, LOCK_FILE, LOCK_WAIT_MS,
    TORN_PREFIX,
};

/// How a journal operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another writer (in this or another process) holds the directory's lock, still after
    /// waiting `waited_ms` for it. The text names the shared backends.
    #[error("{}", format::locked_message(&dir.display().to_string(), *waited_ms))]
    Locked { dir: PathBuf, waited_ms: u64 },

    /// The storage failed.
    #[error("journal I/O error: {0}")]
    Io(#[from] io::Error),

    /// A complete line (ending in `\n`) of `journal.jsonl` is not a valid entry: not UTF-8,
    /// not a JSON object, `stream`/`seq`/`open` missing or of the wrong type, or `seq` not
    /// equal to the entry's position in its stream. `line` is 1-based.
    #[error("{}", FormatError::Corrupt { line: *line, detail: detail.clone() })]
    Corrupt { line: u64, detail: String },

    /// `journal.jsonl` ends with a partial line (no final `\n`) of `bytes` bytes starting at
    /// byte `offset`: the last write was torn. Run [`FileJournal::repair`].
    #[error("{}", FormatError::TornTail { offset: *offset, bytes: *bytes })]
    TornTail { offset: u64, bytes: u64 },

    /// Compare-and-append lost: the stream holds `actual` entries, not the expected number.
    #[error(
        "compare-and-append conflict: the stream holds {actual} entries, not the expected length"
    )]
    Conflict { actual: u64 },

    /// An entry passed to [`FileJournal::append`] was rejected; nothing was written.
    #[error("{}", FormatError::InvalidEntry { detail: detail.clone() })]
    InvalidEntry { detail: String },

    /// `journal.format` names a newer format version than this reader understands, or is
    /// not a format file at all: nothing is read or written.
    #[error("{0}")]
    Format(FormatError),
}

impl From<journal::Error> for Error {
    fn from(e: journal::Error) -> Self {
        match e {
            journal::Error::Corrupt { line, detail } => Error::Corrupt { line, detail },
            journal::Error::TornTail { offset, bytes } => Error::TornTail { offset, bytes },
            journal::Error::Conflict { actual } => Error::Conflict { actual },
            journal::Error::InvalidEntry { detail } => Error::InvalidEntry { detail },
            journal::Error::Format(f) => Error::Format(f),
            journal::Error::Storage(StorageError::Io(m)) => Error::Io(io::Error::other(m)),
            other @ (journal::Error::Storage(_) | journal::Error::Changed(_)) => {
                Error::Io(io::Error::other(other.to_string()))
            }
        }
    }
}

/// What [`FileJournal::repair`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// Byte offset where the torn tail started (the journal's new length), if there was one.
    pub torn_offset: Option<u64>,
    /// How many torn bytes were moved out of `journal.jsonl` (0 when nothing to repair).
    pub torn_bytes: u64,
    /// The side file holding the torn bytes, if any.
    pub saved_to: Option<PathBuf>,
}

impl RepairReport {
    /// The journal's report, its side file named in `dir`.
    pub fn in_dir(r: journal::RepairReport, dir: &Path) -> RepairReport {
        RepairReport {
            torn_offset: r.torn_offset,
            torn_bytes: r.torn_bytes,
            saved_to: r.saved_to.map(|name| dir.join(name)),
        }
    }
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.torn_offset, &self.saved_to) {
            (Some(offset), Some(path)) => write!(
                f,
                "saved {} torn bytes from offset {offset} to {} and truncated {JOURNAL_FILE} to {offset} bytes",
                self.torn_bytes,
                path.display()
            ),
            _ => write!(f, "{JOURNAL_FILE} ends with a complete line: nothing to repair"),
        }
    }
}

/// An open, locked journal directory: `interlock-journal`'s file journal over [`StdFiles`].
/// Lookups take `&self` (the journal reads what other handles of its store appended, so
/// it keeps its index in a cell).
pub struct FileJournal {
    inner: RefCell<journal::FileJournal<StdFiles>>,
    files: StdFiles,
}

impl fmt::Debug for FileJournal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let j = self.inner.borrow();
        f.debug_struct("FileJournal")
            .field("dir", &self.files.dir())
            .field("bytes", &j.len())
            .field("streams", &j.stream_count())
            .field("entries", &j.entry_count())
            .field("checkpoint", &j.checkpoint_covers())
            .field("pending", &self.files.pending())
            .field("fsyncs", &self.files.fsyncs())
            .field("poisoned", &self.files.poisoned())
            .finish()
    }
}

impl FileJournal {
    /// Opens the journal in `dir` (created if missing), takes its lock for the life of the
    /// handle and rebuilds the index (see `interlock_journal::FileJournal::open`). A second
    /// opener waits [`LOCK_WAIT_MS`] for the lock, then fails with [`Error::Locked`].
    pub fn open(dir: &Path) -> Result<Self, Error> {
        FileJournal::open_waiting(dir, Duration::from_millis(LOCK_WAIT_MS))
    }

    /// [`FileJournal::open`], waiting up to `wait` (zero: not at all) for the lock another
    /// writer holds: a writer starting while another finishes is not turned away at once.
    pub fn open_waiting(dir: &Path, wait: Duration) -> Result<Self, Error> {
        FileJournal::over(StdFiles::open(dir, wait)?)
    }

    /// The journal in a store already open (its other clones may be gate instances).
    pub fn over(files: StdFiles) -> Result<Self, Error> {
        let inner = journal::FileJournal::open(files.clone())?;
        Ok(FileJournal {
            inner: RefCell::new(inner),
            files,
        })
    }

    /// The store.
    pub fn files(&self) -> &StdFiles {
        &self.files
    }

    /// Writes a checkpoint of the index (`journal.index`) covering the whole journal, after
    /// syncing it; only open streams stay resident.
    pub fn checkpoint(&mut self) -> Result<(), Error> {
        Ok(self.inner.get_mut().checkpoint()?)
    }

    /// Bytes of `journal.jsonl` that [`FileJournal::open`] read and parsed: the tail after
    /// the checkpoint, or the whole file without one.
    pub fn scanned_bytes(&self) -> u64 {
        self.inner.borrow().scanned_bytes()
    }

    /// The journal length the checkpoint in use covers (`None`: no checkpoint in use).
    pub fn checkpoint_covers(&self) -> Option<u64> {
        self.inner.borrow().checkpoint_covers()
    }

    /// Compare-and-append (`interlock_journal::FileJournal::append`): one write, and one
    /// `fdatasync` when `durable`.
    pub fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), Error> {
        Ok(self
            .inner
            .get_mut()
            .append(stream, expected_len, entries, durable, open)?)
    }

    /// The entries (without their `\n`) of `stream` from position `start` to its end.
    pub fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, Error> {
        Ok(self.inner.borrow_mut().read(stream, start)?)
    }

    /// The number of entries in `stream` (0 when unknown). Panics only if the storage
    /// fails; see [`FileJournal::try_length`].
    pub fn length(&self, stream: &str) -> u64 {
        self.try_length(stream)
            .unwrap_or_else(|e| panic!("journal index unreadable: {e}"))
    }

    /// The number of entries in `stream` (0 when unknown), or why it could not be read.
    pub fn try_length(&self, stream: &str) -> Result<u64, Error> {
        Ok(self.inner.borrow_mut().length(stream)?)
    }

    /// The streams whose last append said `open`, in first-append order. Panics only if the
    /// storage fails; see [`FileJournal::try_open_streams`].
    pub fn open_streams(&self) -> Vec<String> {
        self.try_open_streams()
            .unwrap_or_else(|e| panic!("journal index unreadable: {e}"))
    }

    pub fn try_open_streams(&self) -> Result<Vec<String>, Error> {
        Ok(self.inner.borrow_mut().open_streams()?)
    }

    /// Every stream, in first-append order. Panics only if the storage fails; see
    /// [`FileJournal::try_streams`].
    pub fn streams(&self) -> Vec<String> {
        self.try_streams()
            .unwrap_or_else(|e| panic!("journal index unreadable: {e}"))
    }

    /// Every stream, in first-append order, or why the checkpoint could not be read.
    pub fn try_streams(&self) -> Result<Vec<String>, Error> {
        Ok(self.inner.borrow_mut().streams()?)
    }

    /// Makes every append so far durable: one `fdatasync` if a non-durable append is
    /// pending, else nothing.
    pub fn sync(&mut self) -> Result<(), Error> {
        Ok(self.inner.get_mut().sync()?)
    }

    /// How many `fdatasync` calls were made on this journal (by this handle and every
    /// other sharing its store; directory syncs are not counted).
    pub fn fsyncs(&self) -> u64 {
        self.files.fsyncs()
    }

    /// The journal directory.
    pub fn dir(&self) -> &Path {
        self.files.dir()
    }

    /// Repairs a torn tail in the journal in `dir` (which must exist), taking its lock
    /// ([`Error::Locked`] if a handle is open): see `interlock_journal::FileJournal::repair`.
    pub fn repair(dir: &Path) -> Result<RepairReport, Error> {
        let mut files = StdFiles::open_existing(dir, Duration::ZERO)?;
        let report = journal::FileJournal::repair(&mut files)?;
        Ok(RepairReport::in_dir(report, dir))
    }
}

#[cfg(test)]
mod tests;
