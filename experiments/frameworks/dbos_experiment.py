"""The four rows (issue 15) in DBOS, alone and with Interlock inside.

    python experiments/frameworks/dbos_experiment.py            # writes results/frameworks/dbos.json
    python experiments/frameworks/dbos_experiment.py --reps 3   # each cell 3 times (every run must agree)
    python experiments/frameworks/dbos_experiment.py --quick    # each cell once, checks, writes nothing

A real DBOS runtime on a SQLite system database, real worker processes SIGKILLed at the
fault, DBOS's own recovery (at the next process's launch) resuming the workflows. The
scenarios are hosts/python/tests/frameworks/dbos_worker.py's, the ones the test runs
(hosts/python/tests/frameworks/test_dbos.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any, Dict, List

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hosts" / "python" / "tests" / "frameworks"))

import dbos_worker as dw  # noqa: E402
from rows import ROWS, write_results  # noqa: E402

# What each "with" cell must hold at (cents, refunds); the test asserts the same.
HOLDS = {"reply_lost": (2000, 1), "hand_refund": (2000, 1), "approval_revoked": (0, 0), "cap_race": (2000, 1)}
KEYS = ("refunded_cents", "refunds", "state", "states", "workflow_result", "workflow_results")


def run(reps: int) -> Dict[str, Dict[str, Any]]:
    rows: Dict[str, Dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for row in ROWS:
            rows[row] = {}
            for variant, gated_run in (("alone", False), ("with", True)):
                cells: List[Dict[str, Any]] = []
                for i in range(reps):
                    cell = dw.run_row(row, gated_run, Path(tmp) / f"{row}-{variant}-{i}")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="each cell once; check; write nothing")
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    rows = run(1 if a.quick else a.reps)
    bad = [r for r, want in HOLDS.items()
           if (rows[r]["with"]["refunded_cents"], rows[r]["with"]["refunds"]) != want]
    if bad:
        raise SystemExit(f"with Interlock, these rows did not hold: {bad}")
    if a.quick:
        print("quick: every with-Interlock cell held; nothing written")
        return
    print("wrote", write_results("DBOS", "dbos", version("dbos"), rows, name="dbos"))


if __name__ == "__main__":
    main()
