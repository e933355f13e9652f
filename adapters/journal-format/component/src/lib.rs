//! The journal format as a component: WIT calls in, `interlock-journal-format` calls, WIT
//! values out. No rule lives here; if this file grows logic, that logic belongs in the
//! crate, which the Rust file journal shares.
//!
//! `no_std` keeps the import list empty (Rust std would add wasi:cli and wasi:io).
#![no_std]
extern crate alloc;

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use interlock_journal_format as jf;

wit_bindgen::generate!({
    world: "journal-format",
    path: "wit",
    generate_all,
});

use exports::interlock::journal_format::format as f;

// The allocator, panic handler and cabi_realloc std would give (see its docs).
use interlock_component_rt as _;

fn err(e: jf::FormatError) -> f::FormatError {
    let message = e.to_string();
    let kind = match e {
        jf::FormatError::Corrupt { line, detail } => f::ErrorKind::Corrupt((line, detail)),
        jf::FormatError::TornTail { offset, bytes } => f::ErrorKind::TornTail((offset, bytes)),
        jf::FormatError::InvalidEntry { .. } => f::ErrorKind::InvalidEntry,
        jf::FormatError::NewerVersion { version } => f::ErrorKind::NewerVersion(version),
        jf::FormatError::BadFormatFile { .. } => f::ErrorKind::BadFormatFile,
    };
    f::FormatError { kind, message }
}

/// The bytes a latin-1 string carries (see `scan` in the WIT). A char above U+00FF is a
/// host's bug, not journal data: it traps.
fn latin1(data: &str) -> Vec<u8> {
    data.chars()
        .map(|c| u8::try_from(u32::from(c)).expect("scan data must be latin-1"))
        .collect()
}

struct Component;

impl f::Guest for Component {
    fn scan(data: String) -> Result<f::Scanned, f::FormatError> {
        let entries = jf::scan(&latin1(&data)).map_err(err)?;
        let mut streams: Vec<String> = Vec::new();
        let mut ids: BTreeMap<String, u64> = BTreeMap::new();
        let mut places = Vec::with_capacity(entries.len() * 4);
        for e in entries {
            let id = *ids.entry(e.head.stream).or_insert_with_key(|name| {
                streams.push(name.clone());
                streams.len() as u64 - 1
            });
            places.extend([e.offset, u64::from(e.len), id, u64::from(e.head.open)]);
        }
        Ok(f::Scanned { streams, places })
    }

    fn validate_append(
        entries: Vec<String>,
        stream: String,
        first_seq: u64,
        open: bool,
    ) -> Result<(), f::FormatError> {
        jf::validate_append(&entries, &stream, first_seq, open).map_err(err)
    }

    fn check_format_file(text: String) -> Result<u64, f::FormatError> {
        jf::check_format_file(&text).map_err(err)
    }

    fn format_file_text() -> String {
        jf::format_file_text()
    }

    fn torn_file_name(offset: u64, attempt: u32) -> String {
        jf::torn_file_name(offset, attempt)
    }

    fn complete_prefix(data: String) -> u64 {
        jf::complete_prefix(&latin1(&data)) as u64
    }

    fn lock_wait() -> (u64, u64) {
        (jf::LOCK_WAIT_MS, jf::LOCK_POLL_MS)
    }

    fn locked_message(dir: String, waited_ms: u64) -> String {
        jf::locked_message(&dir, waited_ms)
    }
}

export!(Component);
