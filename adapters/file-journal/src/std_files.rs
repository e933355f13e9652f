//! [`StdFiles`]: the host's side of a file journal on a disk, the `Files` of
//! `interlock-journal` over one journal folder. Only I/O: the folder and its lock, files
//! created owner-only, appends at a known length, fdatasync shared among threads, whole
//! files written by rename. Which bytes mean what is the journal's (`interlock-journal`),
//! which runs over this natively or inside the gate component.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use interlock_journal::{Files, StorageError, LOCK_FILE};
use interlock_journal_format as format;

use crate::commit::GroupCommit;
use crate::Error;

/// One journal folder, locked for as long as any clone lives. Clones share everything (the
/// lock, the open files, their lengths, the group commit), so the gate instances of one
/// process share one store: each appends at the length it knows, and the store refuses an
/// append at a stale length (`conflict`).
#[derive(Clone)]
pub struct StdFiles {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    /// `journal.lock`; the exclusive lock lives as long as this.
    _lock: File,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Files opened so far, by name, with the length every append through this store keeps
    /// (no fstat per append).
    open: HashMap<String, Open>,
    /// Set when a failed write could not be rolled back or a sync failed: the file's state
    /// is unknown, so appends and syncs are refused until the folder is opened again.
    poisoned: Option<String>,
}

struct Open {
    /// Shared with reads, which run outside the store's lock.
    file: Arc<File>,
    len: u64,
    commit: Arc<GroupCommit>,
}

impl std::fmt::Debug for StdFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdFiles")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

/// Options for a file this store creates: readable by its owner only, since a journal
/// holds customers' orders, amounts and premises (as databases keep their data files).
fn owner_only() -> OpenOptions {
    let mut o = OpenOptions::new();
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o
}

