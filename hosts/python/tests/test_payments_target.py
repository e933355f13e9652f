"""The payments target routes the gate's steps to the service's component, which answers
them itself (adapters/payments-sim ``target``): the replies are the component's, unchanged,
and a refusal lands in the journal as the service's code, the same text the CLI and Node
hosts record (hosts/cli/tests/rejection.rs, hosts/node/test/payments.test.js)."""

import json

import pytest
from wasmtime.component import Variant

import conformance_driver as cd
from interlock.clock import FakeClock
from interlock.errors import UnknownTarget
from interlock.gate import Request
from interlock.journal import JOURNAL_FILE
from interlock.payments_sim import Payments, ServiceError
from interlock.targets import PaymentsTarget

T0 = 1_800_000_000_000
EFFECT = json.dumps({"order": "order_881", "amount_cents": 2000})
ID = "0123456789abcdef0123456789abcdef"

# The order was paid 1000 cents; the agent refunds 2000. The premises hold, so the gate
# sends, and the service refuses: over the balance.
VECTOR = {
    "id": "rejected-t1", "fault": "-", "title": "the service refuses the refund (over the balance)",
    "tier": "1", "paid_cents": 1000,
    "steps": [{"op": "decide", "task": "t1", "amount_cents": 2000}, {"op": "send", "task": "t1"}],
    "expect": {
        "refunded_cents": 0, "refund_records": 0,
        "tasks": {"t1": {"state": "REFUSED", "reason": "target_rejected", "executed": "no"}},
    },
}
DETAIL = '"detail":"exceeds_balance: order=\\"order_881\\" requested_cents=2000 remaining_cents=1000"'


def test_a_refusal_records_the_services_code_as_every_host_does(tmp_path):
    report = cd.run(VECTOR, tmp_path)
    assert report.failures == []
    lines = (tmp_path / JOURNAL_FILE).read_text().splitlines()
    refused = [line for line in lines if "REFUSED" in line]
    assert len(refused) == 1, lines
    assert DETAIL in refused[0], refused[0]


def setup(tier, path=None):
    service = Payments.create(path, tier) if path else Payments.in_memory(tier)
    service.add_order("order_881", 10_000)
    return service, PaymentsTarget(service, FakeClock(T0))


def apply(effect=EFFECT, key=ID, effect_id=ID):
    return Request("apply", effect_id, "payments", effect, idempotency_key=key)


def query(effect=EFFECT, effect_id=ID):
    return Request("query", effect_id, "payments", effect)


def capture(names, effect=EFFECT):
    return Request("capture", ID, "payments", effect, names=tuple(names))


def test_each_step_is_answered_by_the_service_its_codes_passed_through():
    service, target = setup("2")
    applied = Variant("applied", '{"amount_cents":2000,"refund_id":"re_0001"}')
    assert target.apply(apply()) == applied
    assert target.apply(apply(json.dumps({"order": "nope", "amount_cents": 1}))) == Variant(
        "rejected", 'unknown_order: order="nope"')
    assert target.apply(apply(json.dumps({"order": "order_881", "amount_cents": 8001}))) == Variant(
        "rejected", 'exceeds_balance: order="order_881" requested_cents=8001 remaining_cents=8000')
    assert target.apply(apply("{not json")) == Variant("rejected", "invalid_effect: not_json")
    assert target.capture(capture(["refunded_by_others_cents", "eligible"])) == Variant(
        "captured", '{"eligible":true,"refunded_by_others_cents":0}')
    assert target.capture(capture(["mood"])) == Variant("failed", 'unknown_premise: name="mood"')
    assert target.capture(capture(["eligible"], '{"order":1}')) == Variant(
        "failed", 'invalid_effect: field="/order"')
    assert target.query(query()) == Variant("found", applied.payload)
    assert target.query(query(effect_id="f" * 32)) == Variant("not-found")
    assert service.refund_count() == 1

    _, tier1 = setup("1")
    assert tier1.query(query()) == Variant("failed", "lookup_unsupported")
    tier1.apply(apply())
    assert tier1.apply(apply(json.dumps({"order": "order_881", "amount_cents": 1}))) == Variant(
        "rejected", f'idempotency_mismatch: key="{ID}"')


def test_an_applied_refund_is_stored_before_the_reply_else_it_is_unknown(tmp_path):
    state = tmp_path / "state" / "payments.json"
    state.parent.mkdir()
    service, target = setup("1", state)
    assert target.apply(apply()).tag == "applied"
    assert len(json.loads(state.read_text())["refunds"]) == 1
    # The state can no longer be stored: a refusal changed nothing, so it stays a refusal;
    # a refund the service made may or may not survive.
    state.unlink()
    state.parent.rmdir()
    refused = target.apply(apply(json.dumps({"order": "nope", "amount_cents": 1}), key="k2"))
    assert refused.tag == "rejected"
    reply = target.apply(apply(key="k3", effect_id="e" * 32))
    assert reply.tag == "unknown" and reply.payload.startswith('state_io: message="'), reply
    assert service.refund_count() == 2


def test_a_step_for_another_target_is_a_host_bug_raised_never_answered():
    _, target = setup("1")
    for kind in ("capture", "authorize", "apply", "query"):
        with pytest.raises(UnknownTarget):
            getattr(target, kind)(Request(kind, ID, "mail", EFFECT, agent="a", idempotency_key="k"))


def test_service_errors_carry_the_case_the_payload_and_the_crates_words():
    service = Payments.in_memory("1")
    with pytest.raises(ServiceError) as e:
        service.refund("nope", 1, now_ms=T0)
    assert (e.value.case, e.value.payload, str(e.value)) == ("unknown-order", "nope", "unknown order nope")
    service.add_order("order_881", 1000)
    with pytest.raises(ServiceError) as e:
        service.refund("order_881", 2000, now_ms=T0)
    assert e.value.case == "exceeds-balance"
    assert getattr(e.value.payload, "remaining-cents") == 1000
    assert str(e.value) == "refund of 2000 cents on order order_881 exceeds the remaining 1000 cents"
    with pytest.raises(ServiceError, match="^this payments service offers no lookup by reference$"):
        service.find_by_reference("x")
