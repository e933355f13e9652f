//! The journal's file format, written once for every host.
//!
//! A journal is a directory holding `journal.jsonl` (every entry text followed by `"\n"`,
//! all streams interleaved), `journal.lock`, and `journal.format` (the format version).
//! This crate holds every rule about those bytes: what an entry's head is, which appends
//! are valid, how a file (or its tail) scans into entries, when its end is torn, how a
//! torn tail's side file is named, which format versions are understood, and the text of
//! every error. Hosts keep only their I/O (open, lock, write, sync, truncate): the Rust
//! file journal (adapters/file-journal) calls this crate directly, Node and Python through
//! the component in `component/`.
//!
//! `no_std` + `alloc` so that the component imports nothing.
#![no_std]
extern crate alloc;
#[cfg(test)]
extern crate std;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use serde::Deserialize;

/// Name of the journal file inside the journal directory.
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// Name of the lock file inside the journal directory.
pub const LOCK_FILE: &str = "journal.lock";
/// Name of the format version file inside the journal directory.
pub const FORMAT_FILE: &str = "journal.format";
/// Prefix of the side files a repair writes (`journal.torn-<offset>`).
pub const TORN_PREFIX: &str = "journal.torn-";
/// The format version this reader writes and understands.
pub const FORMAT_VERSION: u64 = 1;
/// How long opening a file journal waits, by default, for the lock another writer holds,
/// polling every [`LOCK_POLL_MS`]: a writer starting while another finishes is not turned
/// away at once. A host may choose another wait (0: do not wait).
pub const LOCK_WAIT_MS: u64 = 5_000;
/// How often a waiting open tries the lock again.
pub const LOCK_POLL_MS: u64 = 20;
/// What `journal.format` starts with, before the version number.
const FORMAT_MAGIC: &str = "interlock-journal ";

/// How journal bytes break the format. One `Display` per kind: every host shows these
/// texts, so an operator reads the same sentence whichever host found the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// A complete line (ending in `\n`) is not a valid entry: not UTF-8, not a JSON object,
    /// `stream`/`seq`/`open` missing or of the wrong type, or `seq` not equal to the entry's
    /// position in its stream. `line` is 1-based.
    Corrupt { line: u64, detail: String },
    /// The file ends with a partial line (no final `\n`) of `bytes` bytes at byte `offset`.
    TornTail { offset: u64, bytes: u64 },
    /// An entry given to an append was rejected; nothing may be written.
    InvalidEntry { detail: String },
    /// `journal.format` names a version newer than [`FORMAT_VERSION`].
    NewerVersion { version: u64 },
    /// `journal.format` is not `interlock-journal <known version>\n`.
    BadFormatFile { detail: String },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Corrupt { line, detail } => write!(
                f,
                "corrupt journal: {JOURNAL_FILE} line {line} is not a valid entry: {detail}"
            ),
            FormatError::TornTail { offset, bytes } => write!(
                f,
                "torn journal: {JOURNAL_FILE} ends with a partial last line at byte offset \
                 {offset} ({bytes} bytes, no final newline); torn data is never trusted nor \
                 dropped silently: run `repair` to save it to {TORN_PREFIX}{offset} and \
                 truncate the journal to its last complete line"
            ),
            FormatError::InvalidEntry { detail } => write!(f, "invalid journal entry: {detail}"),
            FormatError::NewerVersion { version } => write!(
                f,
                "journal format version {version} is newer than this reader understands \
                 ({FORMAT_VERSION}); upgrade Interlock"
            ),
            FormatError::BadFormatFile { detail } => write!(
                f,
                "journal format file {FORMAT_FILE} is not valid: {detail}; expected {:?}",
                format_file_text()
            ),
        }
    }
}

/// The three members of an entry a backend reads; every other member is the gate's.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Head {
    pub stream: String,
    pub seq: u64,
    pub open: bool,
}

/// Parses the head of one entry (without its `\n`); the error is the detail of a
/// [`FormatError::Corrupt`] or [`FormatError::InvalidEntry`].
pub fn parse_head(body: &[u8]) -> Result<Head, String> {
    let text = core::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
    // serde's derived struct visitor also accepts a JSON array; an entry must be an object.
    if !text.trim_start().starts_with('{') {
        return Err("not a JSON object".to_string());
    }
    serde_json::from_str::<Head>(text).map_err(|e| format!("not a journal entry: {e}"))
}

