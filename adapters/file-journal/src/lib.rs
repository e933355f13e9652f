//! File backend of the Interlock journal (`wit/journal.wit`).
//!
//! A journal is a directory holding:
//!
//! * `journal.jsonl`: every stream interleaved, one entry per line. Each line is the entry
//!   text exactly as the gate produced it followed by `"\n"`, nothing else, so journals are
//!   byte-identical across hosts.
//! * `journal.lock`: the lock file. One [`FileJournal`] holds an exclusive lock on it for
//!   its whole life, so there is a single writer per directory.
//! * `journal.index` (optional): a checkpoint of the index at some length of the journal,
//!   so opening costs the open streams and the tail, not the whole history. Other readers
//!   ignore it; this one uses it only when it matches the journal (see [`INDEX_FILE`]).
//!
//! Every entry is a JSON object whose `stream`, `seq` and `open` members equal the arguments
//! of the append that wrote it; [`FileJournal::open`] rebuilds the index (byte offset and
//! length of each entry, per stream) from those three members. Entries are read back with
//! positional reads, never held in memory.
//!
//! Durability: all streams share one file, so a single `fdatasync` makes every earlier
//! append durable (ordered group commit). [`SharedFileJournal`] lets many threads append
//! and share each `fdatasync` (leader/follower on the synced offset). A partial final line (a torn write) is never
//! trusted nor silently dropped: `open` fails with [`Error::TornTail`] and an operator runs
//! [`FileJournal::repair`], which saves the torn bytes to a side file before truncating.

#![cfg(unix)]

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

mod checkpoint;
mod commit;
mod gate_journal;
mod shared;

pub use checkpoint::INDEX_FILE;
pub use gate_journal::journal_error;
pub use shared::SharedFileJournal;

use checkpoint::{Base, MemStream};
use commit::GroupCommit;

/// [`FileJournal::open`] writes a new checkpoint when it had to scan at least this many
/// bytes past the last one (or the whole file, without one): the scan is paid once.
pub const CHECKPOINT_AFTER_BYTES: u64 = 64 << 20;

/// Name of the journal file inside the journal directory.
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// Name of the lock file inside the journal directory.
pub const LOCK_FILE: &str = "journal.lock";
/// Prefix of the side files written by [`FileJournal::repair`] (`journal.torn-<offset>`).
pub const TORN_PREFIX: &str = "journal.torn-";

/// How a journal operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another writer (in this or another process) holds the directory's lock.
    #[error("journal directory {} is locked by another writer ({LOCK_FILE} is held)", dir.display())]
    Locked { dir: PathBuf },

    /// The storage failed.
    #[error("journal I/O error: {0}")]
    Io(#[from] io::Error),

    /// A complete line (ending in `\n`) of `journal.jsonl` is not a valid entry: not UTF-8,
    /// not a JSON object, `stream`/`seq`/`open` missing or of the wrong type, or `seq` not
    /// equal to the entry's position in its stream. `line` is 1-based.
    #[error("corrupt journal: {JOURNAL_FILE} line {line} is not a valid entry: {detail}")]
    Corrupt { line: u64, detail: String },

    /// `journal.jsonl` ends with a partial line (no final `\n`) of `bytes` bytes starting at
    /// byte `offset`: the last write was torn. Run [`FileJournal::repair`].
    #[error(
        "torn journal: {JOURNAL_FILE} ends with a partial last line at byte offset {offset} \
         ({bytes} bytes, no final newline); torn data is never trusted nor dropped silently: \
         run `repair` to save it to {TORN_PREFIX}{offset} and truncate the journal to its last \
         complete line"
    )]
    TornTail { offset: u64, bytes: u64 },

    /// Compare-and-append lost: the stream holds `actual` entries, not the expected number.
    #[error(
        "compare-and-append conflict: the stream holds {actual} entries, not the expected length"
    )]
    Conflict { actual: u64 },

    /// An entry passed to [`FileJournal::append`] was rejected; nothing was written.
    #[error("invalid journal entry: {detail}")]
    InvalidEntry { detail: String },
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

