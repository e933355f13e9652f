"""Temporal's four rows (issue 15), alone and with Interlock inside: the worker process and
the driver that kills and restarts it. Shared by tests/frameworks/test_temporal.py and
experiments/frameworks/temporal_experiment.py (no copy).

The worker (``python temporal_worker.py --address HOST:PORT --queue Q --world DIR``) runs
two sync activities against the world's simulated payments service:

- ``refund_alone``: Temporal as documented: the refund carries an idempotency key made of
  the workflow id and the activity id, stable across Temporal's retries;
- ``refund_gated``: the seeds' snippet, the activity body ``gated(refund_money.gate,
  refund_money.proposal(...))``.

Faults are the world's: ``kill_before_refund`` SIGKILLs the worker after the decision (for
Interlock: once the intent is durable) and before the service is called;
``kill_after_refund`` once the service took the refund, before the reply. The driver waits
for the kill, changes the world during the outage, starts a new worker, and Temporal's own
activity retry resumes the workflow.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from refund_effect import approve, define, grant_lease, journal_url, proposal, revoke  # noqa: E402
from rows import APPROVAL, APPROVER, LEASE, ORDER, REFUND_CENTS, World  # noqa: E402

import interlock  # noqa: E402
from interlock import Interlock  # noqa: E402
from interlock.decorator import Gated  # noqa: E402
from interlock.temporal import gated  # noqa: E402

# Short on purpose (a killed attempt is noticed after START_TO_CLOSE); the same for both
# variants. The effect's claim (refund_effect.CLAIM_MS) is shorter than an attempt.
START_TO_CLOSE = timedelta(seconds=3)
RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0,
                    maximum_attempts=5)


@dataclass
class Job:
    order: str
    amount: int
    case: str
    gated: bool
    approval: Optional[str] = None  # an Interlock approval (gated only)
    wait_for_approval: bool = False  # Temporal's own approval: a signal (alone only)


@workflow.defn
class RefundWorkflow:
    """Decides the refund, waits for approval when asked (Temporal's documented way: a
    signal), then runs the refund activity under Temporal's retry policy."""

    def __init__(self) -> None:
        self.approved = False
        self.revoked = False

    @workflow.signal
    def approve(self) -> None:
        self.approved = True

    @workflow.signal
    def revoke(self) -> None:
        self.revoked = True

    @workflow.run
    async def run(self, job: Job) -> str:
        if job.wait_for_approval:
            await workflow.wait_condition(lambda: self.approved or self.revoked)
            if self.revoked:
                return "NOT_SENT"
        return await workflow.execute_activity(
            "refund_gated" if job.gated else "refund_alone",
            args=[job.order, job.amount, job.case, job.approval],
            start_to_close_timeout=START_TO_CLOSE, retry_policy=RETRY)


def activities(world: World, refund_money: Gated) -> List[Any]:
    @activity.defn(name="refund_alone")
    def refund_alone(order: str, amount: int, case: str, approval: Optional[str]) -> str:
        info = activity.info()
        key = f"{info.workflow_id}-{info.activity_id}"  # Temporal's documented idempotency key
        world.die_if("kill_before_refund")
        with world.service() as p:
            p.refund(order, amount, key, key)
        world.die_if("kill_after_refund")
        return "REFUNDED"

    @activity.defn(name="refund_gated")
    def refund(order: str, amount: int, case: str, approval: Optional[str]) -> str:
        # recovers this refund if a crash left it in flight, else submits
        return gated(refund_money.gate, proposal(refund_money, order, amount, case, approval))

    return [refund_alone, refund]


async def serve(address: str, queue: str, world_dir: str) -> None:
    world = World(world_dir)
    gate = Interlock(journal_url(world), agent="refund-agent")
    refund_money = define(gate, world)
    gate.recover()  # once, on startup
    client = await Client.connect(address)
    with ThreadPoolExecutor(max_workers=4) as pool:
        worker = Worker(client, task_queue=queue, workflows=[RefundWorkflow],
                        activities=activities(world, refund_money), activity_executor=pool,
                        workflow_runner=UnsandboxedWorkflowRunner(),
                        # No sticky queue: a killed worker's cache would delay the next
                        # workflow task by the sticky timeout.
                        max_cached_workflows=0)
        print("ready", flush=True)
        await worker.run()