/// The head of a line that was appended by a writer that checked it with [`validate`]
/// (a journal sharing its store with this one, in this process: the store's lock keeps
/// every other writer out), read without checking the rest of the line: only its top-level
/// structure is walked, and only `stream`, `seq` and `open` are parsed. `None` when it cannot
/// tell (an escaped key, a duplicate member, anything unusual): then [`parse_head`] decides.
/// For a line [`parse_head`] accepts, this answers the same head or `None`; a line that is
/// not valid JSON beyond its head may be read here (it was checked when it was written, and
/// the gate verifies every entry it reads), never at open, which scans with [`parse_head`].
pub fn appended_head(body: &[u8]) -> Option<Head> {
    core::str::from_utf8(body).ok()?;
    let ws = |i: usize| {
        let mut i = i;
        while matches!(body.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            i += 1;
        }
        i
    };
    let mut i = ws(0);
    if body.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let (mut stream, mut seq, mut open) = (None, None, None);
    loop {
        i = ws(i);
        if body.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(body, i)?;
        let key = &body[i + 1..key_end - 1];
        if key.contains(&b'\\') {
            return None;
        }
        i = ws(key_end);
        if body.get(i) != Some(&b':') {
            return None;
        }
        let start = ws(i + 1);
        let end = value_end(body, start)?;
        let value = &body[start..end];
        match key {
            b"stream" if stream.is_none() => {
                stream = Some(serde_json::from_slice::<String>(value).ok()?);
            }
            b"seq" if seq.is_none() => {
                let plain = value.iter().all(u8::is_ascii_digit)
                    && !value.is_empty()
                    && (value.len() == 1 || value[0] != b'0');
                if !plain {
                    return None;
                }
                seq = Some(core::str::from_utf8(value).ok()?.parse::<u64>().ok()?);
            }
            b"open" if open.is_none() => {
                open = Some(match value {
                    b"true" => true,
                    b"false" => false,
                    _ => return None,
                });
            }
            b"stream" | b"seq" | b"open" => return None,
            _ => {}
        }
        i = ws(end);
        match body.get(i) {
            Some(b',') => i += 1,
            Some(b'}') => break,
            _ => return None,
        }
    }
    if ws(i + 1) != body.len() {
        return None;
    }
    Some(Head {
        stream: stream?,
        seq: seq?,
        open: open?,
    })
}

/// The index after the closing quote of the JSON string starting at `i`.
fn string_end(body: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        j += memchr::memchr2(b'"', b'\\', body.get(j..)?)?;
        match body[j] {
            b'"' => return Some(j + 1),
            _ => j += 2,
        }
    }
}

