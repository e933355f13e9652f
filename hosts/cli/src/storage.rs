//! `interlock:gate/storage`: the primitive storage under the journal that runs inside the
//! gate component: a journal folder ([`StdFiles`]), memory ([`MemoryFiles`]) or a database
//! ([`SqlStore`]). This host stores and reads bytes and rows; every rule of the journal
//! (what the bytes mean, the index, torn tails, the schema, compare-and-append) is the
//! component's (`adapters/journal`).

use std::sync::{Arc, Mutex, MutexGuard};

use interlock_file_journal::StdFiles;
use interlock_journal::{Dialect, Files, MemFiles, Rows, Sql, SqlValue, Statement, StorageError};
#[cfg(feature = "sql")]
use interlock_sql_journal::SqlStore;

use crate::bindings::exports::interlock::gate::journal_admin::Backend;
use crate::bindings::interlock::gate::storage as wit;
use crate::gate::HostState;

/// A file store a gate instance can hold (clones share the store: the instances of one
/// process share one folder and its lock).
pub trait FileStore: Files + Send {
    fn clone_store(&self) -> Box<dyn FileStore>;
}

impl<T: Files + Send + Clone + 'static> FileStore for T {
    fn clone_store(&self) -> Box<dyn FileStore> {
        Box::new(self.clone())
    }
}

/// A database connection shared by the gate instances given it (one connection, used by
/// one call at a time), in its dialect.
#[derive(Clone)]
pub struct SharedSql {
    sql: Arc<Mutex<Box<dyn Sql + Send>>>,
    dialect: Dialect,
}

impl SharedSql {
    pub fn new(sql: impl Sql + Send + 'static, dialect: Dialect) -> SharedSql {
        SharedSql {
            sql: Arc::new(Mutex::new(Box::new(sql))),
            dialect,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Box<dyn Sql + Send>> {
        // A batch is whole or rolled back by the database: a panic cannot tear it.
        self.sql.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Sql for SharedSql {
    fn sql_batch(
        &mut self,
        statements: &[Statement],
        write: bool,
        durable: bool,
    ) -> Result<Vec<Rows>, StorageError> {
        self.lock().sql_batch(statements, write, durable)
    }
}

/// What a gate instance's journal is stored in. Clones share the storage.
pub enum Storage {
    /// A file journal's folder (or memory).
    Files(Box<dyn FileStore>),
    /// A SQL journal's database.
    Sql(SharedSql),
}

impl Clone for Storage {
    fn clone(&self) -> Storage {
        match self {
            Storage::Files(f) => Storage::Files(f.clone_store()),
            Storage::Sql(s) => Storage::Sql(s.clone()),
        }
    }
}

impl From<StdFiles> for Storage {
    fn from(f: StdFiles) -> Storage {
        Storage::Files(Box::new(f))
    }
}

impl From<MemoryFiles> for Storage {
    fn from(f: MemoryFiles) -> Storage {
        Storage::Files(Box::new(f))
    }
}

impl From<SwitchFiles> for Storage {
    fn from(f: SwitchFiles) -> Storage {
        Storage::Files(Box::new(f))
    }
}

#[cfg(feature = "sql")]
impl From<SqlStore> for Storage {
    fn from(s: SqlStore) -> Storage {
        let dialect = s.dialect();
        Storage::Sql(SharedSql::new(s, dialect))
    }
}

impl Storage {
    /// A file store.
    pub fn from_files(files: impl FileStore + 'static) -> Storage {
        Storage::Files(Box::new(files))
    }

    /// An empty file journal in memory (for checks that record nothing, and tests).
    pub fn memory() -> Storage {
        MemoryFiles::new().into()
    }

    /// The journal the component opens over this storage (`journal-admin.open`).
    pub fn backend(&self) -> Backend {
        match self {
            Storage::Files(_) => Backend::File,
            Storage::Sql(s) => match s.dialect {
                Dialect::Sqlite => Backend::Sqlite,
                Dialect::Postgres => Backend::Postgres,
            },
        }
    }

    fn files(&mut self) -> Result<&mut dyn FileStore, StorageError> {
        match self {
            Storage::Files(f) => Ok(&mut **f),
            Storage::Sql(_) => Err(StorageError::Unsupported(
                "this journal is a SQL journal: it has no files".into(),
            )),
        }
    }

    fn sql(&mut self) -> Result<&mut SharedSql, StorageError> {
        match self {
            Storage::Sql(s) => Ok(s),
            Storage::Files(_) => Err(StorageError::Unsupported(
                "this journal is a file journal: it runs no SQL".into(),
            )),
        }
    }
}

impl Files for Storage {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        self.files()?.file_size(name)
    }
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        self.files()?.file_read(name, offset, len)
    }
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        self.files()?.file_append(name, at, bytes)
    }
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        self.files()?.file_sync(name)
    }
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.files()?.file_truncate(name, len)
    }
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.files()?.file_replace(name, bytes)
    }
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        self.files()?.file_create(name, bytes)
    }
}