# ------------------------------------------------------------------ the driver


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    src = str(Path(interlock.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, str(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class WorkerProc:
    """A worker process; ``wait_ready`` waits for its "ready" line."""

    def __init__(self, address: str, queue: str, world: World):
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--address", address, "--queue", queue,
             "--world", str(world.dir)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), text=True)

    def wait_ready(self, timeout_s: float = 30) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the worker prints nothing else on stdout
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError(f"temporal worker did not start: {line!r} {self._err()}")

    def _err(self) -> str:
        try:
            return self.proc.communicate(timeout=5)[1][-2000:]
        except Exception:  # noqa: BLE001 - diagnostics only
            return ""

    async def killed(self, timeout_s: float = 30) -> int:
        """Waits for the worker to die by the armed fault; its exit code (-9)."""
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError("the armed fault never killed the worker")
            await asyncio.sleep(0.05)
        return self.proc.returncode

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def _note(row: str, gated_run: bool) -> str:
    return {
        ("reply_lost", False): "the service took the refund, the worker was SIGKILLed before the reply; Temporal "
                               "retried the activity with its documented idempotency key (workflow id + activity "
                               "id): the service deduped it",
        ("reply_lost", True): "the worker was SIGKILLed after the service took the refund; on restart the gate "
                              "resolved the open effect (recovery or Temporal's retry), nothing resent",
        ("hand_refund", False): "the worker was SIGKILLed before sending; support refunded $20 by hand during the "
                                "outage; Temporal retried the activity, which sent its own $20 (a different key)",
        ("hand_refund", True): "the worker was SIGKILLed after the intent was durable, before sending; support "
                               "refunded $20 by hand; the gate re-checked refunded_by_others and refused the resend",
        ("approval_revoked", False): "approved with a Temporal signal; the worker was SIGKILLed before sending; "
                                     "the revoke signal arrived during the outage, but the activity was already "
                                     "scheduled and Temporal's retry sent $20",
        ("approval_revoked", True): "an Interlock approval, revoked during the outage; the gate re-checked the "
                                    "authority before the resend: nothing sent",
        ("cap_race", False): "two approved workflows ($20 each) ran concurrently; nothing in Temporal knows the "
                             "$30 cap: both refunds landed",
        ("cap_race", True): "two Interlock approvals ($20 each) raced one $30 cap in two concurrent activities; "
                            "the cap journal let one through and refused the other (cap_exceeded)",
    }[(row, gated_run)]


async def run_row(client: Client, address: str, row: str, gated_run: bool, world_dir: Path) -> Dict[str, Any]:
    """Runs one row, alone (``gated_run=False``) or with Interlock inside; its results cell."""
    world = World.create(world_dir)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    wid = f"refund-{row}-{'with' if gated_run else 'alone'}-{uuid.uuid4().hex[:6]}"
    if gated_run:
        grant_lease(world, LEASE)

    def approval_of(case: str) -> Optional[str]:
        """An Interlock approval of the refund under ``case`` (gated only)."""
        return approve(world, case, f"{APPROVAL}:{case}", APPROVER, ORDER, REFUND_CENTS) if gated_run else None

    states: List[str] = []
    if row == "cap_race":
        cases = ["case-a", "case-b"]
        jobs = [Job(ORDER, REFUND_CENTS, c, gated_run, approval_of(c), wait_for_approval=not gated_run) for c in cases]
        w = WorkerProc(address, queue, world)
        try:
            w.wait_ready()
            handles = [await client.start_workflow(RefundWorkflow.run, j, id=f"{wid}-{j.case}", task_queue=queue)
                       for j in jobs]
            if not gated_run:
                for h in handles:
                    await h.signal(RefundWorkflow.approve)
            states = list(await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60))
        finally:
            w.stop()
        extra = {"states": sorted(states)} if gated_run else {}
        return world.cell(_note(row, gated_run), **extra)

    fault = "kill_after_refund" if row == "reply_lost" else "kill_before_refund"
    approval = approval_of(LEASE) if row == "approval_revoked" else None
    job = Job(ORDER, REFUND_CENTS, LEASE, gated_run, approval,
              wait_for_approval=(row == "approval_revoked" and not gated_run))
    world.arm(fault)
    w1 = WorkerProc(address, queue, world)
    try:
        w1.wait_ready()
        handle = await client.start_workflow(RefundWorkflow.run, job, id=wid, task_queue=queue)
        if job.wait_for_approval:
            await handle.signal(RefundWorkflow.approve)
        code = await w1.killed()
        assert code == -signal.SIGKILL, code
    finally:
        w1.stop()
    # The outage: the world changes.
    if row == "hand_refund":
        world.hand_refund()
    elif row == "approval_revoked":
        if gated_run:
            revoke(world, approval or "")
        else:
            await handle.signal(RefundWorkflow.revoke)
    w2 = WorkerProc(address, queue, world)
    try:
        w2.wait_ready()
        state = await asyncio.wait_for(handle.result(), 60)
    finally:
        w2.stop()
    return world.cell(_note(row, gated_run), **({"state": state} if gated_run else {"workflow_result": state}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--address", required=True)
    ap.add_argument("--queue", required=True)
    ap.add_argument("--world", required=True)
    a = ap.parse_args()
    asyncio.run(serve(a.address, a.queue, a.world))


if __name__ == "__main__":
    main()
