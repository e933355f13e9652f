"""The four rows in LangGraph alone, as measured (so the table cannot silently change): the
same killed workers and checkpointer as test_langgraph_with.py, the tools called as the
quickstart writes them (no key, no cap, LangGraph's own interrupt as the approval)."""

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs interlock[langchain] and langgraph-checkpoint-sqlite")

import langgraph_rows  # noqa: E402

MEASURED = {  # (refunded_cents, refunds)
    "reply_lost": (4000, 2),        # the resumed tool node sends the refund again
    "hand_refund": (4000, 2),       # the hand refund, then the resumed tool node's
    "approval_revoked": (2000, 1),  # the go is in the checkpoint; nothing re-asks it
    "cap_race": (4000, 2),          # no cap: both calls land
}


@pytest.mark.parametrize("row", sorted(MEASURED))
def test_alone_as_measured(tmp_path, row):
    cell = langgraph_rows.run_row(row, "alone", tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == MEASURED[row], cell
