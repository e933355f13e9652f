"""States, reasons and errors as types: the enums are the WIT's, spelled as the journal
spells them; every error this package raises on purpose is an InterlockError; a target
that answers a step with something that is not a reply is a TypeError, and the gate lives."""

import asyncio
import json
import re

import pytest

from conftest import REPO
from interlock import (
    COMMITTED,
    Executed,
    FakeClock,
    FileJournal,
    Interlock,
    InterlockError,
    Locked,
    Reason,
    State,
)
from interlock.gate import GateHost, JournalRef
from interlock.payments_sim import Payments
from interlock.targets import PaymentsTarget

T0 = 1_800_000_000_000


def wit_enum(name):
    """The cases of ``enum name`` in wit/types.wit, as the journal spells them."""
    text = (REPO / "wit" / "types.wit").read_text()
    body = re.search(r"enum " + name + r" \{(.*?)\}", text, re.S)
    assert body, f"wit/types.wit has no enum {name}"
    lines = (ln.strip() for ln in body.group(1).splitlines())
    return {ln.rstrip(",") for ln in lines if ln and not ln.startswith("//")}


def test_the_enums_are_the_wits():
    assert {s.value for s in State} == {c.upper() for c in wit_enum("state")}
    assert {r.value for r in Reason} == {c.replace("-", "_") for c in wit_enum("reason")}
    assert {e.value for e in Executed} == wit_enum("executed")
    assert Reason("target_unroutable") is Reason.TARGET_UNROUTABLE


def test_an_outcome_carries_enums_that_are_still_the_journals_spellings(tmp_path):
    payments = Payments.in_memory("2")
    payments.add_order("order_881", 10_000)
    gate = Interlock(tmp_path / ".interlock", clock=FakeClock(T0), standing_lease=True)

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key))
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    out = refund("order_881", 2000)
    # Equal to the spellings first: once narrowed to a member, mypy sees no overlap.
    assert out.status == "COMMITTED" == COMMITTED and out.executed == "yes"
    assert out.status is State.COMMITTED and out.executed is Executed.YES
    assert (str(out.status), f"{out.status}", json.dumps(out.status)) == ("COMMITTED", "COMMITTED", '"COMMITTED"')
    assert str(out) == f"COMMITTED {out.effect_id}" and out.final
    other = refund("order_881", 3000)
    assert other.reason == "conflicting_payload" and other.reason is Reason.CONFLICTING_PAYLOAD
    assert str(other).startswith("REFUSED (conflicting_payload) ")
    assert gate.status(out.effect_id) is State.COMMITTED
    gate.close()


def test_journal_errors_are_interlock_errors(tmp_path):
    held = FileJournal.open(tmp_path / "j")
    try:
        with pytest.raises(InterlockError) as e:
            FileJournal.open(tmp_path / "j", lock_wait_ms=0)
        assert isinstance(e.value, Locked)
    finally:
        held.close()


def test_premises_returning_a_future_on_the_sync_path_is_the_async_type_error(tmp_path):
    loop = asyncio.new_event_loop()
    gate = Interlock(tmp_path / ".interlock", clock=FakeClock(T0), standing_lease=True)

    @gate.effect(premises=lambda order, idempotency_key: loop.create_future())
    def ship(order, idempotency_key):
        return {"shipped": order}

    with pytest.raises(TypeError, match="is async"):
        ship.proposal("o1")
    loop.close()
    gate.close()


class AsyncCapture:
    """The payments target with an async capture: right for asubmit, a mistake for submit."""

    def __init__(self, target):
        self.target = target

    def routes(self):
        return self.target.routes()

    async def capture(self, req):
        return self.target.capture(req)

    def authorize(self, req):
        return self.target.authorize(req)

    def apply(self, req):
        return self.target.apply(req)

    def query(self, req):
        return self.target.query(req)


def test_a_target_that_answers_with_no_reply_is_a_type_error_and_the_gate_lives(tmp_path):
    clock = FakeClock(T0)
    payments = Payments.in_memory("2")
    payments.add_order("order_881", 10_000)
    host = GateHost(JournalRef(FileJournal.open(tmp_path / "j")), clock)
    host.grant_lease("case-4471", T0 + 3_600_000)
    proposal = json.dumps({
        "agent": "refund-agent",
        "target": {"name": "payments", "dedupes": False, "lookup": True, "dedupe_window_ms": 0, "timeout_ms": 1000},
        "key": "refund:order_881",
        "effect": {"order": "order_881", "amount_cents": 2000},
        "authority": {"lease": "case-4471"},
        "premises": payments.premises("order_881"),
    })
    with pytest.raises(TypeError, match="not a reply; an async target is driven by asubmit"):
        host.submit(proposal, AsyncCapture(PaymentsTarget(payments, clock)))
    assert not host.broken and payments.refund_count() == 0
    out = host.submit(proposal, PaymentsTarget(payments, clock))
    assert out.status is State.COMMITTED and payments.refund_count() == 1
