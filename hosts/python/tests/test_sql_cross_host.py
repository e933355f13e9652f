"""Cross-host on the shared backends, SQLite and PostgreSQL: a journal a Python process
wrote and died in (a real os.abort) is recovered and verified by the CLI, and what the CLI
appended (its recovery, a lease it granted) is read here, entry for entry: the effect's
stream as this host reads it holds exactly the entries, hash for hash, of the CLI's receipt,
and the two hosts' receipts are equal. One schema, one set of rows.

Needs the CLI to take a journal URL where it takes a folder (`interlock recover URL
--payments FILE`, `verify URL`, `receipt URL ID`, `lease grant URL ...`): until it does,
these tests are skipped, saying so."""

import json
import subprocess
import sys
import textwrap

import pytest

from interlock import COMMITTED, Interlock
from interlock.clock import SystemClock
from interlock.gate import GateHost, JournalRef
from interlock.payments_sim import Payments
from interlock.sql_journal import open_url

ORDER = "order_881"
LEASE = "case-4471"

# A Python worker that gates a refund against the service in PAYMENTS (the CLI's target
# shape: target "payments", effect {"order", "amount_cents"}) on the journal at URL, and
# dies (os.abort) after the service committed, or once the intent is durable.
CHILD = textwrap.dedent("""
    import os, sys
    from interlock import Interlock, SimulatedCrash
    from interlock.payments_sim import Payments

    url, state, when = sys.argv[1], sys.argv[2], sys.argv[3]
    payments = Payments.open(state)
    gate = Interlock(url, agent="refund-agent")
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
        refund.gate.submit(refund.proposal("order_881", 2000), crash_after_effect=when == "after",
                           crash_before_effect=when == "before")
    except SimulatedCrash:
        os.abort()
    sys.exit("the crash point was never reached")
""")


@pytest.fixture
def url_cli(cli, tmp_path):
    """The CLI, once it takes a journal URL; skipped (saying so) while it refuses one."""
    probe = f"sqlite://{tmp_path}/probe/journal.db"
    out = subprocess.run([str(cli), "verify", probe], capture_output=True, text=True, timeout=120)
    said = (out.stderr + out.stdout).strip()
    if out.returncode != 0 and ("not supported" in said or "is a URL" in said):
        pytest.skip(f"the CLI does not take a journal URL yet: `interlock verify sqlite:///...` answers {said!r}")
    assert out.returncode == 0, said
    return cli


def run(cli, *args, ok=True):
    out = subprocess.run([str(cli), *args], capture_output=True, text=True, timeout=180)
    if ok:
        assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out


def crash_in_python(url, state, when):
    child = subprocess.run([sys.executable, "-c", CHILD, url, str(state), when], capture_output=True, text=True,
                           timeout=180)
    assert child.returncode < 0 or child.returncode == 134, child.stderr  # killed by SIGABRT


def effect_stream(url):
    """The one effect's stream, as the journal holds it (its entries in append order)."""
    with open_url(url) as j:
        entries = [json.loads(e) for e in GateHost(JournalRef(j), SystemClock()).entries_in_order()]
    [stream] = {e["stream"] for e in entries if e["stream"].startswith("effect:")}
    return stream, [e for e in entries if e["stream"] == stream]


@pytest.mark.parametrize("when,sent_by_python,via", [("after", 1, "recovery-query"), ("before", 0, "recovery-retry")])
def test_a_python_crash_recovered_by_the_cli_and_read_back_entry_for_entry(backend, url_cli, tmp_path, when,
                                                                           sent_by_python, via):
    url, state = backend.fresh(), tmp_path / "payments.json"
    Payments.create(state, "2").add_order(ORDER, 10_000)
    crash_in_python(url, state, when)
    assert Payments.open(state).refund_count() == sent_by_python

    rec = run(url_cli, "recover", url, "--payments", str(state))
    assert " COMMITTED " in rec.stdout, rec.stdout
    after = Payments.open(state)
    assert after.refund_count() == 1 and after.refunded_cents(ORDER) == 2000
    run(url_cli, "verify", url)

    # This host reads what the CLI appended: the same entries, hash for hash, as the CLI's
    # receipt, and the same receipt.
    stream, stored = effect_stream(url)
    effect_id = stream.split(":", 1)[1]
    cli_receipt = json.loads(run(url_cli, "receipt", url, effect_id).stdout)
    assert [(e["seq"], e["state"], e["hash"]) for e in stored] == [
        (e["seq"], e["state"], e["hash"]) for e in cli_receipt["entries"]]
    assert stored[-1]["state"] == COMMITTED and stored[-1]["via"] == via
    with Interlock(url) as gate:
        assert gate.open_effects() == [] and gate.verify().ok
        assert dict(gate.receipt(effect_id)) == cli_receipt


def test_a_lease_the_cli_granted_authorizes_a_python_submit(backend, url_cli, tmp_path):
    url = backend.fresh()
    run(url_cli, "lease", "grant", url, LEASE, "--for", "1h")
    payments = Payments.in_memory("2")
    payments.add_order(ORDER, 10_000)
    with Interlock(url, agent="refund-agent") as gate:
        @gate.effect(name="payments", key=lambda order, amount_cents: f"refund:{order}", lease=LEASE,
                     lookup=lambda order, amount_cents, idempotency_key: payments.find_by_reference(idempotency_key))
        def refund(order, amount_cents, idempotency_key):
            return payments.refund(order, amount_cents, idempotency_key, idempotency_key)

        out = refund(ORDER, 2000)
        assert out.status == COMMITTED, out
        lease = out.receipt()["authorized"][0]["checks"]["lease"]
        assert lease["name"] == LEASE and lease["live_until_ms"] > 0, lease
    run(url_cli, "verify", url)
