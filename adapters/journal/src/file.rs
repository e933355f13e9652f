//! [`FileJournal`]: the file backend of the journal over a host's [`Files`].
//!
//! A journal is a folder holding:
//!
//! * `journal.jsonl`: every stream interleaved, one entry per line. Each line is the entry
//!   text exactly as the gate produced it followed by `"\n"`, nothing else, so journals are
//!   byte-identical across hosts.
//! * `journal.format`: the format version (`interlock-journal 1\n`), written when the journal
//!   is created; a newer version is refused, never guessed at. Every rule about the bytes of
//!   these files lives in `interlock-journal-format`.
//! * `journal.index` (optional): a checkpoint of the index at some length of the journal,
//!   so opening costs the open streams and the tail, not the whole history
//!   ([`crate::INDEX_FILE`]).
//! * `journal.torn-<offset>`: torn bytes a repair saved.
//!
//! (`journal.lock` is the host's: it takes it for as long as it serves the folder.)
//!
//! Every entry is a JSON object whose `stream`, `seq` and `open` members equal the arguments
//! of the append that wrote it; [`FileJournal::open`] rebuilds the index (byte offset and
//! length of each entry, per stream) from those three members. Entries are read back with
//! positional reads, never held in memory.
//!
//! Several journals may share one host store (gate instances of one process over one
//! folder, each with its own index): an append is `file_append` at the length this journal
//! has indexed, which the store refuses (`conflict`) when another journal appended first;
//! this journal then reads what was appended since, and answers by the contract (a
//! conflict with the stream's actual length, or the append retried at the new end when its
//! stream did not change). Every read first asks the file's length (`file_size`, which a
//! host answers from memory) and reads what was appended since.

use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use interlock_core::{Journal, JournalError};
use interlock_journal_format::{self as format, FormatError, Scanner};

use crate::checkpoint::{self, read_exact, Base, CheckpointError, MemStream};
use crate::index::Index;
use crate::storage::{Files, StorageError};
use crate::{FORMAT_FILE, JOURNAL_FILE};

/// [`FileJournal::open`] writes a new checkpoint when it had to scan at least this many
/// bytes past the last one (or the whole file, without one): the scan is paid once.
pub const CHECKPOINT_AFTER_BYTES: u64 = 64 << 20;

/// How much of `journal.jsonl` one read of a scan asks for.
const SCAN_CHUNK: u64 = 1 << 20;
/// Entries of a stream closer than this in the file are read with one call.
const READ_GAP: u64 = 16 << 10;
/// The most one read of entries asks for.
const READ_SPAN: u64 = 1 << 20;
/// What a scan answers when it meets a checkpoint another journal replaced (never shown:
/// the caller reloads the index).
const STALE: &str = "the checkpoint was replaced during a scan";
/// How many times an append is tried again after other journals sharing the store
/// appended to other streams first.
const APPEND_TRIES: u32 = 1000;

/// How a file journal call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The storage failed (or does not do file calls).
    Storage(StorageError),

    /// A complete line (ending in `\n`) of `journal.jsonl` is not a valid entry: not UTF-8,
    /// not a JSON object, `stream`/`seq`/`open` missing or of the wrong type, or `seq` not
    /// equal to the entry's position in its stream. `line` is 1-based.
    Corrupt { line: u64, detail: String },

    /// `journal.jsonl` ends with a partial line (no final `\n`) of `bytes` bytes starting at
    /// byte `offset`: the last write was torn. Run [`FileJournal::repair`].
    TornTail { offset: u64, bytes: u64 },

    /// Compare-and-append lost: the stream holds `actual` entries, not the expected number.
    Conflict { actual: u64 },

    /// An entry passed to [`FileJournal::append`] was rejected; nothing was written.
    InvalidEntry { detail: String },

    /// `journal.format` names a newer format version than this reader understands, or is
    /// not a format file at all: nothing is read or written.
    Format(FormatError),

    /// `journal.jsonl` changed under the journal in a way no append explains (it shrank, or
    /// an entry is no longer where it was): open the journal again.
    Changed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Storage(e) => write!(f, "journal I/O error: {e}"),
            Error::Corrupt { line, detail } => FormatError::Corrupt {
                line: *line,
                detail: detail.clone(),
            }
            .fmt(f),
            Error::TornTail { offset, bytes } => FormatError::TornTail {
                offset: *offset,
                bytes: *bytes,
            }
            .fmt(f),
            Error::Conflict { actual } => write!(
                f,
                "compare-and-append conflict: the stream holds {actual} entries, not the expected length"
            ),
            Error::InvalidEntry { detail } => FormatError::InvalidEntry {
                detail: detail.clone(),
            }
            .fmt(f),
            Error::Format(e) => e.fmt(f),
            Error::Changed(m) => write!(f, "{JOURNAL_FILE} changed under the journal: {m}"),
        }
    }
}

impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        Error::Storage(e)
    }
}

impl From<FormatError> for Error {
    fn from(e: FormatError) -> Self {
        match e {
            FormatError::Corrupt { line, detail } => Error::Corrupt { line, detail },
            FormatError::TornTail { offset, bytes } => Error::TornTail { offset, bytes },
            FormatError::InvalidEntry { detail } => Error::InvalidEntry { detail },
            other => Error::Format(other),
        }
    }
}

/// A checkpoint that cannot be read while in use: a storage failure, or damage found in a
/// record (checked when read). A replaced one is handled where it is found (the index is
/// reloaded).
fn checkpoint_error(e: CheckpointError) -> Error {
    match e {
        CheckpointError::Storage(s) => Error::Storage(s),
        other => Error::Storage(StorageError::Io(other.to_string())),
    }
}

/// The gate's error for a file journal error. A conflict keeps its actual length, because
/// the gate re-reads from there; everything else carries the journal's message.
pub fn journal_error(e: Error) -> JournalError {
    match e {
        Error::Conflict { actual } => JournalError::Conflict(actual),
        Error::Corrupt { .. } => JournalError::Corrupt(e.to_string()),
        Error::TornTail { .. } => JournalError::TornTail(e.to_string()),
        Error::Storage(_) | Error::Changed(_) => JournalError::Io(e.to_string()),
        other => JournalError::Other(other.to_string()),
    }
}

/// What [`FileJournal::repair`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// Byte offset where the torn tail started (the journal's new length), if there was one.
    pub torn_offset: Option<u64>,
    /// How many torn bytes were moved out of `journal.jsonl` (0 when nothing to repair).
    pub torn_bytes: u64,
    /// The side file (its name in the folder) holding the torn bytes, if any.
    pub saved_to: Option<String>,
}

impl RepairReport {
    fn nothing() -> RepairReport {
        RepairReport {
            torn_offset: None,
            torn_bytes: 0,
            saved_to: None,
        }
    }
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.torn_offset, &self.saved_to) {
            (Some(offset), Some(name)) => write!(
                f,
                "saved {} torn bytes from offset {offset} to {name} and truncated {JOURNAL_FILE} to {offset} bytes",
                self.torn_bytes,
            ),
            _ => write!(f, "{JOURNAL_FILE} ends with a complete line: nothing to repair"),
        }
    }
}

/// Offset and length (without `\n`) of one entry in `journal.jsonl`.
type Place = (u64, u32);

/// An open file journal over `S`. See the module documentation.
pub struct FileJournal<S: Files> {
    files: S,
    /// Length of `journal.jsonl` this journal has indexed (every byte of it is a complete
    /// entry).
    len: u64,
    /// Offset and length of the last entry (for a checkpoint's check), if any.
    last: Option<Place>,
    index: Index,
    /// Bytes `open` read and parsed (the tail after the checkpoint, or the whole file).
    scanned: u64,
    /// Set by [`FileJournal::new_call`]: the file's length is asked once per call.
    once_per_call: bool,
    /// The file's length was asked since the last [`FileJournal::new_call`].
    looked: bool,
}

impl<S: Files> fmt::Debug for FileJournal<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileJournal")
            .field("bytes", &self.len)
            .field("streams", &self.stream_count())
            .field("open_streams", &self.index.open.len())
            .field("entries", &self.index.entries)
            .field("checkpoint", &self.checkpoint_covers())
            .finish()
    }
}

