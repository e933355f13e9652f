"""The decorator API of the original (the Python library Interlock was first written as):

    gate = Interlock(".interlock")

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: {...},
                 allowed=lambda order, amount: ...,
                 lookup=lambda order, amount, idempotency_key: ...,
                 dedupes=True)
    def refund_money(order, amount, idempotency_key): ...

    gate.recover()  # once, on startup

Each decorated function is an effect definition of the component's ``effects`` machine
(wit/effects.wit), which makes every call a proposal and the gate's steps calls of the
definition's functions, by role. This module only calls the function it is told, in
Python's calling convention, and hands back what came back (or sleeps when told): what an
answer means is the component's. The behaviour, rule by rule: docs/host-api.md.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import math
import os
import threading
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Optional,
    Protocol,
    Sequence,
    Set,
    Tuple,
    Union,
    cast,
    overload,
)

from wasmtime.component import Record, Variant

from .clock import SystemClock
from .errors import InterlockError, InvalidField, Rejected, SimulatedCrash
from .gate import (
    AFTER_COMMIT,
    AFTER_INTENT,
    ClaimWait,
    Clock,
    GateHost,
    JournalRef,
    Outcome,
    State,
    VerifyReport,
    arecover_each,
    arun_machine,
    canonical_json,
    claim_wait_of,
    recover_each,
    run_machine,
    to_outcome,
)
from .journal import FileJournal
from .sql_journal import is_url, open_url

if TYPE_CHECKING:
    from .export import ExportReport

IDEMPOTENCY_KEY = "idempotency_key"
EFFECTS = "effects"

#: A setting given as is, or computed from the call's arguments.
Computed = Union[Any, Callable[..., Any]]
#: A proposal: the gate's JSON text, or the dict it is made from.
Proposal = Union[str, Dict[str, Any]]
#: One of the functions an effect is defined with (``key``, ``premises``, ...), if given.
Fn = Optional[Callable[..., Any]]
#: The roles whose answers make the proposal: a raise there goes to the caller.
_DRAFT_ROLES = ("key", "lease", "bounds", "cap")


class Receipt(dict):
    """An effect's receipt (ARCHITECTURE.md, "Receipt"): a dict of the gate's JSON, with
    its fields also readable as attributes (``receipt.final``, ``receipt.executed``).
    ``text`` is the exact JSON, which :meth:`Interlock.check_receipt` takes."""

    def __init__(self, text: str):
        super().__init__(json.loads(text))
        self.text = text

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class RecoveryReport(list):
    """The outcomes of :meth:`Interlock.recover`, one per open effect it resolved (or
    found still open). ``errors`` maps the effect ids it could not work on to why (an
    effect whose function was not decorated, a gate error)."""

    def __init__(self, outcomes: Sequence[Outcome], errors: Dict[str, Exception]):
        super().__init__(outcomes)
        self.errors = errors


def _to_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _json_text(value: Any) -> str:
    """An input's JSON text for the gate, or :class:`InvalidField` naming the first value
    JSON cannot carry (a datetime, NaN, ...), before anything is recorded."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as e:
        field, problem = _not_json(value, "") or ("", str(e))
        raise InvalidField(field or "/", problem) from None


def _not_json(value: Any, at: str) -> Optional[Tuple[str, str]]:
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else (at, f"{value} is not a JSON number")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return (at, f"the key {k!r} is not a string")
            found = _not_json(v, f"{at}/{k.replace('~', '~0').replace('/', '~1')}")
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _not_json(v, f"{at}/{i}")
            if found:
                return found
        return None
    return (at, f"a {type(value).__name__} is not a JSON value")


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _returned(value: Any, role: str, target: str) -> Variant:
    try:
        return Variant("returned", canonical_json(value))
    except (TypeError, ValueError) as e:
        return Variant("failed", f"{role} of {target} answered no JSON: {e}")


