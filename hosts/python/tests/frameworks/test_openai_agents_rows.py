"""The four rows in the OpenAI Agents SDK (issue 15), alone and with Interlock inside, from
the one scenario module the experiment script runs (experiments/frameworks/openai_agents.py):
a "with" cell that stops holding fails here, and the "alone" cells are pinned as measured, so
results/frameworks/openai_agents.json cannot change silently."""

import sys
from typing import Any, Dict, Tuple

import pytest
from rows import REPO, ROWS, World

sys.path.insert(0, str(REPO / "experiments" / "frameworks"))
import openai_agents as scenarios  # type: ignore[import-not-found]  # noqa: E402 - needs the path above

_CELLS: Dict[Tuple[str, str], Dict[str, Any]] = {}


@pytest.fixture
def cell(tmp_path_factory):
    def run(row: str, mode: str) -> Dict[str, Any]:
        if (row, mode) not in _CELLS:
            world = World.create(tmp_path_factory.mktemp(f"{row}-{mode}"))
            _CELLS[row, mode] = scenarios.run_row(row, mode, world)
        return _CELLS[row, mode]
    return run


def test_reply_lost_with_interlock_is_one_refund_found_by_lookup(cell):
    c = cell("reply_lost", "with")
    assert (c["refunded_cents"], c["refunds"], c["state"]) == (2000, 1, "COMMITTED"), c


def test_hand_refund_with_interlock_refuses_the_resend(cell):
    c = cell("hand_refund", "with")
    # The approver saw refunded_total 0; it is 2000 now: the approval went stale.
    assert (c["refunded_cents"], c["refunds"], c["state"], c["reason"]) == (2000, 1, "REFUSED", "approval_stale"), c


def test_approval_revoked_with_interlock_sends_nothing(cell):
    c = cell("approval_revoked", "with")
    assert (c["refunded_cents"], c["refunds"], c["state"], c["reason"]) == (0, 0, "REFUSED", "approval_revoked"), c


def test_cap_race_with_interlock_lets_one_through(cell):
    c = cell("cap_race", "with")
    assert (c["refunded_cents"], c["refunds"]) == (2000, 1), c
    assert (c["state"], c["reason"]) == ("COMMITTED/REFUSED", "-/cap_exceeded"), c


@pytest.mark.parametrize("row,cents,refunds", [
    ("reply_lost", 2000, 1),        # the tool call's id as the key: the resend deduped
    ("hand_refund", 4000, 2),       # nothing re-checks the order
    ("approval_revoked", 0, 0),     # the resume re-asks the approvals store
    ("cap_race", 4000, 2),          # both read the cap before either refunded
])
def test_alone_as_measured(cell, row, cents, refunds):
    c = cell(row, "alone")
    assert (c["refunded_cents"], c["refunds"]) == (cents, refunds), c


def test_every_row_is_covered():
    assert set(ROWS) == {"reply_lost", "hand_refund", "approval_revoked", "cap_race"}
