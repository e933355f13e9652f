//! World `gate-storage`: the journal is `interlock-journal`'s file or SQL journal, run here
//! over the host's `storage` import (primitive file or SQL I/O), and opened, repaired and
//! read in append order through the exported `journal-admin`. Only translation lives here:
//! WIT types in and out of the journal crate's.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use interlock_core::{Journal, JournalError};
use interlock_journal::{
    journal_error, Dialect, FileJournal, Files, Rows, Sql, SqlJournal, SqlValue, Statement,
    StorageError,
};

use crate::exports::interlock::gate::journal_admin as ja;
use crate::interlock::gate::storage as ws;
use crate::interlock::gate::types as ty;
use crate::{to_wit_journal_err, Component};

/// The host's files (`file-*`), as the file journal sees them.
pub(crate) struct HostFiles;

fn storage_err(e: ws::StorageError) -> StorageError {
    match e {
        ws::StorageError::Conflict(n) => StorageError::Conflict(n),
        ws::StorageError::UnexpectedChanges(i) => StorageError::UnexpectedChanges(i),
        ws::StorageError::Io(m) => StorageError::Io(m),
        ws::StorageError::Unsupported(m) => StorageError::Unsupported(m),
    }
}

impl Files for HostFiles {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        ws::file_size(name).map_err(storage_err)
    }
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        ws::file_read(name, offset, len).map_err(storage_err)
    }
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        ws::file_append(name, at, bytes).map_err(storage_err)
    }
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        ws::file_sync(name).map_err(storage_err)
    }
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        ws::file_truncate(name, len).map_err(storage_err)
    }
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        ws::file_replace(name, bytes).map_err(storage_err)
    }
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        ws::file_create(name, bytes).map_err(storage_err)
    }
}

/// The host's database (`sql-batch`), as the SQL journal sees it.
pub(crate) struct HostSql;

fn to_wit_value(v: &SqlValue) -> ws::SqlValue {
    match v {
        SqlValue::Null => ws::SqlValue::Null,
        SqlValue::Integer(n) => ws::SqlValue::Integer(*n),
        SqlValue::Text(t) => ws::SqlValue::Text(t.clone()),
    }
}

fn from_wit_value(v: ws::SqlValue) -> SqlValue {
    match v {
        ws::SqlValue::Null => SqlValue::Null,
        ws::SqlValue::Integer(n) => SqlValue::Integer(n),
        ws::SqlValue::Text(t) => SqlValue::Text(t),
    }
}

impl Sql for HostSql {
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError> {
        let batch: Vec<ws::Statement> = statements
            .iter()
            .map(|s| ws::Statement {
                sql: s.sql.clone(),
                params: s.params.iter().map(to_wit_value).collect(),
                expect_changes: s.expect_changes,
            })
            .collect();
        let rows = ws::sql_batch(&batch, write, durable).map_err(storage_err)?;
        Ok(rows
            .into_iter()
            .map(|st| {
                st.into_iter()
                    .map(|row| row.into_iter().map(from_wit_value).collect())
                    .collect()
            })
            .collect())
    }
}

/// The instance's journal: not open yet (or its last open failed, and why), or open.
enum StorageJournal {
    Closed(Option<JournalError>),
    File(FileJournal<HostFiles>),
    Sql(SqlJournal<HostSql>),
}

impl StorageJournal {
    fn closed(&self) -> JournalError {
        match self {
            StorageJournal::Closed(Some(e)) => e.clone(),
            _ => JournalError::Other(String::from(
                "the journal is not open (the host calls journal-admin.open first)",
            )),
        }
    }

    fn open(&mut self) -> Result<&mut dyn Journal, JournalError> {
        match self {
            StorageJournal::File(j) => Ok(j),
            StorageJournal::Sql(j) => Ok(j),
            StorageJournal::Closed(_) => Err(self.closed()),
        }
    }
}

