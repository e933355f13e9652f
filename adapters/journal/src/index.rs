//! Where every entry of `journal.jsonl` is: per stream, the byte offset and length of each
//! entry, whether the stream is open, and its place in first-append order. Without a
//! checkpoint every stream is resident; with one, only the open streams and those touched
//! since are, and the others are found in the checkpoint when first asked for.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use hashbrown::HashMap;

use crate::checkpoint::{Base, CheckpointError};
use crate::storage::Files;

type Result<T> = core::result::Result<T, CheckpointError>;

#[derive(Debug)]
pub(crate) struct StreamIndex {
    /// Byte offset in `journal.jsonl` and length (without `\n`) of each entry.
    pub(crate) offsets: Vec<(u64, u32)>,
    /// Whether the last append to this stream said `open`.
    pub(crate) open: bool,
    /// Position of this stream in first-append order.
    pub(crate) order: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Index {
    /// Resident streams, in no order.
    pub(crate) streams: HashMap<String, StreamIndex>,
    /// Streams created after the checkpoint, in first-append order; their `order` is the
    /// checkpoint's stream count plus their position here.
    pub(crate) order: Vec<String>,
    /// Every open stream, by `order`.
    pub(crate) open: BTreeMap<usize, String>,
    /// Total number of entries.
    pub(crate) entries: u64,
    pub(crate) base: Option<Base>,
}

impl Index {
    /// An index of the checkpoint `base`: its open streams made resident.
    pub(crate) fn from_base<S: Files + ?Sized>(files: &mut S, base: Base) -> Result<Index> {
        let mut index = Index {
            entries: base.n_entries(),
            ..Index::default()
        };
        for (name, r) in base.open_streams(files)? {
            let order = r.order as usize;
            let offsets = base.offsets(files, &r)?;
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

    pub(crate) fn base_streams(&self) -> usize {
        self.base.as_ref().map_or(0, |b| b.n_streams() as usize)
    }

    /// The entries' (offset, length) of `stream` from `start`.
    pub(crate) fn offsets<S: Files + ?Sized>(
        &mut self,
        files: &mut S,
        stream: &str,
        start: usize,
    ) -> Result<Vec<(u64, u32)>> {
        self.materialize(files, stream)?;
        Ok(self
            .streams
            .get(stream)
            .map(|s| s.offsets.get(start..).unwrap_or_default().to_vec())
            .unwrap_or_default())
    }

    /// Makes a stream of the checkpoint resident (it is about to change, or was asked for:
    /// it is looked up once); returns its length (0 for a stream the journal does not hold).
    pub(crate) fn materialize<S: Files + ?Sized>(
        &mut self,
        files: &mut S,
        stream: &str,
    ) -> Result<u64> {
        if let Some(s) = self.streams.get(stream) {
            return Ok(s.offsets.len() as u64);
        }
        if let Some(b) = &self.base {
            if let Some(r) = b.find(files, stream)? {
                let offsets = b.offsets(files, &r)?;
                self.streams.insert(
                    stream.to_string(),
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
    pub(crate) fn push(&mut self, stream: &str, offset: u64, len: u32, open: bool) {
        if self
            .push_resident(stream, None, offset, len, open)
            .is_none()
        {
            self.push_new(stream.to_string(), offset, len, open);
        }
    }

    /// Records one entry at the end of a resident `stream`, in one lookup: `None` when the
    /// stream is not resident (nothing recorded); `Some(Err(length))` when `seq` is given and
    /// is not the stream's length (nothing recorded).
    pub(crate) fn push_resident(
        &mut self,
        stream: &str,
        seq: Option<u64>,
        offset: u64,
        len: u32,
        open: bool,
    ) -> Option<core::result::Result<(), u64>> {
        let s = self.streams.get_mut(stream)?;
        let position = s.offsets.len() as u64;
        if seq.is_some_and(|seq| seq != position) {
            return Some(Err(position));
        }
        s.offsets.push((offset, len));
        // The open list changes only when the stream's state does (no allocation for
        // the usual append to an open stream).
        if s.open != open {
            s.open = open;
            if open {
                self.open.insert(s.order, stream.to_string());
            } else {
                self.open.remove(&s.order);
            }
        }
        self.entries += 1;
        Some(Ok(()))
    }

    /// Records the first entry of a stream neither resident nor in the checkpoint.
    pub(crate) fn push_new(&mut self, stream: String, offset: u64, len: u32, open: bool) {
        let order = self.base_streams() + self.order.len();
        self.order.push(stream.clone());
        if open {
            self.open.insert(order, stream.clone());
        }
        self.streams.insert(
            stream,
            StreamIndex {
                offsets: alloc::vec![(offset, len)],
                open,
                order,
            },
        );
        self.entries += 1;
    }

    pub(crate) fn streams<S: Files + ?Sized>(&self, files: &mut S) -> Result<Vec<String>> {
        let mut out = match &self.base {
            Some(b) => {
                let mut all = b.all(files)?;
                all.sort_unstable_by_key(|(_, r)| r.order);
                all.into_iter().map(|(name, _)| name).collect()
            }
            None => Vec::new(),
        };
        out.extend(self.order.iter().cloned());
        Ok(out)
    }
}
