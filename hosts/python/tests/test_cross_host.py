"""Cross-host: a journal crashed in Python is recovered by the CLI, and a journal crashed
by the CLI is recovered by Python. One refund each, one journal format, one lock."""

import json
import subprocess
import sys
import textwrap

from interlock import COMMITTED, Interlock
from interlock.payments_sim import Payments

ORDER = "order_881"
LEASE = "case-4471"

# A Python worker that gates a refund against DIR/payments.json (the CLI's target shape:
# target "payments", effect {"order", "amount_cents"}), dies after the service committed
# and before the reply reaches the gate: a real process death (os.abort).
CHILD = textwrap.dedent("""
    import os, sys
    from interlock import Interlock, SimulatedCrash
    from interlock.payments_sim import Payments

    d = sys.argv[1]
    payments = Payments.open(os.path.join(d, "payments.json"))
    gate = Interlock(d, agent="refund-agent")
    gate.lease("case-4471", ttl_s=3600)

    @gate.effect(name="payments", key=lambda order, amount_cents: f"refund:{order}",
                 premises=lambda order, amount_cents, idempotency_key:
                     payments.premises(order, idempotency_key),
                 lookup=lambda order, amount_cents, idempotency_key:
                     payments.find_by_reference(idempotency_key),
                 lease="case-4471", timeout_ms=1000)
    def refund(order, amount_cents, idempotency_key):
        return payments.refund(order, amount_cents, idempotency_key, idempotency_key)

    try:
        refund.gate.submit(refund.proposal("order_881", 2000), crash_after_effect=True)
    except SimulatedCrash:
        os.abort()
    sys.exit("the crash point was never reached")
""")


def new_world(d, tier="2"):
    d.mkdir(parents=True, exist_ok=True)
    p = Payments.create(d / "payments.json", tier)
    p.add_order(ORDER, 10_000)
    return p


def test_python_crash_recovered_by_the_cli(tmp_path, cli):
    d = tmp_path / "j"
    new_world(d)
    child = subprocess.run([sys.executable, "-c", CHILD, str(d)], capture_output=True, text=True)
    assert child.returncode < 0 or child.returncode == 134, child.stderr  # killed by SIGABRT
    assert Payments.open(d / "payments.json").refund_count() == 1

    rec = subprocess.run([str(cli), "recover", str(d)], capture_output=True, text=True, timeout=120)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    assert " COMMITTED " in rec.stdout, rec.stdout
    after = Payments.open(d / "payments.json")
    assert after.refund_count() == 1 and after.refunded_cents(ORDER) == 2000

    ver = subprocess.run([str(cli), "verify", str(d)], capture_output=True, text=True)
    assert ver.returncode == 0, ver.stdout + ver.stderr
    with Interlock(d) as gate:  # and Python reads what the CLI appended
        assert gate.open_effects() == [] and gate.verify().ok


def test_cli_crash_recovered_by_python(tmp_path, cli):
    d = tmp_path / "j"
    payments = new_world(d)
    # What `interlock demo` sets up before its child: the lease and the proposal (its
    # schema, with the premises read now), then the hidden child that aborts after the
    # service committed.
    with Interlock(d, agent="refund-agent") as gate:
        gate.lease(LEASE, ttl_s=3600)
    proposal = {
        "agent": "refund-agent",
        "target": {"name": "payments", "dedupes": False, "lookup": True,
                   "dedupe_window_ms": 86_400_000, "timeout_ms": 1000},
        "key": "refund:order_881",
        "effect": {"order": ORDER, "amount_cents": 2000},
        "authority": {"lease": LEASE},
        "premises": payments.premises(ORDER),
    }
    (d / "proposal.json").write_text(json.dumps(proposal))
    child = subprocess.run([str(cli), "demo-child", "--dir", str(d), "--phase", "send"],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode != 0 and child.returncode != 2, child.stdout + child.stderr
    payments = Payments.open(d / "payments.json")
    assert payments.refund_count() == 1

    gate = Interlock(d, agent="refund-agent")

    @gate.effect(name="payments", key=lambda order, amount_cents: f"refund:{order}",
                 premises=lambda order, amount_cents, idempotency_key:
                     payments.premises(order, idempotency_key),
                 lookup=lambda order, amount_cents, idempotency_key:
                     payments.find_by_reference(idempotency_key),
                 lease=LEASE, timeout_ms=1000)
    def refund(order, amount_cents, idempotency_key):
        return payments.refund(order, amount_cents, idempotency_key, idempotency_key)

    recovered = gate.recover()
    assert [o.status for o in recovered] == [COMMITTED], (recovered, recovered.errors)
    assert recovered[0].receipt().via == "recovery-query"
    assert payments.refund_count() == 1 and payments.refunded_cents(ORDER) == 2000
    gate.close()
    ver = subprocess.run([str(cli), "verify", str(d)], capture_output=True, text=True)
    assert ver.returncode == 0, ver.stdout + ver.stderr


def test_python_and_the_cli_exclude_each_other(tmp_path, cli):
    d = tmp_path / "j"
    new_world(d)
    with Interlock(d):
        held = subprocess.run([str(cli), "--lock-wait-ms", "0", "verify", str(d)],
                              capture_output=True, text=True)
        assert held.returncode != 0 and "locked" in held.stderr, held.stderr
    # Released with the Interlock: the CLI opens it now.
    free = subprocess.run([str(cli), "verify", str(d)], capture_output=True, text=True)
    assert free.returncode == 0, free.stdout + free.stderr