impl Journal for StorageJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        self.open()?
            .append(stream, expected_len, entries, durable, open)
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        self.open()?.read(stream, start)
    }
    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        self.open()?.length(stream)
    }
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.open()?.open_streams()
    }
    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.open()?.streams()
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        self.open()?.sync()
    }
}

/// The component's one journal. Wasm components are single-threaded, so a RefCell suffices.
struct One(RefCell<StorageJournal>);
unsafe impl Sync for One {}
static JOURNAL: One = One(RefCell::new(StorageJournal::Closed(None)));

impl interlock_core::export::InOrder for StorageJournal {
    fn read_in_order(
        &mut self,
        cursor: u64,
        max: usize,
    ) -> Result<Vec<(u64, String)>, JournalError> {
        match self {
            StorageJournal::File(j) => j.read_in_order(cursor, max).map_err(journal_error),
            StorageJournal::Sql(j) => j.read_in_order(cursor, max),
            StorageJournal::Closed(_) => Err(self.closed()),
        }
    }
}

/// Runs `f` on the instance's journal, as an exporter walks it.
pub(crate) fn with_ordered<R>(
    f: impl FnOnce(&mut dyn interlock_core::export::ExportJournal) -> R,
) -> R {
    let mut j = JOURNAL.0.borrow_mut();
    if let StorageJournal::File(file) = &mut *j {
        file.new_call();
    }
    f(&mut *j)
}

/// Runs `f` on the instance's journal (every gate call goes through here).
pub(crate) fn with_journal<R>(f: impl FnOnce(&mut dyn Journal) -> R) -> R {
    let mut j = JOURNAL.0.borrow_mut();
    if let StorageJournal::File(file) = &mut *j {
        file.new_call();
    }
    f(&mut *j)
}

impl ja::Guest for Component {
    fn open(backend: ja::Backend) -> Result<(), ty::JournalError> {
        let opened = match backend {
            ja::Backend::File => FileJournal::open(HostFiles)
                .map(StorageJournal::File)
                .map_err(journal_error),
            ja::Backend::Sqlite => {
                SqlJournal::open(HostSql, Dialect::Sqlite).map(StorageJournal::Sql)
            }
            ja::Backend::Postgres => {
                SqlJournal::open(HostSql, Dialect::Postgres).map(StorageJournal::Sql)
            }
        };
        let mut slot = JOURNAL.0.borrow_mut();
        match opened {
            Ok(j) => {
                *slot = j;
                Ok(())
            }
            Err(e) => {
                *slot = StorageJournal::Closed(Some(e.clone()));
                Err(to_wit_journal_err(e))
            }
        }
    }

    fn repair() -> Result<ja::RepairReport, ty::JournalError> {
        let report = FileJournal::repair(&mut HostFiles)
            .map_err(|e| to_wit_journal_err(journal_error(e)))?;
        Ok(ja::RepairReport {
            torn_offset: report.torn_offset,
            torn_bytes: report.torn_bytes,
            saved_to: report.saved_to,
        })
    }

    fn entries_in_order() -> Result<Vec<String>, ty::JournalError> {
        let mut slot = JOURNAL.0.borrow_mut();
        let entries = match &mut *slot {
            StorageJournal::Sql(j) => j.entries_in_order(),
            StorageJournal::File(j) => file_entries(j.files_mut()),
            closed => Err(closed.closed()),
        };
        entries.map_err(to_wit_journal_err)
    }
}

/// The lines of `journal.jsonl`, as stored.
fn file_entries(files: &mut HostFiles) -> Result<Vec<String>, JournalError> {
    let name = interlock_journal::JOURNAL_FILE;
    let io = |e: StorageError| JournalError::Io(format!("{name}: {e}"));
    let Some(len) = files.file_size(name).map_err(io)? else {
        return Ok(Vec::new());
    };
    let bytes = files.file_read(name, 0, len).map_err(io)?;
    let text = core::str::from_utf8(&bytes)
        .map_err(|e| JournalError::Corrupt(format!("{name} is not UTF-8: {e}")))?;
    Ok(text.lines().map(String::from).collect())
}
