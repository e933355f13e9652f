"""Tool gating for tool-calling loops: ``protect()``, and the loop the MCP proxy runs.

    from interlock.tools import protect

    tools = protect({"get_order": get_order, "create_refund": create_refund,
                     "find_refund": find_refund}, config, authority={"lease": "case-4471"})
    tools.recover()                                    # once, at startup
    out = tools["create_refund"](order_id="881", amount_cents=2000)
    out["message"]                                     # what to hand back to the model

``config`` is the original's configuration (ARCHITECTURE.md, "Tool gating"). Which calls
are effects, and how a call becomes a premise read, a proposal, a send and a lookup, is
the component's rule (``interlock:gate/tools``); this module only runs the loop every host
runs around it and calls the tools. Nothing here decides anything.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from wasmtime.component import Variant

from ._toolgate import ToolAnswer, ToolCall, ToolMap, tool_map
from .clock import SystemClock
from .decorator import RecoveryReport
from .errors import GateError, GateTrap, InterlockError, InvalidField, Rejected, SimulatedCrash
from .gate import (
    ClaimWait,
    Clock,
    GateHost,
    JournalRef,
    Outcome,
    Request,
    applied,
    canonical_json,
    claim_wait_of,
    failed,
    found,
    not_found,
    rejected,
    unknown,
)
from .journal import FileJournal
from .sql_journal import is_url, open_url

#: A tool call made on the agent's behalf: ``(tool, arguments) -> answer``. It raises
#: :class:`interlock.Rejected` when the tool refused and applied nothing; any other
#: exception leaves a send's fate unknown.
Caller = Callable[[str, Dict[str, Any]], ToolAnswer]
AsyncCaller = Callable[[str, Dict[str, Any]], Awaitable[ToolAnswer]]



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


class _Host(GateHost):
    """The gate instance, keeping the raw outcome record each operation ends with (per
    thread), so the reply to the model quotes the gate's own JSON text."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.done = threading.local()

    def _keep(self, step: Any) -> Any:
        if step.ask.tag == "done":
            self.done.record = step.ask.payload
        return step

    def submit_step(self, proposal: str) -> Any:
        return self._keep(super().submit_step(proposal))

    def recover_step(self, effect_id: str) -> Any:
        return self._keep(super().recover_step(effect_id))

    def resume(self, op: int, reply: Variant) -> Any:
        return self._keep(super().resume(op, reply))


def _text(value: Any, at: str) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError) as e:
        raise InvalidField(at, f"is not JSON: {e}") from None


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if not isinstance(e, GateError) else str(e)