impl<S: Files> FileJournal<S> {
    /// Opens the journal `files` holds: checks `journal.format` (or, for a new journal,
    /// writes it and creates `journal.jsonl`), then builds the index from the checkpoint
    /// (`journal.index`) and the tail after it when the checkpoint matches the file, else
    /// from the whole file. After scanning [`CHECKPOINT_AFTER_BYTES`] or more it writes a
    /// checkpoint. A torn last line is [`Error::TornTail`], a bad line [`Error::Corrupt`];
    /// nothing is changed then.
    pub fn open(mut files: S) -> Result<Self, Error> {
        check_format(&mut files)?;
        let file_len = match files.file_size(JOURNAL_FILE)? {
            Some(n) => n,
            None => {
                // Created empty and durably (its name too), so that the journal exists
                // before anything is appended to it.
                files.file_create(JOURNAL_FILE, b"")?;
                files.file_size(JOURNAL_FILE)?.unwrap_or(0)
            }
        };
        let mut journal = FileJournal {
            files,
            len: 0,
            last: None,
            index: Index::default(),
            scanned: 0,
            once_per_call: false,
            looked: false,
        };
        journal.load(file_len)?;
        if journal.scanned >= CHECKPOINT_AFTER_BYTES {
            let _ = journal.checkpoint();
        }
        Ok(journal)
    }

    /// Builds the index of the first `file_len` bytes: from the checkpoint that matches
    /// them, if any, and the tail after it.
    fn load(&mut self, file_len: u64) -> Result<(), Error> {
        // A checkpoint that is missing, unreadable or does not match is ignored: the file
        // is the truth, the checkpoint only a shortcut.
        let from_base = match Base::load(&mut self.files, file_len) {
            Ok(Some(base)) => {
                let (covered, last_off, last_len) = base.last_entry();
                Index::from_base(&mut self.files, base)
                    .ok()
                    .map(|index| (index, covered, Some((last_off, last_len))))
            }
            _ => None,
        };
        let (index, start, last) = from_base.unwrap_or((Index::default(), 0, None));
        self.index = index;
        self.len = start;
        self.last = last;
        self.scan_to(file_len, false)?;
        self.scanned = file_len - start;
        Ok(())
    }

    /// Reads `journal.jsonl` from the indexed length to `end` and adds every entry to the
    /// index; a partial last line is a torn tail. `appended`: the bytes were appended while
    /// this journal had the store open, by journals that checked every entry before writing
    /// it (the store's lock keeps any other writer out), so a line's head is read from its
    /// structure alone (`interlock_journal_format::appended_head`); at open every line is
    /// parsed whole.
    fn scan_to(&mut self, end: u64, appended: bool) -> Result<(), Error> {
        // Every line is one entry, so the entry count is the line count.
        let mut scanner = Scanner::new(self.len, self.index.entries);
        let mut pending: Vec<u8> = Vec::new();
        let mut at = self.len;
        while at < end {
            let want = (end - at).min(SCAN_CHUNK);
            let chunk = self.files.file_read(JOURNAL_FILE, at, want)?;
            if chunk.is_empty() {
                return Err(Error::Changed(format!(
                    "it was {end} bytes long and ends at {at} when read"
                )));
            }
            at += chunk.len() as u64;
            pending.extend_from_slice(&chunk);
            let mut used = 0;
            while let Some(nl) = memchr::memchr(b'\n', &pending[used..]) {
                let line = &pending[used..used + nl + 1];
                self.index_line(&mut scanner, line, appended)?;
                used += nl + 1;
            }
            pending.drain(..used);
        }
        if !pending.is_empty() {
            // The scanner reports a line without its newline as the torn tail.
            self.index_line(&mut scanner, &pending, false)?;
        }
        debug_assert_eq!(scanner.offset(), self.len);
        Ok(())
    }

