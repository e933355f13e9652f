//! `journal.index`: an optional checkpoint of the index, so opening a journal costs its
//! open streams and the tail written since, not its whole history.
//!
//! The journal file is the only truth; this file is a cache of where its entries are. A
//! reader that does not know it ignores it, and this reader ignores it (and scans) unless it
//! is whole and matches `journal.jsonl`:
//!
//! * the header has the magic, its own checksum, and sections inside the file;
//! * it covers the first `covered_len` bytes of the journal, which must exist, and the
//!   last entry before that offset must be byte for byte the copy the checkpoint holds
//!   (a journal truncated, repaired or rewritten below the checkpoint fails this);
//! * every stream record carries its own checksum, checked when it is read.
//!
//! It is never read whole at open: only the header, the open streams' records and their
//! offsets. Any other stream is found when first asked for, by a binary search over the
//! stream table, sorted by a hash of the name (about 20 positional reads at a million
//! streams). Entries read through it are verified by the gate as always (stream, seq, hash
//! chain).
//!
//! It is read by name through [`Files`], and another journal sharing the store may replace
//! it (a new checkpoint): every lookup first reads the header again, and a header that
//! changed makes the journal reload its index ([`Stale`]), never read one file's records
//! with another's layout.
//!
//! Layout (little-endian u64 throughout): header, stream table (64-byte records sorted by
//! `(fnv64(name), name)`), open list (record numbers), offsets (12 bytes per entry: u64
//! offset, u32 length, in table order), names (UTF-8, in table order), the last entry's
//! copy (with its `\n`).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::storage::{Files, StorageError};
use crate::JOURNAL_FILE;

/// Name of the checkpoint file inside the journal directory.
pub const INDEX_FILE: &str = "journal.index";
const MAGIC: &[u8; 16] = b"interlock-idx-v1";
/// magic + 12 fields + checksum.
const HEADER_LEN: u64 = 16 + 12 * 8 + 8;
const RECORD_LEN: u64 = 64;
const OFFSET_LEN: u64 = 12;

/// Why the checkpoint could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CheckpointError {
    /// The storage failed.
    Storage(StorageError),
    /// The file is not a checkpoint of this journal, or is damaged.
    Invalid(String),
    /// It was replaced since it was loaded (another journal sharing the store wrote a new
    /// one): reload the index.
    Stale,
}

impl From<StorageError> for CheckpointError {
    fn from(e: StorageError) -> Self {
        CheckpointError::Storage(e)
    }
}

impl core::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CheckpointError::Storage(e) => write!(f, "{INDEX_FILE}: {e}"),
            CheckpointError::Invalid(m) => write!(f, "{INDEX_FILE}: {m}"),
            CheckpointError::Stale => write!(f, "{INDEX_FILE} was replaced while in use"),
        }
    }
}

type Result<T> = core::result::Result<T, CheckpointError>;

/// FNV-1a, 64 bits: a checksum against torn or rotten bytes (the file is a cache of data
/// the gate verifies anyway), and the sort key of the stream table.
pub(crate) fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn invalid(what: impl Into<String>) -> CheckpointError {
    CheckpointError::Invalid(what.into())
}

