"""A Python worker of hosts/cli/tests/shared_kill.rs (the many-workers kill runs): the same
loop as that test's CLI workers, in this host. It submits refunds drawn from the moving
window of keys and now and then recovers, on the shared journal at URL, against the one
payments service of the run (its state file, each request under the flock of
``payments.lock``, given up unsent when the service cannot take it within a quarter of the
claim), until it is killed. Prints ``ready`` once set up.

    python shared_worker.py URL SERVICE_FILE SEED START_MS
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import random
import sys
import time
from typing import Any, Callable, List, Optional

from wasmtime.component import Variant

from interlock.clock import SystemClock
from interlock.gate import GateHost, JournalRef
from interlock.payments_sim import Payments
from interlock.sql_journal import open_url
from interlock.targets import PaymentsTarget

# The run's constants: hosts/cli/tests/shared_kill.rs holds the same.
ORDERS = 24
AMOUNT_CENTS = 100
WINDOW = 6
WINDOW_MS = 500
TIMEOUT_MS = 1_000
SEND_WAIT_MS = TIMEOUT_MS // 4
LEASE = "case-4471"


def proposal(k: int) -> str:
    return json.dumps({
        "agent": "refund-agent",
        "target": {"name": "payments", "dedupes": False, "lookup": True, "timeout_ms": TIMEOUT_MS},
        "key": f"refund:{k}",
        "effect": {"order": f"order_{k % ORDERS}", "amount_cents": AMOUNT_CENTS},
        "authority": {"lease": LEASE},
        "premises": {"eligible": True},
    })


class SharedService:
    """The run's one payments service, one request at a time (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        self.lock_path = os.path.splitext(path)[0] + ".lock"
        self.clock = SystemClock()

    def _with(self, f: Callable[[PaymentsTarget], Variant]) -> Optional[Variant]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            until = time.monotonic() + SEND_WAIT_MS / 1000
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
    rng = random.Random(seed)
    clock = SystemClock()
    gate = GateHost(JournalRef(open_url(url)), clock)
    target = SharedService(service)
    print("ready", flush=True)
    while True:
        try:
            if rng.randrange(5) == 0:
                gate.recover_all(target)
            else:
                window = (clock.now_ms() - start_ms) // WINDOW_MS
                gate.submit(proposal(window * WINDOW + rng.randrange(WINDOW)), target)
        except Exception as e:  # noqa: BLE001 - a journal error (a restart) ends one operation
            print(f"error: {e}", file=sys.stderr)
            if gate.broken:
                raise


if __name__ == "__main__":
    main()
