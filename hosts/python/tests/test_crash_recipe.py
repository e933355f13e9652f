"""The original's "crash test per effect" recipe (step 6 of the landing page's "Install with
your AI"), as written: its code is tests/seeds/crash_test.py (the step's words are its
comments). Submit with crash_after_effect=True (SimulatedCrash), a new Interlock on the same
directory, decorate the same function again, recover(), check the status, assert one effect
at the target."""

import asyncio

import pytest

from interlock import AMBIGUOUS, COMMITTED, Interlock, SimulatedCrash
from interlock.payments_sim import Payments
from test_seeds import exec_seed

ORDER = "order_881"


def service(tmp_path, tier):
    p = Payments.create(tmp_path / "payments.json", tier)
    p.add_order(ORDER, 10_000)
    return p


def decorate(gate, payments, tier):
    dedupes = tier.startswith("1")
    def find(order, amount, idempotency_key):
        return payments.find_by_reference(idempotency_key)

    lookup = find if tier in ("2", "1+lookup") else None

    @gate.effect(
        key=lambda order, amount: f"refund:{order}",
        premises=lambda order, amount, idempotency_key: {
            "eligible": payments.premises(order, idempotency_key)["eligible"],
            "refunded_by_others": payments.premises(order, idempotency_key)["refunded_by_others_cents"],
        },
        lookup=lookup,
        dedupes=dedupes,
        timeout_ms=300,  # the claim recovery must wait out after the crash
    )
    def refund_money(order, amount, idempotency_key):
        return payments.refund(order, amount, idempotency_key=idempotency_key, reference=idempotency_key)

    return refund_money


@pytest.mark.parametrize("tier,status,via", [
    ("3", AMBIGUOUS, None),
    ("2", COMMITTED, "recovery-query"),
    ("1", COMMITTED, "recovery-retry"),
])
def test_crash_after_effect_then_recover(tmp_path, tier, status, via):
    payments = service(tmp_path, tier)
    directory = tmp_path / ".interlock"
    # The recipe as written (tests/seeds/crash_test.py), given the effect it tests.
    ns = exec_seed("crash_test.py", {
        "fn": decorate(Interlock(directory), payments, tier), "args": (ORDER, 2000), "directory": directory,
        "decorate": lambda gate: decorate(gate, payments, tier), "expected": status, "service": payments})
    gate, outcome = ns["gate"], ns["outcome"]
    assert gate.open_effects() == []
    receipt = outcome.receipt()
    assert receipt.final == status
    if via:
        assert receipt.via == via
    if status == AMBIGUOUS:
        assert outcome.reason == "no_dedupe_no_lookup"
        assert receipt.executed == "unknown"
    assert payments.refund_count() == 1  # the target recorded one effect
    assert payments.refunded_cents(ORDER) == 2000
    assert gate.verify().ok


def test_the_crashed_interlock_is_dead_and_released_its_lock(tmp_path):
    payments = service(tmp_path, "3")
    gate = Interlock(tmp_path / ".interlock", standing_lease=True)
    refund_money = decorate(gate, payments, "3")
    with pytest.raises(SimulatedCrash):
        refund_money.gate.submit(refund_money.proposal(ORDER, 2000), crash_after_effect=True)
    with pytest.raises(Exception, match="crashed"):
        gate.recover()
    Interlock(tmp_path / ".interlock").close()  # the lock was released, as at process exit


def test_async_effect_crash_and_awaitable_recover(tmp_path):
    payments = service(tmp_path, "2")

    def decorate_async(gate):
        async def premises(order, amount, idempotency_key):
            await asyncio.sleep(0)
            return payments.premises(order, idempotency_key)

        async def lookup(order, amount, idempotency_key):
            await asyncio.sleep(0)
            return payments.find_by_reference(idempotency_key)

        @gate.effect(key=lambda order, amount: f"refund:{order}", premises=premises,
                     lookup=lookup, timeout_ms=300)
        async def refund_money(order, amount, idempotency_key):
            await asyncio.sleep(0)
            return payments.refund(order, amount, reference=idempotency_key)

        return refund_money

    async def main():
        gate = Interlock(tmp_path / ".interlock", standing_lease=True)
        refund_money = decorate_async(gate)
        proposal = await refund_money.aproposal(ORDER, 2000)
        with pytest.raises(SimulatedCrash):
            await refund_money.gate.asubmit(proposal, crash_after_effect=True)
        gate = Interlock(tmp_path / ".interlock", standing_lease=True)
        refund_money = decorate_async(gate)
        recovered = await gate.arecover()
        assert [o.status for o in recovered] == [COMMITTED]
        again = await refund_money(ORDER, 2000)  # the same request: the first outcome
        assert again.status == COMMITTED and again.replayed
        payments.add_order("order_882", 500)
        other = await refund_money.aproposal("order_882", 100)
        with pytest.raises(TypeError, match="async"):
            gate.submit(other)  # the sync API refuses an async effect, clearly
        assert gate.open_effects() == []  # and leaves nothing open: nothing was written

    asyncio.run(main())
    assert payments.refund_count() == 1
