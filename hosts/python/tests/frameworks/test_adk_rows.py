"""The four rows in Google ADK (issue 15), alone and with Interlock inside (the original's
Guard, an AP2 mandate as the approval), from the one scenario module the experiment script
runs (experiments/frameworks/adk.py). A "with" cell that stops holding fails here; the
"alone" cells are pinned as measured."""

import sys
from typing import Any, Dict, Tuple

import pytest
from rows import REPO, World

pytest.importorskip("google.adk")
pytest.importorskip("ap2")
sys.path.insert(0, str(REPO / "experiments" / "frameworks"))
import adk as scenarios  # type: ignore[import-not-found]  # noqa: E402 - needs the path above

_CELLS: Dict[Tuple[str, str], Dict[str, Any]] = {}


@pytest.fixture
def cell(tmp_path_factory):
    def run(row: str, mode: str) -> Dict[str, Any]:
        if (row, mode) not in _CELLS:
            _CELLS[row, mode] = scenarios.run_row(row, mode, World.create(tmp_path_factory.mktemp(f"{row}-{mode}")))
        return _CELLS[row, mode]
    return run


def test_reply_lost_with_the_guard_is_one_refund(cell):
    c = cell("reply_lost", "with")
    assert (c["refunded_cents"], c["refunds"], c["state"]) == (2000, 1, "COMMITTED"), c


def test_hand_refund_with_the_guard_refuses_the_resend(cell):
    c = cell("hand_refund", "with")
    assert (c["refunded_cents"], c["refunds"], c["state"], c["reason"]) == (2000, 1, "REFUSED", "premise_changed"), c


def test_revoked_ap2_mandate_with_the_guard_sends_nothing(cell):
    c = cell("approval_revoked", "with")
    assert (c["refunded_cents"], c["refunds"], c["state"], c["reason"]) == (0, 0, "REFUSED", "approval_revoked"), c


def test_cap_race_with_the_guard_is_not_run_and_says_why(cell):
    assert "no cap" in cell("cap_race", "with")["not_run"]


@pytest.mark.parametrize("row,cents,refunds", [
    ("reply_lost", 2000, 1),        # the function call id as the key: the re-run deduped
    ("hand_refund", 4000, 2),       # the resumed invocation re-ran the tool
    ("approval_revoked", 2000, 1),  # the session state still said approved
    ("cap_race", 2000, 1),          # measured: the two tool calls did not overlap
])
def test_alone_as_measured(cell, row, cents, refunds):
    c = cell(row, "alone")
    assert (c["refunded_cents"], c["refunds"]) == (cents, refunds), c
