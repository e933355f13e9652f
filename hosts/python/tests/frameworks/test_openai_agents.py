"""interlock.openai_agents: gated function tools in the OpenAI Agents SDK's real Runner loop,
driven by the SDK's own scripted model (agents.testing.ScriptedModel): no key, no network.
The first test is the README's quickstart, as written there."""

import asyncio
import json

import pytest
from rows import LEASE, ORDER

from interlock import InvalidField

pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from interlock.openai_agents import gated_function_tools  # noqa: E402

NO_TRACE = RunConfig(tracing_disabled=True)
REFUND = {"order_id": ORDER, "amount_cents": 2000}


def refund_calls(*call_ids):
    return [[function_call("create_refund", REFUND, call_id=c)] for c in call_ids] + [[assistant_message("Done.")]]


def test_quickstart(world):
    tools_by_name = world.tools()          # plain functions: get_order, create_refund, find_refund
    config = world.config()                # the tool-gating config (ARCHITECTURE.md, "Tool gating")
    model = ScriptedModel(refund_calls("call_1", "call_2"))  # the model asks twice

    # --- the README's snippet
    from agents import Agent, Runner

    from interlock.openai_agents import gated_function_tools

    tools = gated_function_tools(tools_by_name, config, authority={"lease": "case-4471"})
    tools.lease("case-4471", ttl_s=3600)
    tools.recover()                        # once, at startup
    agent = Agent(name="support", instructions="Refund what the case approves.", model=model, tools=list(tools))
    result = asyncio.run(Runner.run(agent, "Refund $20 on order 881.", run_config=NO_TRACE))
    # --- end of the snippet

    first, again = [c["outcome"] for c in tools.calls]
    tools.close()
    assert first["state"] == "COMMITTED" and again["replayed"]
    assert world.refund_count() == 1 and world.refunded_cents() == 2000
    assert result.final_output == "Done."
    # What the model read is the component's reply, the same words as every host's.
    last = model.last_call
    assert last is not None
    told = [i["output"] for i in last.input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert told[0].startswith("create_refund done; it happened once"), told


def test_the_model_never_sees_the_idempotency_argument(world):
    with gated_function_tools(world.tools(), world.config(), authority={"lease": LEASE}) as tools:
        schema = tools.by_name("create_refund").params_json_schema
        assert set(schema["properties"]) == {"order_id", "amount_cents", "case_id"}, schema
        # Tools the config does not gate are the SDK's function_tool, unchanged.
        assert "excluding" in tools.by_name("get_order").params_json_schema["properties"]


@pytest.mark.parametrize("tool,pointer", [
    ({"key": []}, "/tools/create_refund/key"),
    ({"key": ["order_id"], "premise": {}}, "/tools/create_refund/premise"),
])
def test_a_bad_config_is_refused_at_start_with_its_pointer(world, tool, pointer):
    config = {"journal_dir": str(world.journal_dir), "tools": {"create_refund": tool}}
    with pytest.raises(InvalidField) as e:
        gated_function_tools(world.tools(), config, authority={"lease": LEASE})
    assert e.value.field == pointer
    assert not world.journal_dir.exists()


def test_no_authority_when_strict_and_a_missing_lookup_tool_are_refused_at_start(world):
    with pytest.raises(InvalidField) as e:
        gated_function_tools(world.tools(), world.config(), strict=True)
    assert e.value.field == "/tools/create_refund/authority"
    fns = world.tools()
    del fns["find_refund"]
    with pytest.raises(InvalidField) as e:
        gated_function_tools(fns, world.config(), authority={"lease": LEASE})
    assert e.value.field == "/tools/create_refund/lookup/tool"


def test_a_run_without_authority_and_a_failing_premise_read_record_nothing(world):
    fns = world.tools()
    get_order = fns["get_order"]

    down = {"now": False}

    def flaky_get_order(order_id, excluding=None):
        if down["now"]:
            raise ConnectionError("the orders service is down")
        return get_order(order_id, excluding)

    tools = gated_function_tools(dict(fns, get_order=flaky_get_order), world.config(),
                                 authority=lambda ctx: ctx.context.get("authority"), strict=True)
    try:
        for down["now"], context in ((False, {}), (True, {"authority": {"lease": LEASE}})):
            agent = Agent(name="support", model=ScriptedModel(refund_calls("c")), tools=list(tools))
            asyncio.run(Runner.run(agent, "Refund $20.", context=context, run_config=NO_TRACE))
        no_authority, failed = tools.calls
        assert not no_authority["ok"] and no_authority["error"].field == "/authority"
        assert "nothing was recorded" in no_authority["message"]
        assert not failed["ok"] and "the orders service is down" in failed["message"]
        assert tools.gate.host().open_effects() == []
    finally:
        tools.close()
    assert world.refund_count() == 0
    assert not (world.journal_dir / "journal.jsonl").exists() or all(
        not json.loads(x)["stream"].startswith("effect:")
        for x in (world.journal_dir / "journal.jsonl").read_text().splitlines())
