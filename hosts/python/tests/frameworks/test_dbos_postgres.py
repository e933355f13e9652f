"""Workflows on PostgreSQL with an existing engine (issue 27): what the original's runtime/
did by hand (a durable workflow runtime on PostgreSQL with the gate in its step), done by
DBOS. One database of a real PostgreSQL cluster (scripts/postgres.sh) holds both DBOS's
system database (its ``dbos`` schema) and the gate's journal (the postgres:// shared
journal, schema ``interlock``). A worker process is SIGKILLed in the middle of the refund
step; the next process launches DBOS, whose own recovery re-runs the step (the gate's
startup recovery is left out: ``recover_at_start: false``); the gated step resolves the
effect the dead run left open. The payments simulator's ledger is the truth: one refund.

The service is at tier 2 here (no dedupe, lookup by reference): a blind re-run of the step
pays twice, as the last test shows DBOS alone doing, so only the gate's recovery keeps it
at one."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

pytest.importorskip("dbos", reason="needs interlock[dbos] (dbos)")

import dbos_worker as dw  # noqa: E402
from refund_effect import journal_url, use_postgres  # noqa: E402
from rows import LEASE, ORDER, REFUND_CENTS, World  # noqa: E402

from interlock import Interlock  # noqa: E402
from sql_backends import _connect  # noqa: E402

TIER = "2"


@pytest.fixture
def pg(pg_cluster: Any) -> Dict[str, str]:
    """A new database in the session's cluster, with DBOS's system database URL and the
    journal's URL both pointing into it."""
    db_url = pg_cluster.database()
    name = db_url.rsplit("/", 1)[1]
    with _connect(db_url) as c:
        c.execute("CREATE SCHEMA interlock")
    # DBOS takes a SQLAlchemy URL (libpq's host= for the unix socket directory).
    system = f"postgresql://postgres@/{name}?host={pg_cluster.dir}&port={pg_cluster.port}"
    return {"db": db_url, "system": system, "journal": f"{db_url}?options=-csearch_path%3Dinterlock"}


def world_in(pg: Dict[str, str], tmp_path: Path, gated: bool) -> World:
    world = World.create(tmp_path / "world", tier=TIER)
    use_postgres(world, pg["system"], pg["journal"])
    if gated:
        with Interlock(journal_url(world), agent="refund-agent") as gate:
            gate.lease(LEASE, 3600)
    return world


def job(name: str, gated: bool) -> Dict[str, Any]:
    return {"id": name, "order": ORDER, "amount": REFUND_CENTS, "gated": gated, "wait_for_approval": False,
            "recover_at_start": False, "cases": [{"case": LEASE, "approval": None}]}


def crash_and_recover(world: World, j: Dict[str, Any], fault: str, outage: Any = None) -> Dict[str, Any]:
    """Starts the workflow in a worker that the armed ``fault`` SIGKILLs mid-step; runs
    ``outage()`` while it is down; then a second worker, which only launches DBOS. Its
    result, and how long the recovery took."""
    world.arm(fault)
    first = dw.worker(world, j, start=True)
    assert first.returncode == -signal.SIGKILL, (first.returncode, first.stderr[-2000:])
    if outage is not None:
        outage()
    t0 = time.monotonic()
    [result] = dw.results_of(dw.worker(world, j, start=False))
    return {"result": result, "recovery_s": time.monotonic() - t0}


def workflow_row(db_url: str, workflow_id: str) -> Dict[str, Any]:
    """What DBOS recorded of the workflow and its steps, read from its own tables."""
    with _connect(db_url) as c:
        status, recovery = c.execute("SELECT status, recovery_attempts FROM dbos.workflow_status "
                                     "WHERE workflow_uuid = %s", (workflow_id,)).fetchone()
        steps = c.execute("SELECT function_name, output FROM dbos.operation_outputs WHERE workflow_uuid = %s "
                          "ORDER BY function_id", (workflow_id,)).fetchall()
    return {"status": status, "recovery_attempts": recovery, "steps": [list(s) for s in steps]}


def journal_of(pg: Dict[str, str]) -> List[Dict[str, Any]]:
    """The journal's effect entries, in order, read from its table in the same database."""
    with _connect(pg["db"]) as c:
        rows = c.execute("SELECT entry FROM interlock.interlock_entries WHERE stream LIKE %s ORDER BY ordinal",
                         ("effect:%",)).fetchall()
    return [json.loads(r[0]) for r in rows]


def test_a_worker_killed_mid_step_is_recovered_by_dbos_one_refund(pg: Dict[str, str], tmp_path: Path) -> None:
    world = world_in(pg, tmp_path, gated=True)
    j = job("refund-mid-step", gated=True)
    out = crash_and_recover(world, j, "kill_after_refund")  # the service took it; the reply is lost
    assert out["result"] == "COMMITTED", out
    assert (world.refund_count(), world.refunded_cents()) == (1, REFUND_CENTS)
    wf = workflow_row(pg["db"], f"{j['id']}-{LEASE}")
    # DBOS recovered the workflow itself and recorded the step's output once.
    assert wf["status"] == "SUCCESS" and wf["recovery_attempts"] >= 1, wf
    assert [name for name, _ in wf["steps"]] == ["refund_gated"], wf
    entries = journal_of(pg)
    assert [e["state"] for e in entries] == ["PROPOSED", "AUTHORIZED", "DISPATCHED", "COMMITTED"], entries
    assert entries[-1]["via"] == "recovery-query", entries[-1]
    with Interlock(journal_url(world), agent="refund-agent") as gate:
        assert gate.verify().ok


def test_a_worker_killed_before_the_send_sends_once(pg: Dict[str, str], tmp_path: Path) -> None:
    world = world_in(pg, tmp_path, gated=True)
    out = crash_and_recover(world, job("refund-before-send", gated=True), "kill_before_refund")
    assert out["result"] == "COMMITTED", out
    assert (world.refund_count(), world.refunded_cents()) == (1, REFUND_CENTS)
    states = [e["state"] for e in journal_of(pg)]
    # The lookup found nothing, the premises held: one more DISPATCHED, then the send.
    assert states == ["PROPOSED", "AUTHORIZED", "DISPATCHED", "AUTHORIZED", "DISPATCHED", "COMMITTED"], states


def test_a_hand_refund_during_the_outage_refuses_the_resend(pg: Dict[str, str], tmp_path: Path) -> None:
    world = world_in(pg, tmp_path, gated=True)
    out = crash_and_recover(world, job("refund-hand", gated=True), "kill_before_refund", world.hand_refund)
    assert out["result"] == "REFUSED", out
    assert (world.refund_count(), world.refunded_cents()) == (1, REFUND_CENTS)


def test_dbos_alone_on_the_same_cluster_pays_twice(pg: Dict[str, str], tmp_path: Path) -> None:
    # The contrast: DBOS's documented step key means nothing to a tier-2 service, and
    # DBOS's recovery re-runs the step whose output it never recorded.
    world = world_in(pg, tmp_path, gated=False)
    out = crash_and_recover(world, job("refund-alone", gated=False), "kill_after_refund")
    assert out["result"] == "REFUNDED", out
    assert (world.refund_count(), world.refunded_cents()) == (2, 2 * REFUND_CENTS)
