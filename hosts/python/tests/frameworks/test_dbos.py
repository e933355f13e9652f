"""DBOS (issue 15): the four rows on a real DBOS runtime (SQLite system database), real
worker processes SIGKILLed, DBOS's own recovery at the next launch resuming the workflows;
alone and with Interlock inside. The scenarios are dbos_worker.py's (the experiment script
runs the same ones)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest

pytest.importorskip("dbos", reason="needs interlock[dbos] (dbos)")

import dbos_worker as dw  # noqa: E402
from rows import CAP_CENTS  # noqa: E402


def row(name: str, gated_run: bool, tmp_path: Path) -> Dict[str, Any]:
    return dw.run_row(name, gated_run, tmp_path / "world")


# -- the "with Interlock" cells: each fails if it stops holding


def test_with_reply_lost_is_one_refund(tmp_path: Path) -> None:
    cell = row("reply_lost", True, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["state"]) == (2000, 1, "COMMITTED"), cell


def test_with_hand_refund_refuses_the_resend(tmp_path: Path) -> None:
    cell = row("hand_refund", True, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["state"]) == (2000, 1, "REFUSED"), cell


def test_with_approval_revoked_sends_nothing(tmp_path: Path) -> None:
    cell = row("approval_revoked", True, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["state"]) == (0, 0, "REFUSED"), cell


def test_with_cap_race_lets_one_through(tmp_path: Path) -> None:
    cell = row("cap_race", True, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["states"]) == (2000, 1, ["COMMITTED", "REFUSED"]), cell


# -- the "alone" cells, as measured (so the table cannot change silently)


def test_alone_reply_lost_is_deduped_by_its_key(tmp_path: Path) -> None:
    cell = row("reply_lost", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (2000, 1), cell


def test_alone_hand_refund_pays_twice(tmp_path: Path) -> None:
    cell = row("hand_refund", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (4000, 2), cell


def test_alone_approval_revoked_still_sends(tmp_path: Path) -> None:
    cell = row("approval_revoked", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"], cell["workflow_result"]) == (2000, 1, "REFUNDED"), cell


def test_alone_cap_race_pays_both(tmp_path: Path) -> None:
    cell = row("cap_race", False, tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (4000, 2) and cell["refunded_cents"] > CAP_CENTS, cell
