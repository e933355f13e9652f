//! File backend of the Interlock journal (`wit/journal.wit`).
//!
//! A journal is a directory holding:
//!
//! * `journal.jsonl`: every stream interleaved, one entry per line. Each line is the entry
//!   text exactly as the gate produced it followed by `"\n"`, nothing else, so journals are
//!   byte-identical across hosts.
//! * `journal.lock`: the lock file. One [`FileJournal`] holds an exclusive lock on it for
//!   its whole life, so there is a single writer per directory.
//! * `journal.format`: the format version (`interlock-journal 1\n`), written when the journal
//!   is created; a newer version is refused, never guessed at. Every rule about the bytes of
//!   these files lives in `interlock-journal-format`, shared with the Node and Python hosts.
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
use std::time::{Duration, Instant};

use interlock_journal_format::{self as format, FormatError, Scanner};

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

pub use interlock_journal_format::{
    FORMAT_FILE, JOURNAL_FILE, LOCK_FILE, LOCK_WAIT_MS, TORN_PREFIX,
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

/// Takes the directory's lock (creating the lock file if needed), trying again every
/// [`format::LOCK_POLL_MS`] for up to `wait` while another writer holds it.
fn lock(dir: &Path, wait: Duration) -> Result<File, Error> {
    let lock = owner_only()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))?;
    let start = Instant::now();
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(lock),
            Err(TryLockError::WouldBlock) if start.elapsed() < wait => {
                std::thread::sleep(Duration::from_millis(format::LOCK_POLL_MS));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    dir: dir.to_owned(),
                    waited_ms: wait.as_millis() as u64,
                })
            }
            Err(TryLockError::Error(e)) => return Err(Error::Io(e)),
        }
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
    /// Waits up to [`format::LOCK_WAIT_MS`] for the lock of another writer (see
    /// [`FileJournal::open_waiting`]).
    ///
    /// Fails with [`Error::Locked`] if another handle still holds the directory,
    /// [`Error::TornTail`] if the file ends with a partial line (see [`FileJournal::repair`])
    /// and [`Error::Corrupt`] if a complete line is not a valid entry.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        Self::open_waiting(dir, Duration::from_millis(format::LOCK_WAIT_MS))
    }

    /// [`FileJournal::open`], waiting up to `wait` (zero: not at all) for the lock another
    /// writer holds: a writer starting while another finishes is not turned away at once.
    pub fn open_waiting(dir: &Path, wait: Duration) -> Result<Self, Error> {
        if !dir.is_dir() {
            create_dir_owner_only(dir)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        let lock = lock(dir, wait)?;
        let path = dir.join(JOURNAL_FILE);
        check_format(dir, &path)?;
        let mut options = owner_only();
        options.read(true).append(true);
        let file = match options.clone().create_new(true).open(&path) {
            Ok(file) => {
                // A new file: make its existence (and the format file's) durable once.
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

        format::validate_append(entries, stream, expected_len, open)?;
        let mut batch = Vec::with_capacity(entries.iter().map(|e| e.len() + 1).sum());
        for entry in entries {
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
        let _lock = lock(dir, Duration::ZERO)?;
        // A journal of a newer format may not even be lines: never cut it by these rules.
        check_existing_format(dir)?;
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
    // Every line is one entry, so the checkpoint's entry count is its line count.
    let mut scanner = Scanner::new(start, index.entries);
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let entry = scanner.line(&buf)?;
        let position = index.materialize(&entry.head.stream)?;
        scanner.check_seq(&entry, position)?;
        index.push(&entry.head.stream, entry.offset, entry.len, entry.head.open);
        last = Some((entry.offset, entry.len));
    }
    Ok((index, scanner.offset(), last))
}

/// Checks `journal.format` under the lock, or writes it for a new journal (no
/// `journal.jsonl` yet). A journal made before the format had a
/// version has `journal.jsonl` and no format file: version 1, left as it is.
fn check_format(dir: &Path, journal: &Path) -> Result<(), Error> {
    if check_existing_format(dir)? || journal.exists() {
        return Ok(());
    }
    // Written whole under a temporary name, then renamed: a crash never leaves a partial
    // format file. The caller's directory sync makes both names durable.
    let tmp = dir.join(format!("{FORMAT_FILE}.tmp"));
    let mut f = owner_only()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(format::format_file_text().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(FORMAT_FILE))?;
    Ok(())
}

/// Checks `journal.format` if there is one (a newer or unknown version is an error);
/// returns whether there was one.
fn check_existing_format(dir: &Path) -> Result<bool, Error> {
    match std::fs::read(dir.join(FORMAT_FILE)) {
        Ok(bytes) => {
            format::check_format_file(&String::from_utf8_lossy(&bytes))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e.into()),
    }
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
        let keep = format::complete_prefix(chunk);
        if keep > 0 {
            return Ok(start + keep as u64);
        }
        end = start;
    }
    Ok(0)
}

/// Creates `journal.torn-<offset>` (or `.1`, `.2`, ... if it exists) without overwriting.
fn create_side_file(dir: &Path, offset: u64) -> io::Result<(File, PathBuf)> {
    for attempt in 0u32.. {
        let path = dir.join(format::torn_file_name(offset, attempt));
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
