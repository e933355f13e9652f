"""The decorator API: the original's snippet unchanged, typed errors, traps kept apart."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import interlock
from interlock import (
    COMMITTED,
    REFUSED,
    FakeClock,
    GateError,
    GateTrap,
    Interlock,
    InvalidField,
    InvalidJson,
    TooLarge,
    UnknownEffect,
)
from interlock.payments_sim import Payments

# The original's snippet (the Python library Interlock was first written as), the copy in
# tests/seeds/landing_python.py, with the import of the simulated service before it and two
# lines that use it after. Its effect names no lease: it runs under the agent's standing
# lease (docs/host-api.md, "Authority"), announced at start, granted and recorded at first use.
SEEDS = Path(__file__).resolve().parents[3] / "tests" / "seeds"
ORIGINAL_SNIPPET = (
    "from interlock.payments_sim import stripe, charge_for, is_eligible, refunded_total, can_refund, refund_exists\n"
    + (SEEDS / "landing_python.py").read_text()
    + 'outcome = refund_money("order_881", 2000)\n'
    + 'print(outcome.status, outcome.receipt().final, outcome.result["amount_cents"])\n'
)


def test_the_original_snippet_runs_as_written(tmp_path):
    (tmp_path / "original.py").write_text(ORIGINAL_SNIPPET)
    for _ in range(2):  # the second run is a restart: the first outcome comes back
        run = subprocess.run([sys.executable, "original.py"], cwd=tmp_path, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["COMMITTED", "COMMITTED", "2000"], run.stdout
    state = json.loads((tmp_path / ".interlock" / "payments.json").read_text())
    assert len(state["refunds"]) == 1


@pytest.fixture
def world(tmp_path):
    payments = Payments.create(tmp_path / "payments.json", "2")
    payments.add_order("order_881", 10_000)
    gate = Interlock(tmp_path / ".interlock", clock=FakeClock(1_800_000_000_000), standing_lease=True)

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key),
                 lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    yield gate, refund, payments
    gate.close()


def test_statuses_reasons_and_receipts(world):
    gate, refund, payments = world
    first = refund("order_881", 2000)
    assert first.status == interlock.COMMITTED == interlock.Status.COMMITTED
    assert refund("order_881", 3000).reason == "conflicting_payload"  # F5
    r = gate.receipt(first.effect_id, key=b"secret")
    assert (r.final, r.executed, r.attempts) == (COMMITTED, "yes", 1)
    assert gate.check_receipt(r, b"secret").ok
    assert payments.refund_count() == 1


def test_revoking_the_standing_lease_refuses(world):
    gate, refund, payments = world
    p = refund.proposal("order_881", 2000)  # names no authority: the standing lease
    assert "authority" not in p
    gate.revoke_lease(gate.standing_lease_name())
    out = refund.gate.submit(p)
    assert (out.status, out.reason) == (REFUSED, "lease_revoked")
    assert payments.refund_count() == 0


def test_premise_changed_says_which(world):
    gate, refund, payments = world
    p = refund.proposal("order_881", 2000)
    payments.refund_by_hand("order_881", 2000)
    out = refund.gate.submit(p)
    assert (out.status, out.reason) == (REFUSED, "premise_changed")
    assert [c.name for c in out.changed] == ["refunded_by_others_cents"]
    assert (out.changed[0].was, out.changed[0].now) == (0, 2000)


def test_bad_input_is_a_typed_gate_error(world):
    gate, refund, _ = world
    with pytest.raises(InvalidJson):
        gate.submit("{not json")
    with pytest.raises(InvalidField) as e:
        gate.submit({"agent": 7})
    assert e.value.field == "/agent" and e.value.case == "invalid-field"
    with pytest.raises(TooLarge):
        gate.submit("[" + "1," * 40_000 + "1]")
    with pytest.raises(UnknownEffect):
        gate.receipt("0" * 32)
    with pytest.raises(GateError):  # every case is a GateError, never a trap
        gate.submit({"agent": "a"})


def test_an_undecorated_effect_stays_open_on_recover(world, tmp_path):
    gate, refund, payments = world
    from interlock import SimulatedCrash

    with pytest.raises(SimulatedCrash):
        refund.gate.submit(refund.proposal("order_881", 2000), crash_before_effect=True)
    fresh = Interlock(tmp_path / ".interlock", clock=FakeClock(1_800_000_000_000 + 60_000), standing_lease=True)
    report = fresh.recover()  # `refund` is not decorated on `fresh`: not routed
    assert [(o.status, o.reason) for o in report] == [("DISPATCHED", "target_unroutable")]
    assert not report.errors and len(fresh.open_effects()) == 1
    fresh.close()


def test_a_trap_is_not_a_gate_error():
    p = Payments()  # never created: the component traps on purpose (a broken host)
    with pytest.raises(GateTrap) as e:
        p.tier()
    assert not isinstance(e.value, GateError)


def test_a_broken_gate_instance_is_replaced(world):
    gate, refund, _ = world
    host = gate.host()
    host.journal.journal, saved = None, host.journal.journal

    def broken_read(*_):
        raise RuntimeError("a host bug")

    host._read = broken_read  # noqa: SLF001 - the linker holds the bound method already
    host.journal.journal = saved
    gate._host.broken = True  # noqa: SLF001 - as after any trap
    assert gate.host() is not host  # a fresh instance, on the same journal
    assert refund("order_881", 2000).status == COMMITTED