    fn index_line(
        &mut self,
        scanner: &mut Scanner,
        line: &[u8],
        appended: bool,
    ) -> Result<(), Error> {
        let entry = if appended {
            scanner.appended_line(line)?
        } else {
            scanner.line(line)?
        };
        let head = &entry.head;
        // One lookup for the usual line, of a stream already resident.
        let pushed = match self.index.push_resident(
            &head.stream,
            Some(head.seq),
            entry.offset,
            entry.len,
            head.open,
        ) {
            Some(pushed) => pushed,
            None => {
                let position = match self.index.materialize(&mut self.files, &head.stream) {
                    // Reloaded by the caller (`catch_up_to`), never in the middle of a scan.
                    Err(CheckpointError::Stale) => return Err(Error::Changed(STALE.into())),
                    other => other.map_err(checkpoint_error)?,
                };
                if position > 0 {
                    // Made resident from the checkpoint.
                    self.index
                        .push_resident(
                            &head.stream,
                            Some(head.seq),
                            entry.offset,
                            entry.len,
                            head.open,
                        )
                        .unwrap_or(Err(position))
                } else if head.seq != 0 {
                    Err(0)
                } else {
                    let (offset, len, open) = (entry.offset, entry.len, head.open);
                    self.index.push_new(entry.head.stream, offset, len, open);
                    self.last = Some((offset, len));
                    self.len = scanner.offset();
                    return Ok(());
                }
            }
        };
        if let Err(position) = pushed {
            // The line's seq is not its stream's next position: corrupt, said by the scanner.
            scanner.check_seq(&entry, position)?;
        }
        self.last = Some((entry.offset, entry.len));
        self.len = scanner.offset();
        Ok(())
    }

    /// [`Index::materialize`], reloading the index when the checkpoint was replaced.
    fn materialize(&mut self, stream: &str) -> Result<u64, Error> {
        match self.index.materialize(&mut self.files, stream) {
            Err(CheckpointError::Stale) => {
                self.reload()?;
                self.index
                    .materialize(&mut self.files, stream)
                    .map_err(checkpoint_error)
            }
            other => other.map_err(checkpoint_error),
        }
    }

    /// Another journal sharing the store replaced the checkpoint: the index is built again
    /// from it and the file after it (the file is the truth; the checkpoint a shortcut).
    fn reload(&mut self) -> Result<(), Error> {
        let size = self.files.file_size(JOURNAL_FILE)?.unwrap_or(0);
        if size < self.len {
            return Err(self.shrank(size));
        }
        self.load(size)
    }

    fn shrank(&self, size: u64) -> Error {
        Error::Changed(format!(
            "it is {size} bytes long, shorter than the {} bytes this journal read; open it again",
            self.len
        ))
    }

    /// Reads what other journals sharing the store appended since this one last looked.
    fn catch_up(&mut self) -> Result<(), Error> {
        if self.once_per_call && self.looked {
            return Ok(());
        }
        self.catch_up_now()
    }

    /// [`FileJournal::catch_up`], asking the file's length even if it was asked in this call.
    fn catch_up_now(&mut self) -> Result<(), Error> {
        let size = self.files.file_size(JOURNAL_FILE)?.unwrap_or(0);
        self.looked = true;
        self.catch_up_to(size)
    }

    /// A new call begins (a gate call): from now on, reads ask the file's length once per
    /// call, at the first read of it, and see the journal as it was then. Appends stay
    /// compare-and-append at the store, so one that missed another journal's append still
    /// conflicts there and catches up.
    pub fn new_call(&mut self) {
        self.once_per_call = true;
        self.looked = false;
    }

    fn catch_up_to(&mut self, size: u64) -> Result<(), Error> {
        if size < self.len {
            return Err(self.shrank(size));
        }
        if size > self.len {
            match self.scan_to(size, true) {
                Err(Error::Changed(m)) if m == STALE => self.load(size)?,
                other => other?,
            }
        }
        Ok(())
    }

    /// Writes a checkpoint of the index (`journal.index`) covering the whole journal, after
    /// syncing it, and continues from that checkpoint: only open streams stay resident.
    /// Costs a pass over the previous checkpoint and the resident streams.
    pub fn checkpoint(&mut self) -> Result<(), Error> {
        self.files.file_sync(JOURNAL_FILE)?;
        let Some((last_off, last_len)) = self.last else {
            return Ok(());
        };
        let last = read_exact(&mut self.files, JOURNAL_FILE, last_off, u64::from(last_len))?;
        let mem: Vec<MemStream<'_>> = self
            .index
            .streams
            .iter()
            .map(|(name, s)| MemStream {
                name,
                offsets: &s.offsets,
                open: s.open,
                order: s.order as u64,
            })
            .collect();
        let bytes = checkpoint::encode(
            &mut self.files,
            self.len,
            last_off,
            &last,
            self.index.base.as_ref(),
            &mem,
        )
        .map_err(checkpoint_error)?;
        drop(mem);
        self.files.file_replace(checkpoint::INDEX_FILE, &bytes)?;
        let base = Base::load(&mut self.files, self.len)
            .map_err(checkpoint_error)?
            .ok_or_else(|| {
                Error::Storage(StorageError::Io(format!(
                    "{} vanished right after it was written",
                    checkpoint::INDEX_FILE
                )))
            })?;
        self.index = Index::from_base(&mut self.files, base).map_err(checkpoint_error)?;
        Ok(())
    }

