"""The async APIs never block the event loop on a disk or on a target's sync I/O: a gate
call over a file journal (its fdatasync) and a target step that is a plain function run
in a worker thread, while the loop keeps its beat. Each test also runs the same call with
the storage marked non-blocking (gate calls on the loop, as over memory) and sees the loop
stall, so the check itself is shown to catch a blocked loop."""

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any, Awaitable, List, Tuple

import pytest
from wasmtime.component import Variant

from interlock import FakeClock, Interlock, State
from interlock.gate import GateHost, JournalRef, Request
from interlock.journal import FileJournal
from interlock.payments_sim import Payments
from interlock.targets import PaymentsTarget

SLOW_S = 0.4  # each fdatasync (or target step) takes this long
BEAT_S = 0.01
T0 = 1_800_000_000_000


async def beat_during(work: Awaitable[Any]) -> Tuple[Any, float]:
    """``work``'s result, and the longest the loop went without running the beat."""
    gaps: List[float] = []
    done = asyncio.Event()

    async def beat() -> None:
        last = started
        while not done.is_set():
            await asyncio.sleep(BEAT_S)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    started = time.monotonic()
    ticker = asyncio.create_task(beat())
    await asyncio.sleep(0)  # the beat is running before the work starts
    try:
        result = await work
    finally:
        done.set()
        await ticker
    return result, max(gaps, default=0.0)


@pytest.fixture
def slow_fsync(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    real = os.fdatasync
    calls: List[int] = []

    def slow(fd: int) -> None:
        calls.append(fd)
        time.sleep(SLOW_S)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", slow)
    return calls


def test_an_async_effect_fsyncs_off_the_loop(tmp_path: Path, slow_fsync: List[int],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with Interlock(tmp_path / ".interlock", standing_lease=True) as gate:
        @gate.effect(key=lambda order: f"refund:{order}")
        async def refund(order: str, idempotency_key: str) -> dict:
            return {"refund_id": f"re_{order}"}

        out, gap = asyncio.run(beat_during(refund("order_1")))
        assert out.status is State.COMMITTED and slow_fsync, (out, slow_fsync)
        assert gap < SLOW_S / 2, f"the loop stalled {gap:.3f} s during an fdatasync"

        # The check catches a blocked loop: the same call with the gate on the loop.
        monkeypatch.setattr(FileJournal, "blocking", False)
        out, gap = asyncio.run(beat_during(refund("order_2")))
        assert out.status is State.COMMITTED
        assert gap >= SLOW_S * 0.9, f"the loop never stalled ({gap:.3f} s) with the gate on it"


class SlowApply(PaymentsTarget):
    """The payments target whose send is a plain function doing slow sync I/O."""

    def apply(self, req: Request) -> Variant:
        time.sleep(SLOW_S)  # a sync HTTP client, say
        return super().apply(req)


def test_a_sync_target_step_in_asubmit_runs_off_the_loop(tmp_path: Path, slow_fsync: List[int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(T0)
    payments = Payments.in_memory("2")
    host = GateHost(JournalRef(FileJournal.open(tmp_path / "j")), clock)
    host.grant_lease("case-4471", T0 + 3_600_000)

    def proposal(order: str) -> str:
        payments.add_order(order, 10_000)
        return json.dumps({
            "agent": "refund-agent",
            "target": {"name": "payments", "dedupes": False, "lookup": True, "timeout_ms": 5000},
            "key": f"refund:{order}",
            "effect": {"order": order, "amount_cents": 2000},
            "authority": {"lease": "case-4471"},
            "premises": payments.premises(order),
        })

    target = SlowApply(payments, clock)
    out, gap = asyncio.run(beat_during(host.asubmit(proposal("order_1"), target)))
    assert out.status is State.COMMITTED and payments.refund_count() == 1
    assert gap < SLOW_S / 2, f"the loop stalled {gap:.3f} s during the send or an fdatasync"

    # The check catches a blocked loop: the gate on the loop (its fdatasync blocks it).
    monkeypatch.setattr(FileJournal, "blocking", False)
    out, gap = asyncio.run(beat_during(host.asubmit(proposal("order_2"), target)))
    assert out.status is State.COMMITTED
    assert gap >= SLOW_S * 0.9, f"the loop never stalled ({gap:.3f} s) with the gate on it"