class Effect:
    """One decorated function: its definition, and how each role's function is called."""

    def __init__(self, gate: "Interlock", fn: Callable[..., Any], *, name: Optional[str],
                 key: Fn, premises: Fn, allowed: Fn, lookup: Fn, dedupes: bool,
                 dedupe_window_ms: Optional[int], timeout_ms: Optional[int], agent: Optional[str],
                 lease: Computed, bounds: Computed, cap: Computed, rejects: Tuple[type, ...]):
        self.fn = fn
        self.name = name or fn.__name__
        sig = inspect.signature(fn)
        self.takes_key = IDEMPOTENCY_KEY in sig.parameters
        self.params = [p for p in sig.parameters if p != IDEMPOTENCY_KEY]
        self._sig = sig.replace(parameters=[p for n, p in sig.parameters.items() if n != IDEMPOTENCY_KEY])
        self.key, self.premises, self.allowed, self.lookup = key, premises, allowed, lookup
        self.dedupes, self.dedupe_window_ms, self.timeout_ms = dedupes, dedupe_window_ms, timeout_ms
        self.agent, self.lease, self.bounds, self.cap = agent, lease, bounds, cap
        self.rejects = (Rejected,) + tuple(rejects)
        self.functions: Dict[str, Callable[..., Any]] = {
            role: f for role, f in (("key", key), ("lease", lease), ("bounds", bounds), ("cap", cap),
                                    ("premises", premises), ("allowed", allowed), ("apply", fn),
                                    ("lookup", lookup)) if callable(f)
        }
        # Async if any of its functions is; a lambda returning a coroutine is caught later.
        self.is_async = any(inspect.iscoroutinefunction(f) for f in self.functions.values())
        self.interlock = gate

    def definition(self) -> str:
        """The effect definition (ARCHITECTURE.md, "Effect definition") the component runs."""
        d: Dict[str, Any] = {"target": self.name, "params": self.params, "functions": list(self.functions),
                             "dedupes": bool(self.dedupes)}
        for field, value in (("lease", self.lease), ("bounds", self.bounds), ("cap", self.cap),
                             ("dedupe_window_ms", self.dedupe_window_ms), ("timeout_ms", self.timeout_ms),
                             ("agent", self.agent)):
            if value is not None and not callable(value):
                d[field] = value
        return _json_text(d)

    def start(self, how: str, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
        """``effects.call`` or ``effects.propose`` of this call (a value the gate refuses is
        named at its place in the effect, ``/effect/<param>``)."""
        values = self.values_of_call(args, kwargs)
        return self.interlock.host()._call(f"effects.{how}", self.name, values, None)

    def values_of_call(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> str:
        """The call's values in parameter order, as the JSON list the component takes."""
        if IDEMPOTENCY_KEY in kwargs:
            raise TypeError(f"{self.name}: the gate supplies {IDEMPOTENCY_KEY}; do not pass it")
        bound = self._sig.bind(*args, **kwargs)
        bound.apply_defaults()
        values = [bound.arguments[p] for p in self.params]
        try:
            return canonical_json(values)
        except (TypeError, ValueError) as e:
            field, problem = _not_json(dict(zip(self.params, values)), "/effect") or ("/effect", str(e))
            raise InvalidField(field, problem) from None

    def invoke(self, call: Any) -> Any:
        """Calls the function of ``call``'s role with the arguments that role takes (its
        value, or an awaitable of it)."""
        role = call.role
        effect = json.loads(call.effect)
        values = [effect[p] for p in self.params]
        effect_id = getattr(call, "effect-id")
        if role == "apply":
            kwargs = {IDEMPOTENCY_KEY: getattr(call, "idempotency-key")} if self.takes_key else {}
            return self.fn(*values, **kwargs)
        if role in ("premises", "lookup"):
            return self.functions[role](*values, effect_id)
        return self.functions[role](*values)

    def answer(self, call: Any, value: Any) -> Variant:
        """What the function returned, as the WIT ``call-answer``."""
        role = call.role
        if role == "apply":
            return Variant("returned", _to_json(value))
        if role == "allowed":
            value = bool(value)
        return _returned(value, role, self.name)

    def failure(self, call: Any, e: Exception) -> Variant:
        """What the function's exception means: ``refused`` (the send's ``rejects``), else
        ``failed``."""
        if call.role == "apply" and isinstance(e, self.rejects):
            return Variant("refused", _why(e))
        return Variant("failed", _why(e))


class ServiceError(Record):
    """A WIT ``service-error``: what a built-in target's service raised, as it says it."""

    def __init__(self, error_type: Optional[str], status: Optional[int], code: Optional[str], message: str):
        setattr(self, "error-type", error_type)
        self.status = status
        self.code = code
        self.message = message


def builtin_roles(definition: Dict[str, Any], roles: Dict[str, Any]) -> Dict[str, Callable[..., Any]]:
    """The roles a host module takes for a built-in target (``key``, ``lease``, ``bounds``,
    ``cap``, ``allowed``): each given as a function is returned, to be called with the
    effect object; each given as a value goes into ``definition``."""
    functions: Dict[str, Callable[..., Any]] = {}
    for role, value in roles.items():
        if callable(value):
            functions[role] = value
        elif value is not None:
            definition[role] = value
    return functions


class Builtin:
    """An effect of a built-in target (wit/targets.wit; ``interlock.stripe``): its premise
    read, its send and its lookup are the component's, made as calls of the service's SDK
    by ``perform(service_call) -> service-answer``; the host's own functions (``key``,
    ``lease``, ``bounds``, ``cap``, ``allowed``) take the effect object. Calling it with the
    effect object (and, per call, ``key=``, ``lease=``, ``approval=``) gates one call."""

    is_async = False

    def __init__(self, gate: "Interlock", definition: Dict[str, Any], perform: Callable[[Any], Variant],
                 functions: Dict[str, Callable[..., Any]]):
        self.interlock = gate
        self.name = str(definition["target"])
        self.perform = perform
        self.functions = functions
        self._definition = {k: v for k, v in definition.items() if v is not None}

    def definition(self) -> str:
        return _json_text(dict(self._definition, functions=list(self.functions)))

    def invoke(self, call: Any) -> Any:
        return self.functions[call.role](json.loads(call.effect))

    def answer(self, call: Any, value: Any) -> Variant:
        return _returned(bool(value) if call.role == "allowed" else value, call.role, self.name)

    def failure(self, call: Any, e: Exception) -> Variant:
        return Variant("failed", _why(e))

    def _start(self, how: str, effect: Dict[str, Any], overrides: Dict[str, Any]) -> Any:
        given = {k: v for k, v in overrides.items() if v is not None}
        o = _json_text(given) if given else None
        return self.interlock.host()._call(f"effects.{how}", self.name, _json_text([effect]), o)

    def __call__(self, effect: Dict[str, Any], *, key: Any = None, lease: Optional[str] = None,
                 approval: Optional[str] = None) -> Outcome:
        first = self._start("call", effect, {"key": key, "lease": lease, "approval": approval})
        return self.interlock._outcome(self.interlock._run(first, drafting=True))

    def proposal(self, effect: Dict[str, Any], *, key: Any = None, lease: Optional[str] = None) -> Dict[str, Any]:
        """The proposal such a call submits (its premises read now), nothing recorded."""
        first = self._start("propose", effect, {"key": key, "lease": lease})
        return cast(Dict[str, Any], json.loads(str(self.interlock._run(first, drafting=True).payload)))


class _Call:
    """One drive of the machine: performs its calls through the Interlock's effects. A raise
    of a function making the proposal (key, lease, bounds, cap, and the first premises read
    of a call) goes to the caller, nothing recorded; any other becomes the call's answer."""

    def __init__(self, gate: "Interlock", drafting: bool):
        self.gate = gate
        self.drafting = drafting

    def _effect(self, call: Any) -> Any:
        drafting = call.role in _DRAFT_ROLES or (self.drafting and call.role == "premises")
        self.drafting = drafting and call.role != "premises"
        self.raising = drafting
        return self.gate._effects[call.target]

    def _serve(self, call: Any) -> Optional[Variant]:
        """A built-in target's service call: its SDK's answer (a raise that is not the SDK's
        own error is no answer at all)."""
        if not hasattr(call, "operation"):
            return None
        try:
            return cast(Builtin, self.gate._effects[call.target]).perform(call)
        except Exception as e:  # noqa: BLE001 - the component decides what no answer means
            return Variant("no-answer", _why(e))

    def perform(self, call: Any) -> Variant:
        served = self._serve(call)
        if served is not None:
            return served
        spec = self._effect(call)
        try:
            r = spec.invoke(call)
        except Exception as e:  # noqa: BLE001 - the component decides what an error means
            if self.raising:
                raise
            return spec.failure(call, e)
        if inspect.isawaitable(r):
            if inspect.iscoroutine(r):
                r.close()
            raise TypeError(f"{spec.name} is async (its function, premises, allowed or lookup returned an "
                            "awaitable): use `await fn(...)`, `await gate.asubmit(...)` and `await gate.arecover()`")
        return spec.answer(call, r)

    async def aperform(self, call: Any) -> Variant:
        served = self._serve(call)
        if served is not None:
            return served
        spec = self._effect(call)
        try:
            r = spec.invoke(call)
            if inspect.isawaitable(r):
                timeout_ms = getattr(call, "timeout-ms")
                r = await (asyncio.wait_for(r, timeout_ms / 1000) if timeout_ms is not None else r)
        except Exception as e:  # noqa: BLE001 - the component decides what an error means
            if self.raising:
                raise
            return spec.failure(call, e)
        return spec.answer(call, r)


class EffectGate:
    """``fn.gate``: the gate as seen from one decorated function. ``submit`` takes the
    function's proposal; everything else is the :class:`Interlock`'s."""

    def __init__(self, gate: "Interlock", effect: Effect):
        self._interlock = gate
        self.effect = effect

    def submit(self, proposal: Proposal, *, crash_after_effect: bool = False,
               crash_before_effect: bool = False) -> Outcome:
        return self._interlock.submit(
            proposal, crash_after_effect=crash_after_effect, crash_before_effect=crash_before_effect
        )

    async def asubmit(self, proposal: Proposal, *, crash_after_effect: bool = False,
                      crash_before_effect: bool = False) -> Outcome:
        return await self._interlock.asubmit(
            proposal, crash_after_effect=crash_after_effect, crash_before_effect=crash_before_effect
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._interlock, name)


class Gated(Protocol):
    """What ``@gate.effect`` makes of a function. Calling it gates one call: an
    :class:`Outcome` (awaitable when the effect is async). ``proposal(*args)`` /
    ``aproposal(*args)``: the proposal such a call submits; ``gate``: its
    :class:`EffectGate`; ``effect``: its :class:`Effect`."""

    proposal: Callable[..., Dict[str, Any]]
    aproposal: Callable[..., Awaitable[Dict[str, Any]]]
    gate: EffectGate
    effect: Effect

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class Interlock:
    """A gate on one journal: a directory (``journal.jsonl``, locked for this object's
    life), or a shared journal named by a URL, ``sqlite:///abs/path.db`` (the processes of
    one machine) or ``postgres://user@host:port/db`` (many machines; needs
    ``pip install 'interlock[postgres]'``). Any other URL is
    :class:`interlock.UnsupportedJournal`, nothing created.

    ``agent`` names who proposes. Authority: an effect's ``lease=`` (a name, or a function
    of the call's arguments), an approval (set ``proposal["authority"] = {"approval": id}``
    after :meth:`approve`), or, for an effect that names neither, the agent's *standing
    lease*, which the gate names (``"<agent>-standing"``) and grants, recorded like any
    lease, the first time a proposal needs it and never again: once revoked with
    :meth:`revoke_lease`, it stays revoked. Such an effect is announced once, when it is
    decorated (the gate's notice, on the ``interlock`` logger). ``strict=True``: named
    authority only (``standing_lease=False`` is the older spelling).
    ``claim_wait``: how :meth:`recover` waits out another worker's live claim
    (``True``: as the gate's defaults say; ``False``: not at all; or a
    :class:`interlock.ClaimWait`). ``lock_wait_ms``: how long to wait for the lock of a
    journal directory another writer holds (default 5 s; 0: fail at once with
    :class:`interlock.Locked`). ``clock_skew_ms``: how far the clocks of the machines
    sharing the journal may disagree; every proposal carries it. ``clock`` is for tests
    (:class:`interlock.clock.FakeClock`). docs/host-api.md has every rule.

    One Interlock may be shared by threads: calls into the gate take turns (one lock),
    while effect functions, premises, checks and lookups run concurrently between them."""

    def __init__(self, path: Union[str, "os.PathLike[str]"] = ".interlock", *, agent: str = "agent",
                 clock: Optional[Clock] = None, claim_wait: Union[bool, ClaimWait] = True,
                 strict: bool = False, standing_lease: Optional[bool] = None,
                 wasm: Optional[Path] = None, lock_wait_ms: Optional[int] = None,
                 clock_skew_ms: Optional[int] = None):
        url = is_url(path) is not None
        self.claim_wait = claim_wait_of(claim_wait)
        #: The journal directory (None for a shared journal, named by a URL).
        self.path: Optional[Path] = None if url else Path(path)
        self.agent = agent
        self.strict = strict is True or standing_lease is False
        self.clock_skew_ms = clock_skew_ms
        # Agents whose standing lease was announced (once each).
        self._announced: Set[str] = set()
        self.clock: Clock = clock or SystemClock()
        self._wasm = wasm
        # Serializes every gate call, and what must change together with one (the gate
        # instance). Reentrant: one leads to another.
        self._lock = threading.RLock()
        storage = open_url(os.fsdecode(path)) if self.path is None else FileJournal.open(self.path, lock_wait_ms)
        #: Where the journal is, for messages (never a password).
        self.journal_name = storage.name
        self._journal = JournalRef(storage)
        self._host: Optional[GateHost] = None
        self._effects: Dict[str, Union[Effect, Builtin]] = {}
        self._dead: Optional[str] = None
        try:
            self.host()
        except BaseException:
            self._journal.close()
            raise

    # -- life

    def close(self) -> None:
        """Releases the journal (a directory's lock, a database connection). The object
        cannot be used afterwards."""
        with self._lock:
            self._journal.close()
            self._host = None
            self._dead = self._dead or "this Interlock was closed"

    def __enter__(self) -> "Interlock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _die(self, why: str) -> None:
        with self._lock:
            self._journal.close()  # as at a process exit: the lock goes with it
            self._host = None
            self._dead = why

    def host(self) -> GateHost:
        """The gate instance (a fresh one after a trap: what is durable stays), its journal
        open and every effect defined."""
        with self._lock:
            if self._dead:
                raise InterlockError(f"{self._dead}; create a new Interlock on {self.journal_name}")
            if self._host is None or self._host.broken:
                host = GateHost(self._journal, self.clock, self._wasm, lock=self._lock)
                if self.strict:
                    host.set_strict_authority(True)
                self._configure(host, self.claim_wait)
                self._host = host
            return self._host

    def _configure(self, host: GateHost, wait: Any) -> None:
        host._call("effects.configure", self.agent, self.clock_skew_ms, host.claim_wait(wait))
        host.set_routes(list(self._effects))  # none defined yet: the gate asks for no target
        for spec in self._effects.values():
            host._call("effects.define", spec.definition())

    # -- the decorator

    @overload
    def effect(self, fn: Callable[..., Any], *, key: Fn = None, premises: Fn = None, allowed: Fn = None,
               lookup: Fn = None, dedupes: bool = False, dedupe_window_ms: Optional[int] = None,
               timeout_ms: Optional[int] = None, name: Optional[str] = None, agent: Optional[str] = None,
               lease: Computed = None, bounds: Computed = None, cap: Computed = None,
               rejects: Sequence[type] = ()) -> "Gated": ...

    @overload
    def effect(self, fn: None = None, *, key: Fn = None, premises: Fn = None, allowed: Fn = None,
               lookup: Fn = None, dedupes: bool = False, dedupe_window_ms: Optional[int] = None,
               timeout_ms: Optional[int] = None, name: Optional[str] = None, agent: Optional[str] = None,
               lease: Computed = None, bounds: Computed = None, cap: Computed = None,
               rejects: Sequence[type] = ()) -> Callable[[Callable[..., Any]], "Gated"]: ...

    def effect(self, fn: Fn = None, *, key: Fn = None, premises: Fn = None, allowed: Fn = None,
               lookup: Fn = None, dedupes: bool = False, dedupe_window_ms: Optional[int] = None,
               timeout_ms: Optional[int] = None, name: Optional[str] = None, agent: Optional[str] = None,
               lease: Computed = None, bounds: Computed = None, cap: Computed = None,
               rejects: Sequence[type] = ()) -> Union["Gated", Callable[[Callable[..., Any]], "Gated"]]:
        """Gates a function with external effects (see the module documentation).

        ``key(*args)``: the effect key, from the approved request, never model output.
        ``premises(*args, effect_id)``: the facts the decision rests on, read fresh
        (excluding this effect's own result); called when the proposal is made, right
        before the send, and before any resend. ``allowed(*args)``: the host's own
        authority check, asked at dispatch and at recovery (if it raises, the effect stays
        open). ``lookup(*args, effect_id)``: whether the effect already happened (truthy:
        found). ``dedupes``: the target dedupes on the idempotency key within
        ``dedupe_window_ms``. ``timeout_ms``: how long a send may take (the claim). Both
        default to the gate's. ``bounds``: premises that may move within a bound
        (``{"name": {"at_most": n}}``). ``rejects``: exception types that mean "refused,
        nothing applied" (besides :class:`interlock.Rejected`); any other exception leaves
        the send's fate unknown."""

        def wrap(f: Callable[..., Any]) -> Gated:
            spec = Effect(self, f, name=name, key=key, premises=premises, allowed=allowed,
                          lookup=lookup, dedupes=dedupes, dedupe_window_ms=dedupe_window_ms,
                          timeout_ms=timeout_ms, agent=agent, lease=lease, bounds=bounds,
                          cap=cap, rejects=tuple(rejects))
            with self._lock:
                standing = self.host()._call("effects.define", spec.definition())
                self._effects[spec.name] = spec
            if standing is not None:
                self._announce(standing)
            effect_gate = EffectGate(self, spec)

            def proposal(*args: Any, **kwargs: Any) -> Dict[str, Any]:
                first = spec.start("propose", args, kwargs)
                return cast(Dict[str, Any], json.loads(str(self._run(first, drafting=True).payload)))

            async def aproposal(*args: Any, **kwargs: Any) -> Dict[str, Any]:
                first = spec.start("propose", args, kwargs)
                return cast(Dict[str, Any], json.loads(str((await self._arun(first, drafting=True)).payload)))

            run: Callable[..., Any]
            if spec.is_async:
                @functools.wraps(f)
                async def run_async(*args: Any, **kwargs: Any) -> Outcome:
                    first = await self.host().off_loop(spec.start, "call", args, kwargs)
                    return self._outcome(await self._arun(first, drafting=True))

                run = run_async
            else:
                @functools.wraps(f)
                def run_sync(*args: Any, **kwargs: Any) -> Outcome:
                    return self._outcome(self._run(spec.start("call", args, kwargs), drafting=True))

                run = run_sync
            gated = cast(Gated, run)
            gated.proposal = proposal
            gated.aproposal = aproposal
            gated.gate = effect_gate
            gated.effect = spec
            return gated

        return wrap(fn) if fn is not None else wrap

    def builtin(self, definition: Dict[str, Any], perform: Callable[[Any], Variant], *,
                functions: Optional[Dict[str, Callable[..., Any]]] = None) -> Builtin:
        """Defines an effect of a built-in target (``definition["builtin"]``, e.g.
        ``stripe.refund``; ``definition["target"]`` its name here): a host module such as
        :mod:`interlock.stripe` gives ``perform``, which makes one SDK call as the component
        says and returns what came back. ``functions``: the host's own ``key``, ``lease``,
        ``bounds``, ``cap`` or ``allowed``, each taking the effect object."""
        spec = Builtin(self, definition, perform, dict(functions or {}))
        with self._lock:
            standing = self.host()._call("effects.define", spec.definition())
            self._effects[spec.name] = spec
        if standing is not None:
            self._announce(standing)
        return spec

    # -- driving the machine

    def _run(self, first: Any, drafting: bool = False, sleep: Optional[Callable[[int], None]] = None) -> Variant:
        try:
            return run_machine(self.host(), EFFECTS, first, _Call(self, drafting).perform, sleep)
        except SimulatedCrash as e:
            self._die(f"this Interlock crashed (simulated, {e.point})")
            raise

    async def _arun(self, first: Any, drafting: bool = False,
                    sleep: Optional[Callable[[int], Awaitable[None]]] = None) -> Variant:
        try:
            return await arun_machine(self.host(), EFFECTS, first, _Call(self, drafting).aperform, sleep)
        except SimulatedCrash as e:
            self._die(f"this Interlock crashed (simulated, {e.point})")
            raise

    def _outcome(self, last: Variant) -> Outcome:
        return self._attach(to_outcome(last.payload))

    def _attach(self, o: Outcome) -> Outcome:
        object.__setattr__(o, "_interlock", self)
        return o

    # -- gate calls

    @staticmethod
    def _text(proposal: Proposal) -> str:
        return proposal if isinstance(proposal, str) else _json_text(proposal)

    def effect_id_of(self, proposal: Proposal) -> str:
        """The effect id a proposal gets (the gate computes it; nothing is recorded)."""
        return self.host().effect_id_of(self._text(proposal))

    def _announce(self, agent: str) -> None:
        """Says once, at start, that effects of ``agent`` that name no authority run under
        its standing lease (the gate's words): visible, never silent."""
        if self.strict or agent in self._announced:
            return
        self._announced.add(agent)
        try:
            notice = self.host().standing_notice(agent)
        except InvalidField:
            return  # no standing lease for such an agent: its proposals are refused, saying why
        logging.getLogger("interlock").warning(notice)

    def _crashing(self, after: bool, before: bool) -> GateHost:
        host = self.host()
        point = AFTER_INTENT if before else AFTER_COMMIT if after else None
        if point is not None:
            host.crash_at(point)
        return host

    def submit(self, proposal: Proposal, *, crash_after_effect: bool = False,
               crash_before_effect: bool = False) -> Outcome:
        """Gates a proposal through to its outcome. ``crash_after_effect``: the effect runs,
        then this process "dies" before the reply reaches the gate: :class:`SimulatedCrash`
        is raised and this Interlock is dead (its journal lock released), as after a kill.
        ``crash_before_effect``: dies once the intent is durable, before the send."""
        host = self._crashing(crash_after_effect, crash_before_effect)
        try:
            return self._outcome(self._run(host._call("effects.submit", self._text(proposal))))
        finally:
            if (crash_after_effect or crash_before_effect) and not host.broken:
                host.crash_at(None)

    async def asubmit(self, proposal: Proposal, *, crash_after_effect: bool = False,
                      crash_before_effect: bool = False) -> Outcome:
        """:meth:`submit` for ``async def`` effects (and async premises/allowed/lookup)."""
        host = self._crashing(crash_after_effect, crash_before_effect)
        try:
            first = await host.off_loop(host._call, "effects.submit", self._text(proposal))
            return self._outcome(await self._arun(first))
        finally:
            if (crash_after_effect or crash_before_effect) and not host.broken:
                host.crash_at(None)

    def recover_effect(self, effect_id: str, sleep: Optional[Callable[[int], None]] = None) -> Outcome:
        """Recovers one effect, waiting out another worker's live claim as this Interlock's
        ``claim_wait`` says; ``sleep(ms)`` (default the clock's) waits when the gate says."""
        return self._outcome(self._run(self.host()._call("effects.recover", effect_id), sleep=sleep))

    async def arecover_effect(self, effect_id: str,
                              sleep: Optional[Callable[[int], Awaitable[None]]] = None) -> Outcome:
        """The awaitable :meth:`recover_effect`."""
        host = self.host()
        first = await host.off_loop(host._call, "effects.recover", effect_id)
        return self._outcome(await self._arun(first, sleep=sleep))

    def _recovering(self, claim_wait: Optional[Union[bool, ClaimWait]]) -> Tuple[GateHost, bool]:
        host = self.host()
        other = claim_wait is not None and claim_wait_of(claim_wait) != self.claim_wait
        if other:
            self._configure(host, claim_wait)
        return host, other

    def recover(self, *, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """Resolves every open effect by the gate's recovery table; call once on startup,
        after decorating every effect. Waits out live claims unless ``claim_wait``
        (default: the Interlock's) says not to: then such an effect is reported open,
        reason ``claim_live``, with ``retry_after_ms``. Effects of functions not decorated
        here stay open (reason ``target_unroutable``); nothing is written for them."""
        host, other = self._recovering(claim_wait)
        try:
            return _report(recover_each(host, self.recover_effect))
        finally:
            if other and not host.broken:
                self._configure(host, self.claim_wait)

    async def arecover(self, *, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """The awaitable :meth:`recover`, for ``async def`` effects."""
        host, other = self._recovering(claim_wait)

        try:
            return _report(await arecover_each(host, self.arecover_effect))
        finally:
            if other and not host.broken:
                self._configure(host, self.claim_wait)

    def open_effects(self) -> List[str]:
        return self.host().open_effects()

    def status(self, effect_id: str) -> State:
        """The effect's last state (a :class:`State`: it equals the journal's spelling)."""
        return State(self.receipt(effect_id)["final"])

    def receipt(self, effect_id: str, key: Optional[bytes] = None) -> Receipt:
        """The effect's receipt; HMAC-SHA256-signed when ``key`` is given."""
        return Receipt(self.host().receipt(effect_id, key))

    def check_receipt(self, receipt: Union[Receipt, str], key: bytes) -> VerifyReport:
        text = receipt.text if isinstance(receipt, Receipt) else receipt
        return self.host().check_receipt(text, key)

    def verify(self, anchors: Sequence[Union[Receipt, str]] = (), checkpoints: Sequence[str] = ()) -> VerifyReport:
        """Verifies every stream's hash chain; receipts in ``anchors`` pin their streams
        (and the authority streams they relied on); each checkpoint note in
        ``checkpoints`` must still be a prefix of the journal's log."""
        held = [json.dumps({"checkpoint": c}) for c in checkpoints]
        return self.host().verify([a.text if isinstance(a, Receipt) else a for a in anchors] + held)

    # -- proof for outsiders (ARCHITECTURE.md, "Proof for outsiders"); keys are text, read
    # with interlock.keys.read_key from a file or the environment

    def generate_key(self, name: str) -> Tuple[str, str]:
        """A new Ed25519 key pair ``(private, public)`` named ``name`` (the log's origin):
        store the private one with :func:`interlock.keys.write_private_key`."""
        return self.host().generate_key(name, os.urandom(32))

    def signed_receipt(self, effect_id: str, signing_key: str) -> Receipt:
        """The effect's receipt signed with Ed25519: anyone with the public key checks it."""
        return Receipt(self.host().signed_receipt(effect_id, signing_key))

    def check_signed_receipt(self, receipt: Union[Receipt, str], public_key: str) -> VerifyReport:
        """An Ed25519 receipt checked with the public key and against this journal."""
        text = receipt.text if isinstance(receipt, Receipt) else receipt
        return self.host().check_signed_receipt(text, public_key)

    def check_receipt_signature(self, receipt: Union[Receipt, str], public_key: str) -> str:
        """An Ed25519 receipt's signature alone, no journal; its effect id, or
        :class:`BadSignature`."""
        text = receipt.text if isinstance(receipt, Receipt) else receipt
        return self.host().check_receipt_signature(text, public_key)

    def checkpoint(self, signing_key: str) -> Dict[str, Any]:
        """Logs the receipt of every effect closed since and signs a checkpoint of the log:
        ``{"checkpoint": note, "tree_size", "appended"}``. Durable."""
        return cast(Dict[str, Any], json.loads(self.host().checkpoint(signing_key)))

    def latest_checkpoint(self) -> Optional[str]:
        return self.host().latest_checkpoint()

    def prove_inclusion(self, effect_id: str, tree_size: Optional[int] = None) -> str:
        """The inclusion proof (JSON) of the effect's logged receipt."""
        return self.host().prove_inclusion(effect_id, tree_size)

    def prove_consistency(self, old_size: int, tree_size: Optional[int] = None) -> str:
        return self.host().prove_consistency(old_size, tree_size)

    def check_inclusion(self, proof: str, public_key: str, checkpoint: Optional[str] = None) -> Dict[str, Any]:
        return cast(Dict[str, Any], json.loads(self.host().check_inclusion(proof, checkpoint, public_key)))

    def check_consistency(self, proof: str, old_checkpoint: str, public_key: str) -> Dict[str, Any]:
        return cast(Dict[str, Any], json.loads(self.host().check_consistency(proof, old_checkpoint, public_key)))

    def bundle(self, signing_key: str, from_ms: int = 0, to_ms: Optional[int] = None) -> str:
        """A signed bundle of the receipts of the effects proposed in ``[from_ms, to_ms)``."""
        end = self.clock.now_ms() + 1 if to_ms is None else to_ms
        return self.host().bundle(from_ms, end, signing_key)

    def check_bundle(self, bundle: str, public_key: str) -> Dict[str, Any]:
        """A bundle checked with the public key, with the five answers per effect."""
        return cast(Dict[str, Any], json.loads(self.host().check_bundle(bundle, public_key)))

    def export(self, to: str, out: Optional[str] = None, *, name: Optional[str] = None,
               content: bool = False, max_records: int = 512, timeout_s: float = 10.0) -> "ExportReport":
        """Exports the journal past its recorded position to ``to`` (``otlp=URL``,
        ``bigquery``, ``cloud-logging``, ``siem``; the file sinks write JSON lines to
        ``out``) through the sink's official library, and records how far it got
        (ARCHITECTURE.md, "Export"). A batch a crash left in doubt is sent again first,
        the same records under the same ids; nothing after it is skipped."""
        from .export import run

        return run(self.host(), to, out, name=name, content=content, max_records=max_records,
                   timeout_s=timeout_s)

    def confirm(self, effect_id: str, evidence: Any) -> Outcome:
        return self._attach(self.host().confirm(effect_id, _to_json(evidence)))

    # -- people in the loop (ARCHITECTURE.md, "People in the loop")

    def set_approval_rules(self, rules: Dict[str, Any]) -> None:
        """Records the approval rules and routes in force from now on. Durable."""
        self.host().set_approval_rules(_to_json(rules))

    def approval_rules(self) -> Dict[str, Any]:
        """The approval rules in force (``{}`` when none were recorded)."""
        return cast(Dict[str, Any], json.loads(self.host().approval_rules()))

    def inbox(self) -> List[Dict[str, Any]]:
        """Every item a person may act on now, from the journal: pending and escalated
        approvals, returned ones with what changed, AMBIGUOUS effects, refused ones."""
        return cast(List[Dict[str, Any]], json.loads(self.host().inbox()))

    def scoreboard(self) -> Dict[str, Any]:
        """Approval items by route (pending, escalated, approved, rejected, expired), time
        to decision, deadlines missed, the share approved by rule: from the journal."""
        return cast(Dict[str, Any], json.loads(self.host().scoreboard()))

    def decide(self, item: str, decider: str, verdict: str, *, why: Optional[str] = None,
               evidence: Any = None) -> Dict[str, Any]:
        """A person's decision on an inbox item (``approve``, ``reject``, ``happened``,
        ``did_not_happen``, ``dismiss``), checked against ``decider``'s own lease and the
        item's route. Returns the item after; a decision not allowed (too late, not on the
        route, no live lease) raises ``InvalidField`` saying why."""
        d: Dict[str, Any] = {"item": item, "decider": decider, "verdict": verdict}
        if why is not None:
            d["why"] = why
        if evidence is not None:
            d["evidence"] = evidence
        return cast(Dict[str, Any], json.loads(self.host().decide(_to_json(d))))

    def webhook(self, scheme: str, headers: Any, body: bytes, secret: str, *,
                tolerance_s: Optional[int] = None) -> Dict[str, Any]:
        """A service's signed webhook (``scheme``: ``stripe`` or ``standard-webhooks``;
        ``headers`` as received, a mapping or pairs; ``body`` the raw bytes): checked, then
        what it confirms recorded. A bad one records nothing and raises ``InvalidField``."""
        pairs = list(headers.items()) if hasattr(headers, "items") else list(headers)
        return cast(Dict[str, Any], json.loads(self.host().webhook(scheme, pairs, body, secret, tolerance_s)))

    # -- authority

    def standing_lease_name(self) -> str:
        """The agent's standing lease name, as the gate names it (nothing is granted)."""
        return self.host().standing_lease_name(self.agent)

    def standing_lease(self) -> str:
        """Grants the agent's standing lease if it never was (the gate decides its name and
        life, and records the grant); returns its name. The gate does so itself at the
        first effect that names no authority."""
        return self.host().grant_standing_lease(self.agent)

    def lease(self, name: str, ttl_s: Optional[float] = None, *, expires_at_ms: Optional[int] = None) -> str:
        """Grants (or extends) the lease ``name`` for ``ttl_s`` seconds or until
        ``expires_at_ms``. Durable on return."""
        if expires_at_ms is None:
            if ttl_s is None:
                raise TypeError("lease() needs ttl_s or expires_at_ms")
            expires_at_ms = self.clock.now_ms() + int(ttl_s * 1000)
        self.host().grant_lease(name, int(expires_at_ms))
        return name

    def revoke_lease(self, name: str) -> None:
        self.host().revoke_lease(name)

    def approve(self, approval: str, approver: str, proposal: Dict[str, Any], *,
                premises_seen: Optional[Dict[str, Any]] = None,
                expires_at_ms: Optional[int] = None) -> Dict[str, Any]:
        """Records an approval of exactly ``proposal``'s request, with the premises the
        approver saw (default: the proposal's). Returns the proposal with the approval as
        its authority."""
        a: Dict[str, Any] = {
            "approval": approval,
            "approver": approver,
            "request": {"key": proposal.get("key"), "effect": proposal["effect"]},
            "premises_seen": premises_seen if premises_seen is not None else proposal.get("premises", {}),
        }
        if a["request"]["key"] is None:
            del a["request"]["key"]
        if expires_at_ms is not None:
            a["expires_at_ms"] = int(expires_at_ms)
        self.host().approve(_json_text(a))
        p = dict(proposal)
        p["authority"] = {"approval": approval, **(
            {"host_check": True} if proposal.get("authority", {}).get("host_check") else {})}
        return p

    def revoke_approval(self, approval: str) -> None:
        self.host().revoke_approval(approval)


def _report(results: Sequence[Tuple[str, Any]]) -> RecoveryReport:
    outcomes = [r for _, r in results if isinstance(r, Outcome)]
    return RecoveryReport(outcomes, {e: r for e, r in results if not isinstance(r, Outcome)})
