"""A Python worker of hosts/cli/tests/shared_kill.rs (the many-workers kill runs): the same
loop as that test's CLI workers, in this host. It submits refunds drawn from the moving
window of keys and now and then recovers, on the shared journal at URL, against the one
payments service of the run (its state file, each request under the flock of
``payments.lock``, given up unsent when the service cannot take it within a quarter of the
claim), until it is killed. Prints ``ready`` once set up.

    python shared_worker.py URL SERVICE_FILE SEED START_MS PLAN

PLAN is the run as the test gives it (JSON): the proposal of effect 0, the number of orders,
the window of keys and the service's send wait, so this file holds none of them.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import random
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from wasmtime.component import Variant

from interlock.clock import SystemClock
from interlock.gate import GateHost, JournalRef, recover_each
from interlock.payments_sim import Payments
from interlock.sql_journal import open_url
from interlock.targets import PaymentsTarget


def proposal(plan: Dict[str, Any], k: int) -> str:
    """Effect ``k``: the plan's proposal under key ``refund:k``, on order ``k`` mod orders."""
    p = json.loads(json.dumps(plan["proposal"]))
    p["key"] = f"refund:{k}"
    p["effect"]["order"] = f"order_{k % plan['orders']}"
    return json.dumps(p)


class SharedService:
    """The run's one payments service, one request at a time (see the module docstring)."""

    def __init__(self, path: str, send_wait_ms: int):
        self.path = path
        self.send_wait_ms = send_wait_ms
        self.lock_path = os.path.splitext(path)[0] + ".lock"
        self.clock = SystemClock()

    def _with(self, f: Callable[[PaymentsTarget], Variant]) -> Optional[Variant]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            until = time.monotonic() + self.send_wait_ms / 1000
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN) or time.monotonic() >= until:
                        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                            return None
                        raise
                    time.sleep(0.001)
            return f(PaymentsTarget(Payments.open(self.path), self.clock))
        finally:
            os.close(fd)  # releases the flock

    def routes(self) -> List[str]:
        return ["payments"]

    def capture(self, req: Any) -> Variant:
        return self._with(lambda t: t.capture(req)) or Variant("failed", "the service did not answer in time")

    def authorize(self, req: Any) -> Variant:
        return Variant("failed", "no host check in this test")

    def apply(self, req: Any) -> Variant:
        # Given up before it reached the service: its fate is not known to the gate.
        return self._with(lambda t: t.apply(req)) or Variant("unknown", "the service did not answer in time")

    def query(self, req: Any) -> Variant:
        return self._with(lambda t: t.query(req)) or Variant("failed", "the service did not answer in time")


def main() -> None:
    url, service, seed, start_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    plan = json.loads(sys.argv[5])
    rng = random.Random(seed)
    clock = SystemClock()
    gate = GateHost(JournalRef(open_url(url)), clock)
    target = SharedService(service, plan["send_wait_ms"])
    print("ready", flush=True)
    while True:
        try:
            if rng.randrange(5) == 0:
                recover_each(gate, lambda effect_id: gate.recover(effect_id, target))
            else:
                window = (clock.now_ms() - start_ms) // plan["window_ms"]
                k = window * plan["window"] + rng.randrange(plan["window"])
                gate.submit(proposal(plan, k), target)
        except Exception as e:  # noqa: BLE001 - a journal error (a restart) ends one operation
            print(f"error: {e}", file=sys.stderr)
            if gate.broken:
                raise


if __name__ == "__main__":
    main()
