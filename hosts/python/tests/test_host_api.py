"""The defaults come from the gate (docs/host-api.md, "Opening a gate"): the decorator
sends no timeout or dedupe window of its own, and the claim wait is the gate's."""

import json
from pathlib import Path

from interlock import ClaimWait, FakeClock, Interlock

T0 = 1_800_000_000_000


def test_the_proposal_leaves_the_gates_defaults_to_the_gate(tmp_path: Path) -> None:
    with Interlock(tmp_path / ".interlock", clock=FakeClock(T0), standing_lease=True) as gate:
        @gate.effect(key=lambda order: f"refund:{order}")
        def refund(order: str, idempotency_key: str) -> dict:
            return {"ok": True}

        target = refund.proposal("order_881")["target"]
        assert "timeout_ms" not in target and "dedupe_window_ms" not in target
        out = refund("order_881")
        assert gate.host().send_timeout_ms(out.effect_id) == gate.host().defaults()["timeout_ms"] == 30_000

        @gate.effect(key=lambda order: f"fast:{order}", timeout_ms=250, dedupe_window_ms=1000)
        def fast(order: str, idempotency_key: str) -> dict:
            return {"ok": True}

        assert fast.proposal("order_881")["target"]["timeout_ms"] == 250
        assert gate.host().send_timeout_ms(fast("order_881").effect_id) == 250


def test_the_claim_wait_is_the_gates_unless_given(tmp_path: Path) -> None:
    with Interlock(tmp_path / ".interlock") as gate:
        w = gate.host().defaults()["claim_wait"]
        assert (w["poll_ms"], w["max_polls"]) == (200, 150)
        assert gate.host().claim_wait(True) is None  # the gate's own

        def fields(wait):
            r = gate.host().claim_wait(wait)
            return getattr(r, "poll-ms"), getattr(r, "max-polls")

        assert fields(False) == (200, 0)
        assert fields(ClaimWait(poll_ms=5)) == (5, 150)


def test_the_standing_lease_is_granted_by_the_gate_once_and_recorded(tmp_path: Path) -> None:
    d = tmp_path / ".interlock"
    with Interlock(d, agent="refund-agent") as gate:
        assert gate.standing_lease_name() == "refund-agent-standing"
        assert not (d / "journal.jsonl").exists() or "standing" not in (d / "journal.jsonl").read_text()
        assert gate.standing_lease() == "refund-agent-standing"
        assert gate.standing_lease() == "refund-agent-standing"
    grants = [json.loads(line) for line in (d / "journal.jsonl").read_text().splitlines()
              if '"stream":"lease:refund-agent-standing"' in line]
    assert [g["state"] for g in grants] == ["GRANTED"]


def test_an_async_send_waits_at_most_the_recorded_timeout(tmp_path: Path) -> None:
    import asyncio
    import time

    with Interlock(tmp_path / ".interlock", standing_lease=True) as gate:
        @gate.effect(key=lambda order: f"refund:{order}", timeout_ms=50)
        async def refund(order: str, idempotency_key: str) -> dict:
            await asyncio.sleep(10)
            return {"ok": True}

        started = time.monotonic()
        out = asyncio.run(refund("order_881"))
        assert time.monotonic() - started < 5
        assert (out.final, out.reason) == (False, "target_unavailable")


def test_clock_skew_ms_goes_into_every_proposal_and_lengthens_the_claim(tmp_path: Path) -> None:
    d = tmp_path / ".interlock"
    with Interlock(d, clock=FakeClock(T0), standing_lease=True, clock_skew_ms=500) as gate:
        @gate.effect(key=lambda order: f"refund:{order}", timeout_ms=1000)
        def refund(order: str, idempotency_key: str) -> dict:
            return {"ok": True}

        out = refund("order_881")
    lines = [json.loads(x) for x in (d / "journal.jsonl").read_text().splitlines()]
    stream = [e for e in lines if e["stream"] == f"effect:{out.effect_id}"]
    assert stream[0]["proposal"]["target"]["clock_skew_ms"] == 500
    sent = next(e for e in stream if e["state"] == "DISPATCHED")
    assert sent["claim_until_ms"] == sent["at_ms"] + 1000 + 500