fn u64_at(buf: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

/// Exactly `len` bytes of `name` from `offset`, or an error.
pub(crate) fn read_exact<S: Files + ?Sized>(
    files: &mut S,
    name: &str,
    offset: u64,
    len: u64,
) -> core::result::Result<Vec<u8>, StorageError> {
    let buf = files.file_read(name, offset, len)?;
    if buf.len() as u64 != len {
        return Err(StorageError::Io(format!(
            "{name}: {len} bytes at offset {offset} asked, {} read: the file is shorter",
            buf.len()
        )));
    }
    Ok(buf)
}

#[derive(Clone, Copy, Debug, Default)]
struct Header {
    covered_len: u64,
    last_off: u64,
    last_len: u64,
    n_streams: u64,
    n_entries: u64,
    n_open: u64,
    table_off: u64,
    open_off: u64,
    offsets_off: u64,
    names_off: u64,
    last_copy_off: u64,
    file_len: u64,
}

impl Header {
    fn fields(&self) -> [u64; 12] {
        [
            self.covered_len,
            self.last_off,
            self.last_len,
            self.n_streams,
            self.n_entries,
            self.n_open,
            self.table_off,
            self.open_off,
            self.offsets_off,
            self.names_off,
            self.last_copy_off,
            self.file_len,
        ]
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        for f in self.fields() {
            out.extend_from_slice(&f.to_le_bytes());
        }
        let sum = fnv64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    fn decode(buf: &[u8]) -> Result<Header> {
        if buf.len() as u64 != HEADER_LEN || &buf[..16] != MAGIC {
            return Err(invalid("not a checkpoint (bad magic)"));
        }
        let body = &buf[..HEADER_LEN as usize - 8];
        if fnv64(body) != u64_at(&buf[16..], 12) {
            return Err(invalid("header checksum mismatch"));
        }
        let f = &buf[16..];
        Ok(Header {
            covered_len: u64_at(f, 0),
            last_off: u64_at(f, 1),
            last_len: u64_at(f, 2),
            n_streams: u64_at(f, 3),
            n_entries: u64_at(f, 4),
            n_open: u64_at(f, 5),
            table_off: u64_at(f, 6),
            open_off: u64_at(f, 7),
            offsets_off: u64_at(f, 8),
            names_off: u64_at(f, 9),
            last_copy_off: u64_at(f, 10),
            file_len: u64_at(f, 11),
        })
    }
}

/// One stream as the checkpoint holds it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    hash: u64,
    name_pos: u64,
    name_len: u64,
    /// Index of its first entry in the offsets section.
    first: u64,
    pub(crate) count: u64,
    pub(crate) order: u64,
    pub(crate) open: bool,
}

impl Record {
    fn encode(&self) -> [u8; RECORD_LEN as usize] {
        let mut out = [0u8; RECORD_LEN as usize];
        let fields = [
            self.hash,
            self.name_pos,
            self.name_len,
            self.first,
            self.count,
            self.order,
            u64::from(self.open),
        ];
        for (i, f) in fields.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        let sum = fnv64(&out[..56]);
        out[56..].copy_from_slice(&sum.to_le_bytes());
        out
    }

    fn decode(buf: &[u8]) -> Result<Record> {
        if fnv64(&buf[..56]) != u64_at(buf, 7) {
            return Err(invalid("stream record checksum mismatch"));
        }
        Ok(Record {
            hash: u64_at(buf, 0),
            name_pos: u64_at(buf, 1),
            name_len: u64_at(buf, 2),
            first: u64_at(buf, 3),
            count: u64_at(buf, 4),
            order: u64_at(buf, 5),
            open: u64_at(buf, 6) != 0,
        })
    }
}

/// A validated checkpoint, read on demand through the journal's [`Files`].
#[derive(Debug)]
pub(crate) struct Base {
    h: Header,
    /// The header's bytes as loaded: read again before each lookup, to notice a replaced file.
    header: Vec<u8>,
}

/// A stream as the in-memory index holds it, borrowed for writing a checkpoint.
pub(crate) struct MemStream<'a> {
    pub(crate) name: &'a str,
    pub(crate) offsets: &'a [(u64, u32)],
    pub(crate) open: bool,
    pub(crate) order: u64,
}

