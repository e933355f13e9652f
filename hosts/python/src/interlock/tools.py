"""Tool gating for tool-calling loops: ``protect()``, and the loop the MCP proxy runs.

    from interlock.tools import protect

    tools = protect({"get_order": get_order, "create_refund": create_refund,
                     "find_refund": find_refund}, config, authority={"lease": "case-4471"})
    tools.recover()                                    # once, at startup
    out = tools["create_refund"](order_id="881", amount_cents=2000)
    out["message"]                                     # what to hand back to the model

``config`` is the original's configuration (ARCHITECTURE.md, "Tool gating"). The loop is
the component's ``tools`` session (wit/tools.wit): which calls are effects, how a call
becomes a premise read, a proposal, a send and a lookup, and what the model is told. This
module only calls the tool it is told with the arguments it is told and hands back what
came back, or sleeps when told.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from wasmtime.component import Record, Variant

from .clock import SystemClock
from .decorator import RecoveryReport, _report
from .errors import GateError, GateTrap, InterlockError, InvalidField, Rejected, SimulatedCrash
from .gate import (
    ClaimWait,
    Clock,
    GateHost,
    JournalRef,
    Question,
    arecover_each,
    arun_machine,
    canonical_json,
    claim_wait_of,
    recover_each,
    run_machine,
)
from .journal import MemoryJournal
from .sql_journal import open_journal

TOOLS = "tools"

#: A tool call made on the agent's behalf: ``(tool, arguments) -> the answer's JSON text``
#: (a plain function's value, or an MCP ``CallToolResult``). It raises
#: :class:`interlock.Rejected` when the tool refused and applied nothing; any other
#: exception leaves a send's fate unknown.
Caller = Callable[[str, Dict[str, Any]], str]
AsyncCaller = Callable[[str, Dict[str, Any]], Awaitable[str]]
#: Asks the person at the client the component's question (an MCP ``elicitation/create``
#: request's params, form mode) and returns the client's ``ElicitResult`` as JSON text; it
#: raises when no one can be asked (the call then answers pending).
Asker = Callable[[Dict[str, Any]], Awaitable[str]]

#: The answer to a question no one here can be asked (a host without an MCP client).
_NO_ONE = Variant("failed", "no client here to ask a person")


@dataclass(frozen=True)
class ToolResult:
    """What one tool call answers the model. ``ok``: the call happened (a pass-through
    call returned, or a gated effect is committed). ``message``: the text for the model
    (for a gated call, the component's reply). ``outcome``: the gate's outcome as the
    journal spells it (None when nothing was recorded). ``result``: the tool's answer.
    ``error``: the typed error of a call refused before anything was recorded."""

    ok: bool
    message: str
    outcome: Optional[Dict[str, Any]] = None
    result: Any = None
    error: Optional[Exception] = None
    gated: bool = True
    extra: Dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> Dict[str, Any]:
        d = {"ok": self.ok, "message": self.message, "outcome": self.outcome, "result": self.result}
        if self.error is not None:
            d["error"] = self.error
        return d


class _Options(Record):
    """The WIT ``tool-options``."""

    def __init__(self, agent: str, authority: Optional[str], strict: bool, results: str, wait: Any):
        self.agent, self.authority, self.strict, self.results, self.wait = agent, authority, strict, results, wait


def _text(value: Any, at: str) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as e:
        raise InvalidField(at, f"is not JSON: {e}") from None


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if not isinstance(e, GateError) else str(e)


def _failure(e: Exception) -> Variant:
    return Variant("refused" if isinstance(e, Rejected) else "failed", _why(e))


def _error_of(detail: Dict[str, Any], message: str) -> InterlockError:
    if detail.get("kind") == "invalid_field":
        return InvalidField(detail["field"], detail["problem"])
    if detail.get("kind") == "gate_error":
        return GateError(detail["message"])
    return InterlockError(detail.get("message") or message)


class ToolGate:
    """The tool-gating session on one journal (ARCHITECTURE.md, "Tool gating"), for any
    way of calling tools: plain functions (:func:`protect`, ``results="plain"``) or an MCP
    upstream (the proxy, ``results="mcp"``).

    ``config``: the configuration (a dict, or its JSON text); a problem raises
    :class:`interlock.InvalidField` at its JSON pointer, nothing opened. ``journal``: a
    directory or a ``sqlite://``/``postgres://`` URL, else the configuration's
    ``journal_dir`` (default ``.interlock/mcp``). ``authority``: the host's
    (``{"lease": name}`` or ``{"approval": id}``), for tools whose configuration names
    none; a gated tool with neither runs under the agent's standing lease (announced here,
    once, on the ``interlock`` logger), or, with ``strict=True``, is refused here.
    ``claim_wait``: how recovery waits out a live claim. ``available``: the tools the host
    has, checked (:meth:`check_tools`) before anything is opened."""

    def __init__(self, config: Union[str, Mapping[str, Any]], *,
                 journal: Union[str, "os.PathLike[str]", None] = None, agent: str = "agent",
                 authority: Optional[Mapping[str, Any]] = None, clock: Optional[Clock] = None,
                 claim_wait: Union[bool, ClaimWait] = True, lock_wait_ms: Optional[int] = None,
                 strict: bool = False, results: str = "plain", available: Optional[List[str]] = None):
        self.config = config if isinstance(config, str) else _text(dict(config), "")
        self.authority = None if authority is None else _text(dict(authority), "/authority")
        self.agent, self.strict, self.results = agent, strict, results
        self.claim_wait = claim_wait_of(claim_wait)
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._journal = JournalRef(None)
        host = GateHost(self._journal, self.clock, lock=self._lock, open=False)
        started = self._start(host, self.claim_wait)
        self.gated: List[str] = list(started.gated)
        if available is not None:  # checked before the journal is opened: nothing created
            host._call("tools.check-tools", list(available))
        where = journal if journal is not None else getattr(started, "journal-dir")
        self.journal_name = os.fsdecode(where)
        self._journal.replace(open_journal(where, lock_wait_ms))
        try:
            host.open_journal()
        except BaseException:
            self._journal.close()
            raise
        # One instance per host authority (a run may bring its own: openai_agents).
        self._hosts: Dict[Optional[str], GateHost] = {self.authority: host}
        if started.standing:
            # Visible, never silent (the gate's words).
            logging.getLogger("interlock").warning(host.standing_notice(agent))

    def _start(self, host: GateHost, wait: Any, authority: Optional[str] = None, check: bool = True) -> Any:
        """Starts the session on ``host``. ``check``: under strict authority, refuse a
        gated tool with none at all here (a run's own authority is checked per call, by
        the gate: the call is refused, nothing recorded)."""
        authority = self.authority if authority is None else authority
        options = _Options(self.agent, authority, self.strict and check, self.results, host.claim_wait(wait))
        started = host._call("tools.start", self.config, options)
        if self.strict:
            host.set_strict_authority(True)
        return started

    # -- life

    def host(self) -> GateHost:
        """The gate instance for the host authority in force (a fresh one after a trap:
        what is durable stays)."""
        authority = self.authority
        with self._lock:
            if self._journal.journal is None:
                raise InterlockError(f"this tool gate was closed; open a new one on {self.journal_name}")
            host = self._hosts.get(authority)
            if host is None or host.broken:
                host = self._hosts[authority] = GateHost(self._journal, self.clock, lock=self._lock)
                self._start(host, self.claim_wait, authority, check=False)
            return host

    def close(self) -> None:
        with self._lock:
            self._journal.close()
            self._hosts.clear()

    def is_gated(self, tool: str) -> bool:
        return tool in self.gated

    def check_tools(self, available: List[str]) -> None:
        """Every tool the configuration names (gated, premise, lookup) is in ``available``;
        else :class:`interlock.InvalidField` at its pointer."""
        self.host()._call("tools.check-tools", list(available))

    # -- authority (the journal is held open: grant and revoke through it)

    def lease(self, name: str, ttl_s: float) -> str:
        self.host().grant_lease(name, self.clock.now_ms() + int(ttl_s * 1000))
        return name

    def revoke_lease(self, name: str) -> None:
        self.host().revoke_lease(name)

    def approve(self, approval: str, approver: str, proposal: Mapping[str, Any],
                expires_at_ms: Optional[int] = None) -> Dict[str, Any]:
        """Records ``approver``'s approval of exactly ``proposal``'s request (its key and
        effect; :meth:`proposal` makes it), with its premises as what the approver saw.
        Durable on return; returns the approval as recorded."""
        a: Dict[str, Any] = {"approval": approval, "approver": approver,
                             "request": {"key": proposal.get("key"), "effect": proposal["effect"]},
                             "premises_seen": proposal.get("premises", {})}
        if a["request"]["key"] is None:
            del a["request"]["key"]
        if expires_at_ms is not None:
            a["expires_at_ms"] = int(expires_at_ms)
        self.host().approve(canonical_json(a))
        return a

    def proposal(self, tool: str, arguments: Mapping[str, Any], caller: Caller) -> Dict[str, Any]:
        """The proposal a call of ``tool`` would submit, recorded nowhere: the call is made
        on a throwaway instance over a journal in memory, which is told to die once the
        intent is recorded (before any send); the proposal is read back from that intent.
        (The ``tools`` interface has no ``propose`` of its own yet.)"""
        if not self.is_gated(tool):
            raise InvalidField(f"/tools/{tool}", "is not gated by the configuration: nothing to approve")
        memory = JournalRef(MemoryJournal())
        scratch = GateHost(memory, self.clock)
        ToolGate._start(self, scratch, False)
        scratch.crash_at("after_intent")
        first = scratch._call("tools.call", tool, _text(dict(arguments), "/arguments"))
        refused: Optional[ToolResult] = None
        try:
            refused = self._result(run_machine(scratch, TOOLS, first, lambda req: self._answer(req, caller)).payload)
        except SimulatedCrash:
            pass
        # Under an authority this scratch journal lacks the gate refuses, but records the
        # proposal first; without one it dies as told, once the proposal is recorded.
        for entry in GateHost(memory, self.clock).entries_in_order():
            e = json.loads(entry)
            if e.get("state") == "PROPOSED":
                return dict(e["proposal"])
        raise (refused.error if refused is not None and refused.error else
               InterlockError(refused.message if refused is not None else f"a call of {tool} recorded no proposal"))

    # -- the loop

    @staticmethod
    def _answer(req: Any, caller: Caller) -> Variant:
        if isinstance(req, Question):
            return _NO_ONE
        try:
            return Variant("returned", caller(req.call.tool, json.loads(req.call.arguments)))
        except SimulatedCrash:
            raise
        except Exception as e:  # noqa: BLE001 - the component decides what an error means
            return _failure(e)

    @staticmethod
    async def _aanswer(req: Any, caller: AsyncCaller, ask: Optional[Asker] = None) -> Variant:
        if isinstance(req, Question):
            if ask is None:
                return _NO_ONE
            try:
                return Variant("returned", await ask(req.request))
            except Exception as e:  # noqa: BLE001 - no one could be asked: the call waits
                return Variant("failed", _why(e))
        timeout_ms = getattr(req, "timeout-ms")
        try:
            called = caller(req.call.tool, json.loads(req.call.arguments))
            text = await (asyncio.wait_for(called, timeout_ms / 1000) if timeout_ms is not None else called)
            return Variant("returned", text)
        except SimulatedCrash:
            raise
        except Exception as e:  # noqa: BLE001 - a timeout, a lost connection: the component decides
            return _failure(e)

    @staticmethod
    def _result(done: Any) -> ToolResult:
        reply = done.reply
        outcome = json.loads(reply.outcome)
        if done.outcome is None:  # refused before the gate was asked: nothing recorded
            detail = outcome.get("error", {})
            return ToolResult(False, reply.message, error=_error_of(detail, reply.message), extra={"error": detail})
        return ToolResult(not getattr(reply, "is-error"), reply.message, outcome, outcome.get("result"))

    def call(self, tool: str, arguments: Mapping[str, Any], caller: Caller) -> ToolResult:
        """One gated call: the premise read, the proposal, the gate's steps (every tool
        called through ``caller``), then the reply for the model."""
        host = self.host()
        first = host._call("tools.call", tool, _text(dict(arguments), "/arguments"))
        return self._result(run_machine(host, TOOLS, first, lambda req: self._answer(req, caller)).payload)

    async def acall(self, tool: str, arguments: Mapping[str, Any], caller: AsyncCaller,
                    ask: Optional[Asker] = None) -> ToolResult:
        """:meth:`call` with an async caller (the MCP proxy; ``protect()`` of async tools).
        A send waits at most the effect's ``timeout_ms``. ``ask``: how a question for the
        person who decides an approval reaches them (the proxy: an MCP elicitation)."""
        host = self.host()
        first = await host.off_loop(host._call, "tools.call", tool, _text(dict(arguments), "/arguments"))
        last = await arun_machine(host, TOOLS, first, lambda req: self._aanswer(req, caller, ask))
        return self._result(last.payload)

    def _recovering(self, claim_wait: Optional[Union[bool, ClaimWait]]) -> Tuple[GateHost, bool]:
        host = self.host()
        other = claim_wait is not None and claim_wait_of(claim_wait) != self.claim_wait
        if other:
            self._start(host, claim_wait)
        return host, other

    def _outcome(self, done: Any) -> Any:
        from .gate import to_outcome

        return to_outcome(done.outcome) if done.outcome is not None else self._result(done).error

    def recover(self, caller: Caller, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """Resolves every open effect of a gated tool (waiting out live claims); effects of
        other targets stay open, untouched."""
        host, other = self._recovering(claim_wait)

        def one(effect_id: str) -> Any:
            first = host._call("tools.recover", effect_id)
            return self._outcome(run_machine(host, TOOLS, first, lambda req: self._answer(req, caller)).payload)

        try:
            return _report(recover_each(host, one))
        finally:
            if other and not host.broken:
                self._start(host, self.claim_wait)

    async def arecover(self, caller: AsyncCaller,
                       claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        host, other = self._recovering(claim_wait)

        async def one(effect_id: str) -> Any:
            first = await host.off_loop(host._call, "tools.recover", effect_id)
            last = await arun_machine(host, TOOLS, first, lambda req: self._aanswer(req, caller))
            return self._outcome(last.payload)

        try:
            return _report(await arecover_each(host, one))
        finally:
            if other and not host.broken:
                self._start(host, self.claim_wait)


# ---------------------------------------------------------------- protect()


class Protected(Mapping[str, Callable[..., Any]]):
    """What :func:`protect` returns: the tools by name. ``tools[name](**arguments)`` calls
    one: a dict ``{"ok", "message", "outcome", "result"}`` (plus ``"error"``, a typed
    :class:`interlock.GateError`, when the call was refused before anything was recorded).
    A gated tool's ``message`` is the component's reply, the same words in every host; an
    un-gated tool is called as is and its return value is ``result``. An ``async def``
    tool's call is awaited (``await tools[name](...)``), and then its gated calls and
    :meth:`arecover` run on the event loop."""

    def __init__(self, functions: Mapping[str, Callable[..., Any]], gate: ToolGate):
        self.functions = dict(functions)
        self.gate = gate
        # A tool the configuration names with no function would be found missing only at a
        # re-check or a recovery, with the effect in flight: refused here (the component's
        # rule, the same in every host).
        gate.check_tools(list(self.functions))
        self._wrapped = {name: self._wrap(name) for name in self.functions}

    def __getitem__(self, name: str) -> Callable[..., Any]:
        return self._wrapped[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._wrapped)

    def __len__(self) -> int:
        return len(self._wrapped)

    # -- calling the plain functions

    def _call(self, tool: str, arguments: Dict[str, Any]) -> str:
        fn = self.functions.get(tool)
        if fn is None:
            raise InterlockError(f"no function was given for the tool {tool!r}")
        r = fn(**arguments)
        if inspect.isawaitable(r):
            if inspect.iscoroutine(r):
                r.close()
            raise TypeError(f"{tool} is async: call the protected tools with await")
        return _text(r, "/result")

    async def _acall(self, tool: str, arguments: Dict[str, Any]) -> str:
        fn = self.functions.get(tool)
        if fn is None:
            raise InterlockError(f"no function was given for the tool {tool!r}")
        r = fn(**arguments)
        if inspect.isawaitable(r):
            r = await r
        return _text(r, "/result")

    def _wrap(self, name: str) -> Callable[..., Any]:
        fn = self.functions[name]
        if not self.gate.is_gated(name):
            return fn  # passes through unchanged

        if inspect.iscoroutinefunction(fn):
            async def gated_async(**arguments: Any) -> Dict[str, Any]:
                return (await self.gate.acall(name, arguments, self._acall)).as_dict()

            gated_async.__name__ = name
            return gated_async

        def gated(**arguments: Any) -> Dict[str, Any]:
            return self.gate.call(name, arguments, self._call).as_dict()

        gated.__name__ = name
        return gated

    # -- life

    def recover(self) -> RecoveryReport:
        """Resolves every open effect left by an earlier run; call once, at startup."""
        return self.gate.recover(self._call)

    async def arecover(self) -> RecoveryReport:
        return await self.gate.arecover(self._acall)

    def lease(self, name: str, ttl_s: float) -> str:
        """Grants (or extends) the lease ``name`` for ``ttl_s`` seconds. Durable on return."""
        return self.gate.lease(name, ttl_s)

    def revoke_lease(self, name: str) -> None:
        self.gate.revoke_lease(name)

    def close(self) -> None:
        """Releases the journal (a directory's lock)."""
        self.gate.close()

    def __enter__(self) -> "Protected":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def protect(functions: Mapping[str, Callable[..., Any]], config: Union[str, Mapping[str, Any]], *,
            journal: Union[str, "os.PathLike[str]", None] = None, agent: str = "agent",
            authority: Optional[Mapping[str, Any]] = None, clock: Optional[Clock] = None,
            claim_wait: Union[bool, ClaimWait] = True, strict: bool = False) -> Protected:
    """Puts the gate in front of the tools the configuration lists (ARCHITECTURE.md,
    "Tool gating"); every other tool passes through unchanged. ``functions`` are plain
    functions called with the tool's arguments as keywords (``async def`` ones too): one
    raising :class:`interlock.Rejected` at the send means the tool refused and applied
    nothing; any other exception leaves the send's fate unknown, for the gate to resolve by
    the tool's tier. ``journal``: a directory or a ``sqlite://``/``postgres://`` URL (else
    ``config["journal_dir"]``). ``authority``: the host's (``{"lease": name}``) for tools
    whose configuration names none; a gated tool with neither runs under the agent's
    standing lease (announced once, here), or with ``strict=True`` is refused here
    (:class:`interlock.InvalidField` at ``/tools/<tool>/authority``), as is any problem in
    the configuration, at its JSON pointer. Call :meth:`Protected.recover` once at
    startup."""
    gate = ToolGate(config, journal=journal, agent=agent, authority=authority, clock=clock,
                    claim_wait=claim_wait, strict=strict)
    try:
        return Protected(functions, gate)
    except BaseException:
        gate.close()
        raise


__all__ = ["protect", "Protected", "ToolGate", "ToolResult", "GateTrap"]