    /// Bytes of `journal.jsonl` that [`FileJournal::open`] read and parsed: the tail after
    /// the checkpoint, or the whole file without one.
    pub fn scanned_bytes(&self) -> u64 {
        self.scanned
    }

    /// The journal length the checkpoint in use covers (`None`: no checkpoint in use).
    pub fn checkpoint_covers(&self) -> Option<u64> {
        self.index.base.as_ref().map(Base::covered_len)
    }

    /// Bytes of `journal.jsonl` indexed.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the journal holds no entry (as far as this journal has read).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries indexed (every stream).
    pub fn entry_count(&self) -> u64 {
        self.index.entries
    }

    /// Streams indexed (every stream, checkpointed ones included).
    pub fn stream_count(&self) -> usize {
        self.index.base_streams() + self.index.order.len()
    }

    /// The store.
    pub fn files(&self) -> &S {
        &self.files
    }

    /// The store, to reach it past the journal (tests).
    pub fn files_mut(&mut self) -> &mut S {
        &mut self.files
    }

    /// The store, the journal closed.
    pub fn into_files(self) -> S {
        self.files
    }

    /// Appends `entries` to `stream` if, and only if, it holds exactly `expected_len`
    /// entries (else [`Error::Conflict`] with the actual length, nothing written).
    ///
    /// Every entry must be a single line holding a JSON object whose `stream`, `seq` and
    /// `open` members are `stream`, `expected_len + i` and `open` (else
    /// [`Error::InvalidEntry`], nothing written). The batch is one `file_append`; when
    /// `durable`, it is followed by one `file_sync`, which also makes every earlier append
    /// durable.
    ///
    /// An empty batch writes nothing and leaves the stream (and its `open` state) unchanged;
    /// if `durable`, it still syncs pending appends.
    pub fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), Error> {
        let mut actual = self.materialize(stream)?;
        if actual != expected_len {
            // Perhaps another journal sharing the store appended to it.
            self.catch_up_now()?;
            actual = self.materialize(stream)?;
            if actual != expected_len {
                return Err(Error::Conflict { actual });
            }
        }
        if entries.is_empty() {
            return if durable { self.sync() } else { Ok(()) };
        }
        format::validate_append(entries, stream, expected_len, open)?;
        let mut batch = Vec::with_capacity(entries.iter().map(|e| e.len() + 1).sum());
        for entry in entries {
            batch.extend_from_slice(entry.as_bytes());
            batch.push(b'\n');
        }
        let mut tries = 0;
        loop {
            match self.files.file_append(JOURNAL_FILE, self.len, &batch) {
                Ok(()) => break,
                Err(StorageError::Conflict(now)) if now > self.len && tries < APPEND_TRIES => {
                    // Another journal sharing the store appended first: read it, then
                    // either this stream moved (a conflict) or it did not (try again).
                    tries += 1;
                    self.catch_up_to(now)?;
                    let actual = self.materialize(stream)?;
                    if actual != expected_len {
                        return Err(Error::Conflict { actual });
                    }
                }
                Err(StorageError::Conflict(now)) if now > self.len => {
                    return Err(Error::Storage(StorageError::Io(format!(
                        "other writers sharing the store appended before each of {tries} tries"
                    ))))
                }
                Err(StorageError::Conflict(now)) => return Err(self.shrank(now)),
                Err(e) => return Err(e.into()),
            }
        }
        let mut offset = self.len;
        for entry in entries {
            self.index.push(stream, offset, entry.len() as u32, open);
            self.last = Some((offset, entry.len() as u32));
            offset += entry.len() as u64 + 1;
        }
        self.len = offset;
        if durable {
            self.files.file_sync(JOURNAL_FILE)?;
        }
        Ok(())
    }

    /// The entries (without their `\n`) of `stream` from position `start` to its end.
    /// An unknown stream, or `start` past the end, reads as empty.
    pub fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, Error> {
        self.catch_up()?;
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        self.materialize(stream)?;
        let wanted = self
            .index
            .offsets(&mut self.files, stream, start)
            .map_err(checkpoint_error)?;
        let mut out = Vec::with_capacity(wanted.len());
        let mut i = 0;
        while i < wanted.len() {
            // Entries close together (one batch, one effect's life) are read in one call.
            let (first, _) = wanted[i];
            let mut j = i + 1;
            let mut end = first + u64::from(wanted[i].1);
            while j < wanted.len() {
                let (off, len) = wanted[j];
                let next_end = off + u64::from(len);
                if off < end || off - end > READ_GAP || next_end - first > READ_SPAN {
                    break;
                }
                end = next_end;
                j += 1;
            }
            let span = read_exact(&mut self.files, JOURNAL_FILE, first, end - first)?;
            for &(off, len) in &wanted[i..j] {
                let at = (off - first) as usize;
                let bytes = &span[at..at + len as usize];
                let text = core::str::from_utf8(bytes).map_err(|e| {
                    Error::Changed(format!(
                        "the entry at byte offset {off} is no longer UTF-8: {e}"
                    ))
                })?;
                out.push(text.to_owned());
            }
            i = j;
        }
        Ok(out)
    }

    /// At most `max` entries after byte offset `cursor` of `journal.jsonl` (the start of a
    /// line), in file order, which is append order: each without its `\n`, with the
    /// offset just after it. What an exporter walks (`interlock_core::export::InOrder`).
    pub fn read_in_order(&mut self, cursor: u64, max: usize) -> Result<Vec<(u64, String)>, Error> {
        self.catch_up()?;
        if cursor > self.len {
            return Err(Error::Changed(format!(
                "the position at byte offset {cursor} is past its end ({} bytes)",
                self.len
            )));
        }
        if cursor > 0 && read_exact(&mut self.files, JOURNAL_FILE, cursor - 1, 1)? != b"\n" {
            return Err(Error::Changed(format!(
                "byte offset {cursor} is not the start of a line"
            )));
        }
        let mut out = Vec::new();
        let (mut at, mut want) = (cursor, READ_SPAN);
        while out.len() < max && at < self.len {
            let chunk = read_exact(&mut self.files, JOURNAL_FILE, at, want.min(self.len - at))?;
            let mut used = 0;
            while out.len() < max {
                let Some(nl) = memchr::memchr(b'\n', &chunk[used..]) else {
                    break;
                };
                let text = core::str::from_utf8(&chunk[used..used + nl]).map_err(|e| {
                    Error::Changed(format!(
                        "the line at byte offset {} is not UTF-8: {e}",
                        at + used as u64
                    ))
                })?;
                out.push((at + (used + nl + 1) as u64, text.to_owned()));
                used += nl + 1;
            }
            // A line longer than the read: read more of it at once.
            want = if used == 0 { want * 2 } else { READ_SPAN };
            at += used as u64;
        }
        Ok(out)
    }

    /// The number of entries in `stream` (0 when unknown).
    pub fn length(&mut self, stream: &str) -> Result<u64, Error> {
        self.catch_up()?;
        self.materialize(stream)
    }

    /// The streams whose last append said `open`, in first-append order.
    pub fn open_streams(&mut self) -> Result<Vec<String>, Error> {
        self.catch_up()?;
        Ok(self.index.open.values().cloned().collect())
    }

    /// Every stream, in first-append order. With a checkpoint this reads its whole table.
    pub fn streams(&mut self) -> Result<Vec<String>, Error> {
        self.catch_up()?;
        match self.index.streams(&mut self.files) {
            Err(CheckpointError::Stale) => {
                self.reload()?;
                self.index
                    .streams(&mut self.files)
                    .map_err(checkpoint_error)
            }
            other => other.map_err(checkpoint_error),
        }
    }

    /// Makes every append so far durable (the store syncs only when something is pending).
    pub fn sync(&mut self) -> Result<(), Error> {
        Ok(self.files.file_sync(JOURNAL_FILE)?)
    }

    /// Repairs a torn tail in the journal `files` holds. It does not open the journal:
    /// open it afterwards.
    ///
    /// If `journal.jsonl` ends with a partial line, its bytes are copied to
    /// `journal.torn-<offset>` (never overwriting an existing file: a `.1`, `.2`, ...
    /// suffix is added if needed), durably, then the journal is truncated to its last
    /// complete line, durably. Nothing is deleted. Complete lines are not checked: a
    /// corrupt line is left for an operator. A journal of a newer or unknown format is not
    /// touched ([`Error::Format`]).
    pub fn repair(files: &mut S) -> Result<RepairReport, Error> {
        // A journal of a newer format may not even be lines: never cut it by these rules.
        check_existing_format(files)?;
        let Some(len) = files.file_size(JOURNAL_FILE)? else {
            return Ok(RepairReport::nothing());
        };
        let keep = complete_prefix(files, len)?;
        if keep == len {
            return Ok(RepairReport::nothing());
        }
        let bytes = len - keep;
        let torn = files.file_read(JOURNAL_FILE, keep, bytes)?;
        if torn.len() as u64 != bytes {
            return Err(Error::Changed(
                "it shrank while its torn tail was being saved".into(),
            ));
        }
        let mut attempt = 0u32;
        let name = loop {
            let name = format::torn_file_name(keep, attempt);
            if files.file_create(&name, &torn)? {
                break name;
            }
            attempt = attempt.checked_add(1).ok_or_else(|| {
                Error::Storage(StorageError::Io("no free name for the torn tail".into()))
            })?;
        };
        files.file_truncate(JOURNAL_FILE, keep)?;
        Ok(RepairReport {
            torn_offset: Some(keep),
            torn_bytes: bytes,
            saved_to: Some(name),
        })
    }
}