impl Base {
    /// The checkpoint in the store if there is one and it matches the journal (of
    /// `journal_len` bytes); `Ok(None)` when absent, `Err` with the reason when present but
    /// not usable.
    pub(crate) fn load<S: Files + ?Sized>(files: &mut S, journal_len: u64) -> Result<Option<Base>> {
        let Some(len) = files.file_size(INDEX_FILE)? else {
            return Ok(None);
        };
        if len < HEADER_LEN {
            return Err(invalid("shorter than its header"));
        }
        let header = read_exact(files, INDEX_FILE, 0, HEADER_LEN)?;
        let h = Header::decode(&header)?;
        // In u128, so that no value of a crafted header can overflow.
        let w = |x: u64| u128::from(x);
        let sections_fit = h.file_len == len
            && h.table_off == HEADER_LEN
            && w(h.open_off) == w(h.table_off) + w(h.n_streams) * w(RECORD_LEN)
            && w(h.offsets_off) == w(h.open_off) + w(h.n_open) * 8
            && w(h.names_off) == w(h.offsets_off) + w(h.n_entries) * w(OFFSET_LEN)
            && h.names_off <= h.last_copy_off
            && w(h.last_copy_off) + w(h.last_len) + 1 == w(len)
            && h.n_open <= h.n_streams;
        if !sections_fit {
            return Err(invalid("sections do not fit the file"));
        }
        if h.covered_len == 0 || h.covered_len > journal_len {
            return Err(invalid(format!(
                "covers {} bytes but the journal has {journal_len}",
                h.covered_len
            )));
        }
        if u128::from(h.last_off) + u128::from(h.last_len) + 1 != u128::from(h.covered_len) {
            return Err(invalid(
                "its last entry does not end where it says it covers",
            ));
        }
        let n = h.last_len + 1;
        let ours = read_exact(files, INDEX_FILE, h.last_copy_off, n)?;
        let theirs = read_exact(files, JOURNAL_FILE, h.last_off, n)?;
        if ours != theirs {
            return Err(invalid(
                "the journal's entry at the checkpoint's offset differs from the one it recorded",
            ));
        }
        Ok(Some(Base { h, header }))
    }

    /// Fails with [`CheckpointError::Stale`] when the file is no longer the one loaded.
    fn check<S: Files + ?Sized>(&self, files: &mut S) -> Result<()> {
        match files.file_read(INDEX_FILE, 0, HEADER_LEN) {
            Ok(now) if now == self.header => Ok(()),
            Ok(_) => Err(CheckpointError::Stale),
            Err(e) => Err(e.into()),
        }
    }

    pub(crate) fn covered_len(&self) -> u64 {
        self.h.covered_len
    }

    /// (covered length, offset of the last entry, its length without `\n`).
    pub(crate) fn last_entry(&self) -> (u64, u64, u32) {
        (self.h.covered_len, self.h.last_off, self.h.last_len as u32)
    }

    pub(crate) fn n_streams(&self) -> u64 {
        self.h.n_streams
    }

    pub(crate) fn n_entries(&self) -> u64 {
        self.h.n_entries
    }

    fn record<S: Files + ?Sized>(&self, files: &mut S, i: u64) -> Result<Record> {
        let buf = read_exact(
            files,
            INDEX_FILE,
            self.h.table_off + i * RECORD_LEN,
            RECORD_LEN,
        )?;
        Record::decode(&buf)
    }

    fn name<S: Files + ?Sized>(&self, files: &mut S, r: &Record) -> Result<String> {
        let inside = r.name_pos >= self.h.names_off
            && r.name_pos
                .checked_add(r.name_len)
                .is_some_and(|end| end <= self.h.last_copy_off);
        if !inside {
            return Err(invalid("a stream name points outside the names"));
        }
        let buf = read_exact(files, INDEX_FILE, r.name_pos, r.name_len)?;
        if fnv64(&buf) != r.hash {
            return Err(invalid("a stream name does not match its record"));
        }
        String::from_utf8(buf).map_err(|_| invalid("a stream name is not UTF-8"))
    }

