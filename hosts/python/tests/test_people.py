"""People in the loop through the Python API: approval rules, the inbox, decisions, and a
service's confirmation signed by the official Standard Webhooks library (not ours)."""
from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any, Callable, Tuple

import pytest
from standardwebhooks.webhooks import Webhook

from interlock import Interlock, InvalidField
from interlock.gate import Reason, State
from interlock.payments_sim import Payments

RULES = {
    "rules": [{"name": "large", "target": "refund",
               "when": [{"field": "/effect/amount", "over": 5000}],
               "then": "person", "route": "finance", "approvers_needed": 2}],
    "routes": {"finance": {"primary_approvers": ["alice@shop", "bob@shop"],
                           "justification_required": True}},
}


def setup(tmp_path: Path) -> Tuple[Interlock, Payments, Callable[..., Any]]:
    payments = Payments.create(str(tmp_path / "payments.json"), "2")
    payments.add_order("order_881", 100_000)
    gate = Interlock(str(tmp_path / "journal"))
    gate.set_approval_rules(RULES)
    for person in ("alice@shop", "bob@shop"):
        gate.lease(person, 3600)

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    return gate, payments, refund


def test_a_large_refund_waits_for_two_people_then_goes_out_once(tmp_path: Path) -> None:
    gate, payments, refund = setup(tmp_path)
    assert gate.approval_rules() == RULES
    out = refund("order_881", 9000)
    assert (out.status, out.reason) == (State.PROPOSED, Reason.APPROVAL_PENDING)
    assert payments.refund_count() == 0
    items = gate.inbox()
    assert [(i["item"], i["kind"], i["status"]) for i in items] == [(out.effect_id, "approval", "pending")]

    with pytest.raises(InvalidField) as e:
        gate.decide(out.effect_id, "alice@shop", "approve")
    assert e.value.field == "/why"
    gate.decide(out.effect_id, "alice@shop", "approve", why="customer verified")
    with pytest.raises(InvalidField, match="already approved"):
        gate.decide(out.effect_id, "alice@shop", "approve", why="again")
    assert refund("order_881", 9000).reason == Reason.APPROVAL_PENDING
    after = gate.decide(out.effect_id, "bob@shop", "approve", why="fine")
    assert after["approved_by"] == ["alice@shop", "bob@shop"]
    assert gate.inbox() == []
    assert refund("order_881", 9000).status == State.COMMITTED
    assert payments.refund_count() == 1
    board = gate.scoreboard()
    assert board["requests"] == 1
    assert {k: board["routes"]["finance"][k] for k in ("items", "approved", "decided", "deadlines_missed")} == \
        {"items": 1, "approved": 1, "decided": 1, "deadlines_missed": 0}
    receipt = gate.receipt(out.effect_id)
    assert [d["decider"] for d in receipt["people"]["decisions"]] == ["alice@shop", "bob@shop"]


def test_a_rejection_is_a_persons_no(tmp_path: Path) -> None:
    gate, payments, refund = setup(tmp_path)
    out = refund("order_881", 9000)
    gate.decide(out.effect_id, "bob@shop", "reject", why="fraud pattern")
    again = refund("order_881", 9000)
    assert (again.status, again.reason, again.return_to) == (State.REFUSED, Reason.APPROVAL_REJECTED, "bob@shop")
    assert payments.refund_count() == 0


def test_a_standard_webhook_confirms_and_a_tampered_one_records_nothing(tmp_path: Path) -> None:
    gate, payments, refund = setup(tmp_path)
    out = refund("order_881", 2000)
    assert out.status == State.COMMITTED
    secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = json.dumps({"type": "refund.succeeded",
                       "data": {"interlock_effect_id": out.effect_id, "status": "succeeded"}})
    now = datetime.datetime.fromtimestamp(gate.clock.now_ms() / 1000, tz=datetime.timezone.utc)
    signature = Webhook(secret).sign("msg_1", now, body)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": signature}
    with pytest.raises(InvalidField, match="changed, or signed with another secret"):
        gate.webhook("standard-webhooks", headers, body.replace("succeeded", "failed").encode(), secret)
    with pytest.raises(InvalidField, match="changed, or signed with another secret"):
        gate.webhook("standard-webhooks", headers, body.encode(), "whsec_" + "A" * 32)
    recorded = gate.webhook("standard-webhooks", headers, body.encode(), secret)
    assert recorded == {"effect_id": out.effect_id, "event": "msg_1", "recorded": "confirmed"}
    with pytest.raises(InvalidField, match="replay"):
        gate.webhook("standard-webhooks", headers, body.encode(), secret)
    receipt = gate.receipt(out.effect_id)
    assert json.loads(receipt.text)["final"] == "CONFIRMED"
