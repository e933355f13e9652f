//! The journal contract suite (`interlock_journal::contract`) as a component: every case
//! runs over the host's `storage` import, so a host tests its own storage with the cases
//! the Rust stores run natively. The glue is WIT types in and out of the journal crate's;
//! the cases and every journal rule are `interlock-journal`'s.
//!
//! `no_std` keeps the component's imports to the storage: Rust std would add wasi:cli and
//! wasi:io.
#![no_std]
extern crate alloc;

use alloc::boxed::Box;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use interlock_journal::contract::{self, Fixture, Kind, Store};
use interlock_journal::{Dialect, Files, Rows, Sql, SqlValue, Statement, StorageError};

wit_bindgen::generate!({
    world: "journal-contract",
    path: "wit",
    generate_all,
});

use exports::interlock::journal_contract::suite as su;
use interlock::gate::storage as ws;

// The allocator, panic handler and cabi_realloc std would give.
use interlock_component_rt as _;

fn storage_err(e: ws::StorageError) -> StorageError {
    match e {
        ws::StorageError::Conflict(n) => StorageError::Conflict(n),
        ws::StorageError::UnexpectedChanges(i) => StorageError::UnexpectedChanges(i),
        ws::StorageError::Io(m) => StorageError::Io(m),
        ws::StorageError::Unsupported(m) => StorageError::Unsupported(m),
    }
}

/// The host's files.
struct HostFiles;

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

/// The host's database.
struct HostSql;

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
                params: s
                    .params
                    .iter()
                    .map(|p| match p {
                        SqlValue::Null => ws::SqlValue::Null,
                        SqlValue::Integer(n) => ws::SqlValue::Integer(*n),
                        SqlValue::Text(t) => ws::SqlValue::Text(t.clone()),
                    })
                    .collect(),
                expect_changes: s.expect_changes,
            })
            .collect();
        let rows = ws::sql_batch(&batch, write, durable).map_err(storage_err)?;
        Ok(rows
            .into_iter()
            .map(|st| {
                st.into_iter()
                    .map(|row| {
                        row.into_iter()
                            .map(|v| match v {
                                ws::SqlValue::Null => SqlValue::Null,
                                ws::SqlValue::Integer(n) => SqlValue::Integer(n),
                                ws::SqlValue::Text(t) => SqlValue::Text(t),
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect())
    }
}

/// The host's store, new for the case; every handle is the one import.
struct HostStore(Kind);

impl Fixture for HostStore {
    fn kind(&self) -> Kind {
        self.0
    }
    fn store(&mut self) -> Store {
        match self.0 {
            Kind::File => Store::Files(Box::new(HostFiles)),
            Kind::Sql(_) => Store::Sql(Box::new(HostSql)),
        }
    }
}

fn kind(k: su::Kind) -> Kind {
    match k {
        su::Kind::File => Kind::File,
        su::Kind::Sqlite => Kind::Sql(Dialect::Sqlite),
        su::Kind::Postgres => Kind::Sql(Dialect::Postgres),
    }
}

struct Component;

impl su::Guest for Component {
    fn cases(k: su::Kind) -> Vec<String> {
        let k = kind(k);
        contract::CASES
            .iter()
            .filter(|(_, only, _)| only.applies(k))
            .map(|(name, _, _)| name.to_string())
            .collect()
    }

    fn run(name: String, k: su::Kind) -> Result<(), String> {
        contract::run(&name, &mut HostStore(kind(k)))
    }
}

export!(Component);
