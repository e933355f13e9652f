"""Tool gating for LangChain and LangGraph: BaseTool in, BaseTool out.

    from interlock.langchain_tools import protect_tools

    tools = protect_tools([get_order, create_refund, find_refund], config, authority={"lease": "case-4471"})
    tools.recover()                                   # once, at startup
    agent = create_react_agent(model, tools, checkpointer=checkpointer)

``config`` is the tool-gating configuration (ARCHITECTURE.md, "Tool gating"), the same as
the MCP proxy's and ``protect()``'s. A gated tool becomes a ``StructuredTool`` with the same
name, description and arguments whose call runs the tool-gating loop of
:mod:`interlock.tools` (the mapping is the component's; nothing here decides): the model gets
the component's message as the tool's content, and the outcome as its artifact
(``ToolMessage.artifact``). Every other tool is passed through, the same object.

Why it matters in LangGraph: a graph resumed from its checkpointer after a crash re-runs the
tool node that was running, so the refund is called again. Through the gate that second
call is the same effect: replayed if it committed, refused if the world changed during the
outage, and never sent twice.

Needs ``langchain-core`` (``pip install 'interlock[langchain]'``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .decorator import RecoveryReport
from .errors import GateError, InterlockError, MissingExtra
from .gate import ClaimWait, Clock, canonical_json
from .tools import ToolGate, ToolResult

try:
    from langchain_core.tools import BaseTool, StructuredTool
except ImportError as e:  # pragma: no cover - the extra is missing
    raise MissingExtra("interlock.langchain_tools", "langchain", str(e)) from e


def _answer_of(value: Any) -> str:
    # A tool's answer as JSON text: a str that is JSON is that JSON (as an MCP text result
    # is read), a ToolMessage its content, any other value its own JSON.
    if isinstance(value, str):
        try:
            return canonical_json(json.loads(value))
        except ValueError:
            pass
    content = getattr(value, "content", None)  # a ToolMessage (a tool invoked with a ToolCall)
    if content is not None and not isinstance(value, (dict, list)):
        return _answer_of(content)
    return canonical_json(value)


class ProtectedTools(List[BaseTool]):
    """What :func:`protect_tools` returns: the tools, as a list (give it to an agent as is),
    plus the gate's life: :meth:`recover` (once at startup), leases, approvals, ``close``.
    ``gate`` is the :class:`interlock.tools.ToolGate`."""

    def __init__(self, originals: Sequence[BaseTool], gate: ToolGate):
        self.originals: Dict[str, BaseTool] = {t.name: t for t in originals}
        self.gate = gate
        gate.check_tools(list(self.originals))
        super().__init__(self._wrap(t) if gate.is_gated(t.name) else t for t in originals)

    # -- calling the original tools (the gate's steps, and pass-through)

    def _call(self, tool: str, arguments: Dict[str, Any]) -> str:
        t = self.originals.get(tool)
        if t is None:
            raise InterlockError(f"no tool named {tool!r} was given")
        return _answer_of(t.invoke(arguments))

    async def _acall(self, tool: str, arguments: Dict[str, Any]) -> str:
        t = self.originals.get(tool)
        if t is None:
            raise InterlockError(f"no tool named {tool!r} was given")
        return _answer_of(await t.ainvoke(arguments))

    @staticmethod
    def _content(r: ToolResult) -> Tuple[str, Dict[str, Any]]:
        artifact = r.as_dict()
        if "error" in artifact:
            artifact["error"] = str(artifact["error"])
        artifact.update(r.extra)
        return r.message, artifact

    def _wrap(self, tool: BaseTool) -> BaseTool:
        name = tool.name

        def run(**arguments: Any) -> Tuple[str, Dict[str, Any]]:
            return self._content(self.gate.call(name, _given(arguments), self._call))

        async def arun(**arguments: Any) -> Tuple[str, Dict[str, Any]]:
            return self._content(await self.gate.acall(name, _given(arguments), self._acall))

        return StructuredTool.from_function(
            func=run, coroutine=arun, name=name, description=tool.description,
            args_schema=tool.args_schema, infer_schema=False, response_format="content_and_artifact",
            return_direct=tool.return_direct,
        )

    # -- life

    def recover(self, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """Resolves every open effect an earlier run left (waiting out live claims); call
        once at startup, before the graph resumes."""
        return self.gate.recover(self._call, claim_wait)

    async def arecover(self, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        return await self.gate.arecover(self._acall, claim_wait)

    def lease(self, name: str, ttl_s: float) -> str:
        """Grants (or extends) the lease ``name`` for ``ttl_s`` seconds. Durable on return."""
        return self.gate.lease(name, ttl_s)

    def revoke_lease(self, name: str) -> None:
        self.gate.revoke_lease(name)

    def approve(self, approval: str, approver: str, tool: str, arguments: Mapping[str, Any], *,
                expires_at_ms: Optional[int] = None) -> Dict[str, Any]:
        """Records ``approver``'s approval of exactly this call (its key and effect, as the
        component maps the call, with the premises read now as what the approver saw).
        The call then runs under it when the tool's authority (or ``protect_tools``'s) is
        ``{"approval": approval}``. Returns the approved proposal."""
        proposal = self.gate.proposal(tool, arguments, self._call)
        self.gate.approve(approval, approver, proposal, expires_at_ms)
        proposal["authority"] = {"approval": approval}
        return proposal

    def revoke_approval(self, approval: str) -> None:
        self.gate.host().revoke_approval(approval)

    def close(self) -> None:
        """Releases the journal (a directory's lock)."""
        self.gate.close()

    def __enter__(self) -> "ProtectedTools":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _given(arguments: Dict[str, Any]) -> Dict[str, Any]:
    # LangChain fills unset optional arguments with None; an argument the model did not
    # give is not part of the call (the effect is what was asked for).
    return {k: v for k, v in arguments.items() if v is not None}


def protect_tools(tools: Iterable[BaseTool], config: Union[str, Mapping[str, Any]], *,
                  journal: Union[str, "os.PathLike[str]", None] = None, agent: str = "agent",
                  authority: Optional[Mapping[str, Any]] = None, clock: Optional[Clock] = None,
                  claim_wait: Union[bool, ClaimWait] = True, strict: bool = False) -> ProtectedTools:
    """Puts the gate in front of the LangChain tools the configuration lists; the others
    pass through unchanged. ``journal``: a directory or a ``sqlite://``/``postgres://``
    URL (else ``config["journal_dir"]``). ``authority``: the host's (``{"lease": name}`` or
    ``{"approval": id}``) for tools whose configuration names none; a gated tool with
    neither runs under the agent's standing lease (``strict=True``: refused). A
    configuration problem, or a gated tool not given, is refused here
    (:class:`interlock.InvalidField` at its JSON pointer), nothing opened or recorded. A
    tool raising :class:`interlock.Rejected` at the send means it refused and applied
    nothing; any other exception leaves the send's fate unknown, for the gate to resolve by
    the tool's tier. Call :meth:`ProtectedTools.recover` once at startup."""
    tools = list(tools)
    # A gated tool not given is refused before the journal is opened (nothing created).
    gate = ToolGate(config, journal=journal, agent=agent, authority=authority, clock=clock, claim_wait=claim_wait,
                    strict=strict, available=[t.name for t in tools])
    try:
        return ProtectedTools(tools, gate)
    except (GateError, InterlockError, TypeError):
        gate.close()
        raise


__all__ = ["protect_tools", "ProtectedTools"]
