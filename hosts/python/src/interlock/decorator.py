"""The decorator API of the original (the Python library Interlock was first written as),
mapped onto the gate's proposal schema (ARCHITECTURE.md, "Proposal"):

    gate = Interlock(".interlock")

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: {...},
                 allowed=lambda order, amount: ...,
                 lookup=lambda order, amount, idempotency_key: ...,
                 dedupes=True)
    def refund_money(order, amount, idempotency_key): ...

    gate.recover()  # once, on startup

Each decorated function is its own target (named after the function): the gate's capture
step calls ``premises``, authorize calls ``allowed``, apply calls the function with the
gate's idempotency key, query calls ``lookup``. What any answer means is the gate's
business; nothing here decides. The behaviour, rule by rule with Node's spelling beside
it: docs/host-api.md.
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
from typing import Any, Awaitable, Callable, Dict, List, Optional, Protocol, Sequence, Set, Tuple, Union, cast, overload

from wasmtime.component import Variant

from .clock import SystemClock
from .errors import InterlockError, InvalidField, Rejected, SimulatedCrash, UnknownTarget
from .gate import (
    AFTER_COMMIT,
    AFTER_INTENT,
    ClaimWait,
    Clock,
    GateHost,
    JournalRef,
    Outcome,
    Reply,
    Request,
    State,
    VerifyReport,
    applied,
    canonical_json,
    captured,
    claim_wait_of,
    failed,
    found,
    not_found,
    rejected,
    unknown,
)
from .gate import allowed as allowed_reply
from .journal import FileJournal
from .sql_journal import is_url, open_url

IDEMPOTENCY_KEY = "idempotency_key"

#: A setting given as is, or computed from the call's arguments.
Computed = Union[Any, Callable[..., Any]]
#: A proposal: the gate's JSON text, or the dict it is made from.
Proposal = Union[str, Dict[str, Any]]
#: One of the functions an effect is defined with (``key``, ``premises``, ...), if given.
Fn = Optional[Callable[..., Any]]


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


def _then(value: Any, f: Callable[[Any], Any], on_error: Callable[[BaseException], Any]) -> Any:
    """``f(value)``, or a coroutine doing it after awaiting ``value``."""
    if inspect.isawaitable(value):

        async def later() -> Any:
            try:
                v = await value
            except Exception as e:  # noqa: BLE001 - turned into a reply
                return on_error(e)
            return f(v)

        return later()
    return f(value)


def _call(fn: Callable[..., Any], args: Sequence[Any], on_error: Callable[[BaseException], Any]) -> Any:
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - turned into a reply
        return on_error(e)


class Effect:
    """One decorated function: its target and how its steps are performed."""

    def __init__(self, gate: "Interlock", fn: Callable[..., Any], *, name: Optional[str],
                 key: Optional[Callable[..., Any]], premises: Optional[Callable[..., Any]],
                 allowed: Optional[Callable[..., Any]], lookup: Optional[Callable[..., Any]],
                 dedupes: bool, dedupe_window_ms: Optional[int], timeout_ms: Optional[int],
                 agent: Optional[str],
                 lease: Computed, bounds: Computed, cap: Computed,
                 rejects: Tuple[type, ...]):
        self.fn = fn
        self.name = name or fn.__name__
        sig = inspect.signature(fn)
        self.takes_key = IDEMPOTENCY_KEY in sig.parameters
        self.params = [p for p in sig.parameters if p != IDEMPOTENCY_KEY]
        self._sig = sig
        self.key, self.premises, self.allowed, self.lookup = key, premises, allowed, lookup
        self.dedupes, self.dedupe_window_ms, self.timeout_ms = dedupes, dedupe_window_ms, timeout_ms
        self.agent, self.lease, self.bounds, self.cap = agent, lease, bounds, cap
        self.rejects = (Rejected,) + tuple(rejects)
        # Async if any of its functions is; a lambda returning a coroutine is caught later.
        self.is_async = any(
            inspect.iscoroutinefunction(f) for f in (fn, premises, allowed, lookup) if f is not None
        )
        self.interlock = gate

    # -- from a call to the effect JSON and back

    def values_of_call(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> List[Any]:
        if IDEMPOTENCY_KEY in kwargs:
            raise TypeError(f"{self.name}: the gate supplies {IDEMPOTENCY_KEY}; do not pass it")
        params = [p for n, p in self._sig.parameters.items() if n != IDEMPOTENCY_KEY]
        bound = self._sig.replace(parameters=params).bind(*args, **kwargs)
        bound.apply_defaults()
        return [bound.arguments[p] for p in self.params]

    def values_of_request(self, req: Request) -> List[Any]:
        effect = req.args
        missing = [p for p in self.params if p not in effect]
        if missing:
            raise ValueError(f"the effect {req.effect} lacks the arguments {missing}")
        return [effect[p] for p in self.params]

    # -- the steps (the router calls these)

    def capture(self, req: Request) -> Reply:
        if self.premises is None:
            # The gate asks only for premises the proposal (or its approval) names; with no
            # function to read them, claiming an empty read would be a lie.
            return failed(f"{self.name} defines no premises")
        try:
            values = self.values_of_request(req)
        except ValueError as e:
            return failed(str(e))

        def pick(all_premises: Any) -> Variant:
            if not isinstance(all_premises, dict):
                return failed(f"premises of {self.name} must return a dict, got {type(all_premises).__name__}")
            missing = [n for n in req.names if n not in all_premises]
            if missing:
                return failed(f"premises of {self.name} did not return {missing}")
            try:
                return captured({n: all_premises[n] for n in req.names})
            except (TypeError, ValueError) as e:
                return failed(f"premises of {self.name} are not JSON: {e}")

        def err(e: BaseException) -> Variant:
            return failed(f"{type(e).__name__}: {e}")

        r = _call(self.premises, values + [req.effect_id], err)
        return r if _is_reply(r) else _then(r, pick, err)

    def authorize(self, req: Request) -> Reply:
        if self.allowed is None:
            # Asked for a check nobody installed here: it cannot be made, which is not a "no".
            return failed(f"{self.name} defines no allowed() check")
        try:
            values = self.values_of_request(req)
        except ValueError as e:
            return failed(str(e))

        # A check that could not be made (it raised) is not a "no": the gate leaves the
        # effect open (read_failed) instead of refusing it on a hiccup.
        def err(e: BaseException) -> Variant:
            return failed(f"{type(e).__name__}: {e}")

        r = _call(self.allowed, values, err)
        return r if _is_reply(r) else _then(r, allowed_reply, err)

    def apply(self, req: Request) -> Reply:
        try:
            values = self.values_of_request(req)
        except ValueError as e:
            return rejected(str(e))  # nothing was called: definitive

        def err(e: BaseException) -> Variant:
            if isinstance(e, self.rejects):
                return rejected(f"{type(e).__name__}: {e}")
            return unknown(f"{type(e).__name__}: {e}")

        kwargs = {IDEMPOTENCY_KEY: req.idempotency_key} if self.takes_key else {}
        try:
            r = self.fn(*values, **kwargs)
        except Exception as e:  # noqa: BLE001 - the gate decides what an error means
            return err(e)
        if inspect.isawaitable(r):
            # An async send waits at most the recorded proposal's timeout (the claim recovery
            # waits out); a sync one cannot be interrupted and runs to its end. Asked outside
            # the send's try: a gate error here is not a send whose fate is unknown.
            timeout_ms = self.interlock.host().send_timeout_ms(req.effect_id)
            r = asyncio.wait_for(r, timeout_ms / 1000)
        return _then(r, lambda v: applied(_to_json(v)), err)

    def query(self, req: Request) -> Reply:
        if self.lookup is None:
            return failed(f"{self.name} has no lookup")
        try:
            values = self.values_of_request(req)
        except ValueError as e:
            return failed(str(e))

        def answer(v: Any) -> Variant:
            if v is None or v is False:
                return not_found()
            return found(_to_json(v))

        def err(e: BaseException) -> Variant:
            return failed(f"{type(e).__name__}: {e}")

        r = _call(self.lookup, values + [req.effect_id], err)
        return r if _is_reply(r) else _then(r, answer, err)

    # -- the proposal

    def proposal_base(self, values: List[Any]) -> Dict[str, Any]:
        gate = self.interlock
        agent = self.agent or gate.agent
        target: Dict[str, Any] = {
            "name": self.name,
            "dedupes": bool(self.dedupes),
            "lookup": self.lookup is not None,
        }
        # Left out unless given: the gate's defaults apply (hosts keep no copy of them).
        if self.dedupe_window_ms is not None:
            target["dedupe_window_ms"] = self.dedupe_window_ms
        if self.timeout_ms is not None:
            target["timeout_ms"] = self.timeout_ms
        if gate.clock_skew_ms is not None:
            target["clock_skew_ms"] = gate.clock_skew_ms
        p: Dict[str, Any] = {"agent": agent, "target": target, "effect": dict(zip(self.params, values))}
        if self.key is not None:
            p["key"] = self.key(*values)
        lease = self.lease(*values) if callable(self.lease) else self.lease
        # No lease named: the gate runs the effect under the agent's standing lease, which
        # it grants at first use (or refuses it, under strict authority).
        authority: Dict[str, Any] = {"lease": lease} if lease else {}
        if self.allowed is not None:
            authority["host_check"] = True
        if authority:
            p["authority"] = authority
        for name, extra in (("bounds", self.bounds), ("cap", self.cap)):
            if extra is not None:
                p[name] = extra(*values) if callable(extra) else extra
        return p


def _is_reply(r: Any) -> bool:
    return isinstance(r, Variant)


class _Router:
    """The Interlock's targets: routes each step to the decorated function it names."""

    def __init__(self, gate: "Interlock", sync: bool):
        self.gate = gate
        self.sync = sync

    def routes(self) -> List[str]:
        # The gate asks for these targets only; any other effect stays open, untouched.
        return list(self.gate._effects)

    def _route(self, req: Request) -> Reply:
        spec = self.gate._effects.get(req.target)
        if spec is None:
            # Unreachable with routes declared; never answer for a target we cannot reach.
            raise UnknownTarget(req.target, req.effect_id)
        if self.sync and spec.is_async:
            raise TypeError(
                f"{req.target} is async: use `await fn(...)`, `await gate.asubmit(...)` and "
                "`await gate.arecover()`"
            )
        r = getattr(spec, req.kind)(req)
        if self.sync and inspect.isawaitable(r):
            if inspect.iscoroutine(r):
                r.close()
            raise TypeError(
                f"{req.target} is async (its function, premises, allowed or lookup returned "
                "an awaitable): use `await fn(...)`, `await gate.asubmit(...)` and "
                "`await gate.arecover()`"
            )
        return r

    capture = authorize = apply = query = _route


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
    :meth:`revoke_lease`, it stays revoked, and every effect under it is refused. Such an
    effect is announced once, when it is decorated (the gate's notice, on the ``interlock``
    logger). ``strict=True``: named authority only; an effect naming none raises
    :class:`interlock.InvalidField` (``/authority``), nothing recorded
    (``standing_lease=False`` is the older spelling of ``strict=True``).
    ``claim_wait``: how :meth:`recover` waits out another worker's live claim
    (``True``: as the gate's defaults say; ``False``: not at all; or a
    :class:`interlock.ClaimWait`). ``lock_wait_ms``: how long to wait for the lock of a
    journal directory another writer holds (default 5 s, the journal format's; 0: fail at
    once with :class:`interlock.Locked`; a shared journal has no such lock: its writers
    take turns per append). ``clock_skew_ms``: how far the clocks of the machines sharing
    the journal may disagree; every proposal carries it, so claims last that much longer and
    expiries are judged by the latest clock (ARCHITECTURE.md, "Clocks across machines";
    default none: one machine). ``clock`` is for tests
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
        #: Strict authority: an effect must name its lease or approval (else the agent's
        #: standing lease, granted by the gate at first use).
        self.strict = strict is True or standing_lease is False
        #: How far the clocks of the machines sharing the journal may disagree: every
        #: proposal carries it (``target.clock_skew_ms``; the gate checks it).
        self.clock_skew_ms = clock_skew_ms
        # Agents whose standing lease was announced (once each, at the first effect under it).
        self._announced: Set[str] = set()
        self.clock: Clock = clock or SystemClock()
        self._wasm = wasm
        # Serializes every gate call, and what must change together with one (the gate
        # instance). Reentrant: one leads to another.
        self._lock = threading.RLock()
        if self.path is None:
            shared = open_url(os.fsdecode(path))
            #: Where the journal is, for messages (never a password).
            self.journal_name = shared.name
            self._journal = JournalRef(shared)
        else:
            self.journal_name = str(self.path)
            self._journal = JournalRef(FileJournal.open(self.path, lock_wait_ms))
        self._host: Optional[GateHost] = None
        self._effects: Dict[str, Effect] = {}
        self._dead: Optional[str] = None

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
        """The gate instance (a fresh one after a trap: what is durable stays)."""
        with self._lock:
            if self._dead:
                raise InterlockError(f"{self._dead}; create a new Interlock on {self.journal_name}")
            if self._host is None or self._host.broken:
                self._host = GateHost(self._journal, self.clock, self._wasm, lock=self._lock)
                if self.strict:
                    self._host.set_strict_authority(True)
            return self._host

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
        ``premises(*args, idempotency_key)``: the facts the decision rests on, read fresh
        (excluding this effect's own result); called when the proposal is made, right
        before the send, and before any resend. ``allowed(*args)``: the host's own
        authority check, asked at dispatch and at recovery (if it raises, the effect stays
        open). ``lookup(*args, idempotency_key)``: whether the effect already happened
        (truthy: found). ``dedupes``: the target dedupes on the idempotency key within
        ``dedupe_window_ms``. ``timeout_ms``: how long a send may take (the claim). Both
        default to the gate's (``gate.host().defaults()``).
        ``bounds``: premises that may move within a bound (``{"name": {"at_most": n}}``).
        ``rejects``: exception types that mean "refused, nothing applied" (besides
        :class:`interlock.Rejected`); any other exception leaves the send's fate unknown."""

        def wrap(f: Callable[..., Any]) -> Gated:
            spec = Effect(self, f, name=name, key=key, premises=premises, allowed=allowed,
                          lookup=lookup, dedupes=dedupes, dedupe_window_ms=dedupe_window_ms,
                          timeout_ms=timeout_ms, agent=agent, lease=lease, bounds=bounds,
                          cap=cap, rejects=tuple(rejects))
            self._effects[spec.name] = spec  # routed from the next operation on
            if spec.lease is None:
                self._announce(spec.agent or self.agent)
            effect_gate = EffectGate(self, spec)

            def base(args: Sequence[Any], kwargs: Dict[str, Any]) -> Tuple[List[Any], Dict[str, Any], str]:
                values = spec.values_of_call(args, kwargs)
                p = spec.proposal_base(values)
                # The id does not depend on bounds, and bounds without the premises they
                # bound are refused: ask for the id of the proposal without them.
                effect_id = self.effect_id_of({k: v for k, v in p.items() if k != "bounds"})
                return values, p, effect_id

            def proposal(*args: Any, **kwargs: Any) -> Dict[str, Any]:
                values, p, effect_id = base(args, kwargs)
                if premises is not None:
                    read = premises(*values, effect_id)
                    if inspect.isawaitable(read):
                        if inspect.iscoroutine(read):
                            read.close()
                        raise TypeError(f"premises of {spec.name} is async: use `await {spec.name}.aproposal(...)`")
                    p["premises"] = read
                return p

            async def aproposal(*args: Any, **kwargs: Any) -> Dict[str, Any]:
                values, p, effect_id = base(args, kwargs)
                if premises is not None:
                    read = premises(*values, effect_id)
                    p["premises"] = await read if inspect.isawaitable(read) else read
                return p

            run: Callable[..., Any]
            if spec.is_async:
                @functools.wraps(f)
                async def run_async(*args: Any, **kwargs: Any) -> Outcome:
                    return await effect_gate.asubmit(await aproposal(*args, **kwargs))

                run = run_async
            else:
                @functools.wraps(f)
                def run_sync(*args: Any, **kwargs: Any) -> Outcome:
                    return effect_gate.submit(proposal(*args, **kwargs))

                run = run_sync
            gated = cast(Gated, run)
            gated.proposal = proposal
            gated.aproposal = aproposal
            gated.gate = effect_gate
            gated.effect = spec
            return gated

        return wrap(fn) if fn is not None else wrap

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

    def submit(self, proposal: Proposal, *, crash_after_effect: bool = False,
               crash_before_effect: bool = False) -> Outcome:
        """Gates a proposal through to its outcome. ``crash_after_effect``: the effect runs,
        then this process "dies" before the reply reaches the gate: :class:`SimulatedCrash`
        is raised and this Interlock is dead (its journal lock released), as after a kill.
        ``crash_before_effect``: dies once the intent is durable, before the send."""
        host, text = self.host(), self._text(proposal)
        try:
            o = host.submit(text, _Router(self, sync=True),
                            crash=_crash_point(crash_after_effect, crash_before_effect))
        except SimulatedCrash as e:
            self._die(f"this Interlock crashed (simulated, {e.point})")
            raise
        return self._attach(o)

    async def asubmit(self, proposal: Proposal, *, crash_after_effect: bool = False,
                      crash_before_effect: bool = False) -> Outcome:
        """:meth:`submit` for ``async def`` effects (and async premises/allowed/lookup)."""
        host, text = self.host(), self._text(proposal)
        try:
            o = await host.asubmit(text, _Router(self, sync=False),
                                   crash=_crash_point(crash_after_effect, crash_before_effect))
        except SimulatedCrash as e:
            self._die(f"this Interlock crashed (simulated, {e.point})")
            raise
        return self._attach(o)

    def _attach(self, o: Outcome) -> Outcome:
        object.__setattr__(o, "_interlock", self)
        return o

    def recover(self, *, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """Resolves every open effect by the gate's recovery table; call once on startup,
        after decorating every effect. Waits out live claims (at most the target's
        ``timeout_ms``) unless ``claim_wait`` (default: the Interlock's) says not to: then
        such an effect is reported open, reason ``claim_live``, with ``retry_after_ms``.
        Effects of functions not decorated here stay open (reason ``target_unroutable``);
        nothing is written for them."""
        wait = self.claim_wait if claim_wait is None else claim_wait
        results = self.host().recover_all(_Router(self, sync=True), wait)
        return self._report(results)

    async def arecover(self, *, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """The awaitable :meth:`recover`, for ``async def`` effects."""
        wait = self.claim_wait if claim_wait is None else claim_wait
        results = await self.host().arecover_all(_Router(self, sync=False), wait)
        return self._report(results)

    def _report(self, results: Sequence[Tuple[str, Any]]) -> RecoveryReport:
        outcomes: List[Outcome] = []
        errors: Dict[str, Exception] = {}
        for effect_id, r in results:
            if isinstance(r, Outcome):
                outcomes.append(self._attach(r))
            else:
                errors[effect_id] = r
        return RecoveryReport(outcomes, errors)

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

    def verify(self, anchors: Sequence[Union[Receipt, str]] = ()) -> VerifyReport:
        """Verifies every stream's hash chain; receipts in ``anchors`` pin their streams."""
        return self.host().verify([a.text if isinstance(a, Receipt) else a for a in anchors])

    def confirm(self, effect_id: str, evidence: Any) -> Outcome:
        return self._attach(self.host().confirm(effect_id, _to_json(evidence)))

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


def _crash_point(after: bool, before: bool) -> Optional[str]:
    return AFTER_INTENT if before else AFTER_COMMIT if after else None
