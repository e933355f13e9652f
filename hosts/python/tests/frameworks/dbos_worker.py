"""DBOS's four rows (issue 15), alone and with Interlock inside: the worker process and the
driver that kills and restarts it. Shared by tests/frameworks/test_dbos.py and
experiments/frameworks/dbos_experiment.py (no copy).

A worker (``python dbos_worker.py --world DIR --job JSON [--start]``) launches a real DBOS
runtime on a SQLite system database in the world's folder. With ``--start`` it starts the
refund workflow(s); without it, it only launches, and DBOS's own recovery resumes the
workflows a killed process left PENDING. Either way it prints the workflows' results as one
JSON line and exits. The refund step is:

- alone: DBOS as documented: a step whose idempotency key is the workflow id and the step
  id, stable across DBOS's re-execution of the step;
- with Interlock: ``gated_step(refund_money, ...)``, the gated step of interlock.dbos.

A job's ``"recover_at_start": false`` leaves out the gate's recovery at launch, so only
DBOS's recovery (re-running the step whose output was never recorded) settles an effect the
dead run left open. A world may keep its system database and journal in PostgreSQL
(``refund_effect.use_postgres``). Faults are the world's (refund_effect.py):
``kill_before_refund``, ``kill_after_refund``. Approval, alone: DBOS's documented way, the
workflow waits for a message (``DBOS.recv``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from refund_effect import approve, grant_lease, postgres_urls, revoke  # noqa: E402
from rows import APPROVAL, APPROVER, LEASE, ORDER, REFUND_CENTS, World  # noqa: E402

import interlock  # noqa: E402

APP = "refund-app"


def system_db(world: World) -> str:
    pg = postgres_urls(world)
    if pg is not None:
        return pg["system_database_url"]
    return "sqlite:///" + str((world.dir / "dbos.sqlite").resolve())


def serve(world_dir: str, job: Dict[str, Any], start: bool) -> None:
    from dbos import DBOS, SetWorkflowID
    from refund_effect import define, journal_url, proposal

    from interlock import Interlock
    from interlock.dbos import gated_step

    world = World(world_dir)
    DBOS(config={"name": APP, "system_database_url": system_db(world), "log_level": "WARNING"})

    gate = Interlock(journal_url(world), agent="refund-agent")
    refund_money = define(gate, world)
    refund_gated = gated_step(refund_money, name="refund_gated", proposal=lambda order, amount, case, approval:
                              proposal(refund_money, order, amount, case, approval),
                              retries_allowed=True, max_attempts=5, interval_seconds=0.2, backoff_rate=1.0)

    @DBOS.step(name="refund_alone")
    def refund_alone(order: str, amount: int, case: str, approval: Optional[str]) -> str:
        key = f"{DBOS.workflow_id}-{DBOS.step_id}"  # DBOS's documented idempotency key
        world.die_if("kill_before_refund")
        with world.service() as p:
            p.refund(order, amount, key, key)
        world.die_if("kill_after_refund")
        return "REFUNDED"

    @DBOS.workflow(name="refund_workflow")
    def refund_workflow(j: Dict[str, Any]) -> str:
        if j["wait_for_approval"]:
            if DBOS.recv("approval", timeout_seconds=60) != "approved":
                return "NOT_SENT"
        step = refund_gated if j["gated"] else refund_alone
        return step(j["order"], j["amount"], j["case"], j.get("approval"))

    if job.get("recover_at_start", True) and gate.open_effects():
        gate.recover()  # once, on startup (before DBOS resumes the workflows)
    DBOS.launch()  # recovers this executor's PENDING workflows
    try:
        if start:
            for c in job["cases"]:
                with SetWorkflowID(f"{job['id']}-{c['case']}"):
                    DBOS.start_workflow(refund_workflow, {**job, **c})
            if job["wait_for_approval"]:
                for c in job["cases"]:
                    DBOS.send(f"{job['id']}-{c['case']}", "approved", "approval")
        results: List[Any] = [DBOS.retrieve_workflow(f"{job['id']}-{c['case']}").get_result() for c in job["cases"]]
        print(json.dumps({"results": results}), flush=True)
    finally:
        gate.close()
        DBOS.destroy()


# ------------------------------------------------------------------ the driver


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    src = str(Path(interlock.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, str(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def worker(world: World, job: Dict[str, Any], start: bool, timeout_s: float = 90) -> subprocess.CompletedProcess:
    args = [sys.executable, str(Path(__file__).resolve()), "--world", str(world.dir), "--job", json.dumps(job)]
    return subprocess.run(args + (["--start"] if start else []), capture_output=True, text=True, env=_env(),
                          timeout=timeout_s)


def results_of(out: subprocess.CompletedProcess) -> List[str]:
    if out.returncode != 0:
        raise RuntimeError(f"dbos worker failed ({out.returncode}): {out.stderr[-3000:]}")
    return list(json.loads(out.stdout.strip().splitlines()[-1])["results"])


NOTES = {
    ("reply_lost", False): "the service took the refund, the worker was SIGKILLed before the step's output was "
                           "recorded; the next launch recovered the workflow and DBOS re-ran the step with its "
                           "documented idempotency key (workflow id + step id): the service deduped it",
    ("reply_lost", True): "the worker was SIGKILLed after the service took the refund; at the next launch the gate "
                          "resolved the open effect (recovery, then the re-run step replayed it): nothing resent",
    ("hand_refund", False): "the worker was SIGKILLed before sending; support refunded $20 by hand during the "
                            "outage; DBOS recovered the workflow and re-ran the step, which sent its own $20",
    ("hand_refund", True): "the worker was SIGKILLed after the intent was durable, before sending; support refunded "
                           "$20 by hand; the gate re-checked refunded_by_others and refused the resend",
    ("approval_revoked", False): "approved with a DBOS message (DBOS.recv); the worker was SIGKILLed before "
                                 "sending; the revoke message arrived during the outage, but the recovered "
                                 "workflow replayed its recorded approval and sent $20",
    ("approval_revoked", True): "an Interlock approval, revoked during the outage; the gate re-checked the authority "
                                "before the resend: nothing sent",
    ("cap_race", False): "two approved workflows ($20 each) ran concurrently in one DBOS process; nothing in the "
                         "steps knows the $30 cap: both refunds landed",
    ("cap_race", True): "two Interlock approvals ($20 each) raced one $30 cap in two concurrent workflows; the "
                        "cap journal let one through and refused the other (cap_exceeded)",
}


def run_row(row: str, gated_run: bool, world_dir: Path) -> Dict[str, Any]:
    """Runs one row, alone (``gated_run=False``) or with Interlock inside; its results cell."""
    world = World.create(world_dir)
    if gated_run:
        grant_lease(world, LEASE)

    def approval_of(case: str) -> Optional[str]:
        return approve(world, case, f"{APPROVAL}:{case}", APPROVER, ORDER, REFUND_CENTS) if gated_run else None

    note = NOTES[(row, gated_run)]
    base = {"id": f"refund-{row}", "order": ORDER, "amount": REFUND_CENTS, "gated": gated_run}
    if row == "cap_race":
        job = {**base, "wait_for_approval": not gated_run,
               "cases": [{"case": c, "approval": approval_of(c)} for c in ("case-a", "case-b")]}
        states = results_of(worker(world, job, start=True))
        return world.cell(note, **({"states": sorted(states)} if gated_run else {"workflow_results": states}))

    approval = approval_of(LEASE) if row == "approval_revoked" else None
    job = {**base, "wait_for_approval": row == "approval_revoked" and not gated_run,
           "cases": [{"case": LEASE, "approval": approval}]}
    world.arm("kill_after_refund" if row == "reply_lost" else "kill_before_refund")
    first = worker(world, job, start=True)
    if first.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the armed fault did not kill the worker: {first.returncode} {first.stderr[-2000:]}")
    # The outage: the world changes.
    if row == "hand_refund":
        world.hand_refund()
    elif row == "approval_revoked":
        if gated_run:
            revoke(world, approval or "")
        else:
            from dbos import DBOSClient

            client = DBOSClient(system_database_url=system_db(world))
            try:
                client.send(f"{job['id']}-{LEASE}", "revoked", "approval")
            finally:
                client.destroy()
    [state] = results_of(worker(world, job, start=False))
    return world.cell(note, **({"state": state} if gated_run else {"workflow_result": state}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--world", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--start", action="store_true")
    a = ap.parse_args()
    serve(a.world, json.loads(a.job), a.start)


if __name__ == "__main__":
    main()
