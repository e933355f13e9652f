"""One instance of the gate component and the loop that drives its steps.

The gate never calls a target. Each call answers with a step (capture, authorize, apply,
query, or done); the host performs it through a target adapter and hands the reply back
with ``resume``. Nothing here decides anything: the loop only routes. A recovery rule
written here would drift from the other hosts: it would be a bug.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import threading
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    Generator,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
    cast,
)

import wasmtime
from wasmtime import Engine, Store
from wasmtime.component import Component, Linker, Record, Variant

from .errors import GateTrap, InterlockError, SimulatedCrash, gate_error
from .journal import FORMAT_WASM, Conflict, Journal, JournalFileError

if TYPE_CHECKING:
    from .decorator import Receipt

GATE_WASM = "interlock_gate.wasm"
PAYMENTS_WASM = "payments_sim.wasm"
GATE_INTERFACE = "interlock:gate/gate@0.1.0"
TOOLS_INTERFACE = "interlock:gate/tools@0.1.0"
JOURNAL_INTERFACE = "interlock:gate/journal@0.1.0"
CLOCK_PREFIX = "wasi:clocks/wall-clock@"

# Crash points, as the conformance vectors spell them.
AFTER_INTENT = "after_intent"
AFTER_COMMIT = "after_commit"
IN_RECOVERY = "in_recovery"


# ---------------------------------------------------------------- loading the component


# The variable that points at each component instead of the packaged copy.
_WASM_ENV = {
    GATE_WASM: "INTERLOCK_WASM",
    PAYMENTS_WASM: "INTERLOCK_PAYMENTS_WASM",
    FORMAT_WASM: "INTERLOCK_JOURNAL_FORMAT_WASM",
}


def wasm_path(name: str) -> Path:
    """Where a component is: its variable (``$INTERLOCK_WASM`` for the gate,
    ``$INTERLOCK_PAYMENTS_WASM``, ``$INTERLOCK_JOURNAL_FORMAT_WASM``), else the copy inside
    this package, else a development checkout's dist/."""
    env = os.environ.get(_WASM_ENV[name])
    if env:
        return Path(env)
    packaged = Path(__file__).with_name("wasm") / name
    if packaged.is_file():
        return packaged
    # src/interlock/gate.py -> hosts/python/src/interlock -> the repository root
    dev = Path(__file__).resolve().parents[4] / "dist" / name
    if dev.is_file():
        return dev
    raise FileNotFoundError(
        f"the component {name} was not found in this package ({packaged}) nor in {dev}; "
        "build it with `bash scripts/build-wasm.sh` or set INTERLOCK_WASM"
    )


_ENGINE: Optional[Engine] = None
_COMPONENTS: Dict[Path, Component] = {}
# Two threads creating their first instance at once must get one engine and one compiled
# component: a component compiled by another engine cannot be instantiated.
_LOADING = threading.RLock()


def engine() -> Engine:
    global _ENGINE
    with _LOADING:
        if _ENGINE is None:
            _ENGINE = Engine()
        return _ENGINE


def _cache_dir() -> Optional[Path]:
    if os.environ.get("INTERLOCK_NO_CACHE"):
        return None
    base = os.environ.get("INTERLOCK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "interlock"
    )
    return Path(base)


def _wasmtime_version() -> str:
    try:
        from importlib.metadata import version

        return version("wasmtime")
    except Exception:  # noqa: BLE001 - an unknown version only disables the cache key's use
        return "unknown"


def load_component(path: Path) -> Component:
    """The component compiled for this process's engine, once per process. The compiled
    artifact is cached on disk (~100-200 ms saved per process), keyed by the wasm bytes and
    the wasmtime version, so a rebuilt guest or another wasmtime never loads a stale one."""
    path = Path(path).resolve()
    with _LOADING:
        if path not in _COMPONENTS:
            _COMPONENTS[path] = _compile(path)
        return _COMPONENTS[path]


