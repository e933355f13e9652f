"""Interlock: a safety gate between an AI agent and effects on the world.

It journals why an effect is allowed before it is sent, re-checks that right before the
send and after any crash, and recovers by what the target can do (dedupe, lookup, or
AMBIGUOUS for a person). Every rule lives in one WebAssembly component
(``interlock_gate.wasm``, shipped in this package), the same one every Interlock host
runs; this package is glue: the journal (a folder, SQLite or PostgreSQL), the clock, and
the decorator API.
"""

from .clock import FakeClock, SystemClock
from .decorator import Effect, EffectGate, Interlock, Receipt, RecoveryReport
from .errors import (
    BadKey,
    BadSignature,
    Contention,
    CorruptJournal,
    GateError,
    GateTrap,
    InterlockError,
    InvalidField,
    InvalidJson,
    JournalFailed,
    Malformed,
    MissingExtra,
    ProofError,
    ProofFailed,
    Rejected,
    SimulatedCrash,
    TooLarge,
    UnexpectedReply,
    UnknownEffect,
    UnknownOperation,
    UnknownTarget,
    UnknownVersion,
    UnsupportedJournal,
)
from .gate import ClaimWait, Executed, Outcome, PremiseChange, Problem, Reason, State, VerifyReport
from .journal import Conflict, Corrupt, FileJournal, JournalFileError, Locked, TornTail, UnknownFormat
from .lowlevel import EffectTarget, Gate, effect_id_for
from .sql_journal import PostgresJournal, SqliteJournal, SqlJournalError

# States, spelled as in the journal (``COMMITTED == "COMMITTED"``).
PROPOSED = State.PROPOSED
AUTHORIZED = State.AUTHORIZED
DISPATCHED = State.DISPATCHED
COMMITTED = State.COMMITTED
REFUSED = State.REFUSED
AMBIGUOUS = State.AMBIGUOUS
CONFIRMED = State.CONFIRMED

#: The former name of :class:`State`.
Status = State

Result = Outcome

__all__ = [
    "Interlock", "Effect", "EffectGate", "Outcome", "Result", "Receipt", "RecoveryReport",
    "PremiseChange", "Problem", "VerifyReport", "State", "Status", "Reason", "Executed",
    "PROPOSED", "AUTHORIZED", "DISPATCHED", "COMMITTED", "REFUSED", "AMBIGUOUS", "CONFIRMED",
    "InterlockError", "GateError", "InvalidJson", "InvalidField", "TooLarge", "UnknownEffect",
    "UnknownOperation", "UnexpectedReply", "JournalFailed", "CorruptJournal", "Contention",
    "GateTrap", "SimulatedCrash", "UnknownTarget", "UnsupportedJournal", "Rejected",
    "FileJournal", "JournalFileError", "Locked", "TornTail", "Corrupt", "FakeClock",
    "SystemClock", "ClaimWait", "Conflict", "UnknownFormat", "SqliteJournal", "PostgresJournal",
    "SqlJournalError", "MissingExtra", "ProofError", "BadKey", "BadSignature", "Malformed",
    "UnknownVersion", "ProofFailed", "Gate", "EffectTarget", "effect_id_for",
]
