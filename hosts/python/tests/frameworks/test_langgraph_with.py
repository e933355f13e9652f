"""The four rows with Interlock inside LangGraph (real killed workers, the SQLite
checkpointer resuming them): each cell must hold at $20 ($0 for the revoked approval).
The scenarios are langgraph_rows.py, the same ones experiments/frameworks/langgraph_experiment.py runs."""

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite", reason="needs interlock[langchain] and langgraph-checkpoint-sqlite")

import langgraph_rows  # noqa: E402


def test_reply_lost_is_recovered_by_lookup_and_the_rerun_replays(tmp_path):
    cell = langgraph_rows.run_row("reply_lost", "with", tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (2000, 1), cell
    assert cell["recovered"] == ["COMMITTED"] and cell["states"] == ["COMMITTED"], cell


def test_hand_refund_during_the_outage_is_refused(tmp_path):
    cell = langgraph_rows.run_row("hand_refund", "with", tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (2000, 1), cell  # the hand refund only
    assert cell["recovered"] == ["REFUSED (premise_changed)"], cell
    assert cell["states"] == ["REFUSED (premise_changed)"], cell


def test_approval_revoked_during_the_outage_sends_nothing(tmp_path):
    cell = langgraph_rows.run_row("approval_revoked", "with", tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (0, 0), cell
    assert cell["recovered"] == ["REFUSED (approval_revoked)"], cell


def test_two_refunds_race_the_cap_one_is_refused(tmp_path):
    cell = langgraph_rows.run_row("cap_race", "with", tmp_path)
    assert (cell["refunded_cents"], cell["refunds"]) == (2000, 1), cell
    assert sorted(cell["states"]) == ["COMMITTED", "REFUSED (cap_exceeded)"], cell