/// The index after the JSON value starting at `i` (its structure only).
fn value_end(body: &[u8], i: usize) -> Option<usize> {
    match body.get(i)? {
        b'"' => string_end(body, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match body.get(j)? {
                    b'"' => {
                        j = string_end(body, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while !matches!(
                body.get(j),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// Checks one entry given to an append of `stream` at position `seq`; the error is a detail.
pub fn validate(entry: &str, stream: &str, seq: u64, open: bool) -> Result<(), String> {
    if entry.contains('\n') {
        return Err("contains a newline; an entry must be a single line".to_string());
    }
    if u32::try_from(entry.len()).is_err() {
        return Err(format!("is {} bytes long, more than 4 GiB", entry.len()));
    }
    let head = parse_head(entry.as_bytes())?;
    if head.stream != stream {
        return Err(format!(
            "its stream member is {:?} but the append is to stream {stream:?}",
            head.stream
        ));
    }
    if head.seq != seq {
        return Err(format!(
            "its seq member is {} but should be {seq}",
            head.seq
        ));
    }
    if head.open != open {
        return Err(format!(
            "its open member is {} but the append says open={open}",
            head.open
        ));
    }
    Ok(())
}

/// Checks a whole append batch: entry `i` must be valid for `stream` at `first_seq + i`.
pub fn validate_append<S: AsRef<str>>(
    entries: &[S],
    stream: &str,
    first_seq: u64,
    open: bool,
) -> Result<(), FormatError> {
    for (i, entry) in entries.iter().enumerate() {
        let seq = first_seq + i as u64;
        validate(entry.as_ref(), stream, seq, open).map_err(|d| FormatError::InvalidEntry {
            detail: format!("entry {i} of the batch (seq {seq}): {d}"),
        })?;
    }
    Ok(())
}

/// One entry found by a scan: where it is (`len` without its `\n`) and its head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub offset: u64,
    pub len: u32,
    pub head: Head,
}

/// Reads journal lines one at a time, from byte `offset` of `journal.jsonl` after `line`
/// lines: the caller supplies the bytes (all of them, or a line at a time), the scanner
/// says what each line is.
#[derive(Debug, Clone)]
pub struct Scanner {
    offset: u64,
    line: u64,
}

impl Scanner {
    /// A scan starting at byte `offset`, after `lines_before` complete lines (entries).
    pub fn new(offset: u64, lines_before: u64) -> Scanner {
        Scanner {
            offset,
            line: lines_before,
        }
    }

    /// Byte offset of the next line.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// One line read at [`Scanner::offset`]: up to and including its `\n`, or, for the last
    /// line of the file, everything left (then the tail is torn).
    pub fn line(&mut self, line: &[u8]) -> Result<Entry, FormatError> {
        let n = line.len() as u64;
        let Some(body) = line.strip_suffix(b"\n") else {
            return Err(FormatError::TornTail {
                offset: self.offset,
                bytes: n,
            });
        };
        self.line += 1;
        let line = self.line;
        let len = u32::try_from(body.len()).map_err(|_| FormatError::Corrupt {
            line,
            detail: format!("{} bytes long, more than 4 GiB", body.len()),
        })?;
        let head = parse_head(body).map_err(|detail| FormatError::Corrupt { line, detail })?;
        let entry = Entry {
            offset: self.offset,
            len,
            head,
        };
        self.offset += n;
        Ok(entry)
    }

    /// [`Scanner::line`] for a line a checking writer appended while this reader had the
    /// journal open ([`appended_head`]); falls back to [`Scanner::line`] when it cannot tell.
    pub fn appended_line(&mut self, line: &[u8]) -> Result<Entry, FormatError> {
        let Some(body) = line.strip_suffix(b"\n") else {
            return self.line(line);
        };
        let (Some(head), Ok(len)) = (appended_head(body), u32::try_from(body.len())) else {
            return self.line(line);
        };
        self.line += 1;
        let entry = Entry {
            offset: self.offset,
            len,
            head,
        };
        self.offset += line.len() as u64;
        Ok(entry)
    }

    /// Checks that the entry just returned by [`Scanner::line`] comes right after the
    /// `position` entries its stream already has.
    pub fn check_seq(&self, entry: &Entry, position: u64) -> Result<(), FormatError> {
        if entry.head.seq == position {
            return Ok(());
        }
        Err(FormatError::Corrupt {
            line: self.line,
            detail: format!(
                "seq is {} but stream {:?} has {position} entries before this line",
                entry.head.seq, entry.head.stream
            ),
        })
    }
}

/// Scans a whole `journal.jsonl` into its entries, in file order, checking each stream's
/// `seq` runs 0, 1, 2, ...; the first torn tail or corrupt line is the error.
pub fn scan(data: &[u8]) -> Result<Vec<Entry>, FormatError> {
    let mut scanner = Scanner::new(0, 0);
    let mut lengths: BTreeMap<String, u64> = BTreeMap::new();
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| p + 1);
        let (line, tail) = rest.split_at(end);
        rest = tail;
        let entry = scanner.line(line)?;
        let n = lengths.entry(entry.head.stream.clone()).or_insert(0);
        scanner.check_seq(&entry, *n)?;
        *n += 1;
        out.push(entry);
    }
    Ok(out)
}

/// Length of the longest prefix of `data` that ends with `\n` (what a repair keeps).
pub fn complete_prefix(data: &[u8]) -> usize {
    data.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1)
}

/// The name of the side file a repair saves a torn tail at `offset` to: `journal.torn-<offset>`,
/// then `.1`, `.2`, ... for later `attempt`s when that name is taken (nothing is overwritten).
pub fn torn_file_name(offset: u64, attempt: u32) -> String {
    if attempt == 0 {
        format!("{TORN_PREFIX}{offset}")
    } else {
        format!("{TORN_PREFIX}{offset}.{attempt}")
    }
}

/// Why a file journal could not be opened: another writer holds `dir`'s lock, still after
/// `waited_ms`. A file journal has one writer per directory; the sentence names the shared
/// backends, the way to run several.
pub fn locked_message(dir: &str, waited_ms: u64) -> String {
    let waited = if waited_ms == 0 {
        String::new()
    } else {
        format!(", still after waiting {waited_ms} ms")
    };
    format!(
        "journal directory {dir} is locked by another writer ({LOCK_FILE} is held){waited}; \
         a file journal has one writer per directory: to run several workers, share a SQLite \
         journal on one machine (sqlite:///path/to/journal.db) or a PostgreSQL journal across \
         machines (postgres://user@host/db)"
    )
}

/// The text of `journal.format` for the version this crate writes.
pub fn format_file_text() -> String {
    format!("{FORMAT_MAGIC}{FORMAT_VERSION}\n")
}

/// The version named by the text of `journal.format`. It must be exactly
/// `interlock-journal <version>\n` with a version this reader understands: a newer one is
/// refused ([`FormatError::NewerVersion`]), never guessed at. A journal directory without the
/// file but with a `journal.jsonl` predates versions and is version 1.
pub fn check_format_file(text: &str) -> Result<u64, FormatError> {
    let bad = |detail: &str| FormatError::BadFormatFile {
        detail: detail.to_string(),
    };
    let number = text
        .strip_prefix(FORMAT_MAGIC)
        .ok_or_else(|| bad("it does not start with \"interlock-journal \""))?
        .strip_suffix('\n')
        .ok_or_else(|| bad("it does not end with a newline"))?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("its version is not a decimal number"));
    }
    if number.len() > 1 && number.starts_with('0') {
        return Err(bad("its version has a leading zero"));
    }
    let version: u64 = number
        .parse()
        .map_err(|_| bad("its version is too large"))?;
    match version {
        FORMAT_VERSION => Ok(version),
        v if v > FORMAT_VERSION => Err(FormatError::NewerVersion { version: v }),
        _ => Err(bad("version 0 does not exist")),
    }
}

#[cfg(test)]
mod tests;
