"""What can go wrong, as types a Python developer can catch.

* :class:`GateError` and its subclasses: the gate refused a call (the WIT ``gate-error``,
  one class per case, ``.case`` is the WIT spelling). The journal is as the WIT documents.
* :class:`GateTrap`: the gate component trapped. The instance is broken and is replaced;
  never a gate error, never turned into one.
* :class:`SimulatedCrash`: a crash injected on purpose (``crash_after_effect=True``).
* REFUSED and AMBIGUOUS are outcomes, not errors: see :class:`interlock.Outcome`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional


class InterlockError(Exception):
    """Every error this package raises on purpose."""


class GateError(InterlockError):
    """The gate refused the call. ``case`` is the WIT ``gate-error`` case."""

    case = "gate-error"

    def __init__(self, message: str, payload: Any = None):
        super().__init__(message)
        self.payload = payload


class InvalidJson(GateError):
    """An input is not JSON (the parser's message, with line and column)."""

    case = "invalid-json"


class InvalidField(GateError):
    """An input is JSON but not the documented schema; ``field`` is a JSON pointer."""

    case = "invalid-field"

    def __init__(self, field: str, problem: str):
        super().__init__(f"invalid input at {field}: {problem}", {"field": field, "problem": problem})
        self.field = field
        self.problem = problem


class TooLarge(GateError):
    """An input is larger than the gate accepts; ``limit`` is in bytes."""

    case = "too-large"

    def __init__(self, limit: int):
        super().__init__(f"the input is larger than {limit} bytes", limit)
        self.limit = limit


class UnknownEffect(GateError):
    case = "unknown-effect"

    def __init__(self, effect_id: str):
        super().__init__(f"no effect {effect_id} in the journal", effect_id)
        self.effect_id = effect_id


class UnknownOperation(GateError):
    case = "unknown-operation"

    def __init__(self, op: int):
        super().__init__(f"no operation {op} is in progress", op)
        self.op = op


class UnexpectedReply(GateError):
    case = "unexpected-reply"


class JournalFailed(GateError):
    """The journal failed. ``journal_case`` is the WIT ``journal-error`` case
    (``conflict``, ``io``, ``corrupt``, ``torn-tail``, ``other``). Nothing is sent on an
    intent that is not durable; but the failure may come after a send (recording its
    result), so the effect may have happened: it stays open, and :meth:`recover` resolves
    it once the journal works again."""

    case = "journal"

    def __init__(self, journal_case: str, detail: Any):
        super().__init__(
            f"the journal failed: {journal_case}: {detail}; an effect this left open is "
            "resolved by recover() once the journal works again",
            detail,
        )
        self.journal_case = journal_case
        self.detail = detail


class CorruptJournal(GateError):
    """A stream the gate must act on fails verification; it will not act on it."""

    case = "corrupt-journal"


class Contention(GateError):
    """Other workers kept winning the journal. Retry; an effect this left open (if the
    contention came after its send) is resolved by :meth:`recover`."""

    case = "contention"


# WIT case -> its exception, from the case's payload (a wasmtime value).
_CASES: Dict[str, Callable[[Any], GateError]] = {
    InvalidJson.case: lambda p: InvalidJson(str(p), p),
    InvalidField.case: lambda p: InvalidField(p.field, p.problem),
    TooLarge.case: TooLarge,
    UnknownEffect.case: UnknownEffect,
    UnknownOperation.case: UnknownOperation,
    UnexpectedReply.case: lambda p: UnexpectedReply(str(p), p),
    JournalFailed.case: lambda p: JournalFailed(p.tag, p.payload),
    CorruptJournal.case: lambda p: CorruptJournal(str(p), p),
    Contention.case: lambda p: Contention(str(p), p),
}


def gate_error(tag: str, payload: Any) -> GateError:
    """The exception for one WIT ``gate-error`` value."""
    make = _CASES.get(tag)
    if make is None:
        # A case this host does not know yet: still a gate error, with its name.
        e = GateError(f"{tag}: {payload}", payload)
        e.case = tag
        return e
    return make(payload)


class ProofError(InterlockError):
    """A proof call failed (the WIT ``proof-error``); nothing was written. ``case`` is the
    WIT spelling. A key is never in the message."""

    case = "proof-error"


class BadKey(ProofError):
    """A key is missing, malformed, or the wrong half (a private key where a public one
    goes, or the reverse)."""

    case = "bad-key"


class BadSignature(ProofError):
    """A signature does not verify under the key given: another key, or changed content."""

    case = "bad-signature"


class Malformed(ProofError):
    """A receipt, checkpoint, proof or bundle is not in its format (cut short, not JSON)."""

    case = "malformed"


class UnknownVersion(ProofError):
    """A document names a format version this component does not read."""

    case = "unknown-version"


class ProofFailed(ProofError):
    """A proof does not hold: for another tree or size, or a forked log."""

    case = "proof-failed"


_PROOF_CASES = {c.case: c for c in (BadKey, BadSignature, Malformed, UnknownVersion, ProofFailed)}


def proof_error(tag: str, payload: Any) -> InterlockError:
    """The exception for one WIT ``proof-error`` value (``gate`` carries a gate-error)."""
    if tag == "gate":
        return gate_error(payload.tag, payload.payload)
    return _PROOF_CASES.get(tag, ProofError)(str(payload))


class GateTrap(InterlockError):
    """The gate component trapped (a broken component or a broken host import). The
    instance is dropped; what is durable in the journal stays, and recovery resumes it."""


class SimulatedCrash(InterlockError):
    """A crash injected on purpose. The crashed :class:`interlock.Interlock` is dead (its
    journal closed, as at a process exit): create a new one on the same directory."""

    def __init__(self, point: str, effect_id: Optional[str] = None):
        super().__init__(f"simulated crash {point}")
        self.point = point
        self.effect_id = effect_id


class UnknownTarget(InterlockError):
    """The gate asked for a step of a target this Interlock does not define. It never
    should: the Interlock declares its targets (``set-routes``), and the gate leaves the
    effects of any other target open (``target_unroutable``) without asking. Nothing was
    answered and the operation was cancelled: what the journal holds stays, and an
    Interlock that defines the target recovers the effect."""

    def __init__(self, target: str, effect_id: str):
        super().__init__(
            f"the gate asked for a step of effect {effect_id} on target {target!r}, which this "
            "Interlock does not define; nothing was answered and the operation was cancelled, "
            f"so the effect stays open for an Interlock that defines {target!r} to recover"
        )
        self.target = target
        self.effect_id = effect_id


class UnsupportedJournal(InterlockError, ValueError):
    """The journal argument is a URL this host cannot open: a scheme other than
    ``sqlite://`` and ``postgres://`` (``postgresql://``), or one of those written wrong
    (``why`` says how it should be). Nothing was created."""

    def __init__(self, scheme: str, why: Optional[str] = None):
        # The URL itself is not repeated: it may carry a password.
        if why is None:
            why = (f"this host opens sqlite:///abs/path.db and postgres://user@host:port/db, not "
                   f"{scheme}:// URLs; for a file journal, pass the path of a directory")
        super().__init__(f"the journal is a {scheme}:// URL that cannot be opened: {why}; nothing was created")
        self.scheme = scheme


class MissingExtra(InterlockError, ImportError):
    """A journal backend needs a library this installation lacks (``postgres://`` needs
    psycopg 3: ``pip install 'interlock[postgres]'``). Nothing was created."""

    def __init__(self, what: str, extra: str, cause: str):
        super().__init__(
            f"{what} needs the optional dependencies of interlock[{extra}], which are not "
            f"installed ({cause}): pip install 'interlock[{extra}]'; nothing was created"
        )
        self.extra = extra


class Rejected(InterlockError):
    """Raise it from an effect function to say the target refused and applied nothing
    (a definitive error, like an HTTP 4xx). Any other exception leaves the send's fate
    unknown, and the gate resolves it by the target's tier."""
