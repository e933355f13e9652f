//! [`MemFiles`]: [`Files`] in memory, for tests and for hosts without a disk. Nothing is
//! ever lost, so a sync only counts.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::storage::{Files, StorageError};

/// Named byte buffers. Every write is as durable as it will ever be; `syncs` counts the
/// `file_sync` calls that had appended bytes to cover (what a disk would fsync).
#[derive(Clone, Debug, Default)]
pub struct MemFiles {
    files: BTreeMap<String, Vec<u8>>,
    /// Per file, the length a sync last covered.
    synced: BTreeMap<String, u64>,
    pub syncs: u64,
}

impl MemFiles {
    pub fn new() -> MemFiles {
        MemFiles::default()
    }

    /// The bytes of `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(Vec::as_slice)
    }

    /// Sets the bytes of `name` past the journal (tests: a torn write, an edited line).
    pub fn set(&mut self, name: &str, bytes: &[u8]) {
        self.files.insert(name.to_string(), bytes.to_vec());
    }

    /// The names of every file.
    pub fn names(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }
}

impl Files for MemFiles {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        Ok(self.files.get(name).map(|f| f.len() as u64))
    }

    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        let Some(f) = self.files.get(name) else {
            return Err(StorageError::Io(alloc::format!("{name}: no such file")));
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(f.len());
        let end = start
            .saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
            .min(f.len());
        Ok(f[start..end].to_vec())
    }

    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        let f = self.files.entry(name.to_string()).or_default();
        if f.len() as u64 != at {
            return Err(StorageError::Conflict(f.len() as u64));
        }
        f.extend_from_slice(bytes);
        Ok(())
    }

    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        let len = self.files.get(name).map_or(0, |f| f.len() as u64);
        let synced = self.synced.entry(name.to_string()).or_insert(0);
        if *synced != len {
            *synced = len;
            self.syncs += 1;
        }
        Ok(())
    }

    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let Some(f) = self.files.get_mut(name) else {
            return Err(StorageError::Io(alloc::format!("{name}: no such file")));
        };
        f.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        if let Some(s) = self.synced.get_mut(name) {
            *s = (*s).min(len);
        }
        Ok(())
    }

    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        self.files.insert(name.to_string(), bytes.to_vec());
        self.synced.insert(name.to_string(), bytes.len() as u64);
        Ok(())
    }

    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        if self.files.contains_key(name) {
            return Ok(false);
        }
        self.files.insert(name.to_string(), bytes.to_vec());
        self.synced.insert(name.to_string(), bytes.len() as u64);
        Ok(true)
    }
}
