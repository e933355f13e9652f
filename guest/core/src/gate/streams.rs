//! How the gate reads streams (verified, through its cache) and appends to them against
//! other workers.
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Value};

use super::Gate;
use crate::entry::{Spelled, Stream};
use crate::journal::{Journal, JournalError};
use crate::types::GateError;

/// How often a compare-and-append is retried against other workers before giving up.
const CAS_RETRIES: usize = 16;
/// Verified streams kept per instance; past this the cache starts over.
const CACHED_STREAMS: usize = 4096;

/// What to do with a stream as it stands now, and the answer to give once it is done.
pub(super) enum Plan<S, T> {
    /// Nothing to append.
    Done(T),
    /// Append these entries; the answer holds once they are in.
    Append(Vec<(S, Map<String, Value>)>, T),
}

impl Gate {
    /// A stream as stored now, verified, served from this instance's cache where it can be.
    pub(super) fn load(&mut self, j: &mut dyn Journal, name: &str) -> Result<Stream, GateError> {
        let mut s = self
            .streams
            .remove(name)
            .unwrap_or_else(|| Stream::empty(name));
        s.catch_up(j)?;
        if self.streams.len() >= CACHED_STREAMS {
            self.streams.clear();
        }
        self.streams.insert(name.into(), s.clone());
        Ok(s)
    }

    /// Keep a stream this instance just appended to, so its next read costs nothing.
    pub(super) fn remember(&mut self, s: &Stream) {
        if let Some(kept) = self.streams.get_mut(&s.name) {
            kept.clone_from(s);
        }
    }

    /// Compare-and-append to stream `name` (closed after it): `plan` decides from the
    /// stream as stored now. When another worker appended first, the decision was made on
    /// a stale stream, so the stream is read and `plan` asked again, up to `CAS_RETRIES`
    /// times before `contention` says what kept changing. Returns the answer, with the
    /// stream as this worker left it for the caller to `remember`.
    pub(super) fn compare_and_append<S: Spelled, T>(
        &mut self,
        j: &mut dyn Journal,
        name: &str,
        now_ms: u64,
        durable: bool,
        mut plan: impl FnMut(&mut Gate, &mut dyn Journal, &Stream) -> Result<Plan<S, T>, GateError>,
        contention: impl FnOnce() -> String,
    ) -> Result<(T, Stream), GateError> {
        for _ in 0..CAS_RETRIES {
            let mut s = self.load(j, name)?;
            let (entries, answer) = match plan(self, j, &s)? {
                Plan::Done(answer) => return Ok((answer, s)),
                Plan::Append(entries, answer) => (entries, answer),
            };
            match s.append(j, entries, now_ms, durable, false) {
                Ok(()) => return Ok((answer, s)),
                Err(JournalError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(GateError::Contention(contention()))
    }
}
