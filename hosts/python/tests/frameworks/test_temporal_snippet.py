"""The seeds' Temporal snippet (temporal_snippet.py, the README's Temporal section) run as
written, twice, on a real Temporal dev server: the second run (a restart, the same workflow
id and journal) pays nothing more."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="needs interlock[temporal] (temporalio)")

from test_temporal import server  # noqa: E402,F401 - the dev server fixture

import interlock  # noqa: E402

HERE = Path(__file__).resolve().parent


def test_the_seeds_snippet_runs_as_written(server: str, tmp_path: Path) -> None:  # noqa: F811
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_PAYMENTS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(interlock.__file__).resolve().parents[1]), str(HERE)])
    for _ in range(2):  # the second run: a restart on the same journal, the same workflow
        out = subprocess.run([sys.executable, str(HERE / "temporal_snippet.py"), server], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == "COMMITTED", out.stdout
    state = json.loads((tmp_path / ".interlock" / "payments.json").read_text())
    assert [r["amount_cents"] for r in state["refunds"]] == [20], state