def _compile(path: Path) -> Component:
    data = path.read_bytes()
    key = hashlib.sha256(data + _wasmtime_version().encode()).hexdigest()[:16]
    cache = _cache_dir()
    cached = cache / f"{path.stem}.{key}.cwasm" if cache else None
    component = None
    if cached is not None and cached.is_file():
        try:
            # Only this function writes these files (whole, by rename), named by the hash
            # of the wasm and of the wasmtime version: they are wasmtime's own output.
            component = Component.deserialize(engine(), cached.read_bytes())
        except Exception:  # noqa: BLE001 - an unusable cached artifact is compiled again
            component = None
    if component is None:
        try:
            component = Component(engine(), data)
        except wasmtime.WasmtimeError as e:
            raise GateTrap(f"{path} is not a valid component: {e}") from e
        if cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(bytes(component.serialize()))
                os.replace(tmp, cached)
            except OSError:
                pass  # best effort: a read-only home only costs time
    return component


# ---------------------------------------------------------------- values


def _f(rec: Any, name: str) -> Any:
    """A field of a WIT record (wasmtime-py keeps the kebab-case names)."""
    return getattr(rec, name)


class _Spelled(str, Enum):
    """A ``str`` enum that is its journal spelling: ``State.COMMITTED == "COMMITTED"``, and
    ``str()`` and f-strings give the spelling (as the journal, the CLI and Node write it)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class State(_Spelled):
    """Where an effect is in its life (WIT ``state``), spelled as in the journal."""

    PROPOSED = "PROPOSED"
    AUTHORIZED = "AUTHORIZED"
    DISPATCHED = "DISPATCHED"
    COMMITTED = "COMMITTED"
    REFUSED = "REFUSED"
    AMBIGUOUS = "AMBIGUOUS"
    CONFIRMED = "CONFIRMED"

    @property
    def final(self) -> bool:
        """Closed: nothing more will happen to the effect without a person."""
        return self in _FINAL


_FINAL = frozenset({State.COMMITTED, State.REFUSED, State.AMBIGUOUS, State.CONFIRMED})


class Reason(_Spelled):
    """Why an outcome is not a plain success (WIT ``reason``), spelled as in the journal's
    JSON (underscores where the WIT has dashes)."""

    CONFLICTING_PAYLOAD = "conflicting_payload"
    LEASE_MISSING = "lease_missing"
    LEASE_EXPIRED = "lease_expired"
    LEASE_REVOKED = "lease_revoked"
    NOT_ALLOWED = "not_allowed"
    PREMISE_CHANGED = "premise_changed"
    APPROVAL_MISSING = "approval_missing"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVAL_REVOKED = "approval_revoked"
    APPROVAL_STALE = "approval_stale"
    CAP_EXCEEDED = "cap_exceeded"
    TARGET_REJECTED = "target_rejected"
    NO_DEDUPE_NO_LOOKUP = "no_dedupe_no_lookup"
    DEDUPE_WINDOW_PASSED = "dedupe_window_passed"
    CLAIM_LIVE = "claim_live"
    READ_FAILED = "read_failed"
    TARGET_UNAVAILABLE = "target_unavailable"
    TARGET_UNROUTABLE = "target_unroutable"


class Executed(_Spelled):
    """Whether the effect happened at the target, as far as the gate knows."""

    YES = "yes"
    NO = "no"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PremiseChange:
    """A premise that no longer holds: its recorded value (or bound) and the value now."""

    name: str
    was: Any
    now: Any


@dataclass(frozen=True)
class Outcome:
    """What the gate decided for one effect. REFUSED and AMBIGUOUS are outcomes, not errors.

    ``status`` is a :class:`State` (``COMMITTED``, ``REFUSED``, ``AMBIGUOUS``,
    ``CONFIRMED``; ``DISPATCHED`` while the effect is still open), ``reason`` a
    :class:`Reason` (``conflicting_payload``, ``claim_live``, ...), ``executed`` an
    :class:`Executed` (``yes``, ``no`` or ``unknown``); each equals its journal spelling as a
    string. ``result`` is the target's result, parsed from JSON."""

    effect_id: str
    status: State
    reason: Optional[Reason]
    executed: Executed
    result: Any
    changed: Tuple[PremiseChange, ...]
    return_to: Optional[str]
    replayed: bool
    retry_after_ms: Optional[int]

    @property
    def state(self) -> State:
        return self.status

    @property
    def final(self) -> bool:
        return self.status.final

    def __str__(self) -> str:
        extra = f" ({self.reason})" if self.reason else ""
        return f"{self.status}{extra} {self.effect_id}"

    def receipt(self, key: Optional[bytes] = None) -> Receipt:
        """The effect's receipt, from the :class:`interlock.Interlock` this outcome came from
        (HMAC-SHA256-signed when ``key`` is given)."""
        gate = getattr(self, "_interlock", None)
        if gate is None:
            raise InterlockError("this outcome did not come from an Interlock; use gate.receipt(effect_id)")
        return gate.receipt(self.effect_id, key)


