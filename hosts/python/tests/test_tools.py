"""protect(): the tool-gating loop on plain functions (the mapping is the component's; these
check the host's side: configuration and authority refused at start, pass-through, the
send's errors, async tools, shared journals, bad calls recording nothing)."""

import asyncio
import json
from typing import Any, List

import pytest

from interlock import InvalidField, Rejected
from interlock.payments_sim import Payments
from interlock.tools import protect

LEASE = "case-4471"
REFUND = {
    "key": ["order_id"],
    "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                 "fields": ["refunded_total"]},
    "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
    "idempotency_argument": "reference",
    "timeout_ms": 1000,
}
ARGS = {"order_id": "881", "amount_cents": 2000}


def world(tmp_path, tier="2", **tool):
    payments = Payments.in_memory(tier)
    payments.add_order("881", 10_000)
    calls: List[Any] = []

    def get_order(order_id, excluding=None):
        calls.append(("get_order", order_id, excluding))
        return {"refunded_total": payments.premises(order_id, excluding)["refunded_by_others_cents"]}

    def create_refund(order_id, amount_cents, reference=None):
        calls.append(("create_refund", order_id, amount_cents, reference))
        return payments.refund(order_id, amount_cents, reference, reference)

    def find_refund(reference):
        return {"found": payments.find_by_reference(reference)}

    def echo(text):
        return {"echo": text}

    config = {"journal_dir": str(tmp_path / "journal"), "tools": {"create_refund": dict(REFUND, **tool)}}
    fns = {"get_order": get_order, "create_refund": create_refund, "find_refund": find_refund, "echo": echo}
    return payments, calls, config, fns


def test_a_refund_then_its_duplicate(tmp_path):
    payments, calls, config, fns = world(tmp_path)
    with protect(fns, config, authority={"lease": LEASE}) as tools:
        tools.lease(LEASE, 3600)
        first = tools["create_refund"](**ARGS)
        again = tools["create_refund"](**ARGS)
    assert first["ok"] and first["outcome"]["state"] == "COMMITTED", first
    assert first["result"]["amount_cents"] == 2000
    assert first["message"].startswith("create_refund done; it happened once")
    assert again["ok"] and again["outcome"]["replayed"]
    assert payments.refund_count() == 1
    # The gate's id was passed as the premise tool's `excluding` and as the send's reference.
    effect = first["outcome"]["effect_id"]
    assert ("get_order", "881", effect) in calls and ("create_refund", "881", 2000, effect) in calls


def test_untouched_tools_pass_through(tmp_path):
    _, _, config, fns = world(tmp_path)
    with protect(fns, config, authority={"lease": LEASE}) as tools:
        assert tools["echo"] is fns["echo"] and tools["get_order"] is fns["get_order"]
        assert set(tools) == set(fns)


@pytest.mark.parametrize("config,pointer", [
    ({"tools": {"create_refund": {"key": []}}}, "/tools/create_refund/key"),
    ({"tools": {"create_refund": dict(REFUND, premise={})}}, "/tools/create_refund/premise"),
    ({"tools": {}, "jorunal_dir": "x"}, "/jorunal_dir"),
])
def test_a_bad_config_is_refused_at_protect_with_its_pointer(tmp_path, config, pointer):
    _, _, _, fns = world(tmp_path)
    with pytest.raises(InvalidField) as e:
        protect(fns, dict(config, journal_dir=str(tmp_path / "j")), authority={"lease": LEASE})
    assert e.value.field == pointer
    assert not (tmp_path / "j").exists()  # nothing created


def test_no_authority_runs_under_the_standing_lease_announced_or_is_refused_when_strict(tmp_path, caplog):
    _, _, config, fns = world(tmp_path)
    with pytest.raises(InvalidField) as e:
        protect(fns, config, strict=True)
    assert e.value.field == "/tools/create_refund/authority"
    # By default: the agent's standing lease, announced once at start, granted at first use.
    with caplog.at_level("WARNING", logger="interlock"):
        tools = protect(fns, config, agent="support")
    assert [r.getMessage() for r in caplog.records if r.name == "interlock"] == [
        tools.gate.host().standing_notice("support")]
    out = tools["create_refund"](**ARGS)
    assert out["ok"], out
    receipt = json.loads(tools.gate.host().receipt(out["outcome"]["effect_id"], None))
    assert receipt["proposed"]["authority"] == {"lease": "support-standing"}
    tools.close()
    # The tool's own authority is enough.
    _, _, config, fns = world(tmp_path, authority={"lease": LEASE})
    protect(fns, config).close()


def test_a_gated_tool_needs_its_function(tmp_path):
    _, _, config, fns = world(tmp_path)
    del fns["create_refund"]
    with pytest.raises(InvalidField) as e:
        protect(fns, config, authority={"lease": LEASE})
    assert e.value.field == "/tools/create_refund"


