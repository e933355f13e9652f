//! The shared journal of the simulated world: a [`MemJournal`] behind a wrapper that
//! injects the faults a real fsync'ing file journal can show.
//!
//! - A write error leaves nothing visible (the file backend rolls a failed write back).
//! - A read error.
//! - A crash at the n-th journal call of one gate call, before the call or after its write
//!   (an append that was written but whose fsync never returned). A process crash loses
//!   nothing written (it sits in the page cache); a power loss keeps every line up to the
//!   last completed fsync and any line-granular prefix of what came after, which is exactly
//!   what `interlock repair` leaves of a file whose unsynced tail was torn.
use std::collections::BTreeSet;

use interlock_core::{Journal, JournalError, MemJournal};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashKind {
    /// One worker's process dies; the journal keeps every line written.
    Process,
    /// The machine loses power: lines after the last fsync may be lost.
    Power,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// The next append fails and leaves nothing.
    WriteError,
    /// The next read (read or length) fails.
    ReadError,
    /// At journal call number `at` of this gate call: crash before it, or after it wrote.
    Crash {
        at: u32,
        after: bool,
        kind: CrashKind,
    },
}

/// One stored line: its stream, its text, the `open` flag it was appended with.
#[derive(Clone, Debug)]
struct Line {
    stream: String,
    text: String,
    open: bool,
}

#[derive(Debug)]
pub struct SimJournal {
    mem: MemJournal,
    lines: Vec<Line>,
    /// `lines[..synced]` are durable: a completed fsync covered them.
    pub synced: usize,
    fault: Fault,
    calls: u32,
    /// Set when an injected crash fired; every call fails until the harness handles it.
    pub crashed: Option<CrashKind>,
    /// What was injected during the current gate call, if anything.
    pub injected: Option<&'static str>,
    /// Streams changed since the last [`SimJournal::take_dirty`] (all of them after a cut).
    dirty: BTreeSet<String>,
}

impl Default for SimJournal {
    fn default() -> Self {
        Self::new()
    }
}

impl SimJournal {
    pub fn new() -> SimJournal {
        SimJournal {
            mem: MemJournal::new(),
            lines: Vec::new(),
            synced: 0,
            fault: Fault::None,
            calls: 0,
            crashed: None,
            injected: None,
            dirty: BTreeSet::new(),
        }
    }

    /// Arm a fault for the next gate call (`calls` counts journal calls from here).
    pub fn arm(&mut self, fault: Fault) {
        self.fault = fault;
        self.calls = 0;
        self.injected = None;
    }

    /// The gate call is over: disarm whatever did not fire.
    pub fn disarm(&mut self) {
        self.fault = Fault::None;
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The journal without faults, for the harness's own checks.
    pub fn raw(&mut self) -> &mut MemJournal {
        &mut self.mem
    }

    pub fn to_jsonl(&self) -> String {
        self.mem.to_jsonl()
    }

    /// After a crash: a process crash keeps everything, a power loss keeps
    /// `lines[..keep]` with `synced <= keep <= len` (chosen by the caller). Returns how many
    /// lines were lost.
    pub fn recover_from_crash(&mut self, keep: usize) -> usize {
        let kind = self.crashed.take();
        self.fault = Fault::None;
        if kind != Some(CrashKind::Power) {
            return 0;
        }
        self.power_cut(keep)
    }

    /// Cut the journal to its first `keep` lines (never below the durable mark).
    pub fn power_cut(&mut self, keep: usize) -> usize {
        assert!(keep >= self.synced && keep <= self.lines.len());
        let lost = self.lines.len() - keep;
        self.dirty
            .extend(self.lines.iter().map(|l| l.stream.clone()));
        self.lines.truncate(keep);
        let mut mem = MemJournal::new();
        for l in &self.lines {
            let len = mem.length(&l.stream).expect("memory journal reads");
            mem.append(&l.stream, len, std::slice::from_ref(&l.text), false, l.open)
                .expect("a prefix of a journal replays");
        }
        self.mem = mem;
        self.synced = self.lines.len();
        lost
    }

    /// The streams changed since the last call, for an incremental verify: `verify` checks
    /// each stream on its own, so the streams left untouched since their last clean verify
    /// need no second look.
    pub fn take_dirty(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.dirty)
    }

    /// How many entries of `stream` a completed fsync covers.
    pub fn durable_len(&self, stream: &str) -> u64 {
        self.lines[..self.synced]
            .iter()
            .filter(|l| l.stream == stream)
            .count() as u64
    }

