"""protect_tools(): LangChain BaseTools in, BaseTools out, with LangGraph's prebuilt agent and
LangChain's fake chat model (in this process; the killed-process rows are
test_langgraph_with.py and test_langgraph_alone.py)."""

import asyncio
import json
from typing import Tuple

import pytest

pytest.importorskip("langgraph", reason="needs interlock[langchain] (langchain-core, langgraph)")

import langgraph_rows  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.tools import BaseTool, tool  # noqa: E402
from langgraph.prebuilt import create_react_agent  # noqa: E402
from rows import LEASE, ORDER, World  # noqa: E402

from interlock import InvalidField  # noqa: E402
from interlock.langchain_tools import protect_tools  # noqa: E402


def define_tools(world: World) -> Tuple[BaseTool, BaseTool, BaseTool]:
    """The agent's tools as a LangChain user writes them."""
    service = world.tools()

    @tool
    def get_order(order_id: str, excluding: str = "") -> dict:
        """Reads an order: whether it can be refunded and how much was refunded."""
        return service["get_order"](order_id, excluding or None)

    @tool
    def create_refund(order_id: str, amount_cents: int, reference: str = "") -> dict:
        """Refunds amount_cents on an order."""
        return service["create_refund"](order_id, amount_cents, reference or None)

    @tool
    def find_refund(reference: str) -> dict:
        """Finds the refund made with this reference."""
        return service["find_refund"](reference)

    return get_order, create_refund, find_refund


def agent_model(*turns):
    model = langgraph_rows.model("reply_lost")
    if turns:
        model.responses = list(turns)
    return model


def test_the_quickstart(world):
    get_order, create_refund, find_refund = define_tools(world)
    config = world.config(authority={"lease": LEASE})  # the tool-gating config, as the MCP proxy's

    # -- the README's quickstart (the original's snippet, plus the agent)
    from interlock.langchain_tools import protect_tools

    tools = protect_tools([get_order, create_refund, find_refund], config)
    tools.recover()  # once, at startup
    tools.lease(LEASE, 3600)  # the case's authority
    agent = create_react_agent(agent_model(), tools)
    out = agent.invoke({"messages": [("user", "Refund $20 on order_881.")]})
    # --

    assert all(isinstance(t, BaseTool) for t in tools) and [t.name for t in tools] == [
        "get_order", "create_refund", "find_refund"]
    assert tools[0] is get_order and tools[2] is find_refund  # not gated: the same objects
    [msg] = [m for m in out["messages"] if m.type == "tool"]
    assert msg.content.startswith("create_refund done; it happened once"), msg.content
    assert msg.artifact["outcome"]["state"] == "COMMITTED" and msg.artifact["ok"]
    assert world.refund_count() == 1 and world.refunded_cents() == 2000
    effect = msg.artifact["outcome"]["effect_id"]
    assert world.refunds()[0]["reference"] == effect  # the gate's key, not the model's
    # The same call again (a resumed graph re-running its tool node): replayed, not sent.
    again = tools[1].invoke({"order_id": ORDER, "amount_cents": 2000})
    assert "happened once" in again and world.refund_count() == 1
    tools.close()


def test_a_refused_call_is_told_to_the_model_and_sends_nothing(world):
    tools = protect_tools(define_tools(world), world.config(authority={"lease": LEASE}))
    tools.lease(LEASE, 3600)
    world.hand_refund()  # refunded by hand: the premise the agent decides on says $20 already
    call = {"name": "create_refund", "args": {"order_id": ORDER, "amount_cents": 2000}, "id": "c1",
            "type": "tool_call"}
    out = create_react_agent(agent_model(AIMessage("", tool_calls=[call]), AIMessage("ok")), tools).invoke(
        {"messages": [("user", "Refund $20 on order_881.")]})
    [msg] = [m for m in out["messages"] if m.type == "tool"]
    # Decided now on refunded_total = 2000: committed; the gate does not judge the decision.
    assert msg.artifact["outcome"]["state"] == "COMMITTED"
    # A call missing its key argument: refused before anything is recorded, said to the model.
    r = tools.gate.call("create_refund", {"amount_cents": 2000}, tools._call)
    assert not r.ok and "nothing was recorded" in r.message and isinstance(r.error, InvalidField)
    assert r.error.field == "/arguments/order_id"
    assert world.refund_count() == 2
    tools.close()


@pytest.mark.parametrize("config,pointer", [
    ({"tools": {"create_refund": {"key": []}}}, "/tools/create_refund/key"),
    ({"tools": {"create_refund": {"key": ["order_id"], "premise": {}}}}, "/tools/create_refund/premise"),
    ({"tools": {"refund_all": {"key": ["order_id"], "authority": {"lease": "x"}}}}, "/tools/refund_all"),
])
def test_bad_configs_are_refused_at_start_with_their_pointer(world, config, pointer):
    journal = world.dir / "bad-journal"
    with pytest.raises(InvalidField) as e:
        protect_tools(define_tools(world), dict(config, journal_dir=str(journal)))
    assert e.value.field == pointer
    assert not journal.exists()  # nothing created


def test_a_tool_without_authority_is_refused_at_start_only_when_strict(world):
    config = {"tools": {"create_refund": {"key": ["order_id"]}}, "journal_dir": str(world.dir / "strict")}
    with pytest.raises(InvalidField) as e:
        protect_tools(define_tools(world), config, strict=True)
    assert e.value.field == "/tools/create_refund/authority"
    assert not (world.dir / "strict").exists()
    protect_tools(define_tools(world), config).close()  # the agent's standing lease


def test_async_tools_and_arecover(world):
    tools = protect_tools(define_tools(world), world.config(authority={"lease": LEASE}))
    tools.lease(LEASE, 3600)

    async def go():
        assert len(await tools.arecover()) == 0
        return await tools[1].ainvoke({"order_id": ORDER, "amount_cents": 2000})

    out = asyncio.run(go())
    assert "happened once" in out and world.refund_count() == 1
    tools.close()


def test_an_approval_authorizes_its_call_and_a_revoke_refuses_it(world):
    from rows import APPROVAL, APPROVER

    tools = protect_tools(define_tools(world), world.config(authority={"approval": APPROVAL}))
    proposal = tools.approve(APPROVAL, APPROVER, "create_refund", {"order_id": ORDER, "amount_cents": 2000})
    assert proposal["premises"] == {"refunded_total": 0} and proposal["authority"] == {"approval": APPROVAL}
    tools.revoke_approval(APPROVAL)
    out = tools[1].invoke({"type": "tool_call", "id": "c", "name": "create_refund",
                           "args": {"order_id": ORDER, "amount_cents": 2000}})
    assert out.artifact["outcome"]["state"] == "REFUSED", out.content
    assert out.artifact["outcome"]["reason"] == "approval_revoked"
    assert world.refund_count() == 0
    tools.close()


def test_an_approval_binds_the_exact_amount(world):
    from rows import APPROVAL, APPROVER

    tools = protect_tools(define_tools(world), world.config(authority={"approval": APPROVAL}))
    tools.approve(APPROVAL, APPROVER, "create_refund", {"order_id": ORDER, "amount_cents": 2000})
    out = tools[1].invoke({"type": "tool_call", "id": "c", "name": "create_refund",
                           "args": {"order_id": ORDER, "amount_cents": 3000}})
    tools.close()
    assert world.refund_count() == 0, json.dumps(out.artifact["outcome"])
    # Another payload under the approved key is another request: not approved.
    assert out.artifact["outcome"]["reason"] == "approval_missing", out.artifact