def _json_or_none(text: Optional[str]) -> Any:
    return None if text is None else json.loads(text)


def to_outcome(rec: Any) -> Outcome:
    reason = _f(rec, "reason")
    return Outcome(
        effect_id=_f(rec, "effect-id"),
        status=State(_f(rec, "state").upper()),
        reason=Reason(reason.replace("-", "_")) if reason else None,
        executed=Executed(_f(rec, "executed")),
        result=_json_or_none(_f(rec, "result")),
        changed=tuple(
            PremiseChange(c.name, json.loads(c.was), json.loads(c.now)) for c in _f(rec, "changed")
        ),
        return_to=_f(rec, "return-to"),
        replayed=_f(rec, "replayed"),
        retry_after_ms=_f(rec, "retry-after-ms"),
    )


@dataclass(frozen=True)
class Problem:
    stream: str
    seq: int
    kind: str
    detail: str


@dataclass(frozen=True)
class VerifyReport:
    streams: int
    entries: int
    problems: Tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def _report(rec: Any) -> VerifyReport:
    return VerifyReport(
        rec.streams,
        rec.entries,
        tuple(Problem(_f(p, "stream"), p.seq, p.kind, p.detail) for p in rec.problems),
    )


# Replies, as the WIT `reply` variant. Targets return these.
def captured(premises: Dict[str, Any]) -> Variant:
    return Variant("captured", canonical_json(premises))


def allowed(yes: bool) -> Variant:
    return Variant("allowed", bool(yes))


def applied(result_json: str) -> Variant:
    return Variant("applied", result_json)


def rejected(message: str) -> Variant:
    return Variant("rejected", message)


def unknown(message: str) -> Variant:
    return Variant("unknown", message)


def found(result_json: str) -> Variant:
    return Variant("found", result_json)


def not_found() -> Variant:
    return Variant("not-found")


