"""interlock.integrations.adk: the original's Guard snippet (../shared/seeds, the landing
page) as written, under ADK's real Runner with a scripted BaseLlm; and bad input."""

import asyncio
import sys

import pytest
from rows import LEASE, ORDER, REPO

pytest.importorskip("google.adk")
pytest.importorskip("ap2")
sys.path.insert(0, str(REPO / "experiments" / "frameworks"))
import adk as scenarios  # type: ignore[import-not-found]  # noqa: E402

from interlock.integrations.adk import Guard  # noqa: E402
from interlock.lowlevel import Leases  # noqa: E402


def test_the_original_snippet(world, monkeypatch):
    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    leases = Leases()
    leases.grant(LEASE)
    refunds = scenarios.Refunds(world)
    get_order, issue_refund = scenarios._tools(world)
    monkeypatch.chdir(world.dir)  # the snippet's relative journal folder, here

    # --- the README's snippet (the original's, as written)
    from interlock.integrations.adk import Guard
    guard = Guard(".interlock/adk", leases)
    guard.gate("issue_refund",
               target_for=lambda effect: refunds,  # an EffectTarget: capture, validate_premises, apply, query
               # ctx.state["premises"] is set when the agent decides (the tool that reads the order)
               proposal=lambda args, ctx: {"lease": "case-4471", "request_id": "case-4471",
                                           "premises": ctx.state["premises"],
                                           "effect": {"order": args["order_id"], "amount": args["amount"]}})
    agent = LlmAgent(name="support", model="gemini-2.5-flash", tools=[get_order, issue_refund],
                     before_tool_callback=guard.before_tool_callback)
    guard.recover()  # once, when the process starts
    # --- end of the snippet

    agent.model = scenarios.ScriptedLlm()  # no Gemini here: the scripted model
    runner = InMemoryRunner(agent=agent, app_name="refunds")

    async def run(session: str) -> None:
        await runner.session_service.create_session(app_name="refunds", user_id="u", session_id=session)
        async for _ in runner.run_async(user_id="u", session_id=session, new_message=types.Content(
                role="user", parts=[types.Part(text="Refund $20 on order 881.")])):
            pass
    asyncio.run(run("a"))
    asyncio.run(run("b"))  # the same request again: the same effect, replayed
    guard.close()
    [(_, _, first), (_, _, again)] = guard.outcomes
    assert first.status == "COMMITTED" and again.replayed and again.effect_id == first.effect_id
    assert world.refund_count() == 1 and world.refunded_cents() == 2000


def test_a_bad_proposal_is_answered_to_the_model_and_records_nothing(world):
    guard = Guard(world.dir / "adk", Leases())
    guard.gate("issue_refund", target_for=lambda effect: scenarios.Refunds(world),
               proposal=lambda args, ctx: {"lease": LEASE, "premise": {}, "effect": {"order": ORDER}})

    class Tool:
        name = "issue_refund"
    out = guard.before_tool_callback(Tool(), {"order_id": ORDER}, scenarios._Ctx({}))
    assert out is not None and out["status"] == "ERROR" and "/premise" in out["error"]
    assert "nothing was recorded" in out["message"]
    assert guard.before_tool_callback(type("T", (), {"name": "get_order"})(), {}, None) is None  # not gated
    guard.close()
    assert world.refund_count() == 0
    assert not (world.dir / "adk" / "issue_refund" / "journal.jsonl").exists() or \
        "effect:" not in (world.dir / "adk" / "issue_refund" / "journal.jsonl").read_text()