    /// The entries' (offset, length) of a stream.
    pub(crate) fn offsets<S: Files + ?Sized>(
        &self,
        files: &mut S,
        r: &Record,
    ) -> Result<Vec<(u64, u32)>> {
        if r.first
            .checked_add(r.count)
            .is_none_or(|end| end > self.h.n_entries)
        {
            return Err(invalid("a stream record points past the offsets"));
        }
        if r.count == 0 {
            return Ok(Vec::new());
        }
        let buf = read_exact(
            files,
            INDEX_FILE,
            self.h.offsets_off + r.first * OFFSET_LEN,
            r.count * OFFSET_LEN,
        )?;
        Ok(buf
            .chunks_exact(OFFSET_LEN as usize)
            .map(|c| {
                let off = u64::from_le_bytes(c[..8].try_into().expect("8"));
                let len = u32::from_le_bytes(c[8..].try_into().expect("4"));
                (off, len)
            })
            .collect())
    }

    /// The record of `name`, by binary search over the table.
    pub(crate) fn find<S: Files + ?Sized>(
        &self,
        files: &mut S,
        name: &str,
    ) -> Result<Option<Record>> {
        self.check(files)?;
        let key = (fnv64(name.as_bytes()), name);
        let (mut lo, mut hi) = (0u64, self.h.n_streams);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let r = self.record(files, mid)?;
            let ord = match r.hash.cmp(&key.0) {
                Ordering::Equal => self.name(files, &r)?.as_str().cmp(key.1),
                other => other,
            };
            match ord {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(Some(r)),
            }
        }
        Ok(None)
    }

    /// The open streams: (name, record).
    pub(crate) fn open_streams<S: Files + ?Sized>(
        &self,
        files: &mut S,
    ) -> Result<Vec<(String, Record)>> {
        self.check(files)?;
        let buf = read_exact(files, INDEX_FILE, self.h.open_off, self.h.n_open * 8)?;
        let mut out = Vec::with_capacity(self.h.n_open as usize);
        for i in 0..self.h.n_open as usize {
            let n = u64_at(&buf, i);
            if n >= self.h.n_streams {
                return Err(invalid("the open list points past the table"));
            }
            let r = self.record(files, n)?;
            out.push((self.name(files, &r)?, r));
        }
        Ok(out)
    }

    /// Every stream (name, record), in table order: reads the whole table and names.
    pub(crate) fn all<S: Files + ?Sized>(&self, files: &mut S) -> Result<Vec<(String, Record)>> {
        self.check(files)?;
        let table = read_exact(
            files,
            INDEX_FILE,
            self.h.table_off,
            self.h.n_streams * RECORD_LEN,
        )?;
        let names = read_exact(
            files,
            INDEX_FILE,
            self.h.names_off,
            self.h.last_copy_off - self.h.names_off,
        )?;
        let mut out = Vec::with_capacity(self.h.n_streams as usize);
        for chunk in table.chunks_exact(RECORD_LEN as usize) {
            let r = Record::decode(chunk)?;
            let start = r
                .name_pos
                .checked_sub(self.h.names_off)
                .ok_or_else(|| invalid("a name points before the names"))?
                as usize;
            let bytes = names
                .get(start..start.saturating_add(r.name_len as usize))
                .ok_or_else(|| invalid("a name points past the names"))?;
            let name = core::str::from_utf8(bytes)
                .map_err(|_| invalid("a stream name is not UTF-8"))?
                .to_string();
            out.push((name, r));
        }
        Ok(out)
    }

    /// Every entry's (offset, length), in table order.
    fn all_offsets<S: Files + ?Sized>(&self, files: &mut S) -> Result<Vec<u8>> {
        Ok(read_exact(
            files,
            INDEX_FILE,
            self.h.offsets_off,
            self.h.n_entries * OFFSET_LEN,
        )?)
    }
}

