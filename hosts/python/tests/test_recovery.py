"""Recovery through the decorator API: targets this Interlock cannot reach, host checks
that cannot be made, live claims reported instead of waited out, and receipts that count
only real sends."""

import asyncio
from typing import List

import pytest

from interlock import COMMITTED, PROPOSED, ClaimWait, FakeClock, Interlock, JournalFailed, SimulatedCrash
from interlock.payments_sim import Payments

T0 = 1_800_000_000_000
ORDER = "order_881"


def define_payments(gate, payments, allowed=None, premises=True, sends=None, timeout_ms=1000):
    """The refund as the target "payments" (the CLI's name for it)."""
    dedupes = payments.tier().startswith("1")
    lookup = None
    if payments.tier() in ("2", "1+lookup"):
        lookup = lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key)  # noqa: E731
    read = None
    if premises:
        read = lambda order, amount, idempotency_key: payments.premises(order, idempotency_key)  # noqa: E731

    @gate.effect(name="payments", key=lambda order, amount: f"refund:{order}", premises=read,
                 allowed=allowed, lookup=lookup, dedupes=dedupes, timeout_ms=timeout_ms)
    def refund(order, amount, idempotency_key):
        if sends is not None:
            sends.append(idempotency_key)
        return payments.refund(order, amount, idempotency_key=idempotency_key, reference=idempotency_key)

    return refund


def crashed_after_the_send(tmp_path, tier, *, before=False, **kw):
    """A journal left with an open DISPATCHED refund whose send landed at the service (or,
    with before=True, never left)."""
    payments = Payments.in_memory(tier)
    payments.add_order(ORDER, 10_000)
    clock = FakeClock(T0)
    gate = Interlock(tmp_path / ".interlock", clock=clock, standing_lease=True)
    refund = define_payments(gate, payments, **kw)
    with pytest.raises(SimulatedCrash):
        refund.gate.submit(refund.proposal(ORDER, 2000), crash_after_effect=not before,
                           crash_before_effect=before)
    assert payments.refund_count() == (0 if before else 1)
    return payments, clock, tmp_path / ".interlock"


def test_an_effect_of_a_target_not_defined_here_stays_open_and_nothing_is_written(tmp_path):
    payments, clock, d = crashed_after_the_send(tmp_path, "2")
    clock.advance(60_000)  # the claim has expired
    other = Interlock(d, clock=clock, standing_lease=True)

    @other.effect(name="emails")
    def send_email(to):
        raise AssertionError("never called")

    before = (d / "journal.jsonl").read_bytes()
    report = other.recover()
    assert [(o.status, o.reason) for o in report] == [("DISPATCHED", "target_unroutable")]
    assert not report.errors
    assert (d / "journal.jsonl").read_bytes() == before  # nothing asked, nothing appended
    assert payments.refund_count() == 1

    define_payments(other, payments)  # routed from the next operation on
    [out] = other.recover()
    assert out.status == COMMITTED and out.receipt().via == "recovery-query"
    assert payments.refund_count() == 1 and other.open_effects() == []
    other.close()


def test_receipt_attempts_count_only_real_sends(tmp_path):
    # Tier 1 without premises: recovery resends at once, so an Interlock without the target
    # used to record another AUTHORIZED and DISPATCHED before failing to send.
    sends: List[str] = []
    payments, clock, d = crashed_after_the_send(tmp_path, "1", premises=False, sends=sends)
    clock.advance(60_000)
    with Interlock(d, clock=clock, standing_lease=True) as blind:
        blind.recover()  # defines nothing: the effect is left alone
    gate = Interlock(d, clock=clock, standing_lease=True)
    define_payments(gate, payments, premises=False, sends=sends)
    [out] = gate.recover()
    assert out.status == COMMITTED and out.receipt().via == "recovery-retry"
    assert len(sends) == 2 and payments.refund_count() == 1  # the service deduped the resend
    assert out.receipt().attempts == len(sends)
    gate.close()


def flaky_check(fails):
    def allowed(order, amount):
        if fails:
            fails.pop()
            raise ConnectionError("the policy service is down")
        return True

    return allowed


