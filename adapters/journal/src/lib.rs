//! Every journal backend of Interlock, written once: the rules of the file journal and of
//! the SQL journal, over the primitive storage a host provides ([`Files`], [`Sql`]: the
//! `storage` interface of `wit/storage.wit`, as Rust traits).
//!
//! The same code runs in two places. Inside the gate component (`guest/component`, world
//! `gate-storage`), over the host's storage import: the host keeps only I/O (open, lock,
//! read at an offset, append at a known length, fdatasync, run statements in a transaction),
//! so every host stores and reads the same bytes and rows by the same rules. And natively
//! (`adapters/file-journal`, `adapters/sql-journal`), over std files and database drivers,
//! for tests, the simulation, benches and fuzzing.
//!
//! * [`FileJournal`]: `journal.jsonl` and its companions (the format file, the
//!   `journal.index` checkpoint, torn-tail side files); the index of where every entry is,
//!   append validation, the scan, torn-tail detection and repair. Several journals (gate
//!   instances) may share one host store: compare-and-append is `file_append` at the length
//!   this journal knows, and a journal that finds the file longer reads what others wrote.
//! * [`SqlJournal`]: the one schema (`schema.sql`, two dialect tokens) and every statement,
//!   compare-and-append as guarded statements in one transaction.
//! * [`MemFiles`]: [`Files`] in memory, for tests.
//! * [`contract`]: the journal contract as one suite of cases, run against every store.
#![no_std]
extern crate alloc;

mod checkpoint;
pub mod contract;
mod file;
mod index;
mod memory;
mod sql;
mod storage;

pub use checkpoint::INDEX_FILE;
pub use file::{journal_error, Error, FileJournal, RepairReport, CHECKPOINT_AFTER_BYTES};
pub use memory::MemFiles;
pub use sql::{Dialect, SqlJournal, FORMAT_KEY, OPEN_STREAMS, SCHEMA};
pub use storage::{Files, Rows, Sql, SqlValue, Statement, StorageError};

pub use interlock_journal_format::{
    FORMAT_FILE, JOURNAL_FILE, LOCK_FILE, LOCK_WAIT_MS, TORN_PREFIX,
};
