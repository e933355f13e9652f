"""Google ADK (``google-adk``): the original's ``Guard``, a ``before_tool_callback`` that
sends a tool's effect through the gate.

    from interlock.integrations.adk import Guard
    guard = Guard(".interlock/adk", leases)
    guard.gate("issue_refund",
               target_for=lambda effect: refunds,   # an EffectTarget: capture, validate_premises, apply, query
               proposal=lambda args, ctx: {"lease": "case-4471", "request_id": "case-4471",
                                           "premises": ctx.state["premises"],
                                           "effect": {"order": args["order_id"], "amount": args["amount"]}})
    agent = LlmAgent(name="support", model=..., tools=[issue_refund],
                     before_tool_callback=guard.before_tool_callback)
    guard.recover()  # once, when the process starts

A gated tool's call never runs the tool's body: the callback answers it (ADK uses a
callback's dict as the tool's response), after the effect went through the original's
low-level gate (:class:`interlock.lowlevel.Gate`): the proposal is the original's shape
(``agent`` defaults to the ADK agent's name), the target the ``EffectTarget`` the effect
is sent to. Every rule (identity from ``request_id``, authority, the re-check, recovery by
tier) is the component's.

Each gated tool has its own journal, ``<dir>/<tool name>`` (a low-level gate is one target
on one journal). An AP2 mandate (``ap2.types.mandate.CartMandate``, or any object with its
fields) can be the approval: :meth:`Guard.approve_mandate`.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from ..decorator import Interlock, RecoveryReport
from ..errors import InterlockError, InvalidField
from ..gate import Outcome
from ..lowlevel import Gate

Proposal = Callable[[Dict[str, Any], Any], Mapping[str, Any]]
TargetFor = Callable[[Dict[str, Any]], Any]


class _Gated:
    def __init__(self, name: str, target_for: TargetFor, proposal: Proposal):
        self.name = name
        self.target_for = target_for
        self.proposal = proposal
        self.gate: Optional[Gate] = None


class Guard:
    """The gate for an ADK agent's tools. ``dir``: the journals' folder (one journal per
    gated tool, ``<dir>/<name>``). ``leases``: the lease store the low-level gate asks
    (:class:`interlock.lowlevel.Leases`, or any object with ``is_live``), or None when
    every proposal names an approval. ``claim_ttl``: how long a send may take, in seconds
    (the claim a recovery waits out; default: the gate's)."""

    def __init__(self, dir: Union[str, "os.PathLike[str]"], leases: Any = None, *, agent: Optional[str] = None,
                 claim_ttl: Optional[float] = None):
        self.dir = Path(dir)
        self.leases = leases
        self.claim_ttl = claim_ttl
        self.agent = agent
        self._gated: Dict[str, _Gated] = {}
        self._lock = threading.RLock()
        #: Every gated call's outcome, in order: ``(tool, args, Outcome)``.
        self.outcomes: List[Any] = []

    # -- declaring

    def gate(self, name: str, *, target_for: TargetFor, proposal: Proposal) -> None:
        """Gates the tool ``name``: ``proposal(args, tool_context)`` makes the original's
        proposal (``agent``, ``lease`` or ``approval``, ``premises``, ``effect``,
        ``request_id``) when the model calls it; ``target_for(effect)`` is the
        EffectTarget the effect is sent to."""
        if not name or "/" in name or name.startswith("."):
            raise InvalidField("/name", f"{name!r} cannot name a tool's journal folder")
        with self._lock:
            self._gated[name] = _Gated(name, target_for, proposal)

    def _gate_for(self, g: _Gated, effect: Dict[str, Any]) -> Gate:
        with self._lock:
            if g.gate is None:
                g.gate = Gate(g.target_for(effect), self.dir / g.name, self.leases, agent=self.agent or "agent",
                              claim_ttl=self.claim_ttl)
            return g.gate

    # -- the callback

    def before_tool_callback(self, tool: Any, args: Dict[str, Any], tool_context: Any) -> Optional[Dict[str, Any]]:
        """ADK's ``before_tool_callback``: None for a tool that is not gated (ADK runs it);
        for a gated one, the effect sent through the gate and the tool's response:
        ``{"status", "reason", "effect_id", "executed", "result", "changed", "return_to"}``
        (``status`` ``COMMITTED`` when it happened; REFUSED and AMBIGUOUS say why and who to
        ask). A proposal the gate cannot take is an ``{"status": "ERROR", "error": ...}``
        response, nothing recorded."""
        g = self._gated.get(getattr(tool, "name", None) or "")
        if g is None:
            return None
        try:
            p = dict(g.proposal(dict(args), tool_context))
            p.setdefault("agent", self.agent or str(getattr(tool_context, "agent_name", None) or "agent"))
            if "effect" not in p:
                raise InvalidField("/effect", "is required")
            gate = self._gate_for(g, p["effect"])
            o = gate.submit(p)
        except (InterlockError, KeyError, TypeError) as e:
            return {"status": "ERROR", "error": f"{type(e).__name__}: {e}",
                    "message": f"{g.name} was NOT done and nothing was recorded: {e}"}
        self.outcomes.append((g.name, dict(args), o))
        return _response(o)

    # -- the journal's life

    def recover(self) -> RecoveryReport:
        """Resolves every open effect of every gated tool (re-checking authority and
        premises first; waiting out live claims); call once, when the process starts,
        after the ``gate(...)`` calls."""
        outcomes: List[Outcome] = []
        errors: Dict[str, Exception] = {}
        for g in list(self._gated.values()):
            folder = self.dir / g.name
            if g.gate is None:
                if not (folder / "journal.jsonl").exists():
                    continue
                effect = _an_open_effect(folder)
                if effect is None:
                    continue
                self._gate_for(g, effect)
            assert g.gate is not None
            report = g.gate.recover()
            outcomes.extend(report)
            errors.update(report.errors)
        return RecoveryReport(outcomes, errors)

    def approve_mandate(self, name: str, mandate: Any, args: Dict[str, Any], tool_context: Any = None) -> str:
        """Records an AP2 mandate as the approval of exactly the call ``name(**args)`` (its
        proposal, as ``proposal`` makes it for ``tool_context``): the approval id is the
        cart's id, the approver its merchant, its expiry the cart's ``cart_expiry``.
        Returns the approval id (the proposal's ``approval`` names it)."""
        g = self._gated.get(name)
        if g is None:
            raise InvalidField(f"/{name}", "is not a gated tool")
        contents = getattr(mandate, "contents", mandate)
        approval = str(contents.id)
        expiry = getattr(contents, "cart_expiry", None)
        p = dict(g.proposal(dict(args), tool_context))
        p.setdefault("agent", self.agent or "agent")
        gate = self._gate_for(g, p["effect"])
        gate.approve(approval, str(getattr(contents, "merchant_name", "ap2-merchant")),
                     {k: v for k, v in p.items() if k != "approval"},
                     expires_at_ms=None if expiry is None else int(datetime.fromisoformat(expiry).timestamp() * 1000))
        return approval

    def revoke_approval(self, name: str, approval: str, effect: Dict[str, Any]) -> None:
        g = self._gated[name]
        self._gate_for(g, effect).revoke_approval(approval)

    def close(self) -> None:
        with self._lock:
            for g in self._gated.values():
                if g.gate is not None:
                    g.gate.close()
                    g.gate = None

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _response(o: Outcome) -> Dict[str, Any]:
    return {"status": str(o.status), "reason": None if o.reason is None else str(o.reason),
            "effect_id": o.effect_id, "executed": str(o.executed), "result": o.result,
            "changed": [{"name": c.name, "was": c.was, "now": c.now} for c in o.changed],
            "return_to": o.return_to}


def _an_open_effect(folder: Path) -> Optional[Dict[str, Any]]:
    """The recorded effect of an open effect in a tool's journal (to ask ``target_for``
    which target recovers it); None when nothing is open."""
    i = Interlock(str(folder))
    try:
        open_ids = i.open_effects()
        if not open_ids:
            return None
        effect = i.receipt(open_ids[0])["effect"]
        return effect if isinstance(effect, dict) else json.loads(json.dumps(effect))
    finally:
        i.close()


__all__ = ["Guard"]
