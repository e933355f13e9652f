"""A gated step for DBOS workflows:

    from interlock.dbos import gated, gated_step

    @DBOS.step()
    def refund(order: str, amount: int) -> str:
        # recovers this refund if a crash left it in flight, else submits
        return gated(refund_money.gate, refund_money.proposal(order, amount))

    refund = gated_step(refund_money)   # the same step, made for you

DBOS recovers a killed process's workflows when the next process launches, and re-runs a
step whose output was never recorded. That re-run submits the same proposal; the gate finds
the effect the dead run left open and recovers it under the recorded decision (premises and
authority re-checked, the send resolved by the target's tier) instead of sending again
blindly. Nothing here decides what a re-run gets: that is the gate's rule. This module turns
the gate's answer into a step result:

- a final outcome (``COMMITTED``, ``CONFIRMED``, ``REFUSED``, ``AMBIGUOUS``) is the step's
  output, the state's spelling (``"COMMITTED"``), which DBOS records; a recovered workflow
  replays it without asking the gate again;
- a live claim (the dead run's send may still land) is waited out, as long as the gate says;
- an effect left open for any other reason raises :class:`EffectOpen`, so a step with
  ``retries_allowed=True`` tries again (and recovers it), and one without fails the
  workflow, the effect still open for ``gate.recover()`` at the next launch.

Needs ``pip install 'interlock[dbos]'`` (dbos).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .decorator import EffectGate, Gated, Proposal
from .errors import InterlockError, MissingExtra
from .gate import Outcome, Reason, State

try:
    from dbos import DBOS
except ImportError as _e:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("interlock.dbos", "dbos", str(_e)) from None

__all__ = ["gated", "gated_outcome", "gated_step", "EffectOpen"]


class EffectOpen(InterlockError):
    """The effect is still open (``outcome.reason`` says why): a retry of the step, or
    ``gate.recover()``, resolves it."""

    def __init__(self, outcome: Outcome):
        super().__init__(
            f"interlock: effect {outcome.effect_id} is still open ({outcome.reason}); a retry recovers it")
        self.outcome = outcome


def gated_outcome(gate: EffectGate, proposal: Proposal) -> Outcome:
    """Submits ``proposal`` (the gate recovers the effect if an earlier run left it open),
    another worker's live claim waited out by the gate's recovery (``recover-waiting``, which
    asks this host to sleep as long as it must). The gate's outcome, open or final."""
    o = gate.submit(proposal)
    if o.status is State.DISPATCHED and o.reason is Reason.CLAIM_LIVE:
        o = gate.recover_effect(o.effect_id)
    return o


def gated(gate: EffectGate, proposal: Proposal) -> str:
    """The body of a DBOS step: the effect's final state (``"COMMITTED"``, ``"REFUSED"``,
    ``"AMBIGUOUS"``, ``"CONFIRMED"``), or :class:`EffectOpen` while it is open. ``gate`` is
    a decorated function's ``.gate``, ``proposal`` its ``.proposal(...)`` (or one returned
    by ``Interlock.approve``)."""
    o = gated_outcome(gate, proposal)
    if not o.final:
        raise EffectOpen(o)
    return str(o.status)


def gated_step(fn: Gated, *, name: Optional[str] = None,
               proposal: Optional[Callable[..., Proposal]] = None, **step_options: Any) -> Callable[..., str]:
    """A DBOS step gating ``fn`` (a ``@gate.effect`` function): called with ``fn``'s
    arguments, it submits ``fn.proposal(...)`` (or ``proposal(...)``, e.g. one under an
    approval) and returns the final state. ``step_options`` go to ``DBOS.step``
    (``retries_allowed=True`` retries an effect left open)."""
    make = proposal or fn.proposal

    def step(*args: Any, **kwargs: Any) -> str:
        return gated(fn.gate, make(*args, **kwargs))

    step.__name__ = step.__qualname__ = name or f"gated_{fn.effect.name}"
    return DBOS.step(name=name or step.__name__, **step_options)(step)