/// The three members of an entry the backend reads; every other member is ignored.
#[derive(Deserialize)]
struct Head {
    stream: String,
    seq: u64,
    open: bool,
}

/// Parses the head of one entry (without its `\n`).
fn parse_head(body: &[u8]) -> Result<Head, String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("not UTF-8: {e}"))?;
    // serde's derived struct visitor also accepts a JSON array; an entry must be an object.
    if !text.trim_start().starts_with('{') {
        return Err("not a JSON object".to_owned());
    }
    serde_json::from_str::<Head>(text).map_err(|e| format!("not a journal entry: {e}"))
}

#[derive(Debug)]
struct StreamIndex {
    /// Byte offset in `journal.jsonl` and length (without `\n`) of each entry.
    offsets: Vec<(u64, u32)>,
    /// Whether the last append to this stream said `open`.
    open: bool,
    /// Position of this stream in first-append order.
    order: usize,
}

/// Where every entry is. Without a checkpoint every stream is resident; with one, only the
/// open streams and those touched since are, and the others are found in the checkpoint.
#[derive(Debug, Default)]
struct Index {
    /// Resident streams.
    streams: HashMap<String, StreamIndex>,
    /// Streams created after the checkpoint, in first-append order; their `order` is the
    /// checkpoint's stream count plus their position here.
    order: Vec<String>,
    /// Every open stream, by `order`.
    open: BTreeMap<usize, String>,
    /// Total number of entries.
    entries: u64,
    base: Option<Base>,
}

impl Index {
    /// An index of the checkpoint `base`: its open streams made resident.
    fn from_base(base: Base) -> io::Result<Index> {
        let mut index = Index {
            entries: base.n_entries(),
            ..Index::default()
        };
        for (name, r) in base.open_streams()? {
            let order = r.order as usize;
            let offsets = base.offsets(&r)?;
            index.open.insert(order, name.clone());
            index.streams.insert(
                name,
                StreamIndex {
                    offsets,
                    open: true,
                    order,
                },
            );
        }
        index.base = Some(base);
        Ok(index)
    }

    fn base_streams(&self) -> usize {
        self.base.as_ref().map_or(0, |b| b.n_streams() as usize)
    }

    fn length(&self, stream: &str) -> io::Result<u64> {
        if let Some(s) = self.streams.get(stream) {
            return Ok(s.offsets.len() as u64);
        }
        match &self.base {
            Some(b) => Ok(b.find(stream)?.map_or(0, |r| r.count)),
            None => Ok(0),
        }
    }

    /// The entries' (offset, length) of `stream` from `start`.
    fn offsets(&self, stream: &str, start: usize) -> io::Result<Vec<(u64, u32)>> {
        if let Some(s) = self.streams.get(stream) {
            return Ok(s.offsets.get(start..).unwrap_or_default().to_vec());
        }
        let Some(b) = &self.base else {
            return Ok(Vec::new());
        };
        let Some(r) = b.find(stream)? else {
            return Ok(Vec::new());
        };
        if start as u64 >= r.count {
            return Ok(Vec::new());
        }
        let mut all = b.offsets(&r)?;
        Ok(all.split_off(start))
    }

    /// Makes a stream of the checkpoint resident before it changes; returns its length.
    fn materialize(&mut self, stream: &str) -> io::Result<u64> {
        if let Some(s) = self.streams.get(stream) {
            return Ok(s.offsets.len() as u64);
        }
        if let Some(b) = &self.base {
            if let Some(r) = b.find(stream)? {
                let offsets = b.offsets(&r)?;
                self.streams.insert(
                    stream.to_owned(),
                    StreamIndex {
                        offsets,
                        open: r.open,
                        order: r.order as usize,
                    },
                );
                return Ok(r.count);
            }
        }
        Ok(0)
    }