/// Creates `dir` (and missing parents) readable by its owner only.
fn create_dir_owner_only(dir: &Path) -> io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Makes the directory entries of `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
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

impl StdFiles {
    /// The journal folder `dir` (created owner-only, with missing parents, if missing),
    /// locked: waits up to `wait` (zero: not at all) for the lock another writer holds, then
    /// fails with [`Error::Locked`], whose text names the shared backends.
    pub fn open(dir: &Path, wait: Duration) -> Result<StdFiles, Error> {
        if !dir.is_dir() {
            create_dir_owner_only(dir)?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        StdFiles::open_existing(dir, wait)
    }

    /// [`StdFiles::open`], waiting the default [`interlock_journal::LOCK_WAIT_MS`] for the
    /// lock.
    pub fn at(dir: &Path) -> Result<StdFiles, Error> {
        StdFiles::open(dir, Duration::from_millis(interlock_journal::LOCK_WAIT_MS))
    }

    /// [`StdFiles::open`] of a folder that must exist (nothing is created but the lock file).
    pub fn open_existing(dir: &Path, wait: Duration) -> Result<StdFiles, Error> {
        let lock = lock(dir, wait)?;
        Ok(StdFiles {
            inner: Arc::new(Inner {
                dir: dir.to_owned(),
                _lock: lock,
                state: Mutex::new(State::default()),
            }),
        })
    }

    /// The journal folder.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// How many `fdatasync` calls `file_sync` made (directory syncs and the syncs of whole
    /// files written at once are not counted).
    pub fn fsyncs(&self) -> u64 {
        self.lock().open.values().map(|o| o.commit.fsyncs()).sum()
    }

    /// Whether bytes appended to some file are not yet synced.
    pub fn pending(&self) -> bool {
        self.lock().open.values().any(|o| o.commit.pending())
    }

    /// Why the store refuses writes, if it does.
    pub fn poisoned(&self) -> Option<String> {
        let state = self.lock();
        state
            .poisoned
            .clone()
            .or_else(|| state.open.values().find_map(|o| o.commit.failed()))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every field is updated together with the file it describes: a panic (a bug)
        // leaves at worst a poisoned store.
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn path(&self, name: &str) -> Result<PathBuf, StorageError> {
        // A name, never a path: one file of this folder.
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(StorageError::Io(format!(
                "{name:?} is not a file name of a journal folder"
            )));
        }
        Ok(self.inner.dir.join(name))
    }

    fn io(&self, what: &str, name: &str, e: io::Error) -> StorageError {
        StorageError::Io(format!(
            "cannot {what} {name} in {}: {e}",
            self.inner.dir.display()
        ))
    }

    fn refuse_if_poisoned(&self, state: &State) -> Result<(), StorageError> {
        let why = state
            .poisoned
            .clone()
            .or_else(|| state.open.values().find_map(|o| o.commit.failed()));
        match why {
            None => Ok(()),
            Some(why) => Err(StorageError::Io(format!(
                "journal {} refuses writes after an earlier failure ({why}); reopen it",
                self.inner.dir.display()
            ))),
        }
    }

    /// The open file `name` (opened now if it exists; `None` if it does not).
    fn opened<'s>(
        &self,
        state: &'s mut State,
        name: &str,
    ) -> Result<Option<&'s mut Open>, StorageError> {
        if !state.open.contains_key(name) {
            let path = self.path(name)?;
            let file = match OpenOptions::new().read(true).write(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(self.io("open", name, e)),
            };
            self.adopt(state, name, file)?;
        }
        Ok(state.open.get_mut(name))
    }

    fn adopt(&self, state: &mut State, name: &str, file: File) -> Result<(), StorageError> {
        let len = file.metadata().map_err(|e| self.io("stat", name, e))?.len();
        let second = file.try_clone().map_err(|e| self.io("open", name, e))?;
        state.open.insert(
            name.to_owned(),
            Open {
                file: Arc::new(file),
                len,
                commit: Arc::new(GroupCommit::new(second, len)),
            },
        );
        Ok(())
    }
}

impl Files for StdFiles {
    fn file_size(&mut self, name: &str) -> Result<Option<u64>, StorageError> {
        let mut state = self.lock();
        Ok(self.opened(&mut state, name)?.map(|o| o.len))
    }

    fn file_read(&mut self, name: &str, offset: u64, len: u64) -> Result<Vec<u8>, StorageError> {
        let (file, size) = {
            let mut state = self.lock();
            let Some(o) = self.opened(&mut state, name)? else {
                return Err(StorageError::Io(format!(
                    "cannot read {name} in {}: no such file",
                    self.inner.dir.display()
                )));
            };
            (o.file.clone(), o.len)
        };
        // Outside the store's lock: reads do not hold up appends.
        let end = size.min(offset.saturating_add(len));
        let n = end.saturating_sub(offset) as usize;
        let mut buf = vec![0u8; n];
        file.read_exact_at(&mut buf, offset)
            .map_err(|e| self.io("read", name, e))?;
        Ok(buf)
    }

    fn file_append(&mut self, name: &str, at: u64, bytes: &[u8]) -> Result<(), StorageError> {
        let mut state = self.lock();
        self.refuse_if_poisoned(&state)?;
        if self.opened(&mut state, name)?.is_none() {
            let path = self.path(name)?;
            let file = owner_only()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| self.io("create", name, e))?;
            sync_dir(&self.inner.dir).map_err(|e| self.io("sync the folder of", name, e))?;
            self.adopt(&mut state, name, file)?;
        }
        let o = state.open.get_mut(name).expect("opened above");
        if o.len != at {
            return Err(StorageError::Conflict(o.len));
        }
        if let Err(e) = o.file.write_all_at(bytes, at) {
            // Nothing of a failed append may stay visible.
            if let Err(cut) = o.file.set_len(at) {
                state.poisoned = Some(format!(
                    "could not cut {name} back to {at} bytes after a failed append: {cut}"
                ));
            }
            return Err(self.io("append to", name, e));
        }
        o.len = at + bytes.len() as u64;
        o.commit.wrote(o.len);
        Ok(())
    }

    fn file_sync(&mut self, name: &str) -> Result<(), StorageError> {
        let (commit, end) = {
            let mut state = self.lock();
            self.refuse_if_poisoned(&state)?;
            match self.opened(&mut state, name)? {
                Some(o) => (o.commit.clone(), o.len),
                None => return Ok(()),
            }
        };
        // Outside the store's lock: other threads append while this one syncs, and the
        // next sync covers them all.
        if let Err(why) = commit.sync_to(end) {
            // The kernel may have dropped dirty pages: nothing written since the last good
            // sync can be trusted, so it is cut off and the store refuses writes.
            let mut state = self.lock();
            let synced = commit.synced();
            if let Some(o) = state.open.get_mut(name) {
                if o.file.set_len(synced).is_ok() {
                    o.len = synced;
                }
            }
            state.poisoned.get_or_insert(why.clone());
            return Err(StorageError::Io(format!(
                "cannot sync {name} in {}: {why}",
                self.inner.dir.display()
            )));
        }
        Ok(())
    }

    fn file_truncate(&mut self, name: &str, len: u64) -> Result<(), StorageError> {
        let mut state = self.lock();
        let Some(o) = self.opened(&mut state, name)? else {
            return Err(StorageError::Io(format!(
                "cannot truncate {name} in {}: no such file",
                self.inner.dir.display()
            )));
        };
        o.file
            .set_len(len)
            .and_then(|()| o.file.sync_all())
            .map_err(|e| self.io("truncate", name, e))?;
        o.len = len;
        o.commit.cut(len);
        Ok(())
    }

    fn file_replace(&mut self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        // Under the store's lock: one temporary file at a time.
        let mut state = self.lock();
        let path = self.path(name)?;
        let tmp = self.path(&format!("{name}.tmp"))?;
        let write = || -> io::Result<()> {
            let mut f = owner_only()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            sync_dir(&self.inner.dir)
        };
        write().map_err(|e| self.io("write", name, e))?;
        // The open handle is the old file's.
        state.open.remove(name);
        Ok(())
    }

    fn file_create(&mut self, name: &str, bytes: &[u8]) -> Result<bool, StorageError> {
        let mut state = self.lock();
        let path = self.path(name)?;
        let f = match owner_only()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(self.io("create", name, e)),
        };
        (&f).write_all(bytes)
            .and_then(|()| f.sync_all())
            .and_then(|()| sync_dir(&self.inner.dir))
            .map_err(|e| self.io("create", name, e))?;
        self.adopt(&mut state, name, f)?;
        Ok(true)
    }
}
