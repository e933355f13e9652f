"""Gated function tools for the OpenAI Agents SDK (``openai-agents``).

    from agents import Agent, Runner
    from interlock.openai_agents import gated_function_tools

    tools = gated_function_tools({"get_order": get_order, "create_refund": create_refund,
                                  "find_refund": find_refund}, config, authority={"lease": "case-4471"})
    tools.recover()                                    # once, at startup
    agent = Agent(name="support", model=model, tools=list(tools))

``config`` is the tool-gating configuration (ARCHITECTURE.md, "Tool gating"), the same as
the MCP proxy's and ``protect()``'s. Every tool is a plain function turned into the SDK's
``FunctionTool`` by its own ``function_tool`` (so the schema comes from the signature and
docstring, as the SDK documents); a gated tool's call goes through
:func:`interlock.tools.protect`, and the model reads the component's reply (``message``).
The idempotency argument of a gated tool is left out of the schema the model sees: the gate
supplies it. Nothing here maps a call to an effect: that is the component's rule.

Authority is the host's, fixed (``{"lease": name}``) or read per run from the run's context
(``authority=lambda ctx: {"approval": ctx.context.approval}``), so two runs under two
approvals share one journal, and its cap.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import os
import typing
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from .clock import SystemClock
from .decorator import RecoveryReport
from .errors import InterlockError, InvalidField
from .gate import ClaimWait, Clock
from .tools import Protected, ToolGate

try:  # an optional extra: pip install 'interlock[openai-agents]'
    from agents import FunctionTool, function_tool
    from agents.tool_context import ToolContext
except ImportError as e:  # pragma: no cover - the extra's absence is the user's to fix
    raise ImportError("interlock.openai_agents needs the OpenAI Agents SDK: "
                      "pip install 'interlock[openai-agents]'") from e

#: Where the authority comes from: a fixed ``{"lease": name}``/``{"approval": id}``, or a
#: function of the tool call's context (the SDK's ``ToolContext``; ``ctx.context`` is the
#: run's context object) answering one.
AuthoritySource = Union[Mapping[str, Any], Callable[[Any], Optional[Mapping[str, Any]]]]

# The authority of the call in progress (set per tool invocation; a task and the thread it
# hands the call to see their own).
_CALL_AUTHORITY: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("interlock_call_authority",
                                                                                default=None)


class _RunGate(ToolGate):
    """A :class:`ToolGate` whose host authority may be the run's: the call in progress's
    (:data:`_CALL_AUTHORITY`), else the fixed one. ToolGate keeps one session per host
    authority, read from ``self.authority`` at each call, so this is the whole of it."""

    @property
    def authority(self) -> Optional[str]:
        per_call = _CALL_AUTHORITY.get()
        return per_call if per_call is not None else self._fixed_authority

    @authority.setter
    def authority(self, value: Optional[str]) -> None:
        self._fixed_authority = value


class GatedFunctionTools(Sequence[FunctionTool]):
    """What :func:`gated_function_tools` returns: the SDK's ``FunctionTool``s (pass
    ``list(tools)`` as an agent's ``tools``), in the order given, plus the journal's life:
    :meth:`recover` at startup, leases, approvals."""

    def __init__(self, protected: Protected, tools: List[FunctionTool], calls: List[Dict[str, Any]]):
        self.protected = protected
        self.gate = protected.gate
        self._tools = tools
        #: Every gated call this object made, in order: ``{"tool", "arguments", "ok",
        #: "message", "outcome", "result"}`` (what the model was told, and the outcome).
        self.calls = calls

    def __getitem__(self, i: Any) -> Any:
        return self._tools[i]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[FunctionTool]:
        return iter(self._tools)

    def by_name(self, name: str) -> FunctionTool:
        for t in self._tools:
            if t.name == name:
                return t
        raise KeyError(name)

    def recover(self) -> RecoveryReport:
        """Resolves every open effect of a gated tool left by an earlier run (waiting out
        live claims); call once, at startup, before any run."""
        return self.protected.recover()

    def lease(self, name: str, ttl_s: float) -> str:
        """Grants (or extends) the lease ``name`` for ``ttl_s`` seconds. Durable on return."""
        return self.protected.lease(name, ttl_s)

    def revoke_lease(self, name: str) -> None:
        self.protected.revoke_lease(name)

    def approve(self, approval: str, approver: str, tool: str, arguments: Mapping[str, Any], *,
                expires_at_ms: Optional[int] = None) -> Dict[str, Any]:
        """Records the approval ``approval`` of exactly this call (the request the component
        maps it to: its key and effect), with the premises the approver sees now (the
        premise tool is read). Durable on return; returns the approval as recorded. A call
        that cannot be mapped, or whose premise read fails, is refused (an
        :class:`interlock.InterlockError`), nothing recorded."""
        proposal = self.gate.proposal(tool, arguments, self.protected._call)
        return self.gate.approve(approval, approver, proposal, expires_at_ms)

    def revoke_approval(self, approval: str) -> None:
        """Revokes an approval (durable on return): an effect under it that has not been
        sent is REFUSED ``approval_revoked``, at its send or at recovery."""
        self.gate.host().revoke_approval(approval)

    def close(self) -> None:
        """Releases the journal (a directory's lock)."""
        self.protected.close()

    def __enter__(self) -> "GatedFunctionTools":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _authority_text(source: AuthoritySource, ctx: Any) -> Optional[str]:
    a = source(ctx) if callable(source) else source
    return None if a is None else json.dumps(dict(a))


def _function_tool(name: str, fn: Callable[..., Any], protected: Protected, idempotency_argument: Optional[str],
                   authority: Optional[AuthoritySource], options: Mapping[str, Any],
                   calls: List[Dict[str, Any]]) -> FunctionTool:
    """The SDK's FunctionTool for a gated tool: ``fn``'s schema without the idempotency
    argument, a ToolContext first (the run's authority), the call through ``protected``."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    params = [p for n, p in sig.parameters.items() if n != idempotency_argument]
    call = protected[name]
    is_async = inspect.iscoroutinefunction(call)

    async def invoke(ctx: ToolContext[Any], *args: Any, **kwargs: Any) -> str:
        arguments = inspect.Signature(params).bind(*args, **kwargs).arguments
        token = _CALL_AUTHORITY.set(_authority_text(authority, ctx) if authority is not None else None)
        try:
            if is_async:
                out = await call(**arguments)
            else:
                # The gate's loop blocks on the journal and the tool: off the event loop, so
                # concurrent runs (and their tool calls) really run at once.
                out = await asyncio.to_thread(call, **arguments)
        finally:
            _CALL_AUTHORITY.reset(token)
        calls.append({"tool": name, "arguments": dict(arguments), **out})
        return str(out["message"])

    ctx_param = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=ToolContext)
    invoke.__signature__ = sig.replace(parameters=[ctx_param, *params], return_annotation=str)  # type: ignore[attr-defined]
    invoke.__annotations__ = {**{p.name: hints[p.name] for p in params if p.name in hints},
                              "ctx": ToolContext, "return": str}
    invoke.__name__ = name
    invoke.__qualname__ = name
    invoke.__doc__ = fn.__doc__
    return function_tool(invoke, name_override=name, **dict(options))


def gated_function_tools(functions: Mapping[str, Callable[..., Any]], config: Union[str, Mapping[str, Any]], *,
                         authority: Optional[AuthoritySource] = None,
                         journal: Union[str, "os.PathLike[str]", None] = None, agent: str = "agent",
                         clock: Optional[Clock] = None, claim_wait: Union[bool, ClaimWait] = True,
                         options: Optional[Mapping[str, Mapping[str, Any]]] = None,
                         strict: bool = False) -> GatedFunctionTools:
    """The SDK's function tools for ``functions`` (plain functions, ``async def`` too), the
    ones the configuration lists gated (ARCHITECTURE.md, "Tool gating"), the others made by
    ``function_tool`` unchanged. ``authority``: the host's, for gated tools whose
    configuration names none: a dict, or a function of the call's ``ToolContext``
    answering one per run. A call with no authority at all runs under the agent's standing
    lease; with ``strict=True`` it is refused (a tool with none is refused here,
    :class:`interlock.InvalidField` at ``/tools/<tool>/authority``; a run without one is
    refused that call, nothing recorded). Any problem in the configuration is refused
    here, at its JSON pointer. ``options``: per tool, keyword arguments for ``function_tool``
    (``{"create_refund": {"needs_approval": True}}``). ``journal``, ``agent``, ``clock``,
    ``claim_wait``: as :func:`interlock.tools.protect`."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(functions))
    if unknown:
        raise InvalidField(f"/options/{unknown[0]}", "names no tool given")
    dynamic = callable(authority)
    fixed = None if dynamic or authority is None else dict(authority)  # type: ignore[arg-type]
    # A per-run source answers at each call; the start check needs to know one exists.
    # The placeholder never reaches a proposal: it is dropped right after the check.
    start_authority = {"approval": "(the run's)"} if dynamic else fixed
    gate = _RunGate(config, journal=journal, agent=agent, authority=start_authority,
                    clock=clock or SystemClock(), claim_wait=claim_wait, strict=strict)
    if dynamic:
        gate.authority = None
    try:
        protected = Protected(functions, gate)
        parsed = json.loads(gate.config)
        out: List[FunctionTool] = []
        calls: List[Dict[str, Any]] = []
        for name, fn in functions.items():
            opts = options.get(name, {})
            if gate.is_gated(name):
                spec = parsed["tools"][name]
                out.append(_function_tool(name, fn, protected, spec.get("idempotency_argument"),
                                          authority if dynamic else None, opts, calls))
            else:
                out.append(function_tool(fn, name_override=name, **dict(opts)))
        return GatedFunctionTools(protected, out, calls)
    except BaseException:
        gate.close()
        raise


__all__ = ["gated_function_tools", "GatedFunctionTools", "AuthoritySource", "InterlockError"]