    /// Records one entry at the end of `stream` (made resident first by `materialize`).
    fn push(&mut self, stream: &str, offset: u64, len: u32, open: bool) {
        let s = match self.streams.get_mut(stream) {
            Some(s) => s,
            None => {
                let order = self.base_streams() + self.order.len();
                self.order.push(stream.to_owned());
                self.streams
                    .entry(stream.to_owned())
                    .or_insert(StreamIndex {
                        offsets: Vec::new(),
                        open,
                        order,
                    })
            }
        };
        s.offsets.push((offset, len));
        s.open = open;
        if open {
            self.open.insert(s.order, stream.to_owned());
        } else {
            self.open.remove(&s.order);
        }
        self.entries += 1;
    }

    fn streams(&self) -> io::Result<Vec<String>> {
        let mut out = match &self.base {
            Some(b) => {
                let mut all = b.all()?;
                all.sort_unstable_by_key(|(_, r)| r.order);
                all.into_iter().map(|(name, _)| name).collect()
            }
            None => Vec::new(),
        };
        out.extend(self.order.iter().cloned());
        Ok(out)
    }
}

/// An open, locked journal directory. See the crate documentation.
pub struct FileJournal {
    dir: PathBuf,
    /// `journal.jsonl`, opened for reading and appending.
    file: File,
    /// `journal.lock`; the exclusive lock lives as long as this handle.
    _lock: File,
    /// Length of `journal.jsonl` (every byte of it is a complete, indexed entry).
    len: u64,
    /// Offset and length of the last entry (for a checkpoint's check), if any.
    last: Option<(u64, u32)>,
    index: Index,
    /// Bytes `open` read and parsed (the tail after the checkpoint, or the whole file).
    scanned: u64,
    /// The sync side, shared with [`SharedFileJournal`]'s waiters.
    commit: Arc<GroupCommit>,
    /// Set when a failed write could not be rolled back or a sync failed: the file's state is
    /// unknown, so appends and syncs are refused until the journal is reopened.
    poisoned: Option<String>,
}

impl fmt::Debug for FileJournal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileJournal")
            .field("dir", &self.dir)
            .field("bytes", &self.len)
            .field(
                "streams",
                &(self.index.base_streams() + self.index.order.len()),
            )
            .field("open_streams", &self.index.open.len())
            .field("entries", &self.index.entries)
            .field(
                "checkpoint",
                &self.index.base.as_ref().map(Base::covered_len),
            )
            .field("pending", &self.commit.pending())
            .field("fsyncs", &self.commit.fsyncs())
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

/// Options for a file this backend creates: readable by its owner only, since a journal
/// holds customers' orders, amounts and premises (as databases keep their data files).
pub(crate) fn owner_only() -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o
}

/// Creates `dir` (and missing parents) readable by its owner only.
fn create_dir_owner_only(dir: &Path) -> io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Takes the directory's lock (creating the lock file if needed).
fn lock(dir: &Path) -> Result<File, Error> {
    let lock = owner_only()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(TryLockError::WouldBlock) => Err(Error::Locked {
            dir: dir.to_owned(),
        }),
        Err(TryLockError::Error(e)) => Err(Error::Io(e)),
    }
}

