"""The gate over each shared backend through this host's own API, ``Interlock(URL)``: a
submit is one durable commit; a crash after (or before) the send and another Interlock's
recovery, per tier; and processes of this host sharing one journal at once: two submitting
one effect send it once, and four recovering twelve effects against a service that does not
dedupe send each once. Only compare-and-append keeps them apart. (The Rust backends' own:
adapters/sql-journal/tests/gate.rs.)"""

import json
import subprocess
import sys
import textwrap
import time
from typing import Any, List

import pytest

from interlock import AMBIGUOUS, COMMITTED, DISPATCHED, FakeClock, Interlock, SimulatedCrash
from interlock.payments_sim import Payments
from interlock.sql_journal import PostgresJournal, SqliteJournal

T0 = 1_800_000_000_000
ORDER = "order_881"
LEASE = "case-4471"
CLAIM_MS = 1000


def define(gate: Interlock, payments: Payments) -> Any:
    """The refund as the target "payments" (the CLI's name for it), by the service's tier."""
    tier = payments.tier()
    lookup = None
    if tier in ("2", "1+lookup"):
        lookup = lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key)  # noqa: E731

    @gate.effect(name="payments", key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key),
                 lookup=lookup, dedupes=tier.startswith("1"), timeout_ms=CLAIM_MS, lease=LEASE)
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, idempotency_key=idempotency_key, reference=idempotency_key)

    return refund


def world(tier: str) -> Payments:
    payments = Payments.in_memory(tier)
    payments.add_order(ORDER, 10_000)
    return payments


@pytest.mark.parametrize("tier", ["1", "2", "3"])
def test_a_submit_is_one_durable_commit(backend, tier):
    payments = world(tier)
    gate = Interlock(backend.fresh(), clock=FakeClock(T0))
    gate.lease(LEASE, ttl_s=3600)
    refund = define(gate, payments)
    journal = gate._journal.journal
    assert isinstance(journal, (SqliteJournal, PostgresJournal)), journal
    before = journal.durable_commits
    out = refund(ORDER, 2000)
    assert (out.status, out.executed) == (COMMITTED, "yes")
    assert journal.durable_commits - before == 1, "one commit waits for the disk on the send path"
    assert payments.refunded_cents(ORDER) == 2000
    assert gate.verify().ok
    # The same request again replays the outcome; nothing is sent twice.
    again = refund(ORDER, 2000)
    assert again.replayed and again.status == COMMITTED
    assert payments.refund_count() == 1
    gate.close()


@pytest.mark.parametrize("tier,crash,want,sent,at_once", [
    ("1", "after", COMMITTED, 1, False),
    ("2", "after", COMMITTED, 1, True),  # the lookup finds it under the live claim
    ("3", "after", AMBIGUOUS, 1, False),
    ("2", "before", COMMITTED, 1, False),  # not found under a live claim proves nothing
    ("3", "before", AMBIGUOUS, 0, False),  # unknown fate: a person decides
])
def test_another_interlock_recovers_after_a_crash(backend, tier, crash, want, sent, at_once):
    url, payments, clock = backend.fresh(), world(tier), FakeClock(T0)
    first = Interlock(url, clock=clock)
    first.lease(LEASE, ttl_s=3600)
    refund = define(first, payments)
    with pytest.raises(SimulatedCrash):
        refund.gate.submit(refund.proposal(ORDER, 2000), crash_after_effect=crash == "after",
                           crash_before_effect=crash == "before")
    other = Interlock(url, clock=clock)
    define(other, payments)
    # While the claim is live nobody sends, not even recovery; only a lookup (it only
    # reads) may close the effect, when it finds it.
    live = other.recover(claim_wait=False)
    if at_once:
        assert [(o.status, o.reason) for o in live] == [(want, None)]
    else:
        assert [(o.status, o.reason) for o in live] == [(DISPATCHED, "claim_live")]
        clock.advance(2 * CLAIM_MS)
        [o] = other.recover()
        assert o.status == want
    assert payments.refund_count() == sent, "the send was never repeated"
    assert list(other.recover()) == [], "nothing left open"
    assert other.verify().ok
    other.close()


SUBMITTER = textwrap.dedent("""
    import json, os, sys, time
    from interlock import Interlock

    url, sends, go, me = sys.argv[1:5]
    gate = Interlock(url, agent="refund-agent")

    @gate.effect(name="payments", key=lambda order: f"refund:{order}", lease="case-4471",
                 timeout_ms=30000)
    def refund(order, idempotency_key):
        # The service: one line per send, whoever sends (it does not dedupe).
        fd = os.open(sends, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, f"{me} {idempotency_key}\\n".encode())
        os.close(fd)
        time.sleep(0.3)  # a slow send: the other process finds it under way
        return {"ok": True}

    p = refund.proposal("order_881")
    while not os.path.exists(go):
        time.sleep(0.001)
    out = refund.gate.submit(p)
    print(json.dumps({"status": out.status, "reason": out.reason, "replayed": out.replayed}))
    gate.close()
""")


