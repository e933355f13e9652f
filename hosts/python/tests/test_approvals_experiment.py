"""The approvals experiment (experiments/approvals/run.py, results/approvals.md) in its quick
mode: a smaller day of refund requests through the gate, scripted people and the payments
simulator. Its invariants: no wrong refund in the simulator's ledger, nothing owed left
unpaid, and every count adds up."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Dict

RUN = Path(__file__).resolve().parents[3] / "experiments" / "approvals" / "run.py"


def quick_day() -> Dict[str, Any]:
    spec = importlib.util.spec_from_file_location("approvals_run", RUN)
    assert spec is not None and spec.loader is not None, RUN
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    figures: Dict[str, Any] = module.run(quick=True)
    return figures


def test_the_quick_day_pays_no_wrong_refund_and_its_counts_add_up() -> None:
    f = quick_day()
    assert f["wrong_refunds"] == []
    assert f["owed_but_not_sent"] == []
    # Every request ends once, and the mix is the requests.
    assert sum(f["ends"].values()) == f["requests"] == sum(f["mix"].values())
    assert all(f["mix"][c] >= 1 for c in f["mix"]), "the quick day has every category"
    # An approval item is by rule or for a person; every one a person gets is in the inbox.
    assert f["approved_by_rule"] + f["sent_to_a_person_for_approval"] == f["approval_requests_recorded"]
    assert f["approval_items_in_inbox"] == f["sent_to_a_person_for_approval"]
    assert f["items_shown_in_inbox"] == f["approval_items_in_inbox"] + f["refusals_shown_to_acknowledge"]
    # The ledger: one agent refund per request that ended COMMITTED (a replay sends nothing).
    assert f["ledger_refunds"]["by_agent"] == f["ends"].get("COMMITTED", 0)
    assert f["ends"].get("COMMITTED replayed", 0) == f["mix"]["retry_same"]
    # The day's people and deadlines did what the issue asks, never a silent no.
    assert f["timeouts_recorded_as_a_no"] == 0
    assert f["expired"] >= f["mix"]["flagged_late"]
    assert f["escalated"] >= 1 and f["returned_stale"] == f["mix"]["stale_full"] + f["mix"]["stale_partial"]
    assert any("revoked" in d["problem"] for d in f["decisions_refused"]), f["decisions_refused"]
    # An approval stops working the moment its approver loses access.
    assert f["approval_then_approver_revoked_then_send"]["refunds_in_ledger"] == 0
    assert "approval_pending" in f["approval_then_approver_revoked_then_send"]["after_revocation"]
    checks = {c["check"] for c in f["caught"]}
    assert {"premises re-read right before the send", "effect identity: the same case again",
            "approval returned: the premises its approvers saw changed"} <= checks, checks
