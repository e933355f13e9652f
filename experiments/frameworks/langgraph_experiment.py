"""LangGraph, alone and with Interlock inside, on the original's four rows (issue 15):
writes results/frameworks/langgraph.json. ``--quick``: runs the rows and checks the "with"
cells, writes nothing (for CI).

    python experiments/frameworks/langgraph_experiment.py [--quick]

Needs the Python host with its langchain extra (hosts/python/.venv has it). The scenarios
are hosts/python/tests/frameworks/langgraph_rows.py, the same ones the tests run.
"""

import argparse
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hosts" / "python" / "tests" / "frameworks"))

import langgraph_rows  # noqa: E402
from rows import write_results  # noqa: E402

#: What each "with Interlock" cell must hold: $20 once, $0 for the revoked approval.
HOLDS = {"reply_lost": 2000, "hand_refund": 2000, "approval_revoked": 0, "cap_race": 2000}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="check the cells, write nothing")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = langgraph_rows.run_all(Path(d))
    bad = {r: c["with"] for r, c in rows.items() if c["with"]["refunded_cents"] != HOLDS[r]}
    for row, cells in rows.items():
        print(f"{row:17} alone ${cells['alone']['refunded_cents'] / 100:.0f}   "
              f"with ${cells['with']['refunded_cents'] / 100:.0f} ({cells['with'].get('state')})")
    if bad:
        print(f"a 'with Interlock' cell does not hold: {bad}", file=sys.stderr)
        return 1
    if not args.quick:
        path = write_results("LangGraph", "langgraph", version("langgraph"), rows)
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
