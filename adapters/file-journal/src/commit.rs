//! Group commit: durable appends from many threads share one `fdatasync`.
//!
//! All streams live in one file, so a single `fdatasync` makes every byte written before it
//! started durable. Writers append under the store's lock, then wait here *without* it
//! for the file to be synced past the end of their append. One waiter at a time (the
//! leader) runs `fdatasync`, covering everything written when it started; the others
//! (followers) sleep until a sync covers them, and the first one a finished sync does not
//! cover leads the next round. Under load each `fdatasync` covers every append written
//! during the previous one.

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Debug)]
struct SyncState {
    /// Every byte before this offset is durable (or was in the file when it was opened).
    synced: u64,
    /// A leader is running `fdatasync` right now.
    leader: bool,
    /// Set when an `fdatasync` failed: nothing unsynced can be trusted any more.
    failed: Option<String>,
}

/// The sync side of one open file, shared by every thread appending to it.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    /// A second descriptor of the file: `fdatasync` works on the file, not the fd.
    file: File,
    /// End of the last complete append (whole batches only; raised after the write).
    written: AtomicU64,
    state: Mutex<SyncState>,
    covered: Condvar,
    fsyncs: AtomicU64,
}

impl GroupCommit {
    /// `len` bytes are already in the file: they count as written and synced (a journal
    /// opened after a crash holds what the kernel kept).
    pub(crate) fn new(file: File, len: u64) -> GroupCommit {
        GroupCommit {
            file,
            written: AtomicU64::new(len),
            state: Mutex::new(SyncState {
                synced: len,
                leader: false,
                failed: None,
            }),
            covered: Condvar::new(),
            fsyncs: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        // The state is three plain fields updated together: a panic cannot tear it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that every byte before `end` is written (called under the store's lock,
    /// after the append's write returned).
    pub(crate) fn wrote(&self, end: u64) {
        self.written.fetch_max(end, Ordering::AcqRel);
    }

    /// The file was cut to `len` bytes (durably): nothing past it is written or pending.
    pub(crate) fn cut(&self, len: u64) {
        self.written.store(len, Ordering::Release);
        let mut state = self.lock();
        state.synced = state.synced.min(len);
    }

    /// Whether some written byte is not yet known to be durable.
    pub(crate) fn pending(&self) -> bool {
        self.written.load(Ordering::Acquire) > self.lock().synced
    }

    /// Every byte before this offset is durable.
    pub(crate) fn synced(&self) -> u64 {
        self.lock().synced
    }

    /// Why an earlier `fdatasync` failed, if one did.
    pub(crate) fn failed(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    /// How many `fdatasync` calls were made.
    pub(crate) fn fsyncs(&self) -> u64 {
        self.fsyncs.load(Ordering::Relaxed)
    }

    /// Returns once every byte before `end` is durable: at once if a sync already covered
    /// it, else after leading or following a sync. An `fdatasync` failure fails this call
    /// and every later one (the kernel may have dropped the dirty pages).
    pub(crate) fn sync_to(&self, end: u64) -> Result<(), String> {
        let mut state = self.lock();
        loop {
            if let Some(why) = &state.failed {
                return Err(why.clone());
            }
            if state.synced >= end {
                return Ok(());
            }
            if state.leader {
                state = self.covered.wait(state).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            state.leader = true;
            // Everything written before fdatasync starts is covered by it. `end` was
            // written by the caller before it came here, so `upto >= end`.
            let upto = self.written.load(Ordering::Acquire);
            drop(state);
            self.fsyncs.fetch_add(1, Ordering::Relaxed);
            let result = self.file.sync_data();
            state = self.lock();
            state.leader = false;
            match result {
                Ok(()) => state.synced = state.synced.max(upto),
                Err(e) => {
                    state.failed = Some(format!("fdatasync failed: {e}"));
                }
            }
            self.covered.notify_all();
        }
    }
}