class ToolGate:
    """The tool-gating loop on one journal (ARCHITECTURE.md, "Tool gating"), for any way of
    calling tools: plain functions (:func:`protect`) or an MCP upstream (the proxy).

    ``config``: the configuration (a dict, or its JSON text); a problem raises
    :class:`interlock.InvalidField` at its JSON pointer, nothing opened. ``journal``: a
    directory or a ``sqlite://``/``postgres://`` URL, else ``config["journal_dir"]``.
    ``authority``: the host's (``{"lease": name}`` or ``{"approval": id}``), for tools
    whose configuration names none; a gated tool with neither runs under the agent's
    standing lease (granted and recorded at first use; announced here, once, on the
    ``interlock`` logger), or, with ``strict=True``, is refused here, at
    ``/tools/<tool>/authority``. ``claim_wait``: how recovery waits out a live claim."""

    def __init__(self, config: Union[str, Mapping[str, Any]], *,
                 journal: Union[str, "os.PathLike[str]", None] = None, agent: str = "agent",
                 authority: Optional[Mapping[str, Any]] = None, clock: Optional[Clock] = None,
                 claim_wait: Union[bool, ClaimWait] = True, lock_wait_ms: Optional[int] = None,
                 tools: Optional[ToolMap] = None, strict: bool = False):
        self.map = tools or tool_map()
        self.config = config if isinstance(config, str) else _text(dict(config), "")
        self.gated: List[str] = self.map.check_config(self.config)
        parsed = json.loads(self.config)  # checked by the component just above
        self.authority = None if authority is None else _text(dict(authority), "/authority")
        self.strict = strict
        standing = self.map.check_authority(self.config, self.authority, strict)
        where = journal if journal is not None else parsed.get("journal_dir")
        if where is None:
            raise InvalidField("/journal_dir", "is required when no journal is given")
        self.agent = agent
        self.claim_wait = claim_wait_of(claim_wait)
        self.clock: Clock = clock or SystemClock()
        self.journal_name = os.fsdecode(where)
        opened = open_url(self.journal_name) if is_url(where) else FileJournal.open(Path(where), lock_wait_ms)
        self._journal = JournalRef(opened)
        self._lock = threading.RLock()
        self._host: Optional[_Host] = None
        if standing:
            # Visible, never silent (the gate's words).
            logging.getLogger("interlock").warning(self.host().standing_notice(agent))

    # -- life

    def host(self) -> _Host:
        """The gate instance (a fresh one after a trap: what is durable stays)."""
        with self._lock:
            if self._journal.journal is None:
                raise InterlockError(f"this tool gate was closed; open a new one on {self.journal_name}")
            if self._host is None or self._host.broken:
                self._host = _Host(self._journal, self.clock, lock=self._lock)
                if self.strict:
                    self._host.set_strict_authority(True)
            return self._host

    def close(self) -> None:
        with self._lock:
            self._journal.close()
            self._host = None

    def is_gated(self, tool: str) -> bool:
        return tool in self.gated

    # -- authority (the journal is held open: grant and revoke through it)

    def lease(self, name: str, ttl_s: float) -> str:
        self.host().grant_lease(name, self.clock.now_ms() + int(ttl_s * 1000))
        return name

    def revoke_lease(self, name: str) -> None:
        self.host().revoke_lease(name)

    # -- the loop

    def _refused(self, tool: str, e: Exception) -> ToolResult:
        # The same words and error detail as the CLI's proxy.
        if isinstance(e, _PremiseFailed):
            message = (f"{tool} was NOT done and nothing was recorded: the facts it rests on could not be "
                       f"read ({e}). Try again later.")
            detail: Dict[str, Any] = {"kind": "premise_read_failed", "message": str(e)}
        else:
            message = f"{tool} was NOT done and nothing was recorded: {e}. Fix the call and try again."
            detail = ({"kind": "invalid_field", "field": e.field, "problem": e.problem}
                      if isinstance(e, InvalidField) else {"kind": "gate_error", "message": str(e)})
        return ToolResult(False, message, error=e, extra={"error": detail})

    def _premises(self, tool: str, pc: ToolCall, answer: ToolAnswer) -> str:
        if answer.is_error:
            raise _PremiseFailed(f"{pc.tool} answered an error: {answer.value}")
        return answer.value

    def _finish(self, tool: str, o: Outcome) -> ToolResult:
        rep = self.map.reply(tool, self.host().done.record)
        outcome = json.loads(rep.outcome)
        return ToolResult(not rep.is_error, rep.message, outcome, outcome.get("result"))

    def call(self, tool: str, arguments: Mapping[str, Any], caller: Caller) -> ToolResult:
        """One gated call: the premise read, the proposal, the gate's steps (every tool
        called through ``caller``), then the reply. A call that cannot be mapped, or
        whose premise read fails, is refused before anything is recorded."""
        try:
            args = _text(dict(arguments), "/arguments")
            pc = self.map.premise_call(self.config, tool, args)
            answer = None
            if pc is not None:
                try:
                    got = caller(pc.tool, json.loads(pc.arguments))
                except Exception as e:  # noqa: BLE001 - the model is told; nothing recorded
                    raise _PremiseFailed(f"{pc.tool} failed: {_why(e)}") from e
                answer = self._premises(tool, pc, got)
            proposal = self.map.proposal(self.config, tool, args, answer, self.agent, self.authority)
        except (GateError, _PremiseFailed) as e:
            return self._refused(tool, e)
        # The outcome's record is kept per thread: this thread's, read right after.
        try:
            o = self.host().submit(proposal, _Targets(self, caller))
        except InvalidField as e:
            return self._refused(tool, e)  # the gate refused the input: nothing recorded
        return self._finish(tool, o)

    async def acall(self, tool: str, arguments: Mapping[str, Any], caller: AsyncCaller) -> ToolResult:
        """:meth:`call` with an async caller (the MCP proxy; ``protect()`` of async tools).
        A send waits at most the effect's ``timeout_ms``."""
        try:
            args = _text(dict(arguments), "/arguments")
            pc = self.map.premise_call(self.config, tool, args)
            answer = None
            if pc is not None:
                try:
                    got = await caller(pc.tool, json.loads(pc.arguments))
                except Exception as e:  # noqa: BLE001 - the model is told; nothing recorded
                    raise _PremiseFailed(f"{pc.tool} failed: {_why(e)}") from e
                answer = self._premises(tool, pc, got)
            proposal = self.map.proposal(self.config, tool, args, answer, self.agent, self.authority)
        except (GateError, _PremiseFailed) as e:
            return self._refused(tool, e)
        # No await between the operation's last step and reading its record: the record
        # read is this operation's.
        try:
            o = await self.host().asubmit(proposal, _AsyncTargets(self, caller))
        except InvalidField as e:
            return self._refused(tool, e)  # the gate refused the input: nothing recorded
        return self._finish(tool, o)

    def recover(self, caller: Caller, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """Resolves every open effect of a gated tool (waiting out live claims); effects of
        other targets stay open, untouched."""
        wait = self.claim_wait if claim_wait is None else claim_wait
        return _report(self.host().recover_all(_Targets(self, caller), wait))

    async def arecover(self, caller: AsyncCaller,
                       claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        wait = self.claim_wait if claim_wait is None else claim_wait
        return _report(await self.host().arecover_all(_AsyncTargets(self, caller), wait))


class _PremiseFailed(InterlockError):
    """The premise read failed: nothing was recorded."""


def _report(results: Sequence[Tuple[str, Any]]) -> RecoveryReport:
    outcomes = [r for _, r in results if isinstance(r, Outcome)]
    errors = {e: r for e, r in results if not isinstance(r, Outcome)}
    return RecoveryReport(outcomes, errors)


# ---------------------------------------------------------------- the gate's steps, as tool calls


class _Steps:
    """What each step means as tool calls; the answers' meaning is the component's."""

    def __init__(self, gate: ToolGate):
        self.gate = gate
        self.map = gate.map
        self.config = gate.config

    def routes(self) -> List[str]:
        return list(self.gate.gated)

    def authorize(self, req: Request) -> Variant:
        # A tool's authority is a lease or an approval, never a host check.
        return failed("tool gating installs no host authority check")

    def _premise_call(self, req: Request) -> Union[ToolCall, Variant]:
        try:
            pc = self.map.premise_call(self.config, req.target, req.effect)
        except GateError as e:
            return failed(str(e))
        return pc if pc is not None else failed(f"{req.target} has no premise tool")

    def _captured(self, req: Request, pc: ToolCall, answer: ToolAnswer) -> Variant:
        if answer.is_error:
            return failed(f"the premise tool {pc.tool} answered an error: {answer.value}")
        try:
            return Variant("captured", self.map.premises(self.config, req.target, answer.value))
        except GateError as e:
            return failed(str(e))

    def _send_call(self, req: Request) -> Union[ToolCall, Variant]:
        try:
            return self.map.send_call(self.config, req.target, req.effect, req.idempotency_key or "")
        except GateError as e:
            return rejected(str(e))  # nothing was called: definitive

    @staticmethod
    def _applied(answer: ToolAnswer) -> Variant:
        # The tool's own error (isError) is its refusal: nothing applied.
        return rejected(answer.value) if answer.is_error else applied(answer.value)

    @staticmethod
    def _send_failed(e: BaseException) -> Variant:
        return rejected(_why(e)) if isinstance(e, Rejected) else unknown(_why(e))

    def _lookup_call(self, req: Request) -> Union[ToolCall, Variant]:
        try:
            lc = self.map.lookup_call(self.config, req.target, req.effect_id, req.effect)
        except GateError as e:
            return failed(str(e))
        return lc if lc is not None else failed(f"{req.target} has no lookup tool")

    def _found(self, req: Request, lc: ToolCall, answer: ToolAnswer) -> Variant:
        if answer.is_error:
            return failed(f"the lookup tool {lc.tool} answered an error: {answer.value}")
        try:
            return found(answer.value) if self.map.found(self.config, req.target, answer.value) else not_found()
        except GateError as e:
            return failed(str(e))


class _Targets(_Steps):
    def __init__(self, gate: ToolGate, caller: Caller):
        super().__init__(gate)
        self.caller = caller

    def _ask(self, c: ToolCall) -> ToolAnswer:
        return self.caller(c.tool, json.loads(c.arguments))

    def capture(self, req: Request) -> Variant:
        pc = self._premise_call(req)
        if isinstance(pc, Variant):
            return pc
        try:
            answer = self._ask(pc)
        except Exception as e:  # noqa: BLE001 - a read that could not be made
            return failed(_why(e))
        return self._captured(req, pc, answer)

    def apply(self, req: Request) -> Variant:
        sc = self._send_call(req)
        if isinstance(sc, Variant):
            return sc
        try:
            answer = self._ask(sc)
        except SimulatedCrash:
            raise
        except Exception as e:  # noqa: BLE001 - the gate decides what an error means
            return self._send_failed(e)
        return self._applied(answer)

    def query(self, req: Request) -> Variant:
        lc = self._lookup_call(req)
        if isinstance(lc, Variant):
            return lc
        try:
            answer = self._ask(lc)
        except Exception as e:  # noqa: BLE001 - a lookup that could not be made
            return failed(_why(e))
        return self._found(req, lc, answer)


class _AsyncTargets(_Steps):
    def __init__(self, gate: ToolGate, caller: AsyncCaller):
        super().__init__(gate)
        self.caller = caller

    async def _ask(self, c: ToolCall) -> ToolAnswer:
        return await self.caller(c.tool, json.loads(c.arguments))

    async def capture(self, req: Request) -> Variant:
        pc = self._premise_call(req)
        if isinstance(pc, Variant):
            return pc
        try:
            answer = await self._ask(pc)
        except Exception as e:  # noqa: BLE001
            return failed(_why(e))
        return self._captured(req, pc, answer)

    async def apply(self, req: Request) -> Variant:
        sc = self._send_call(req)
        if isinstance(sc, Variant):
            return sc
        # Asked before the send: a gate error here is not a send whose fate is unknown.
        timeout_ms = self.gate.host().send_timeout_ms(req.effect_id)
        try:
            answer = await asyncio.wait_for(self._ask(sc), timeout_ms / 1000)
        except Exception as e:  # noqa: BLE001 - a timeout, a lost connection: unknown
            return self._send_failed(e)
        return self._applied(answer)

    async def query(self, req: Request) -> Variant:
        lc = self._lookup_call(req)
        if isinstance(lc, Variant):
            return lc
        try:
            answer = await self._ask(lc)
        except Exception as e:  # noqa: BLE001
            return failed(_why(e))
        return self._found(req, lc, answer)


# ---------------------------------------------------------------- protect()


def _answer_of(value: Any) -> ToolAnswer:
    return ToolAnswer(False, _text(value, "/result"))


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
        gate.map.check_tools(gate.config, list(self.functions))
        self._wrapped = {name: self._wrap(name) for name in self.functions}

    def __getitem__(self, name: str) -> Callable[..., Any]:
        return self._wrapped[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._wrapped)

    def __len__(self) -> int:
        return len(self._wrapped)

    # -- calling the plain functions

    def _call(self, tool: str, arguments: Dict[str, Any]) -> ToolAnswer:
        fn = self.functions.get(tool)
        if fn is None:
            raise InterlockError(f"no function was given for the tool {tool!r}")
        r = fn(**arguments)
        if inspect.isawaitable(r):
            if inspect.iscoroutine(r):
                r.close()
            raise TypeError(f"{tool} is async: call the protected tools with await")
        return _answer_of(r)

    async def _acall(self, tool: str, arguments: Dict[str, Any]) -> ToolAnswer:
        fn = self.functions.get(tool)
        if fn is None:
            raise InterlockError(f"no function was given for the tool {tool!r}")
        r = fn(**arguments)
        if inspect.isawaitable(r):
            r = await r
        return _answer_of(r)

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


__all__ = ["protect", "Protected", "ToolGate", "ToolResult", "ToolAnswer", "ToolCall", "GateTrap"]
