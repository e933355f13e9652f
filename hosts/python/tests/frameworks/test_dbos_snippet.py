"""The README's DBOS section (dbos_snippet.py) run as written: killed once after the
service took the refund, then started again: DBOS recovers the workflow, the gate the
effect, and one $20 refund is all there is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="needs interlock[dbos] (dbos)")

import interlock  # noqa: E402

HERE = Path(__file__).resolve().parent


def test_the_dbos_snippet_survives_a_kill(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_PAYMENTS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(interlock.__file__).resolve().parents[1]), str(HERE)])

    def run(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(HERE / "dbos_snippet.py")], cwd=tmp_path, env={**env, **extra},
                              capture_output=True, text=True, timeout=120)

    first = run(KILL_AFTER_REFUND="1")
    assert first.returncode == -9, first.stderr[-3000:]
    second = run()  # the restart: same folder, same workflow id
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.strip().splitlines()[-1] == "COMMITTED", second.stdout
    state = json.loads((tmp_path / ".interlock" / "payments.json").read_text())
    assert [r["amount_cents"] for r in state["refunds"]] == [20], state