/// The bytes of a checkpoint of a journal of `covered_len` bytes (whose last entry is
/// `last`, without its `\n`, at `last_off`): the streams of `base` not in `mem`, and `mem`.
pub(crate) fn encode<S: Files + ?Sized>(
    files: &mut S,
    covered_len: u64,
    last_off: u64,
    last: &[u8],
    base: Option<&Base>,
    mem: &[MemStream<'_>],
) -> Result<Vec<u8>> {
    // Every stream, by (hash, name): from the old checkpoint unless memory has it.
    enum Src<'a> {
        Base(Record),
        Mem(&'a MemStream<'a>),
    }
    let in_mem: BTreeMap<&str, &MemStream<'_>> = mem.iter().map(|m| (m.name, m)).collect();
    let mut all: Vec<(u64, String, Src<'_>)> = Vec::new();
    let base_offsets = match base {
        Some(b) => {
            for (name, r) in b.all(files)? {
                if !in_mem.contains_key(name.as_str()) {
                    all.push((r.hash, name, Src::Base(r)));
                }
            }
            b.all_offsets(files)?
        }
        None => Vec::new(),
    };
    for m in mem {
        all.push((fnv64(m.name.as_bytes()), m.name.to_string(), Src::Mem(m)));
    }
    all.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));

    let n_streams = all.len() as u64;
    let count_of = |s: &Src<'_>| match s {
        Src::Base(r) => r.count,
        Src::Mem(m) => m.offsets.len() as u64,
    };
    let n_entries: u64 = all.iter().map(|(_, _, s)| count_of(s)).sum();
    let n_open = all
        .iter()
        .filter(|(_, _, s)| match s {
            Src::Base(r) => r.open,
            Src::Mem(m) => m.open,
        })
        .count() as u64;
    let names_len: u64 = all.iter().map(|(_, n, _)| n.len() as u64).sum();
    let table_off = HEADER_LEN;
    let open_off = table_off + n_streams * RECORD_LEN;
    let offsets_off = open_off + n_open * 8;
    let names_off = offsets_off + n_entries * OFFSET_LEN;
    let last_copy_off = names_off + names_len;
    let h = Header {
        covered_len,
        last_off,
        last_len: last.len() as u64,
        n_streams,
        n_entries,
        n_open,
        table_off,
        open_off,
        offsets_off,
        names_off,
        last_copy_off,
        file_len: last_copy_off + last.len() as u64 + 1,
    };

    let mut w = Vec::with_capacity(h.file_len as usize);
    w.extend_from_slice(&h.encode());
    let (mut first, mut name_pos) = (0u64, names_off);
    let mut open = Vec::new();
    for (i, (hash, name, src)) in all.iter().enumerate() {
        let (count, order, is_open) = match src {
            Src::Base(r) => (r.count, r.order, r.open),
            Src::Mem(m) => (m.offsets.len() as u64, m.order, m.open),
        };
        if is_open {
            open.push(i as u64);
        }
        let r = Record {
            hash: *hash,
            name_pos,
            name_len: name.len() as u64,
            first,
            count,
            order,
            open: is_open,
        };
        w.extend_from_slice(&r.encode());
        first += count;
        name_pos += name.len() as u64;
    }
    for i in open {
        w.extend_from_slice(&i.to_le_bytes());
    }
    for (_, _, src) in &all {
        match src {
            Src::Base(r) => {
                let start = (r.first * OFFSET_LEN) as usize;
                let bytes = base_offsets
                    .get(start..start + (r.count * OFFSET_LEN) as usize)
                    .ok_or_else(|| invalid("a stream record points past the offsets"))?;
                w.extend_from_slice(bytes);
            }
            Src::Mem(m) => {
                for &(off, len) in m.offsets {
                    w.extend_from_slice(&off.to_le_bytes());
                    w.extend_from_slice(&len.to_le_bytes());
                }
            }
        }
    }
    for (_, name, _) in &all {
        w.extend_from_slice(name.as_bytes());
    }
    w.extend_from_slice(last);
    w.push(b'\n');
    debug_assert_eq!(w.len() as u64, h.file_len);
    Ok(w)
}