def failed(message: str) -> Variant:
    return Variant("failed", message)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys (the gate re-canonicalizes what it stores; this only
    keeps the text a host sends the same as the Rust host's). Integers stay exact, however
    large (the gate refuses those outside the I-JSON range); NaN and infinities, which JSON
    cannot carry, raise ``ValueError``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


@dataclass(frozen=True)
class Request:
    """One step's request (capture, authorize, apply or query) as plain Python.
    ``effect`` is the effect's JSON text; ``args`` its parsed form."""

    kind: str
    effect_id: str
    target: str
    effect: str
    names: Tuple[str, ...] = ()
    agent: Optional[str] = None
    idempotency_key: Optional[str] = None
    attempt: int = 0

    @property
    def args(self) -> Any:
        return json.loads(self.effect)


def to_request(kind: str, rec: Any) -> Request:
    return Request(
        kind=kind,
        effect_id=_f(rec, "effect-id"),
        target=rec.target,
        effect=rec.effect,
        names=tuple(getattr(rec, "names", ()) or ()),
        agent=getattr(rec, "agent", None),
        idempotency_key=getattr(rec, "idempotency-key", None),
        attempt=getattr(rec, "attempt", 0) or 0,
    )


# ---------------------------------------------------------------- the host


class Clock(Protocol):
    """The time the gate sees: :class:`interlock.SystemClock` or :class:`interlock.FakeClock`."""

    def now_ms(self) -> int: ...

    def sleep(self, ms: int) -> None: ...

    def asleep(self, ms: int) -> Awaitable[None]: ...


#: What a target answers a step with: a WIT ``reply`` (see :func:`captured` and the rest),
#: or an awaitable of one (async targets, driven by the ``a``-methods).
Reply = Union[Variant, Awaitable[Variant]]


class Targets(Protocol):
    """Performs the steps the gate asks for (one method per step kind). It may also have
    ``routes()``: the target names it reaches (see :meth:`GateHost.route`)."""

    def capture(self, req: Request) -> Reply: ...

    def authorize(self, req: Request) -> Reply: ...

    def apply(self, req: Request) -> Reply: ...

    def query(self, req: Request) -> Reply: ...


class _Datetime(Record):
    """A WIT ``wasi:clocks/wall-clock.datetime``."""

    def __init__(self, seconds: int, nanoseconds: int):
        self.seconds = seconds
        self.nanoseconds = nanoseconds


class JournalRef:
    """One journal (a :class:`interlock.journal.Journal`: a file journal or a shared one)
    shared by several gate instances in a process (racing workers, a restarted worker),
    which can be closed and reopened under them."""

    def __init__(self, journal: Optional[Journal]):
        self.journal = journal

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
        self.journal = None

    def replace(self, journal: Journal) -> None:
        self.journal = journal


def _journal_error(e: Exception) -> Variant:
    if isinstance(e, Conflict):
        return Variant("conflict", e.actual)
    if isinstance(e, JournalFileError):
        return Variant(e.case, str(e))
    return Variant("io", f"journal I/O error: {e}")


@dataclass(frozen=True)
class ClaimWait:
    """How recovery waits out another worker's live claim: at most ``max_polls`` polls,
    each as long as the gate says the claim has left (``poll_ms`` when it does not say).
    ``max_polls=0`` does not wait: the outcome is reported open, reason ``claim_live``,
    with ``retry_after_ms``. A field left ``None`` is the gate's default (its
    ``defaults`` export): hosts keep no copy of it."""

    poll_ms: Optional[int] = None
    max_polls: Optional[int] = None


DEFAULT_CLAIM_WAIT = ClaimWait()
NO_CLAIM_WAIT = ClaimWait(max_polls=0)


def claim_wait_of(wait: Any) -> ClaimWait:
    """``True`` (the default wait), ``False`` (no wait) or a :class:`ClaimWait`."""
    if isinstance(wait, ClaimWait):
        return wait
    if isinstance(wait, bool):
        return DEFAULT_CLAIM_WAIT if wait else NO_CLAIM_WAIT
    raise TypeError(f"claim_wait must be True, False or a ClaimWait, not {wait!r}")


class GateHost:
    """One instance of the gate component with its journal and clock. Cheap to create
    (the component is compiled once per process); a restarted process is a new host.

    An instance must never be entered from two threads at once: every export call holds
    ``lock`` (pass one to share it with other state that must change together). Target
    I/O happens between calls, without the lock, so operations of several threads
    interleave step by step, and a target function may call the gate itself."""

    def __init__(self, journal: JournalRef, clock: Clock, wasm: Optional[Path] = None,
                 lock: Optional[threading.RLock] = None):
        self.journal = journal
        self.clock = clock
        self.lock = lock if lock is not None else threading.RLock()
        self.crash_point: Optional[str] = None
        self.broken = False
        self._routes: Optional[List[str]] = None  # what the instance was last told
        component = load_component(wasm or wasm_path(GATE_WASM))
        eng = engine()
        clock_name = next(
            (n for n in component.type.imports(eng) if n.startswith(CLOCK_PREFIX)), None
        )
        if clock_name is None:
            raise GateTrap("the gate component does not import wasi:clocks/wall-clock")
        linker = Linker(eng)
        with linker.root() as root:
            with root.add_instance(clock_name) as wc:
                wc.add_func("now", self._now)
                wc.add_func("resolution", self._resolution)
            with root.add_instance(JOURNAL_INTERFACE) as j:
                j.add_func("append", self._append)
                j.add_func("read", self._read)
                j.add_func("length", self._length)
                j.add_func("open-streams", self._open_streams)
                j.add_func("streams", self._streams)
                j.add_func("sync", self._sync)
        self.store = Store(eng)
        try:
            instance = linker.instantiate(self.store, component)
        except wasmtime.WasmtimeError as e:
            raise GateTrap(f"the gate component does not fit this host's imports: {e}") from e
        self._linker = linker  # keeps the host functions alive with the instance
        gi = instance.get_export_index(self.store, GATE_INTERFACE)
        if gi is None:
            raise GateTrap(f"the component does not export {GATE_INTERFACE}")
        self._funcs = {}
        for name in (
            "effect-id-of", "submit", "resume", "cancel", "open-effects", "recover",
            "set-routes", "grant-lease", "revoke-lease", "approve", "revoke-approval", "confirm",
            "receipt", "check-receipt", "verify", "defaults", "send-timeout-ms",
            "standing-lease-name", "grant-standing-lease", "set-strict-authority",
            "standing-notice",
        ):
            idx = instance.get_export_index(self.store, name, gi)
            func = instance.get_func(self.store, idx) if idx is not None else None
            if func is None:
                raise GateTrap(f"the gate component lacks the export {name!r}")
            self._funcs[name] = func
        # The tool mapping (interlock:gate/tools), for a caller that hands its calls on
        # unchanged (the conformance driver): ``raw`` reaches these by name too.
        ti = instance.get_export_index(self.store, TOOLS_INTERFACE)
        if ti is None:
            raise GateTrap(f"the component does not export {TOOLS_INTERFACE}")
        for name in (
            "check-config", "check-authority", "check-tools", "premise-call", "proposal", "send-call",
            "lookup-call", "premises", "mcp-answer", "reply", "found",
        ):
            idx = instance.get_export_index(self.store, name, ti)
            func = instance.get_func(self.store, idx) if idx is not None else None
            if func is None:
                raise GateTrap(f"the gate component lacks the export {TOOLS_INTERFACE} {name!r}")
            self._funcs[name] = func

    # -- imports: wasi:clocks/wall-clock

    def _now(self, _store: Store) -> Record:
        ms = self.clock.now_ms()
        return _Datetime(ms // 1000, (ms % 1000) * 1_000_000)

    def _resolution(self, _store: Store) -> Record:
        return _Datetime(0, 1_000_000)  # the gate only ever reads milliseconds

    # -- imports: interlock:gate/journal

    def _with_journal(self, fn: Callable[[Journal], Any]) -> Any:
        j = self.journal.journal
        if j is None:
            return Variant("other", "journal is closed")
        try:
            return fn(j)
        except (JournalFileError, OSError) as e:
            return _journal_error(e)

    def _append(self, _s: Store, stream: str, expected: int, entries: List[str], durable: bool,
                is_open: bool) -> Any:
        return self._with_journal(lambda j: j.append(stream, expected, entries, durable, is_open))

    def _read(self, _s: Store, stream: str, start: int) -> Any:
        return self._with_journal(lambda j: j.read(stream, start))

    def _length(self, _s: Store, stream: str) -> Any:
        return self._with_journal(lambda j: j.length(stream))

    def _open_streams(self, _s: Store) -> Any:
        return self._with_journal(lambda j: j.open_streams())

    def _streams(self, _s: Store) -> Any:
        return self._with_journal(lambda j: j.streams())

    def _sync(self, _s: Store) -> Any:
        return self._with_journal(lambda j: j.sync())

    # -- calling the exports

    def _call(self, name: str, *args: Any) -> Any:
        with self.lock:
            if self.broken:
                raise GateTrap("this gate instance trapped earlier; it cannot be used again")
            try:
                result = self._funcs[name](self.store, *args)
            except (wasmtime.WasmtimeError, wasmtime.Trap) as e:
                self.broken = True
                raise GateTrap(f"the gate component trapped in {name}: {e}") from e
            except BaseException:
                # A host import raised (a host bug): the instance has trapped.
                self.broken = True
                raise
        if isinstance(result, Variant):  # every export's error is the gate-error variant
            raise gate_error(result.tag, result.payload)
        return result

    def raw(self, name: str, *args: Any) -> Any:
        """Calls export ``name`` and returns what wasmtime gives, an ``err`` as the
        gate-error value itself (for a caller that hands it on unchanged: the conformance
        driver). The caller holds ``lock``."""
        if self.broken:
            raise GateTrap("this gate instance trapped earlier; it cannot be used again")
        return self._funcs[name](self.store, *args)

    def effect_id_of(self, proposal: str) -> str:
        return self._call("effect-id-of", proposal)

    def defaults(self) -> Dict[str, Any]:
        """The gate's defaults (``timeout_ms``, ``dedupe_window_ms``, ``claim_wait``:
        ``{poll_ms, max_polls}``, ``standing_lease_ms``): the one copy every host reads."""
        return cast(Dict[str, Any], json.loads(self._call("defaults")))

    def send_timeout_ms(self, effect_id: str) -> int:
        """How long to wait on a send of ``effect_id``: its recorded proposal's
        ``target.timeout_ms``, the gate's default filled in."""
        return int(self._call("send-timeout-ms", effect_id))

    def standing_lease_name(self, agent: str) -> str:
        return cast(str, self._call("standing-lease-name", agent))

    def grant_standing_lease(self, agent: str) -> str:
        """Grants ``agent``'s standing lease if it never was (a revoked one stays revoked);
        its name. Recorded like any lease; durable on return."""
        return cast(str, self._call("grant-standing-lease", agent))

    def set_strict_authority(self, strict: bool) -> None:
        """Strict authority: a proposal naming no lease or approval is refused
        (:class:`InvalidField` at ``/authority``) instead of running under its agent's
        standing lease."""
        self._call("set-strict-authority", strict)

    def standing_notice(self, agent: str) -> str:
        """The line to show once at start when effects of ``agent`` may run under its
        standing lease (the gate's words)."""
        return cast(str, self._call("standing-notice", agent))

    def _claim_wait(self, wait: Any) -> Tuple[int, int]:
        """``(poll_ms, max_polls)`` of ``wait``, the gate's defaults filled in."""
        w = claim_wait_of(wait)
        d = self.defaults()["claim_wait"]
        return (d["poll_ms"] if w.poll_ms is None else w.poll_ms,
                d["max_polls"] if w.max_polls is None else w.max_polls)

    def submit_step(self, proposal: str) -> Any:
        return self._call("submit", proposal)

    def resume(self, op: int, reply: Variant) -> Any:
        return self._call("resume", op, reply)

    def cancel(self, op: int) -> None:
        self._call("cancel", op)

    def open_effects(self) -> List[str]:
        return list(self._call("open-effects"))

    def recover_step(self, effect_id: str) -> Any:
        return self._call("recover", effect_id)

    def set_routes(self, targets: Sequence[str]) -> None:
        """The targets this host performs steps for; the gate asks nothing for any other
        (its effects stay open, reason ``target_unroutable``, nothing written)."""
        names = sorted(set(targets))
        with self.lock:
            if names != self._routes:
                self._call("set-routes", names)
                self._routes = names

    def route(self, targets: Targets) -> None:
        """Tells the gate the targets ``targets`` reaches (its ``routes()``), before an
        operation: a target defined since the last operation is routed from now on.
        Targets without ``routes()`` leave the routes as they are (every target, until
        told otherwise)."""
        routes = getattr(targets, "routes", None)
        if routes is not None:
            self.set_routes(routes())

    def grant_lease(self, lease: str, expires_at_ms: int) -> None:
        self._call("grant-lease", lease, int(expires_at_ms))

    def revoke_lease(self, lease: str) -> None:
        self._call("revoke-lease", lease)

    def approve(self, approval: str) -> None:
        self._call("approve", approval)

    def revoke_approval(self, approval: str) -> None:
        self._call("revoke-approval", approval)

    def confirm(self, effect_id: str, evidence: str) -> Outcome:
        return to_outcome(self._call("confirm", effect_id, evidence))

    def receipt(self, effect_id: str, key: Optional[bytes] = None) -> str:
        return self._call("receipt", effect_id, None if key is None else bytes(key))

    def check_receipt(self, receipt: str, key: bytes) -> VerifyReport:
        return _report(self._call("check-receipt", receipt, bytes(key)))

    def verify(self, anchors: Sequence[str] = ()) -> VerifyReport:
        return _report(self._call("verify", list(anchors)))

    # -- driving steps

    def crash_at(self, point: Optional[str]) -> None:
        """Raise :class:`SimulatedCrash` at ``point`` (after_intent, after_commit,
        in_recovery) instead of answering the gate, in every operation from now on (one
        operation's own crash point is the ``crash`` argument of :meth:`submit`)."""
        self.crash_point = point

    def _maybe_crash(self, crash: Optional[str], here: str, effect_id: str) -> None:
        if crash == here:
            self.broken = True  # a crashed process answers nothing more
            raise SimulatedCrash(here.replace("_", " "), effect_id)

    def _steps(self, first: Any, recovering: bool,
               crash: Optional[str]) -> Generator[Tuple[int, Request], Variant, Outcome]:
        """The step loop as a generator: yields (op, request), receives the reply. Shared
        by the sync and the async drivers so both route identically."""
        crash = crash or self.crash_point
        step = first
        while True:
            tag, payload = step.ask.tag, step.ask.payload
            if tag == "done":
                return to_outcome(payload)
            req = to_request(tag, payload)
            if tag == "apply" and not recovering:
                self._maybe_crash(crash, AFTER_INTENT, req.effect_id)
            reply = yield step.op, req
            if tag == "apply":
                self._maybe_crash(crash, IN_RECOVERY if recovering else AFTER_COMMIT, req.effect_id)
            elif tag == "query" and recovering:
                self._maybe_crash(crash, IN_RECOVERY, req.effect_id)
            step = self.resume(step.op, reply)

    def drive(self, first: Any, targets: Targets, recovering: bool = False,
              crash: Optional[str] = None) -> Outcome:
        gen = self._steps(first, recovering, crash)
        try:
            op, req = next(gen)
            while True:
                op, req = gen.send(self._reply(op, req, self._perform(op, req, targets)))
        except StopIteration as stop:
            return stop.value

    async def adrive(self, first: Any, targets: Targets, recovering: bool = False,
                     crash: Optional[str] = None) -> Outcome:
        gen = self._steps(first, recovering, crash)
        try:
            op, req = next(gen)
            while True:
                reply = self._perform(op, req, targets)
                if inspect.isawaitable(reply):
                    try:
                        reply = await reply
                    except BaseException:
                        self._cancel_quietly(op)
                        raise
                op, req = gen.send(self._reply(op, req, reply))
        except StopIteration as stop:
            return stop.value

    def _reply(self, op: int, req: Request, reply: object) -> Variant:
        """``reply`` if it is one. Anything else (an awaitable on the sync path, None, ...)
        is the target's bug, not the gate's: the operation is abandoned, unanswered, and this
        instance stays usable (handed to the gate, it would trap it)."""
        if isinstance(reply, Variant):
            return reply
        if inspect.iscoroutine(reply):
            reply.close()
        self._cancel_quietly(op)
        hint = "; an async target is driven by asubmit/arecover" if inspect.isawaitable(reply) else ""
        raise TypeError(
            f"target {req.target!r} answered the {req.kind} step of effect {req.effect_id} with "
            f"{type(reply).__name__}, not a reply{hint}"
        )

    def _cancel_quietly(self, op: int) -> None:
        if not self.broken:
            try:
                self.cancel(op)
            except Exception:  # noqa: BLE001 - best effort: the operation is abandoned anyway
                pass

    def _perform(self, op: int, req: Request, targets: Targets) -> Reply:
        try:
            return getattr(targets, req.kind)(req)
        except SimulatedCrash:
            self.broken = True
            raise
        except BaseException:
            # The host will not finish this operation; what is durable stays.
            self._cancel_quietly(op)
            raise

    def submit(self, proposal: str, targets: Targets, crash: Optional[str] = None) -> Outcome:
        self.route(targets)
        return self.drive(self.submit_step(proposal), targets, crash=crash)

    async def asubmit(self, proposal: str, targets: Targets, crash: Optional[str] = None) -> Outcome:
        self.route(targets)
        return await self.adrive(self.submit_step(proposal), targets, crash=crash)

    @staticmethod
    def _claim_live(o: Outcome) -> bool:
        return o.status is State.DISPATCHED and o.reason is Reason.CLAIM_LIVE

    @staticmethod
    def _wait_ms(poll_ms: int, o: Outcome) -> int:
        # The claim is live until strictly after its deadline.
        return poll_ms if o.retry_after_ms is None else o.retry_after_ms + 1

    def recover(self, effect_id: str, targets: Targets, claim_wait: Any = True) -> Outcome:
        """Recovers one effect by the gate's recovery table. While another worker's claim is
        live the gate says so (``claim_live``, ``retry_after_ms``); this waits exactly that
        long and asks again, as ``claim_wait`` allows (see :class:`ClaimWait`)."""
        poll_ms, max_polls = self._claim_wait(claim_wait)
        self.route(targets)
        polls = 0
        while True:
            o = self.drive(self.recover_step(effect_id), targets, recovering=True)
            if not self._claim_live(o) or polls >= max_polls:
                return o
            polls += 1
            self.clock.sleep(self._wait_ms(poll_ms, o))

    async def arecover(self, effect_id: str, targets: Targets, claim_wait: Any = True) -> Outcome:
        poll_ms, max_polls = self._claim_wait(claim_wait)
        self.route(targets)
        polls = 0
        while True:
            o = await self.adrive(self.recover_step(effect_id), targets, recovering=True)
            if not self._claim_live(o) or polls >= max_polls:
                return o
            polls += 1
            await self.clock.asleep(self._wait_ms(poll_ms, o))

    def recover_all(self, targets: Targets, claim_wait: Any = True) -> List[Tuple[str, Any]]:
        """Recovers every open effect: ``[(effect_id, Outcome or exception)]``. One effect's
        gate error does not stop the others; a trap or a crash stops everything."""
        results: List[Tuple[str, Any]] = []
        for effect_id in self.open_effects():
            try:
                results.append((effect_id, self.recover(effect_id, targets, claim_wait)))
            except (GateTrap, SimulatedCrash):
                raise
            except Exception as e:  # noqa: BLE001 - reported per effect
                if self.broken:
                    raise
                results.append((effect_id, e))
        return results

    async def arecover_all(self, targets: Targets, claim_wait: Any = True) -> List[Tuple[str, Any]]:
        results: List[Tuple[str, Any]] = []
        for effect_id in self.open_effects():
            try:
                results.append((effect_id, await self.arecover(effect_id, targets, claim_wait)))
            except (GateTrap, SimulatedCrash):
                raise
            except Exception as e:  # noqa: BLE001
                if self.broken:
                    raise
                results.append((effect_id, e))
        return results
