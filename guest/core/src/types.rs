//! The gate's vocabulary, mirroring wit/types.wit and wit/target.wit one for one.
use alloc::string::String;
use alloc::vec::Vec;

use crate::journal::JournalError;

macro_rules! spelled {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The spelling used in the journal and in every host.
            pub fn as_str(self) -> &'static str { match self { $($name::$variant => $text),+ } }
            pub fn parse(s: &str) -> Option<$name> { match s { $($text => Some($name::$variant),)+ _ => None } }
        }
    };
}

spelled!(
    /// Where an effect is in its life.
    State {
        Proposed = "PROPOSED",
        Authorized = "AUTHORIZED",
        Dispatched = "DISPATCHED",
        Committed = "COMMITTED",
        Refused = "REFUSED",
        Ambiguous = "AMBIGUOUS",
        Confirmed = "CONFIRMED",
    }
);

impl State {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Committed | State::Refused | State::Ambiguous | State::Confirmed
        )
    }
}

spelled!(
    /// Whether the effect happened at the target, as far as the gate can establish.
    Executed { Yes = "yes", No = "no", Unknown = "unknown" }
);

spelled!(
    /// Why an outcome is not a plain success (see wit/types.wit for each case).
    Reason {
        ConflictingPayload = "conflicting_payload",
        LeaseMissing = "lease_missing",
        LeaseExpired = "lease_expired",
        LeaseRevoked = "lease_revoked",
        NotAllowed = "not_allowed",
        PremiseChanged = "premise_changed",
        ApprovalMissing = "approval_missing",
        ApprovalExpired = "approval_expired",
        ApprovalRevoked = "approval_revoked",
        ApprovalStale = "approval_stale",
        CapExceeded = "cap_exceeded",
        TargetRejected = "target_rejected",
        NoDedupeNoLookup = "no_dedupe_no_lookup",
        DedupeWindowPassed = "dedupe_window_passed",
        ClaimLive = "claim_live",
        ReadFailed = "read_failed",
        TargetUnavailable = "target_unavailable",
        TargetUnroutable = "target_unroutable",
        ApprovalPending = "approval_pending",
        ApprovalRejected = "approval_rejected",
    }
);

/// One premise that no longer holds; `was` and `now` are JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PremiseChange {
    pub name: String,
    pub was: String,
    pub now: String,
}

/// What the gate decided for one effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub effect_id: String,
    pub state: State,
    pub reason: Option<Reason>,
    pub executed: Executed,
    /// The target's result as JSON text, when known.
    pub result: Option<String>,
    pub changed: Vec<PremiseChange>,
    pub return_to: Option<String>,
    pub replayed: bool,
    /// For an open effect, how long until recovery can act (the live claim's remaining time).
    pub retry_after_ms: Option<u64>,
}

/// What the gate asks of the host next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    Capture {
        effect_id: String,
        target: String,
        effect: String,
        names: Vec<String>,
    },
    Authorize {
        effect_id: String,
        target: String,
        effect: String,
        agent: String,
    },
    Apply {
        effect_id: String,
        target: String,
        effect: String,
        idempotency_key: String,
        attempt: u32,
    },
    Query {
        effect_id: String,
        target: String,
        effect: String,
    },
    /// Wait this many ms, then resume with [`Reply::Slept`]: another worker's claim on the
    /// effect is live (asked only by [`crate::Gate::recover_waiting`]).
    Sleep(u64),
    /// For tests: the host must stop here as a killed process would, performing nothing
    /// more and dropping this gate ([`crate::Gate::crash_at`]).
    Crash(CrashPoint),
    Done(Outcome),
}

/// Where a test kills a host (`Gate::crash_at`): the same points in every host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// The intent is durable; the send has not left (a first send).
    BeforeSend,
    /// The target applied the send; its reply never reached the gate (a first send).
    AfterSend,
    /// During a recovery, right after its send or its lookup was answered.
    InRecovery,
}

impl CrashPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            CrashPoint::BeforeSend => "before-send",
            CrashPoint::AfterSend => "after-send",
            CrashPoint::InRecovery => "in-recovery",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub op: u64,
    pub ask: Ask,
}

/// The host's answer to the step it was asked. JSON payloads are text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Captured(String),
    Allowed(bool),
    Applied(String),
    Rejected(String),
    Unknown(String),
    Found(String),
    NotFound,
    Failed(String),
    /// The host waited as [`Ask::Sleep`] asked.
    Slept,
}

impl Reply {
    pub fn kind(&self) -> &'static str {
        match self {
            Reply::Captured(_) => "captured",
            Reply::Allowed(_) => "allowed",
            Reply::Applied(_) => "applied",
            Reply::Rejected(_) => "rejected",
            Reply::Unknown(_) => "unknown",
            Reply::Found(_) => "found",
            Reply::NotFound => "not-found",
            Reply::Failed(_) => "failed",
            Reply::Slept => "slept",
        }
    }
}

/// What a function or tool the host was told to call did (the loops of `tools::session`
/// and `effects`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallAnswer {
    /// It returned this (JSON text): a plain function's value (a function returning
    /// nothing: `null`), or an MCP `CallToolResult`.
    Returned(String),
    /// It said the target refused and applied nothing (it raised the host's `Rejected`).
    Refused(String),
    /// No answer: it raised, the connection was lost, it did not answer in time.
    Failed(String),
    /// The host slept as asked.
    Slept,
}

/// How recovery waits out another worker's live claim: every `retry_after_ms` the gate
/// gives (or `poll_ms` when it gives none), at most `max_polls` times; then the effect is
/// reported open (`claim_live`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimWait {
    pub poll_ms: u64,
    pub max_polls: u64,
}

impl Default for ClaimWait {
    fn default() -> Self {
        ClaimWait {
            poll_ms: crate::defaults::CLAIM_WAIT_POLL_MS,
            max_polls: crate::defaults::CLAIM_WAIT_MAX_POLLS,
        }
    }
}

/// Why a gate call failed (wit/gate.wit `gate-error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GateError {
    InvalidJson(String),
    InvalidField { field: String, problem: String },
    TooLarge(u64),
    UnknownEffect(String),
    UnknownOperation(u64),
    UnexpectedReply(String),
    Journal(JournalError),
    CorruptJournal(String),
    Contention(String),
}

impl From<JournalError> for GateError {
    fn from(e: JournalError) -> Self {
        GateError::Journal(e)
    }
}

impl core::fmt::Display for GateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GateError::InvalidJson(m) => write!(f, "input is not JSON: {m}"),
            GateError::InvalidField { field, problem } => {
                write!(f, "invalid field {field}: {problem}")
            }
            GateError::TooLarge(limit) => write!(f, "input larger than {limit} bytes"),
            GateError::UnknownEffect(id) => write!(f, "no effect {id} in the journal"),
            GateError::UnknownOperation(op) => write!(f, "no operation {op} in progress"),
            GateError::UnexpectedReply(m) => write!(f, "unexpected reply: {m}"),
            GateError::Journal(e) => write!(f, "journal: {e}"),
            GateError::CorruptJournal(m) => write!(f, "journal fails verification: {m}"),
            GateError::Contention(m) => write!(f, "contention: {m}"),
        }
    }
}
