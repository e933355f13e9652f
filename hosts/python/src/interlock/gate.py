"""One instance of the gate component and the loop that drives its steps.

The gate never calls a target. Each call answers with a step (capture, authorize, apply,
query, or done); the host performs it through a target adapter and hands the reply back
with ``resume``. Nothing here decides anything: the loop only routes. A recovery rule
written here would drift from the other hosts: it would be a bug.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import hashlib
import inspect
import json
import os
import threading
import weakref
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
    TypeVar,
    Union,
    cast,
)

import wasmtime
from wasmtime import Engine, Store
from wasmtime.component import Component, Linker, Record, Variant

from . import _wasmtime_carry
from .errors import GateTrap, InterlockError, SimulatedCrash, gate_error, proof_error
from .journal import Storage, StorageError, journal_error

T = TypeVar("T")

if TYPE_CHECKING:
    from .decorator import Receipt

GATE_WASM = "interlock_gate.wasm"
PAYMENTS_WASM = "payments_sim.wasm"
STORAGE_INTERFACE = "interlock:gate/storage@0.1.0"
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
}


def wasm_path(name: str) -> Path:
    """Where a component is: its variable (``$INTERLOCK_WASM`` for the gate,
    ``$INTERLOCK_PAYMENTS_WASM``), else the copy inside
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


# wasmtime-py's list<u8> in one copy (pinned) and its result<option<T>, E> errors: _wasmtime_carry.
_wasmtime_carry.install_variant_errors()
_wasmtime_carry.install_bytes_fast_path()
_wasmtime_carry.install_types_once()

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
    APPROVAL_PENDING = "approval_pending"
    APPROVAL_REJECTED = "approval_rejected"


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
    """The storage under one journal (:class:`interlock.journal.FileJournal`, or a SQL
    storage of :mod:`interlock.sql_journal`), shared by several gate instances of a process
    (racing workers, a restarted worker), which can be closed and reopened under them."""

    def __init__(self, journal: Optional[Storage]):
        self.journal = journal

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
        self.journal = None

    def replace(self, journal: Storage) -> None:
        self.journal = journal


@dataclass(frozen=True)
class ClaimWait:
    """How recovery waits out another worker's live claim: at most ``max_polls`` polls,
    each as long as the gate says (``poll_ms`` when it does not say). ``max_polls=0`` does
    not wait: the outcome is reported open, reason ``claim_live``, with
    ``retry_after_ms``. A field left ``None`` is the gate's default."""

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


class _ClaimWaitRecord(Record):
    def __init__(self, poll_ms: int, max_polls: int):
        setattr(self, "poll-ms", poll_ms)
        setattr(self, "max-polls", max_polls)


#: The crash points of the public API (``crash_at``) as the WIT ``crash-point`` spells them.
CRASH_POINTS = {AFTER_INTENT: "before-send", AFTER_COMMIT: "after-send", IN_RECOVERY: "in-recovery"}
_CRASH_WORDS = {"before-send": "after intent", "after-send": "after commit", "in-recovery": "in recovery"}

_STORAGE_CALLS = {"file-size": "file_size", "file-read": "file_read", "file-append": "file_append",
                  "file-sync": "file_sync", "file-truncate": "file_truncate", "file-replace": "file_replace",
                  "file-create": "file_create", "sql-batch": "sql_batch"}

# Every instance alive, released at exit while the interpreter still runs: a store dropped
# during its finalization calls wasmtime-py's host-function finalizers too late (a crash).
_LIVE: "weakref.WeakSet[GateHost]" = weakref.WeakSet()


@atexit.register
def _release_all() -> None:
    for host in list(_LIVE):
        host.release()
    gc.collect()


def storage_imports(journal: JournalRef) -> Dict[str, Callable[..., Any]]:
    """The host functions of ``interlock:gate/storage`` over ``journal``'s storage. A
    failure is the call's ``storage-error`` (never a trap): a host exception is ``io``."""

    def call(method: str) -> Callable[..., Any]:
        def perform(_store: Store, *args: Any) -> Any:
            storage = journal.journal
            if storage is None:
                return Variant("io", "journal is closed")
            try:
                return getattr(storage, method)(*args)
            except StorageError as e:
                return e.variant
            except Exception as e:  # noqa: BLE001 - a host failure is the storage's io
                return Variant("io", f"{type(e).__name__}: {e}")
        return perform

    return {name: call(method) for name, method in _STORAGE_CALLS.items()}