def start_together(script: str, args: List[List[str]], go: Any) -> List[Any]:
    """Runs one child per argument list, lets them all go at once, returns their JSON lines."""
    children = [subprocess.Popen([sys.executable, "-c", script, *a], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for a in args]
    try:
        time.sleep(0.5)  # each has opened the journal (or is about to)
        go.write_text("")
        out = []
        for c in children:
            stdout, stderr = c.communicate(timeout=120)
            assert c.returncode == 0, stderr
            out.append(json.loads(stdout.strip().splitlines()[-1]))
        return out
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
                c.wait()


def test_two_processes_submit_one_effect_and_one_sends(backend, tmp_path):
    url = backend.fresh()
    with Interlock(url) as gate:
        gate.lease(LEASE, ttl_s=3600)
    sends = tmp_path / "sends"
    go = tmp_path / "go"
    outcomes = start_together(SUBMITTER, [[url, str(sends), str(go), f"p{i}"] for i in range(2)], go)
    lines = sends.read_text().splitlines()
    assert len(lines) == 1, lines
    won = [o for o in outcomes if o["status"] == COMMITTED and not o["replayed"]]
    assert len(won) == 1, outcomes
    lost = [o for o in outcomes if o is not won[0]]
    assert all((o["status"], o["reason"]) == (DISPATCHED, "claim_live") or (o["status"] == COMMITTED and o["replayed"])
               for o in lost), outcomes
    with Interlock(url) as gate:
        assert gate.verify().ok and gate.open_effects() == []


# The service of the recovery race: a file of sends, one line each, and a lookup by key.
SERVICE = textwrap.dedent("""
    import os, time

    def define(gate, sends, me):
        def lookup(order, idempotency_key):
            try:
                with open(sends) as f:
                    found = [line for line in f if line.split()[1] == idempotency_key]
            except FileNotFoundError:
                return None
            return {"sent_by": found[0].split()[0]} if found else None

        @gate.effect(name="payments", key=lambda order: f"refund:{order}", lease="case-4471",
                     timeout_ms=300, lookup=lookup)
        def refund(order, idempotency_key):
            fd = os.open(sends, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(fd, f"{me} {idempotency_key}\\n".encode())
            os.close(fd)
            time.sleep(0.05)  # the others move on meanwhile: they meet on every effect
            return {"ok": True}

        return refund
""")

RECOVERER = SERVICE + textwrap.dedent("""
    import json, sys, time
    from interlock import Interlock

    url, sends, go, me = sys.argv[1:5]
    gate = Interlock(url)
    define(gate, sends, me)
    while not os.path.exists(go):
        time.sleep(0.001)
    # Without waiting out claims: a worker that finds an effect under way moves on to the next.
    report = gate.recover(claim_wait=False)
    print(json.dumps({"outcomes": [[o.effect_id, o.status, o.reason, o.replayed] for o in report],
                      "errors": {k: repr(v) for k, v in report.errors.items()}}))
    gate.close()
""")


def test_processes_recovering_at_once_send_each_effect_once(backend, tmp_path):
    """Twelve effects left open by crashed workers (their intent durable, nothing sent);
    four processes recover them all at once, against a service that dedupes nothing: only
    compare-and-append keeps each effect to one send."""
    url, sends = backend.fresh(), tmp_path / "sends"
    namespace: dict = {}
    exec(SERVICE, namespace)  # the same service the children run
    with Interlock(url) as gate:
        gate.lease(LEASE, ttl_s=3600)
    for i in range(12):
        gate = Interlock(url)
        refund = namespace["define"](gate, str(sends), "crashed")
        with pytest.raises(SimulatedCrash):
            refund.gate.submit(refund.proposal(f"order_{i}"), crash_before_effect=True)
    assert not sends.exists()
    go = tmp_path / "go"
    reports = start_together(RECOVERER, [[url, str(sends), str(go), f"r{i}"] for i in range(4)], go)
    assert all(r["errors"] == {} for r in reports), reports
    lines = sends.read_text().splitlines()
    keys = [line.split()[1] for line in lines]
    assert len(keys) == 12 == len(set(keys)), lines
    fresh = [o for r in reports for o in r["outcomes"] if o[1] == COMMITTED and not o[3]]
    assert sorted(o[0] for o in fresh) == sorted(keys), "each effect recovered by exactly one process"
    for r in reports:
        for _, status, reason, _replayed in r["outcomes"]:
            assert status == COMMITTED or (status, reason) == (DISPATCHED, "claim_live"), r
    with Interlock(url) as gate:
        assert gate.verify().ok and gate.open_effects() == []