/// Makes the directory entries of `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl FileJournal {
    /// Opens the journal in `dir` (created if missing), takes its lock for the life of the
    /// handle and rebuilds the index from `journal.jsonl`: from its checkpoint
    /// (`journal.index`) and the tail after it when the checkpoint matches the file, else
    /// from the whole file. After scanning [`CHECKPOINT_AFTER_BYTES`] or more it writes a
    /// new checkpoint (best effort: a failure only costs the next open a longer scan).
    ///
    /// Fails with [`Error::Locked`] if another handle holds the directory,
    /// [`Error::TornTail`] if the file ends with a partial line (see [`FileJournal::repair`])
    /// and [`Error::Corrupt`] if a complete line is not a valid entry.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        if !dir.is_dir() {
            create_dir_owner_only(dir)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        let lock = lock(dir)?;
        let path = dir.join(JOURNAL_FILE);
        let mut options = owner_only();
        options.read(true).append(true);
        let file = match options.clone().create_new(true).open(&path) {
            Ok(file) => {
                // A new file: make its existence durable once.
                sync_dir(dir)?;
                file
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => options.open(&path)?,
            Err(e) => return Err(e.into()),
        };
        let file_len = file.metadata()?.len();
        // A checkpoint that is missing, unreadable or does not match is ignored: the file
        // is the truth, the checkpoint only a shortcut.
        let from_base = match Base::load(dir, &file, file_len) {
            Ok(Some(base)) => {
                let (covered, last_off, last_len) = base.last_entry();
                Index::from_base(base)
                    .ok()
                    .map(|index| (index, covered, Some((last_off, last_len))))
            }
            _ => None,
        };
        let (index, start, last) = from_base.unwrap_or((Index::default(), 0, None));
        let (index, len, last) = scan(&file, index, start, last)?;
        let commit = Arc::new(GroupCommit::new(file.try_clone()?, len));
        let mut journal = FileJournal {
            dir: dir.to_owned(),
            file,
            _lock: lock,
            len,
            last,
            index,
            scanned: len - start,
            commit,
            poisoned: None,
        };
        if journal.scanned >= CHECKPOINT_AFTER_BYTES {
            let _ = journal.checkpoint();
        }
        Ok(journal)
    }

    /// Writes a checkpoint of the index (`journal.index`) covering the whole journal, after
    /// syncing it, and continues from that checkpoint: only open streams stay resident.
    /// Costs a pass over the previous checkpoint and the resident streams.
    pub fn checkpoint(&mut self) -> Result<(), Error> {
        self.sync()?;
        let Some((last_off, last_len)) = self.last else {
            return Ok(());
        };
        let mut last = vec![0u8; last_len as usize];
        self.file.read_exact_at(&mut last, last_off)?;
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
        checkpoint::write(
            &self.dir,
            self.len,
            last_off,
            &last,
            self.index.base.as_ref(),
            &mem,
        )?;
        let base = Base::load(&self.dir, &self.file, self.len)?.ok_or_else(|| {
            io::Error::other(format!("{INDEX_FILE} vanished right after it was written"))
        })?;
        self.index = Index::from_base(base)?;
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

    /// Appends `entries` to `stream` if, and only if, it holds exactly `expected_len`
    /// entries (else [`Error::Conflict`] with the actual length, nothing written).
    ///
    /// Every entry must be a single line holding a JSON object whose `stream`, `seq` and
    /// `open` members are `stream`, `expected_len + i` and `open` (else
    /// [`Error::InvalidEntry`], nothing written). The batch is written with one `write_all`;
    /// when `durable`, it is followed by one `fdatasync`, which also makes every earlier
    /// append durable. On failure nothing of the append stays in the file.
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
        self.check_poisoned()?;
        let actual = self.index.materialize(stream)?;
        if actual != expected_len {
            return Err(Error::Conflict { actual });
        }
        if entries.is_empty() {
            return if durable { self.sync() } else { Ok(()) };
        }

        let mut batch = Vec::with_capacity(entries.iter().map(|e| e.len() + 1).sum());
        for (i, entry) in entries.iter().enumerate() {
            let seq = expected_len + i as u64;
            validate(entry, stream, seq, open).map_err(|d| Error::InvalidEntry {
                detail: format!("entry {i} of the batch (seq {seq}): {d}"),
            })?;
            batch.extend_from_slice(entry.as_bytes());
            batch.push(b'\n');
        }

        let start = self.len;
        if let Err(e) = (&self.file).write_all(&batch) {
            self.roll_back(start);
            return Err(e.into());
        }
        let end = start + batch.len() as u64;
        self.commit.wrote(end);
        if durable {
            if let Err(why) = self.commit.sync_to(end) {
                self.failed_sync(why.clone());
                return Err(Error::Io(io::Error::other(why)));
            }
        }

        let mut offset = start;
        for entry in entries {
            self.index.push(stream, offset, entry.len() as u32, open);
            self.last = Some((offset, entry.len() as u32));
            offset += entry.len() as u64 + 1;
        }
        self.len = offset;
        Ok(())
    }

    /// After a failed `fdatasync` the kernel may have dropped dirty pages: nothing written
    /// since the last good sync can be trusted, so it is cut off and the handle refuses
    /// writes until the journal is reopened.
    fn failed_sync(&mut self, why: String) {
        self.roll_back(self.commit.synced());
        self.poison(why);
    }

    /// The entries (without their `\n`) of `stream` from position `start` to its end.
    /// An unknown stream, or `start` past the end, reads as empty.
    pub fn read(&self, stream: &str, start: u64) -> Result<Vec<String>, Error> {
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        let wanted = self.index.offsets(stream, start)?;
        let mut out = Vec::with_capacity(wanted.len());
        for (offset, len) in wanted {
            let mut buf = vec![0; len as usize];
            self.file.read_exact_at(&mut buf, offset)?;
            let text = String::from_utf8(buf).map_err(|e| {
                Error::Io(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{JOURNAL_FILE} changed under the journal: entry at byte offset {offset} is no longer UTF-8: {e}"
                    ),
                ))
            })?;
            out.push(text);
        }
        Ok(out)
    }

    /// The number of entries in `stream` (0 when unknown).
    ///
    /// Panics only if the checkpoint, valid at open, can no longer be read; see
    /// [`FileJournal::try_length`].
    pub fn length(&self, stream: &str) -> u64 {
        self.try_length(stream)
            .unwrap_or_else(|e| panic!("journal index unreadable: {e}"))
    }

    /// The number of entries in `stream` (0 when unknown), or why the checkpoint could
    /// not be read.
    pub fn try_length(&self, stream: &str) -> Result<u64, Error> {
        Ok(self.index.length(stream)?)
    }

    /// The streams whose last append said `open`, in first-append order.
    pub fn open_streams(&self) -> Vec<String> {
        self.index.open.values().cloned().collect()
    }

    /// Every stream, in first-append order. With a checkpoint this reads its whole table.
    ///
    /// Panics only if the checkpoint can no longer be read; see
    /// [`FileJournal::try_streams`].
    pub fn streams(&self) -> Vec<String> {
        self.try_streams()
            .unwrap_or_else(|e| panic!("journal index unreadable: {e}"))
    }

    /// Every stream, in first-append order, or why the checkpoint could not be read.
    pub fn try_streams(&self) -> Result<Vec<String>, Error> {
        Ok(self.index.streams()?)
    }

    /// Makes every append so far durable: one `fdatasync` if a non-durable append is
    /// pending, else nothing.
    pub fn sync(&mut self) -> Result<(), Error> {
        self.check_poisoned()?;
        if let Err(why) = self.commit.sync_to(self.len) {
            self.poison(why.clone());
            return Err(Error::Io(io::Error::other(why)));
        }
        Ok(())
    }

    /// How many `fdatasync` calls were made on this journal (by this handle and, through
    /// [`SharedFileJournal`], its threads; directory syncs are not counted).
    pub fn fsyncs(&self) -> u64 {
        self.commit.fsyncs()
    }

    /// The journal directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Repairs a torn tail in the journal in `dir` (which must exist), taking its lock
    /// ([`Error::Locked`] if a handle is open).
    ///
    /// If `journal.jsonl` ends with a partial line, its bytes are copied to
    /// `journal.torn-<offset>` (never overwriting an existing file: a `.1`, `.2`, ...
    /// suffix is added if needed) and synced, then the journal is truncated to its last
    /// complete line and synced. Nothing is deleted. Complete lines are not checked: a
    /// corrupt line is left for an operator.
    pub fn repair(dir: &Path) -> Result<RepairReport, Error> {
        let _lock = lock(dir)?;
        let nothing = RepairReport {
            torn_offset: None,
            torn_bytes: 0,
            saved_to: None,
        };
        let path = dir.join(JOURNAL_FILE);
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(nothing),
            Err(e) => return Err(e.into()),
        };
        let len = file.metadata()?.len();
        let keep = complete_prefix(&file, len)?;
        if keep == len {
            return Ok(nothing);
        }
        let bytes = len - keep;

        let (mut side, side_path) = create_side_file(dir, keep)?;
        let mut src = &file;
        src.seek(SeekFrom::Start(keep))?;
        let copied = io::copy(&mut src.take(bytes), &mut side)?;
        if copied != bytes {
            return Err(Error::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{JOURNAL_FILE} shrank while its torn tail was being saved"),
            )));
        }
        side.sync_all()?;
        sync_dir(dir)?;

        file.set_len(keep)?;
        file.sync_all()?;
        Ok(RepairReport {
            torn_offset: Some(keep),
            torn_bytes: bytes,
            saved_to: Some(side_path),
        })
    }

    fn check_poisoned(&self) -> Result<(), Error> {
        match self.poisoned.clone().or_else(|| self.commit.failed()) {
            None => Ok(()),
            Some(why) => Err(Error::Io(io::Error::other(format!(
                "journal {} refuses writes after an earlier failure ({why}); reopen it",
                self.dir.display()
            )))),
        }
    }

    fn poison(&mut self, why: String) {
        self.poisoned.get_or_insert(why);
    }

    /// Truncates `journal.jsonl` back to `len` after a failed append; poisons the handle if
    /// even that fails.
    fn roll_back(&mut self, len: u64) {
        if let Err(e) = self.file.set_len(len) {
            self.poison(format!(
                "could not truncate {JOURNAL_FILE} back to {len} bytes after a failed append: {e}"
            ));
        }
    }
}