impl<S: Files> interlock_core::export::InOrder for FileJournal<S> {
    fn read_in_order(
        &mut self,
        cursor: u64,
        max: usize,
    ) -> Result<Vec<(u64, String)>, JournalError> {
        FileJournal::read_in_order(self, cursor, max).map_err(journal_error)
    }
}

impl<S: Files> Journal for FileJournal<S> {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        FileJournal::append(self, stream, expected_len, entries, durable, open)
            .map_err(journal_error)
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        FileJournal::read(self, stream, start).map_err(journal_error)
    }
    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        FileJournal::length(self, stream).map_err(journal_error)
    }
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        FileJournal::open_streams(self).map_err(journal_error)
    }
    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        FileJournal::streams(self).map_err(journal_error)
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        FileJournal::sync(self).map_err(journal_error)
    }
}

/// Checks `journal.format`, or writes it for a new journal (no `journal.jsonl` yet). A
/// journal made before the format had a version has `journal.jsonl` and no format file:
/// version 1, left as it is.
fn check_format<S: Files + ?Sized>(files: &mut S) -> Result<(), Error> {
    if check_existing_format(files)? || files.file_size(JOURNAL_FILE)?.is_some() {
        return Ok(());
    }
    // Written whole and durably: a crash never leaves a partial format file. Another
    // opener may have written it first: then it is checked like any.
    if !files.file_create(FORMAT_FILE, format::format_file_text().as_bytes())? {
        check_existing_format(files)?;
    }
    Ok(())
}

/// The longest `journal.format` worth reading: anything longer is not one.
const FORMAT_FILE_MAX: u64 = 4096;

/// Checks `journal.format` if there is one (a newer or unknown version is an error);
/// returns whether there was one.
fn check_existing_format<S: Files + ?Sized>(files: &mut S) -> Result<bool, Error> {
    let Some(n) = files.file_size(FORMAT_FILE)? else {
        return Ok(false);
    };
    let bytes = files.file_read(FORMAT_FILE, 0, n.min(FORMAT_FILE_MAX))?;
    format::check_format_file(&String::from_utf8_lossy(&bytes)).map_err(Error::Format)?;
    Ok(true)
}

/// Length of the longest prefix of the file that ends with `\n` (0 if none).
fn complete_prefix<S: Files + ?Sized>(files: &mut S, len: u64) -> Result<u64, Error> {
    const CHUNK: u64 = 64 * 1024;
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let chunk = read_exact(files, JOURNAL_FILE, start, end - start)?;
        let keep = format::complete_prefix(&chunk);
        if keep > 0 {
            return Ok(start + keep as u64);
        }
        end = start;
    }
    Ok(0)
}
