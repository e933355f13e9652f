//! The primitive storage a host provides (`wit/storage.wit`, interface `storage`), as two
//! Rust traits: [`Files`] for a file journal's folder and [`Sql`] for a SQL journal. A host
//! implements one of them with plain I/O and no journal rule; everything about what the
//! bytes and rows mean is in [`crate::FileJournal`] and [`crate::SqlJournal`].

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// How a storage call failed (`storage-error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageError {
    /// `file_append`: the file is not `at` bytes long; carries its length. Nothing written.
    Conflict(u64),
    /// `sql_batch`: the statement at this index did not change the rows it expected; the
    /// whole batch was rolled back.
    UnexpectedChanges(u32),
    /// The storage failed (disk full, I/O error, connection lost, a timeout, a commit whose
    /// acknowledgement was lost).
    Io(String),
    /// This storage does not do this call (the other kind of journal).
    Unsupported(String),
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Conflict(n) => {
                write!(f, "the file is {n} bytes long, not the length given")
            }
            StorageError::UnexpectedChanges(i) => {
                write!(
                    f,
                    "statement {i} of the batch did not change the rows it expected"
                )
            }
            StorageError::Io(m) => f.write_str(m),
            StorageError::Unsupported(m) => write!(f, "unsupported storage call: {m}"),
        }
    }
}

/// The files of one journal folder, by name (`journal.jsonl`, `journal.format`,
/// `journal.index`, `journal.torn-<offset>`), never a path. See `wit/storage.wit` for what
/// each call must guarantee.
pub trait Files {
    /// The file's length in bytes; `None` when it does not exist.
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError>;
    /// Up to `len` bytes from `offset` (fewer only at the end of the file).
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError>;
    /// Appends `bytes` if, and only if, the file is exactly `at` bytes long (a missing file
    /// is 0 bytes long and is created, owner-only); else `Conflict(length)`. Not durable by
    /// itself. A failed write leaves nothing of it visible.
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError>;
    /// Makes every byte appended to the file so far durable.
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError>;
    /// Cuts the file to `len` bytes, durably.
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError>;
    /// Writes the whole file at once (renamed into place, owner-only), durably, the folder
    /// synced.
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError>;
    /// Creates the file with `bytes`, durably (the folder synced), only if no file of that
    /// name exists: true when it created it.
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError>;
}

/// A value bound to a parameter or read from a column (`sql-value`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Text(String),
}

/// One statement of a batch (`statement`): its text in the journal's dialect (`?1`, `?2`,
/// ... in SQLite, `$1`, `$2`, ... in PostgreSQL), its parameters, and the rows it must
/// change, if it is a guard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    pub sql: String,
    pub params: Vec<SqlValue>,
    /// The batch is rolled back, answering `UnexpectedChanges(index)`, unless this statement
    /// changes exactly this many rows.
    pub expect_changes: Option<u64>,
}

/// One statement's rows, each its columns in order.
pub type Rows = Vec<Vec<SqlValue>>;

/// A SQL database (`sql-batch`).
pub trait Sql {
    /// Runs `statements` in order as one transaction and answers each statement's rows, or
    /// nothing of it happens. `write`: the transaction writes (SQLite takes the write lock
    /// first). `durable`: the commit returns once on stable storage, with every commit
    /// before it; otherwise it may be flushed later, in commit order.
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError>;
}

impl<F: Files + ?Sized> Files for &mut F {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        (**self).file_size(name)
    }
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        (**self).file_read(name, offset, len)
    }
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        (**self).file_append(name, at, bytes)
    }
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        (**self).file_sync(name)
    }
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        (**self).file_truncate(name, len)
    }
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        (**self).file_replace(name, bytes)
    }
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        (**self).file_create(name, bytes)
    }
}

impl<F: Files + ?Sized> Files for alloc::boxed::Box<F> {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        (**self).file_size(name)
    }
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        (**self).file_read(name, offset, len)
    }
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        (**self).file_append(name, at, bytes)
    }
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        (**self).file_sync(name)
    }
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        (**self).file_truncate(name, len)
    }
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        (**self).file_replace(name, bytes)
    }
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        (**self).file_create(name, bytes)
    }
}

impl<S: Sql + ?Sized> Sql for &mut S {
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError> {
        (**self).sql_batch(statements, write, durable)
    }
}

impl<S: Sql + ?Sized> Sql for alloc::boxed::Box<S> {
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError> {
        (**self).sql_batch(statements, write, durable)
    }
}