/// Files in memory, shared by clones: a test drops a "crashed" host and starts a fresh one
/// on the same bytes. Nothing is lost, so a sync only counts.
#[derive(Clone, Default)]
pub struct MemoryFiles {
    inner: Arc<Mutex<MemFiles>>,
}

impl MemoryFiles {
    pub fn new() -> MemoryFiles {
        MemoryFiles::default()
    }

    fn lock(&self) -> MutexGuard<'_, MemFiles> {
        // Every call changes the buffers whole: a panic elsewhere leaves them consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bytes of `name` (empty when missing).
    pub fn bytes(&self, name: &str) -> Vec<u8> {
        self.lock()
            .get(name)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
    }

    /// Sets the bytes of `name` past the journal, as an attacker editing it would.
    pub fn set(&self, name: &str, bytes: &[u8]) {
        self.lock().set(name, bytes)
    }
}

impl Files for MemoryFiles {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        self.lock().file_size(name)
    }
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        self.lock().file_read(name, offset, len)
    }
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        self.lock().file_append(name, at, bytes)
    }
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        self.lock().file_sync(name)
    }
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.lock().file_truncate(name, len)
    }
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.lock().file_replace(name, bytes)
    }
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        self.lock().file_create(name, bytes)
    }
}

/// A file store that can be closed and opened again under every instance holding it (a
/// journal closed and reopened as a new process would, with the old processes' instances
/// still around). While closed, every call fails with `io` saying why.
#[derive(Clone)]
pub struct SwitchFiles {
    inner: Arc<Mutex<Result<Box<dyn FileStore>, String>>>,
}

impl SwitchFiles {
    pub fn new(store: impl FileStore + 'static) -> SwitchFiles {
        SwitchFiles {
            inner: Arc::new(Mutex::new(Ok(Box::new(store)))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Result<Box<dyn FileStore>, String>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the store (a folder's lock is let go), for every holder.
    pub fn close(&self, why: &str) {
        *self.lock() = Err(why.to_owned());
    }

    /// Puts a (re)opened store behind every holder.
    pub fn set(&self, store: impl FileStore + 'static) {
        *self.lock() = Ok(Box::new(store));
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut dyn FileStore) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        match &mut *self.lock() {
            Ok(store) => f(&mut **store),
            Err(why) => Err(StorageError::Io(why.clone())),
        }
    }
}

impl Files for SwitchFiles {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        self.with(|s| s.file_size(name))
    }
    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        self.with(|s| s.file_read(name, offset, len))
    }
    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        self.with(|s| s.file_append(name, at, bytes))
    }
    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        self.with(|s| s.file_sync(name))
    }
    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        self.with(|s| s.file_truncate(name, len))
    }
    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.with(|s| s.file_replace(name, bytes))
    }
    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        self.with(|s| s.file_create(name, bytes))
    }
}

/// A store whose every call fails with `why` (a folder or database that could not be
/// opened): the component's `journal-admin.open` then says so.
#[derive(Clone)]
pub struct Unavailable(pub String);