def test_bad_calls_record_nothing(tmp_path):
    payments, _, config, fns = world(tmp_path)

    def failing_get_order(order_id, excluding=None):
        raise ConnectionError("the orders service is down")
    with protect(fns, config, authority={"lease": LEASE}) as tools:
        tools.lease(LEASE, 3600)
        missing = tools["create_refund"](amount_cents=2000)
        tools.functions["get_order"] = failing_get_order
        down = tools["create_refund"](**ARGS)
        assert tools.gate.host().open_effects() == []
    assert not missing["ok"] and isinstance(missing["error"], InvalidField)
    assert missing["error"].field == "/arguments/order_id" and "nothing was recorded" in missing["message"]
    assert not down["ok"] and "the orders service is down" in down["message"]
    assert payments.refund_count() == 0
    lines = (tmp_path / "journal" / "journal.jsonl").read_text().splitlines()
    assert all(json.loads(x)["stream"].startswith("lease:") for x in lines)


def test_rejected_is_refused_and_any_other_exception_is_unknown_then_recovered(tmp_path):
    payments, _, config, fns = world(tmp_path)
    real = fns["create_refund"]

    def refusing(order_id, amount_cents, reference=None):
        raise Rejected("card expired")

    def lost_reply(order_id, amount_cents, reference=None):
        real(order_id, amount_cents, reference)
        raise TimeoutError("the reply was lost")
    with protect(dict(fns, create_refund=refusing), config, authority={"lease": LEASE}) as tools:
        tools.lease(LEASE, 3600)
        out = tools["create_refund"](**ARGS)
    assert not out["ok"] and out["outcome"]["reason"] == "target_rejected" and out["outcome"]["executed"] == "no"
    config["journal_dir"] = str(tmp_path / "j2")
    with protect(dict(fns, create_refund=lost_reply), config, authority={"lease": LEASE}) as tools:
        tools.lease(LEASE, 3600)
        out = tools["create_refund"](**ARGS)
        assert out["outcome"]["state"] == "DISPATCHED" and out["outcome"]["reason"] == "target_unavailable"
        assert "not finished" in out["message"]
        report = tools.recover()  # waits the claim out, then finds the refund
        assert [o.status for o in report] == ["COMMITTED"]
    assert payments.refund_count() == 1


def test_async_tools(tmp_path):
    payments, _, config, fns = world(tmp_path)

    async def create_refund(order_id, amount_cents, reference=None):
        await asyncio.sleep(0)
        return payments.refund(order_id, amount_cents, reference, reference)

    async def go():
        with protect(dict(fns, create_refund=create_refund), config, authority={"lease": LEASE}) as tools:
            tools.lease(LEASE, 3600)
            await tools.arecover()
            return await tools["create_refund"](**ARGS)
    out = asyncio.run(go())
    assert out["ok"] and payments.refund_count() == 1


def test_a_shared_sqlite_journal(tmp_path):
    payments, _, config, fns = world(tmp_path)
    url = "sqlite://" + str(tmp_path / "journal.db")
    with protect(fns, config, journal=url, authority={"lease": LEASE}) as tools:
        tools.lease(LEASE, 3600)
        assert tools["create_refund"](**ARGS)["ok"]
    assert not (tmp_path / "journal").exists() and payments.refund_count() == 1


def test_a_premise_or_lookup_tool_without_a_function_is_refused_at_protect(tmp_path):
    from interlock import InvalidField
    from interlock.tools import protect

    config = {"tools": {"create_refund": {
        "key": ["order_id"], "authority": {"lease": "L"},
        "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"}}}}
    with pytest.raises(InvalidField) as e:
        protect({"create_refund": lambda **a: a}, config, journal=str(tmp_path))
    assert e.value.field == "/tools/create_refund/lookup/tool"
    assert (tmp_path / "journal.jsonl").read_bytes() == b""  # nothing recorded


def test_a_decider_with_no_client_to_ask_leaves_the_call_pending(tmp_path):
    # protect() carries no MCP client: the component's question for the configuration's
    # decider is answered that no one can be asked, and the call waits, as without one.
    payments, _, config, fns = world(tmp_path)
    config["decider"] = "alice@shop"
    rules = {"rules": [{"name": "large", "target": "create_refund",
                        "when": [{"field": "/effect/amount_cents", "over": 1000}],
                        "then": "person", "route": "finance"}],
             "routes": {"finance": {"primary_approvers": ["alice@shop"]}}}
    with protect(fns, config, authority={"lease": LEASE}) as tools:
        for lease in (LEASE, "alice@shop"):
            tools.lease(lease, 3600)
        tools.gate.host().set_approval_rules(json.dumps(rules))
        out = tools["create_refund"](**ARGS)
        aout = asyncio.run(tools.gate.acall("create_refund", ARGS, tools._acall))
    for o in (out, aout.as_dict()):
        assert not o["ok"] and o["outcome"]["reason"] == "approval_pending", o
        assert "create_refund is pending a person's approval (item " in o["message"], o
    assert payments.refund_count() == 0