    /// Ok(true): perform the call, then crash.
    fn enter(&mut self, write: bool) -> Result<bool, JournalError> {
        if self.crashed.is_some() {
            return Err(JournalError::Io("the process is gone".into()));
        }
        let n = self.calls;
        self.calls += 1;
        match self.fault {
            Fault::WriteError if write => {
                self.fault = Fault::None;
                self.injected = Some("write_error");
                Err(JournalError::Io("injected write error".into()))
            }
            Fault::ReadError if !write => {
                self.fault = Fault::None;
                self.injected = Some("read_error");
                Err(JournalError::Io("injected read error".into()))
            }
            Fault::Crash { at, after, kind } if at == n => {
                self.fault = Fault::None;
                self.injected = Some(match (kind, after) {
                    (CrashKind::Process, false) => "crash_process_before_journal_call",
                    (CrashKind::Process, true) => "crash_process_after_journal_call",
                    (CrashKind::Power, false) => "crash_power_before_journal_call",
                    (CrashKind::Power, true) => "crash_power_after_journal_call",
                });
                if after {
                    Ok(true)
                } else {
                    self.crashed = Some(kind);
                    Err(JournalError::Io("injected crash".into()))
                }
            }
            _ => Ok(false),
        }
    }

    fn crash_now(&mut self) -> JournalError {
        JournalError::Io("injected crash".into())
    }
}

impl Journal for SimJournal {
    fn append(
        &mut self,
        stream: &str,
        expected_len: u64,
        entries: &[String],
        durable: bool,
        open: bool,
    ) -> Result<(), JournalError> {
        let crash_after = self.enter(true)?;
        let kind = self.injected_kind();
        let r = self
            .mem
            .append(stream, expected_len, entries, durable, open);
        if r.is_ok() {
            self.dirty.insert(stream.to_string());
            self.lines.extend(entries.iter().map(|t| Line {
                stream: stream.to_string(),
                text: t.clone(),
                open,
            }));
            // The fsync of a crashed call never returned: nothing new is durable.
            if durable && !crash_after {
                self.synced = self.lines.len();
            }
        }
        if crash_after {
            self.crashed = Some(kind);
            return Err(self.crash_now());
        }
        r
    }

    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        let crash_after = self.enter(false)?;
        let r = self.mem.read(stream, start);
        if crash_after {
            self.crashed = Some(self.injected_kind());
            return Err(self.crash_now());
        }
        r
    }

    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        let crash_after = self.enter(false)?;
        let r = self.mem.length(stream);
        if crash_after {
            self.crashed = Some(self.injected_kind());
            return Err(self.crash_now());
        }
        r
    }

    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        let crash_after = self.enter(false)?;
        let r = self.mem.open_streams();
        if crash_after {
            self.crashed = Some(self.injected_kind());
            return Err(self.crash_now());
        }
        r
    }

    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        let crash_after = self.enter(false)?;
        let r = self.mem.streams();
        if crash_after {
            self.crashed = Some(self.injected_kind());
            return Err(self.crash_now());
        }
        r
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        let crash_after = self.enter(true)?;
        if crash_after {
            self.crashed = Some(self.injected_kind());
            return Err(self.crash_now());
        }
        self.synced = self.lines.len();
        self.mem.sync()
    }
}

impl SimJournal {
    fn injected_kind(&self) -> CrashKind {
        match self.injected {
            Some(s) if s.starts_with("crash_power") => CrashKind::Power,
            _ => CrashKind::Process,
        }
    }
}

/// A read-only view of some streams of a journal, for an incremental `Gate::verify`.
pub struct View<'a> {
    pub inner: &'a mut MemJournal,
    pub names: Vec<String>,
}

impl Journal for View<'_> {
    fn append(
        &mut self,
        _: &str,
        _: u64,
        _: &[String],
        _: bool,
        _: bool,
    ) -> Result<(), JournalError> {
        Err(JournalError::Other("a verify view is read-only".into()))
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        self.inner.read(stream, start)
    }
    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        self.inner.length(stream)
    }
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        Ok(Vec::new())
    }
    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        let all = self.inner.streams()?;
        Ok(all.into_iter().filter(|s| self.names.contains(s)).collect())
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        Ok(())
    }
}

/// The journal as the harness's own read-only calls (receipts) see it: no faults, and a
/// sync the gate asks for is a real one (it moves the durable boundary), as on a disk.
pub struct Admin<'a>(pub &'a mut SimJournal);

impl Journal for Admin<'_> {
    fn append(
        &mut self,
        _: &str,
        _: u64,
        _: &[String],
        _: bool,
        _: bool,
    ) -> Result<(), JournalError> {
        Err(JournalError::Other("the admin view is read-only".into()))
    }
    fn read(&mut self, stream: &str, start: u64) -> Result<Vec<String>, JournalError> {
        self.0.mem.read(stream, start)
    }
    fn length(&mut self, stream: &str) -> Result<u64, JournalError> {
        self.0.mem.length(stream)
    }
    fn open_streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.0.mem.open_streams()
    }
    fn streams(&mut self) -> Result<Vec<String>, JournalError> {
        self.0.mem.streams()
    }
    fn sync(&mut self) -> Result<(), JournalError> {
        self.0.synced = self.0.lines.len();
        self.0.mem.sync()
    }
}
