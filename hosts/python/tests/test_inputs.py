"""What a caller passes in: bad input is a typed error and leaves the journal as it was,
byte for byte; good input with bounds works."""

import datetime
import math

import pytest

from interlock import (
    COMMITTED,
    REFUSED,
    FakeClock,
    Interlock,
    InterlockError,
    InvalidField,
    UnsupportedJournal,
)
from interlock.payments_sim import Payments

T0 = 1_800_000_000_000


@pytest.fixture
def fresh(tmp_path):
    """A fresh journal with no lease named (the standing lease not yet granted) and an
    effect whose function counts its calls."""
    payments = Payments.in_memory("2")
    payments.add_order("#881", 10_000)
    gate = Interlock(tmp_path / ".interlock", clock=FakeClock(T0), standing_lease=True)
    calls = []

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key))
    def refund(order, amount, idempotency_key):
        calls.append(amount)
        return payments.refund(order, amount, reference=idempotency_key)

    journal = tmp_path / ".interlock" / "journal.jsonl"
    yield gate, refund, calls, journal
    gate.close()


def test_an_integer_past_2_53_is_refused_before_anything_is_recorded(fresh):
    gate, refund, calls, journal = fresh
    before = journal.read_bytes()
    with pytest.raises(InvalidField) as e:
        refund("#881", 2**64 + 1)
    assert e.value.field == "/effect/amount"
    assert journal.read_bytes() == before and calls == []
    assert refund("#881", 2000).status == COMMITTED  # and a good call still goes through


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_refused_with_a_typed_error(fresh, bad):
    gate, refund, calls, journal = fresh
    before = journal.read_bytes()
    with pytest.raises(InvalidField) as e:
        refund("#881", bad)
    assert e.value.field == "/effect/amount"
    assert journal.read_bytes() == before and calls == []


def test_an_argument_json_cannot_carry_leaves_the_journal_unchanged(fresh):
    gate, refund, calls, journal = fresh
    before = journal.read_bytes()
    with pytest.raises(InvalidField) as e:
        refund("#881", datetime.datetime(2030, 1, 1))
    assert isinstance(e.value, InterlockError) and e.value.field == "/effect/amount"
    assert "datetime" in e.value.problem
    assert journal.read_bytes() == before and calls == []  # not even the standing lease


def test_a_proposal_the_gate_refuses_does_not_grant_the_standing_lease(fresh):
    gate, refund, calls, journal = fresh
    before = journal.read_bytes()
    p = refund.proposal("#881", 2000)
    p["bounds"] = {"no_such_premise": {"at_most": 1}}
    with pytest.raises(InvalidField):
        gate.submit(p)
    assert journal.read_bytes() == before and calls == []


def test_bounds_through_the_effect_api(tmp_path):
    payments = Payments.in_memory("2")
    payments.add_order("order_1", 10_000)
    payments.add_order("order_2", 10_000)
    gate = Interlock(tmp_path / ".interlock", clock=FakeClock(T0), standing_lease=True)

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: {
                     "refunded_so_far": payments.premises(order, idempotency_key)["refunded_by_others_cents"]},
                 bounds={"refunded_so_far": {"at_most": 80}})
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    p = refund.proposal("order_1", 1000)
    payments.refund_by_hand("order_1", 50)  # moved, but within the bound
    assert refund.gate.submit(p).status == COMMITTED

    p = refund.proposal("order_2", 1000)
    payments.refund_by_hand("order_2", 90)  # past the bound by the re-check
    out = refund.gate.submit(p)
    assert (out.status, out.reason) == (REFUSED, "premise_changed")
    assert [c.name for c in out.changed] == ["refunded_so_far"]
    assert payments.refunded_cents("order_2") == 90  # only the hand refund
    gate.close()


@pytest.mark.parametrize("url", ["mysql://user:secret@host/db", "sqlite://relative/j.db",
                                 "file://./journal", "http://example.com/j"])
def test_a_url_this_host_cannot_open_is_refused_and_nothing_is_created(tmp_path, monkeypatch, url):
    # sqlite:///abs and postgres:// open shared journals (tests/test_sql_journal.py); any
    # other URL, or one of those written wrong, is refused before anything is opened.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsupportedJournal) as e:
        Interlock(url)
    assert isinstance(e.value, InterlockError)
    assert "cannot be opened" in str(e.value) and "secret" not in str(e.value)
    assert list(tmp_path.iterdir()) == []