impl Files for Unavailable {
    fn file_size(&mut self, _: &str) -> Result<Option<u64>, StorageError> {
        Err(StorageError::Io(self.0.clone()))
    }
    fn file_read(&mut self, _: &str, _: u64, _: u64) -> Result<Vec<u8>, StorageError> {
        Err(StorageError::Io(self.0.clone()))
    }
    fn file_append(&mut self, _: &str, _: u64, _: &[u8]) -> Result<(), StorageError> {
        Err(StorageError::Io(self.0.clone()))
    }
    fn file_sync(&mut self, _: &str) -> Result<(), StorageError> {
        Err(StorageError::Io(self.0.clone()))
    }
    fn file_truncate(&mut self, _: &str, _: u64) -> Result<(), StorageError> {
        Err(StorageError::Io(self.0.clone()))
    }
    fn file_replace(&mut self, _: &str, _: &[u8]) -> Result<(), StorageError> {
        Err(StorageError::Io(self.0.clone()))
    }
    fn file_create(&mut self, _: &str, _: &[u8]) -> Result<bool, StorageError> {
        Err(StorageError::Io(self.0.clone()))
    }
}

// ---------------------------------------------------------------- the WIT interfaces

fn wit_error(e: StorageError) -> wit::StorageError {
    match e {
        StorageError::Conflict(n) => wit::StorageError::Conflict(n),
        StorageError::UnexpectedChanges(i) => wit::StorageError::UnexpectedChanges(i),
        StorageError::Io(m) => wit::StorageError::Io(m),
        StorageError::Unsupported(m) => wit::StorageError::Unsupported(m),
    }
}

impl wit::Host for HostState {
    fn file_size(&mut self, name: String) -> Result<Option<u64>, wit::StorageError> {
        self.storage.file_size(&name).map_err(wit_error)
    }

    fn file_read(
        &mut self,
        name: String,
        offset: u64,
        len: u64,
    ) -> Result<Vec<u8>, wit::StorageError> {
        self.storage
            .file_read(&name, offset, len)
            .map_err(wit_error)
    }

    fn file_append(
        &mut self,
        name: String,
        at: u64,
        bytes: Vec<u8>,
    ) -> Result<(), wit::StorageError> {
        self.storage
            .file_append(&name, at, &bytes)
            .map_err(wit_error)
    }

    fn file_sync(&mut self, name: String) -> Result<(), wit::StorageError> {
        self.storage.file_sync(&name).map_err(wit_error)
    }

    fn file_truncate(&mut self, name: String, len: u64) -> Result<(), wit::StorageError> {
        self.storage.file_truncate(&name, len).map_err(wit_error)
    }

    fn file_replace(&mut self, name: String, bytes: Vec<u8>) -> Result<(), wit::StorageError> {
        self.storage.file_replace(&name, &bytes).map_err(wit_error)
    }

    fn file_create(&mut self, name: String, bytes: Vec<u8>) -> Result<bool, wit::StorageError> {
        self.storage.file_create(&name, &bytes).map_err(wit_error)
    }

    fn sql_batch(
        &mut self,
        statements: Vec<wit::Statement>,
        write: bool,
        durable: bool,
    ) -> Result<Vec<Vec<Vec<wit::SqlValue>>>, wit::StorageError> {
        let batch: Vec<Statement> = statements
            .into_iter()
            .map(|s| Statement {
                sql: s.sql,
                params: s
                    .params
                    .into_iter()
                    .map(|p| match p {
                        wit::SqlValue::Null => SqlValue::Null,
                        wit::SqlValue::Integer(n) => SqlValue::Integer(n),
                        wit::SqlValue::Text(t) => SqlValue::Text(t),
                    })
                    .collect(),
                expect_changes: s.expect_changes,
            })
            .collect();
        let rows = self
            .storage
            .sql()
            .and_then(|s| s.sql_batch(&batch, write, durable))
            .map_err(wit_error)?;
        Ok(rows
            .into_iter()
            .map(|st| {
                st.into_iter()
                    .map(|row| {
                        row.into_iter()
                            .map(|v| match v {
                                SqlValue::Null => wit::SqlValue::Null,
                                SqlValue::Integer(n) => wit::SqlValue::Integer(n),
                                SqlValue::Text(t) => wit::SqlValue::Text(t),
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect())
    }
}