def test_a_host_check_that_raises_at_submit_leaves_the_effect_open(tmp_path):
    payments = Payments.in_memory("2")
    payments.add_order(ORDER, 10_000)
    gate = Interlock(tmp_path / ".interlock", clock=FakeClock(T0), standing_lease=True)
    sends: List[str] = []
    refund = define_payments(gate, payments, allowed=flaky_check([1]), sends=sends)
    out = refund(ORDER, 2000)
    assert (out.status, out.reason) == (PROPOSED, "read_failed")  # not REFUSED, not an error
    assert sends == []
    again = refund(ORDER, 2000)  # the check answers now
    assert again.status == COMMITTED and len(sends) == 1
    gate.close()


def test_a_host_check_that_raises_at_recovery_leaves_the_effect_open(tmp_path):
    sends: List[str] = []
    payments, clock, d = crashed_after_the_send(tmp_path, "1", allowed=lambda o, a: True, sends=sends)
    clock.advance(60_000)
    gate = Interlock(d, clock=clock, standing_lease=True)
    define_payments(gate, payments, allowed=flaky_check([1]), sends=sends)
    [out] = gate.recover()
    assert (out.status, out.reason) == ("DISPATCHED", "read_failed")
    assert len(sends) == 1 and gate.open_effects() == [out.effect_id]
    [out] = gate.recover()  # the check answers now: resolved once, by the tier
    assert out.status == COMMITTED and out.receipt().via == "recovery-retry"
    assert payments.refund_count() == 1
    gate.close()


def test_recover_can_report_a_live_claim_instead_of_waiting(tmp_path):
    # Crashed before the send: the lookup under the live claim finds nothing, which proves
    # nothing (the send may still be under way), so the claim is reported or waited out.
    payments, clock, d = crashed_after_the_send(tmp_path, "2", before=True, timeout_ms=30_000)
    gate = Interlock(d, clock=clock, claim_wait=False, standing_lease=True)
    define_payments(gate, payments, timeout_ms=30_000)
    before = (d / "journal.jsonl").read_bytes()
    for report in (gate.recover(), gate.recover(claim_wait=ClaimWait(max_polls=0)),
                   asyncio.run(gate.arecover())):
        [out] = report
        assert (out.status, out.reason) == ("DISPATCHED", "claim_live")
        assert 0 < out.retry_after_ms <= 30_000
    assert clock.now_ms() == T0  # nothing slept
    assert (d / "journal.jsonl").read_bytes() == before
    assert payments.refund_count() == 0
    [out] = gate.recover(claim_wait=True)  # waits it out (the fake clock moves)
    assert out.status == COMMITTED and clock.now_ms() > T0 + 30_000
    assert payments.refund_count() == 1
    gate.close()


def test_a_landed_send_is_closed_by_its_lookup_under_the_live_claim(tmp_path):
    payments, clock, d = crashed_after_the_send(tmp_path, "2", timeout_ms=30_000)
    gate = Interlock(d, clock=clock, claim_wait=False, standing_lease=True)
    define_payments(gate, payments, timeout_ms=30_000)
    [out] = gate.recover()
    assert (out.status, out.reason) == (COMMITTED, None)
    assert clock.now_ms() == T0  # no wait: one lookup
    assert payments.refund_count() == 1
    assert list(gate.recover()) == []
    gate.close()


def test_a_journal_failure_after_the_send_does_not_say_nothing_was_sent(tmp_path):
    payments = Payments.in_memory("2")
    payments.add_order(ORDER, 10_000)
    clock = FakeClock(T0)
    gate = Interlock(tmp_path / ".interlock", clock=clock, standing_lease=True)

    @gate.effect(name="payments", key=lambda order, amount: f"refund:{order}",
                 lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key),
                 timeout_ms=1000)
    def refund(order, amount, idempotency_key):
        r = payments.refund(order, amount, reference=idempotency_key)
        gate._journal.close()  # noqa: SLF001 - the journal fails before the result is recorded
        return r

    with pytest.raises(JournalFailed) as e:
        refund(ORDER, 2000)
    assert "nothing was sent" not in str(e.value) and "recover()" in str(e.value)
    assert payments.refund_count() == 1  # it was sent
    clock.advance(60_000)
    again = Interlock(tmp_path / ".interlock", clock=clock, standing_lease=True)
    define_payments(again, payments, premises=False)
    [out] = again.recover()
    assert out.status == COMMITTED and payments.refund_count() == 1
    again.close()