#: A step asks the host to sleep this many ms (another worker's claim is live).
Sleep = int


class GateHost:
    """One instance of the gate component over a journal's storage, with a clock. Cheap
    to create (the component is compiled once per process); a restarted process is a new
    host. ``open``: open the journal (``journal-admin.open``) now.

    An instance must never be entered from two threads at once: every export call holds
    ``lock`` (pass one to share it with other state that must change together). Target
    I/O happens between calls, without the lock."""

    def __init__(self, journal: JournalRef, clock: Clock, wasm: Optional[Path] = None,
                 lock: Optional[threading.RLock] = None, open: bool = True):
        self.journal = journal
        self.clock = clock
        self.lock = lock if lock is not None else threading.RLock()
        self.broken = False
        self._routes: Optional[List[str]] = None  # what the instance was last told
        component = load_component(wasm or wasm_path(GATE_WASM))
        eng = engine()
        imports = list(component.type.imports(eng))
        clock_name = next((n for n in imports if n.startswith(CLOCK_PREFIX)), None)
        if clock_name is None or STORAGE_INTERFACE not in imports:
            raise GateTrap(f"the gate component does not import wasi:clocks/wall-clock and {STORAGE_INTERFACE}")
        linker = Linker(eng)
        with linker.root() as root:
            with root.add_instance(clock_name) as wc:
                _wasmtime_carry.add_func(wc, "now", self._now)
                _wasmtime_carry.add_func(wc, "resolution", self._resolution)
            with root.add_instance(STORAGE_INTERFACE) as st:
                for wit_name, func in storage_imports(journal).items():
                    _wasmtime_carry.add_func(st, wit_name, func)
        self.store = Store(eng)
        try:
            self._instance = linker.instantiate(self.store, component)
        except wasmtime.WasmtimeError as e:
            raise GateTrap(f"the gate component does not fit this host's imports: {e}") from e
        self._linker = linker  # keeps the host functions alive with the instance
        self._funcs: Dict[str, Any] = {}
        _LIVE.add(self)
        if open:
            self.open_journal()

    def release(self) -> None:
        """Drops the instance (its store and host functions) now: it cannot be used again."""
        with self.lock:
            self.broken = True
            self._funcs.clear()
            for attr in ("_instance", "store", "_linker"):
                self.__dict__.pop(attr, None)

    # -- imports

    def _now(self, _store: Store) -> Record:
        ms = self.clock.now_ms()
        return _Datetime(ms // 1000, (ms % 1000) * 1_000_000)

    def _resolution(self, _store: Store) -> Record:
        return _Datetime(0, 1_000_000)  # the gate only ever reads milliseconds

    # -- calling the exports

    def _func(self, name: str) -> Any:
        """The export ``interface.function`` (``gate.submit``, ``tools.call``, ...)."""
        func = self._funcs.get(name)
        if func is None:
            iface, fn = name.split(".")
            idx = self._instance.get_export_index(self.store, f"interlock:gate/{iface}@0.1.0")
            idx = self._instance.get_export_index(self.store, fn, idx) if idx is not None else None
            func = self._instance.get_func(self.store, idx) if idx is not None else None
            if func is None:
                raise GateTrap(f"the gate component lacks the export {name}: rebuild it (scripts/build-wasm.sh)")
            self._funcs[name] = func
        return func

    def raw(self, name: str, *args: Any) -> Any:
        """Calls export ``name`` and returns what wasmtime gives, an ``err`` as the error
        value itself (for a caller that hands it on unchanged: the conformance driver)."""
        with self.lock:
            if self.broken:
                raise GateTrap("this gate instance trapped earlier; it cannot be used again")
            try:
                return self._func(name)(self.store, *args)
            except (wasmtime.WasmtimeError, wasmtime.Trap) as e:
                self.broken = True
                raise GateTrap(f"the gate component trapped in {name}: {e}") from e
            except BaseException:
                self.broken = True  # a host import raised (a host bug): the instance trapped
                raise

    def _call(self, name: str, *args: Any, errors: Callable[[str, Any], Exception] = gate_error) -> Any:
        result = self.raw(name, *args)
        if isinstance(result, Variant):
            # A result whose two sides are both variants comes tagged ``ok``/``err``;
            # otherwise a Variant is the error itself (a gate-error, or a proof-error).
            if result.tag == "ok":
                return result.payload
            if result.tag == "err":
                result = result.payload
            raise errors(result.tag, result.payload)
        return result

    # -- the journal (journal-admin)

    def open_journal(self) -> None:
        """Opens the journal over the storage (checks or writes its format, builds its
        index); a torn tail, corruption or a newer format raises its journal error."""
        backend = self.journal.journal.backend if self.journal.journal is not None else "file"
        r = self.raw("journal-admin.open", backend)
        if isinstance(r, Variant):
            raise journal_error(r)

    def repair_journal(self) -> Any:
        r = self.raw("journal-admin.repair")
        if isinstance(r, Variant):
            raise journal_error(r)
        return r

    def entries_in_order(self) -> List[str]:
        """Every entry in append order across streams (a file journal's lines)."""
        r = self.raw("journal-admin.entries-in-order")
        if isinstance(r, Variant):
            raise journal_error(r)
        return list(r)

    # -- the gate

    def effect_id_of(self, proposal: str) -> str:
        return cast(str, self._call("gate.effect-id-of", proposal))

    def defaults(self) -> Dict[str, Any]:
        """The gate's defaults (``timeout_ms``, ``dedupe_window_ms``, ``claim_wait``:
        ``{poll_ms, max_polls}``, ``standing_lease_ms``): the one copy every host reads."""
        return cast(Dict[str, Any], json.loads(self._call("gate.defaults")))

    def send_timeout_ms(self, effect_id: str) -> int:
        return int(self._call("gate.send-timeout-ms", effect_id))

    def standing_lease_name(self, agent: str) -> str:
        return cast(str, self._call("gate.standing-lease-name", agent))

    def grant_standing_lease(self, agent: str) -> str:
        """Grants ``agent``'s standing lease if it never was; its name. Durable on return."""
        return cast(str, self._call("gate.grant-standing-lease", agent))

    def set_strict_authority(self, strict: bool) -> None:
        """Strict authority: a proposal naming no lease or approval is refused
        (:class:`InvalidField` at ``/authority``)."""
        self._call("gate.set-strict-authority", strict)

    def standing_notice(self, agent: str) -> str:
        """The line to show once at start when effects of ``agent`` may run under its
        standing lease (the gate's words)."""
        return cast(str, self._call("gate.standing-notice", agent))

    def claim_wait(self, wait: Any) -> Optional[Record]:
        """The WIT ``claim-wait`` of ``wait`` (True, False or a :class:`ClaimWait`), the
        gate's defaults filled in; None for the gate's own."""
        w = claim_wait_of(wait)
        if w.poll_ms is None and w.max_polls is None:
            return None
        d = self.defaults()["claim_wait"]
        return _ClaimWaitRecord(d["poll_ms"] if w.poll_ms is None else w.poll_ms,
                                d["max_polls"] if w.max_polls is None else w.max_polls)

    def crash_at(self, point: Optional[str]) -> None:
        """For tests: the gate asks this host to die at ``point`` (``after_intent``,
        ``after_commit``, ``in_recovery``) in every operation from now on (None: never);
        the operation raises :class:`SimulatedCrash` there."""
        self._call("gate.crash-at", None if point is None else CRASH_POINTS.get(point, point))

    def crash(self, point: str, effect_id: Optional[str]) -> SimulatedCrash:
        """The instance dies where the gate said (``ask.crash``)."""
        self.broken = True  # a crashed process answers nothing more
        return SimulatedCrash(_CRASH_WORDS.get(point, point), effect_id)

    def submit_step(self, proposal: str) -> Any:
        return self._call("gate.submit", proposal)

    def resume(self, op: int, reply: Variant) -> Any:
        return self._call("gate.resume", op, reply)

    def cancel(self, op: int) -> None:
        self._call("gate.cancel", op)

    def open_effects(self) -> List[str]:
        return list(self._call("gate.open-effects"))

    def recover_step(self, effect_id: str, wait: Any = True) -> Any:
        """Recovery of one effect, waiting out a live claim as ``wait`` says (the gate asks
        the host to sleep when it must)."""
        return self._call("gate.recover-waiting", effect_id, self.claim_wait(wait))

    def set_routes(self, targets: Sequence[str]) -> None:
        """The targets this host performs steps for; the gate asks nothing for any other
        (its effects stay open, reason ``target_unroutable``, nothing written)."""
        names = sorted(set(targets))
        with self.lock:
            if names != self._routes:
                self._call("gate.set-routes", names)
                self._routes = names

    def route(self, targets: Targets) -> None:
        """Tells the gate the targets ``targets`` reaches (its ``routes()``, if it has one)."""
        routes = getattr(targets, "routes", None)
        if routes is not None:
            self.set_routes(routes())

    def grant_lease(self, lease: str, expires_at_ms: int) -> None:
        self._call("gate.grant-lease", lease, int(expires_at_ms))

    def revoke_lease(self, lease: str) -> None:
        self._call("gate.revoke-lease", lease)

    def approve(self, approval: str) -> None:
        self._call("gate.approve", approval)

    def revoke_approval(self, approval: str) -> None:
        self._call("gate.revoke-approval", approval)

    def confirm(self, effect_id: str, evidence: str) -> Outcome:
        return to_outcome(self._call("gate.confirm", effect_id, evidence))

    # -- people in the loop (ARCHITECTURE.md, "People in the loop"): JSON text in and out

    def set_approval_rules(self, rules: str) -> None:
        self._call("gate.set-approval-rules", rules)

    def approval_rules(self) -> str:
        return cast(str, self._call("gate.approval-rules"))

    def inbox(self) -> str:
        return cast(str, self._call("gate.inbox"))

    def scoreboard(self) -> str:
        return cast(str, self._call("gate.scoreboard"))

    def decide(self, decision: str) -> str:
        return cast(str, self._call("gate.decide", decision))

    def webhook(self, scheme: str, headers: Sequence[Tuple[str, str]], body: bytes, secret: str,
                tolerance_s: Optional[int] = None) -> str:
        return cast(str, self._call("gate.webhook", scheme, [(str(k), str(v)) for k, v in headers],
                                    bytes(body), secret, tolerance_s))

    def receipt(self, effect_id: str, key: Optional[bytes] = None) -> str:
        return cast(str, self._call("gate.receipt", effect_id, None if key is None else bytes(key)))

    def check_receipt(self, receipt: str, key: bytes) -> VerifyReport:
        return _report(self._call("gate.check-receipt", receipt, bytes(key)))

    def verify(self, anchors: Sequence[str] = ()) -> VerifyReport:
        return _report(self._call("gate.verify", list(anchors)))

    # -- proof for outsiders (wit/proof.wit): keys cross as text; every check is the component's

    def _proof(self, name: str, *args: Any) -> Any:
        return self._call(f"proof.{name}", *args, errors=proof_error)

    def generate_key(self, name: str, seed: bytes) -> Tuple[str, str]:
        pair = self._proof("generate-key", name, bytes(seed))
        return pair.signer, pair.verifier

    def verifier_key(self, signer: str) -> str:
        return cast(str, self._proof("verifier-key", signer))

    def signed_receipt(self, effect_id: str, signer: str) -> str:
        return cast(str, self._proof("receipt", effect_id, signer))

    def check_signed_receipt(self, receipt: str, verifier: str) -> VerifyReport:
        return _report(self._proof("check-receipt", receipt, verifier))

    def check_receipt_signature(self, receipt: str, verifier: str) -> str:
        return cast(str, self._proof("check-receipt-signature", receipt, verifier))

    def checkpoint(self, signer: str) -> str:
        return cast(str, self._proof("checkpoint", signer))

    def latest_checkpoint(self) -> Optional[str]:
        return cast(Optional[str], self._proof("latest-checkpoint"))

    def prove_inclusion(self, effect_id: str, tree_size: Optional[int] = None) -> str:
        return cast(str, self._proof("prove-inclusion", effect_id, tree_size))

    def prove_consistency(self, old_size: int, tree_size: Optional[int] = None) -> str:
        return cast(str, self._proof("prove-consistency", int(old_size), tree_size))

    def check_inclusion(self, proof: str, checkpoint: Optional[str], verifier: str) -> str:
        return cast(str, self._proof("check-inclusion", proof, checkpoint, verifier))

    def check_consistency(self, proof: str, old_checkpoint: str, verifier: str) -> str:
        return cast(str, self._proof("check-consistency", proof, old_checkpoint, verifier))

    def bundle(self, from_ms: int, to_ms: int, signer: str) -> str:
        return cast(str, self._proof("bundle", int(from_ms), int(to_ms), signer))

    def check_bundle(self, bundle: str, verifier: str) -> str:
        return cast(str, self._proof("check-bundle", bundle, verifier))

    # -- driving the gate's steps through targets (the low-level API)

    def _steps(self, first: Any) -> Generator[Tuple[int, Union[Request, Sleep]], Variant, Outcome]:
        """The step loop as a generator: yields (op, request or ms to sleep), receives the
        reply. Shared by the sync and the async drivers so both route identically."""
        step, effect_id = first, None
        while True:
            tag, payload = step.ask.tag, step.ask.payload
            if tag == "done":
                return to_outcome(payload)
            if tag == "crash":
                raise self.crash(payload, effect_id)
            if tag == "sleep":
                reply = yield step.op, int(payload)
            else:
                req = to_request(tag, payload)
                effect_id = req.effect_id
                reply = yield step.op, req
            step = self.resume(step.op, reply)

    def drive(self, first: Any, targets: Targets) -> Outcome:
        gen = self._steps(first)
        try:
            op, req = next(gen)
            while True:
                if isinstance(req, Request):
                    reply = self._reply(op, req, self._perform(op, req, targets))
                else:
                    self.clock.sleep(req)
                    reply = Variant("slept")
                op, req = gen.send(reply)
        except StopIteration as stop:
            return stop.value

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, a call into the gate, in a worker thread when the journal's storage
        blocks (a file's fdatasync, a database's commit), so the event loop never waits on
        a disk; at once over memory. The instance's lock still admits one call at a time."""
        storage = self.journal.journal
        if storage is None or not getattr(storage, "blocking", True):
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    async def adrive(self, first: Any, targets: Targets) -> Outcome:
        """:meth:`drive` for async targets. Every gate call runs :meth:`off_loop`, and so
        does a target's step function that is not a coroutine function (sync I/O)."""
        gen = self._steps(first)
        done, got = await self.off_loop(advance, gen, None)
        while not done:
            op, req = got
            if isinstance(req, Request):
                fn = getattr(targets, req.kind, None)
                if fn is not None and not inspect.iscoroutinefunction(fn):
                    answer = await asyncio.to_thread(self._perform, op, req, targets)
                else:
                    answer = self._perform(op, req, targets)
                if inspect.isawaitable(answer):
                    try:
                        answer = await answer
                    except BaseException:
                        self._cancel_quietly(op)
                        raise
                reply = self._reply(op, req, answer)
            else:
                await self.clock.asleep(req)
                reply = Variant("slept")
            done, got = await self.off_loop(advance, gen, reply)
        return cast(Outcome, got)

    def _reply(self, op: int, req: Request, reply: object) -> Variant:
        """``reply`` if it is one. Anything else is the target's bug, not the gate's: the
        operation is abandoned, unanswered, and this instance stays usable."""
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
            return cast(Reply, getattr(targets, req.kind)(req))
        except SimulatedCrash:
            self.broken = True
            raise
        except BaseException:
            self._cancel_quietly(op)  # the host will not finish it; what is durable stays
            raise

    def submit(self, proposal: str, targets: Targets) -> Outcome:
        self.route(targets)
        return self.drive(self.submit_step(proposal), targets)

    async def asubmit(self, proposal: str, targets: Targets) -> Outcome:
        self.route(targets)
        return await self.adrive(await self.off_loop(self.submit_step, proposal), targets)

    def recover(self, effect_id: str, targets: Targets, claim_wait: Any = True) -> Outcome:
        """Recovers one effect by the gate's recovery table, waiting out another worker's
        live claim as ``claim_wait`` allows (see :class:`ClaimWait`)."""
        self.route(targets)
        return self.drive(self.recover_step(effect_id, claim_wait), targets)

    async def arecover(self, effect_id: str, targets: Targets, claim_wait: Any = True) -> Outcome:
        self.route(targets)
        return await self.adrive(await self.off_loop(self.recover_step, effect_id, claim_wait), targets)


def _per_effect(host: GateHost, e: Exception) -> Exception:
    """One effect's error, reported with it; a trap or a crash stops everything."""
    if isinstance(e, (GateTrap, SimulatedCrash)) or host.broken:
        raise e
    return e


def recover_each(host: GateHost, recover: Callable[[str], Any]) -> List[Tuple[str, Any]]:
    """``[(effect_id, recover(effect_id) or its exception)]`` for every open effect."""
    results: List[Tuple[str, Any]] = []
    for effect_id in host.open_effects():
        try:
            results.append((effect_id, recover(effect_id)))
        except Exception as e:  # noqa: BLE001 - reported per effect
            results.append((effect_id, _per_effect(host, e)))
    return results


async def arecover_each(host: GateHost, recover: Callable[[str], Awaitable[Any]]) -> List[Tuple[str, Any]]:
    results: List[Tuple[str, Any]] = []
    for effect_id in host.open_effects():
        try:
            results.append((effect_id, await recover(effect_id)))
        except Exception as e:  # noqa: BLE001 - reported per effect
            results.append((effect_id, _per_effect(host, e)))
    return results


def repair(storage: Storage) -> Any:
    """``journal-admin.repair`` over ``storage`` (its WIT ``repair-report``)."""
    from .clock import SystemClock

    return GateHost(JournalRef(storage), SystemClock(), open=False).repair_journal()


# ---------------------------------------------------------------- the loops' machines


@dataclass(frozen=True)
class Question:
    """A ``tools`` step for the person at the client (WIT ``person-question``): ``request`` is
    an MCP ``elicitation/create`` request's params (form mode), as the component words it.
    Its answer is ``returned`` with the client's ``ElicitResult`` as JSON, or ``failed`` when
    no one can be asked (the call then answers pending)."""

    request: Dict[str, Any]


def machine_steps(host: GateHost, iface: str, first: Any) -> Generator[Tuple[int, Any], Variant, Variant]:
    """The one step handler of the component's loops (``effects``, ``tools``): yields
    ``(id, call)`` (a call record to perform, or a :class:`Question` for a person) or
    ``(id, ms)`` (an int: sleep that long), receives the WIT ``call-answer`` (a
    ``service-answer`` for a built-in target's ``request``), and returns the
    last step (``done``, ``proposed``). A ``crash`` step raises :class:`SimulatedCrash`."""
    step, effect_id = first, None
    while True:
        resume = f"{iface}.resume"
        if step.tag == "call":
            effect_id = getattr(step.payload, "effect-id", None) or effect_id
            op = step.payload.id
            answer = yield op, step.payload
        elif step.tag == "request":
            # A built-in target's service call (wit/targets.wit), answered with what came back.
            op, resume = step.payload.id, f"{iface}.answer"
            answer = yield op, step.payload
        elif step.tag == "sleep":
            op, ms = step.payload
            answer = yield op, int(ms)
        elif step.tag == "ask":
            op = step.payload.id
            answer = yield op, Question(json.loads(step.payload.request))
        elif step.tag == "crash":
            raise host.crash(step.payload, effect_id)
        else:
            return cast(Variant, step)
        step = host._call(resume, op, answer)


SLEPT = Variant("slept")


def run_machine(host: GateHost, iface: str, first: Any, perform: Callable[[Any], Variant],
                sleep: Optional[Callable[[int], None]] = None) -> Variant:
    """Drives ``machine_steps`` with a sync ``perform(call) -> call-answer`` and ``sleep(ms)``
    (default the host's clock). If either raises, the call is cancelled (what is durable
    stays) and the exception goes on."""
    gen = machine_steps(host, iface, first)
    try:
        op, what = next(gen)
        while True:
            try:
                if isinstance(what, int):
                    (sleep or host.clock.sleep)(what)
                    answer = SLEPT
                else:
                    answer = perform(what)
            except BaseException:
                _cancel(host, iface, op)
                raise
            op, what = gen.send(answer)
    except StopIteration as stop:
        return cast(Variant, stop.value)


async def arun_machine(host: GateHost, iface: str, first: Any, perform: Callable[[Any], Awaitable[Variant]],
                       sleep: Optional[Callable[[int], Awaitable[None]]] = None) -> Variant:
    """:func:`run_machine` with an async ``perform`` and ``sleep``; the gate calls run
    :meth:`GateHost.off_loop` (a journal's fsync never blocks the event loop)."""
    gen = machine_steps(host, iface, first)
    done, got = await host.off_loop(advance, gen, None)
    while not done:
        op, what = got
        try:
            if isinstance(what, int):
                await (sleep or host.clock.asleep)(what)
                answer = SLEPT
            else:
                answer = await perform(what)
        except BaseException:
            _cancel(host, iface, op)
            raise
        done, got = await host.off_loop(advance, gen, answer)
    return cast(Variant, got)


def advance(gen: Generator[Any, Any, Any], value: Any) -> Tuple[bool, Any]:
    """One step of a step generator: ``(False, what it yielded)`` or ``(True, what it
    returned)``. A StopIteration cannot cross a thread's future, so it ends here."""
    try:
        return False, gen.send(value)
    except StopIteration as stop:
        return True, stop.value


def _cancel(host: GateHost, iface: str, op: int) -> None:
    if not host.broken:
        try:
            host._call(f"{iface}.cancel", op)
        except Exception:  # noqa: BLE001 - best effort: the call is abandoned anyway
            pass
