"""Bindings of the component's ``interlock:gate/tools`` interface (wit/tools.wit): which tool
calls are effects, and how a call becomes a premise read, a proposal, a send and a lookup.

The mapping is a rule, so it lives in the component only; these are thin calls, JSON text
in and out, a ``gate-error`` raised as its :class:`interlock.GateError` (``InvalidField``
with the JSON pointer of the problem). The functions record nothing, so they run on an
instance of their own, whose journal imports are never called (they answer an error if a
future component did).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional

import wasmtime
from wasmtime import Store
from wasmtime.component import Linker, Record, Variant

from .errors import GateTrap, gate_error
from .gate import CLOCK_PREFIX, GATE_WASM, JOURNAL_INTERFACE, _Datetime, engine, load_component, wasm_path

TOOLS_INTERFACE = "interlock:gate/tools@0.1.0"
_EXPORTS = ("check-config", "check-authority", "check-tools", "premise-call", "proposal", "send-call",
            "lookup-call", "premises", "mcp-answer", "reply", "found")


@dataclass(frozen=True)
class ToolCall:
    """A call the host makes on the agent's behalf; ``arguments`` is canonical JSON text."""

    tool: str
    arguments: str


@dataclass(frozen=True)
class ToolAnswer:
    """An MCP tool result as the mapping reads it; ``value`` is canonical JSON text."""

    is_error: bool
    value: str


@dataclass(frozen=True)
class ToolReply:
    """What a gated call answers the model; ``outcome`` is JSON text."""

    is_error: bool
    message: str
    outcome: str


def _no_journal(*_args: Any) -> Variant:
    return Variant("other", "the tools interface has no journal")


class ToolMap:
    """One instance of the gate component, for its ``tools`` export. Safe to share between
    threads (one call at a time enters the instance)."""

    def __init__(self, wasm: Optional[Path] = None):
        self._lock = threading.Lock()
        component = load_component(wasm or wasm_path(GATE_WASM))
        eng = engine()
        clock_name = next((n for n in component.type.imports(eng) if n.startswith(CLOCK_PREFIX)), None)
        if clock_name is None:
            raise GateTrap("the gate component does not import wasi:clocks/wall-clock")
        linker = Linker(eng)
        with linker.root() as root:
            with root.add_instance(clock_name) as wc:
                # The mapping reads no time; a fixed instant keeps it that way.
                wc.add_func("now", lambda _s: _Datetime(0, 0))
                wc.add_func("resolution", lambda _s: _Datetime(0, 1_000_000))
            with root.add_instance(JOURNAL_INTERFACE) as j:
                for name in ("append", "read", "length", "open-streams", "streams", "sync"):
                    j.add_func(name, _no_journal)
        self._store = Store(eng)
        try:
            instance = linker.instantiate(self._store, component)
        except wasmtime.WasmtimeError as e:
            raise GateTrap(f"the gate component does not fit this host's imports: {e}") from e
        self._linker = linker
        ti = instance.get_export_index(self._store, TOOLS_INTERFACE)
        if ti is None:
            raise GateTrap(f"the component does not export {TOOLS_INTERFACE}: rebuild it (scripts/build-wasm.sh)")
        self._funcs = {}
        for name in _EXPORTS:
            idx = instance.get_export_index(self._store, name, ti)
            func = instance.get_func(self._store, idx) if idx is not None else None
            if func is None:
                raise GateTrap(f"the gate component lacks the tools export {name!r}")
            self._funcs[name] = func

    def _call(self, name: str, *args: Any, fallible: bool = True) -> Any:
        with self._lock:
            try:
                r = self._funcs[name](self._store, *args)
            except (wasmtime.WasmtimeError, wasmtime.Trap) as e:
                raise GateTrap(f"the gate component trapped in tools.{name}: {e}") from e
        if fallible and isinstance(r, Variant):
            raise gate_error(r.tag, r.payload)
        return r

    @staticmethod
    def _tool_call(r: Any) -> Optional[ToolCall]:
        return None if r is None else ToolCall(r.tool, r.arguments)

    def check_config(self, config: str) -> List[str]:
        """The tools the configuration gates; a problem is InvalidField at its pointer."""
        return list(self._call("check-config", config))

    def check_tools(self, config: str, available: List[str]) -> None:
        """Every tool the configuration names (gated, premise, lookup) is in ``available``;
        else InvalidField at its pointer (``/tools/<tool>/lookup/tool``)."""
        self._call("check-tools", config, list(available))

    def check_authority(self, config: str, authority: Optional[str], strict: bool = False) -> List[str]:
        """Checks ``authority`` (the host's) and, when ``strict``, that every gated tool has
        authority, its own or the host's (else InvalidField at ``/tools/<tool>/authority``).
        The gated tools that will run under the agent's standing lease."""
        return list(self._call("check-authority", config, authority, strict))

    def premise_call(self, config: str, tool: str, arguments: str) -> Optional[ToolCall]:
        return self._tool_call(self._call("premise-call", config, tool, arguments))

    def proposal(self, config: str, tool: str, arguments: str, premises: Optional[str], agent: str,
                 authority: Optional[str]) -> str:
        return str(self._call("proposal", config, tool, arguments, premises, agent, authority))

    def send_call(self, config: str, tool: str, arguments: str, idempotency_key: str) -> ToolCall:
        r = self._tool_call(self._call("send-call", config, tool, arguments, idempotency_key))
        assert r is not None
        return r

    def lookup_call(self, config: str, tool: str, effect_id: str, recorded_effect: str) -> Optional[ToolCall]:
        return self._tool_call(self._call("lookup-call", config, tool, effect_id, recorded_effect))

    def premises(self, config: str, tool: str, answer: str) -> str:
        return str(self._call("premises", config, tool, answer))

    def mcp_answer(self, tool_result: str) -> ToolAnswer:
        r = self._call("mcp-answer", tool_result)
        return ToolAnswer(bool(getattr(r, "is-error")), r.value)

    def found(self, config: str, tool: str, answer: str) -> bool:
        return bool(self._call("found", config, tool, answer))

    def reply(self, tool: str, outcome: Record) -> ToolReply:
        """``outcome`` is the WIT record the gate answered (kept raw, so the message quotes
        the gate's own JSON text)."""
        r = self._call("reply", tool, outcome, fallible=False)
        return ToolReply(bool(getattr(r, "is-error")), r.message, r.outcome)


_SHARED: Optional[ToolMap] = None
_SHARED_LOCK = threading.Lock()


def tool_map() -> ToolMap:
    """The process's one :class:`ToolMap`."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ToolMap()
        return _SHARED
