"""The gate as a Temporal activity body (the original's ``interlock.temporal``):

    from interlock.temporal import gated

    @activity.defn
    def refund(order: str, amount: int) -> str:
        # recovers this refund if a crash left it in flight, else submits
        return gated(refund_money.gate, refund_money.proposal(order, amount))

Temporal retries an activity whose worker died; the retry submits the same proposal, and
the gate finds the effect the dead attempt left open and recovers it under the recorded
decision (the premises re-checked, the authority re-checked, the send resolved by the
target's tier) instead of sending again blindly. Nothing here decides: which outcome a
retry gets is the gate's rule. This module only turns the gate's answer into what Temporal
understands:

- a final outcome (``COMMITTED``, ``CONFIRMED``, ``REFUSED``, ``AMBIGUOUS``) is the
  activity's result, the state's spelling (``"COMMITTED"``): a retry would only replay it;
- an effect still open because another attempt's claim is live (the dead worker's send may
  still land) is waited out here, heartbeating, exactly as long as the gate says;
- an effect left open for any other reason (the send's fate unknown, a premise read that
  failed) raises :class:`EffectOpen`, a retryable ``ApplicationError``: Temporal's next
  attempt recovers it;
- cancellation is never delivered inside a gate step (``shield_thread_cancel_exception``
  for ``def`` activities; ``async def`` ones are cancelled between steps), so a cancelled
  attempt leaves the effect open for recovery, never half-recorded.

Needs ``pip install 'interlock[temporal]'`` (temporalio).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from .decorator import EffectGate, Proposal
from .errors import MissingExtra
from .gate import Outcome, Reason, State

try:
    from temporalio import activity
    from temporalio.exceptions import ApplicationError, CancelledError
except ImportError as _e:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("interlock.temporal", "temporal", str(_e)) from None

__all__ = ["gated", "agated", "gated_outcome", "agated_outcome", "EffectOpen"]

#: The longest a claim wait goes without a heartbeat (ms): well under any sensible
#: ``heartbeat_timeout``.
HEARTBEAT_EVERY_MS = 1000


class EffectOpen(ApplicationError):
    """The effect is still open (its outcome's ``reason`` says why, ``details[0]`` is its
    effect id): retryable, so Temporal's next attempt recovers it."""

    def __init__(self, outcome: Outcome):
        super().__init__(
            f"interlock: effect {outcome.effect_id} is still open ({outcome.reason}); a retry recovers it",
            outcome.effect_id, str(outcome.reason),
            type="InterlockEffectOpen", non_retryable=False,
        )
        self.outcome = outcome


def _claim_live(o: Outcome) -> bool:
    return o.status is State.DISPATCHED and o.reason is Reason.CLAIM_LIVE


@contextmanager
def _shielded() -> Iterator[None]:
    if activity.in_activity():
        with activity.shield_thread_cancel_exception():
            yield
    else:
        yield


def _heartbeat(o: Outcome) -> None:
    if activity.in_activity():
        activity.heartbeat({"effect_id": o.effect_id, "waiting": str(o.reason)})


def _wait_sync(ms: int) -> None:
    """Sleeps ``ms``, heartbeating; a cancellation ends the wait (the effect stays open)."""
    deadline = time.monotonic() + ms / 1000
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        step = min(left, HEARTBEAT_EVERY_MS / 1000)
        if activity.in_activity():
            activity.wait_for_cancelled_sync(step)
            if activity.is_cancelled():
                raise CancelledError("cancelled while waiting out a live claim; the effect stays open")
            activity.heartbeat()
        else:
            time.sleep(step)


async def _wait_async(ms: int) -> None:
    import asyncio

    deadline = time.monotonic() + ms / 1000
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, HEARTBEAT_EVERY_MS / 1000))  # cancelled here, between steps
        if activity.in_activity():
            activity.heartbeat()


def gated_outcome(gate: EffectGate, proposal: Proposal) -> Outcome:
    """Submits ``proposal`` (the gate recovers the effect if an earlier attempt left it open);
    another worker's live claim is waited out by the gate's recovery (``recover-waiting``),
    heartbeating while it sleeps. Returns the gate's outcome, open or final."""
    with _shielded():
        o = gate.submit(proposal)
    if _claim_live(o):
        _heartbeat(o)
        with _shielded():
            o = gate.recover_effect(o.effect_id, sleep=_wait_sync)
    return o


async def agated_outcome(gate: EffectGate, proposal: Proposal) -> Outcome:
    """:func:`gated_outcome` for ``async def`` effects (``await gate.asubmit``)."""
    o = await gate.asubmit(proposal)
    if _claim_live(o):
        _heartbeat(o)
        o = await gate.arecover_effect(o.effect_id, sleep=_wait_async)
    return o


def _final(o: Outcome) -> str:
    if not o.final:
        raise EffectOpen(o)
    return str(o.status)


def gated(gate: EffectGate, proposal: Proposal) -> str:
    """The body of a ``def`` activity: the effect's final state (``"COMMITTED"``,
    ``"REFUSED"``, ``"AMBIGUOUS"``, ``"CONFIRMED"``), or :class:`EffectOpen` (retryable)
    while it is open. ``gate`` is a decorated function's ``.gate``, ``proposal`` its
    ``.proposal(...)`` (or one returned by ``Interlock.approve``)."""
    return _final(gated_outcome(gate, proposal))


async def agated(gate: EffectGate, proposal: Proposal) -> str:
    """:func:`gated` for ``async def`` activities and effects."""
    return _final(await agated_outcome(gate, proposal))