/// Checks an entry given to `append`.
fn validate(entry: &str, stream: &str, seq: u64, open: bool) -> Result<(), String> {
    if entry.contains('\n') {
        return Err("contains a newline; an entry must be a single line".to_owned());
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

/// Offset and length (without `\n`) of one entry in `journal.jsonl`.
type Place = (u64, u32);

/// Reads `journal.jsonl` from `start` (0, or the end of the checkpoint `index` holds) and
/// adds every entry to `index`; returns it with the file's length and its last entry.
fn scan(
    file: &File,
    mut index: Index,
    start: u64,
    mut last: Option<Place>,
) -> Result<(Index, u64, Option<Place>), Error> {
    let mut reader = file;
    reader.seek(SeekFrom::Start(start))?;
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut buf = Vec::new();
    let mut offset = start;
    // Every line is one entry, so the checkpoint's entry count is its line count.
    let mut line = index.entries;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            return Err(Error::TornTail {
                offset,
                bytes: n as u64,
            });
        }
        line += 1;
        let body = &buf[..n - 1];
        let len = u32::try_from(body.len()).map_err(|_| Error::Corrupt {
            line,
            detail: format!("{} bytes long, more than 4 GiB", body.len()),
        })?;
        let head = parse_head(body).map_err(|detail| Error::Corrupt { line, detail })?;
        let position = index.materialize(&head.stream)?;
        if head.seq != position {
            return Err(Error::Corrupt {
                line,
                detail: format!(
                    "seq is {} but stream {:?} has {position} entries before this line",
                    head.seq, head.stream
                ),
            });
        }
        index.push(&head.stream, offset, len, head.open);
        last = Some((offset, len));
        offset += n as u64;
    }
    Ok((index, offset, last))
}

/// Length of the longest prefix of the file that ends with `\n` (0 if none).
fn complete_prefix(file: &File, len: u64) -> io::Result<u64> {
    const CHUNK: u64 = 64 * 1024;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let chunk = &mut buf[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(p) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + p as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Creates `journal.torn-<offset>` (or `.1`, `.2`, ... if it exists) without overwriting.
fn create_side_file(dir: &Path, offset: u64) -> io::Result<(File, PathBuf)> {
    for attempt in 0u32.. {
        let name = if attempt == 0 {
            format!("{TORN_PREFIX}{offset}")
        } else {
            format!("{TORN_PREFIX}{offset}.{attempt}")
        };
        let path = dir.join(name);
        match owner_only().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("u32 range exhausted")
}

#[cfg(test)]
mod tests;
