"""interlock.integrations.adk: the original's Guard snippet (the landing page's agent.py, run
from its copy tests/seeds/agent.py as written) under ADK's real Runner with a scripted
BaseLlm; and bad input."""

import asyncio
import sys

import pytest
from rows import LEASE, ORDER, REPO

from test_seeds import exec_seed

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
    _, issue_refund = scenarios._tools(world)
    monkeypatch.chdir(world.dir)  # the snippet's relative journal folder, here

    # The landing page's agent.py as written (tests/seeds/agent.py), given the names it uses
    # but does not define.
    ns = exec_seed("agent.py", {"leases": leases, "refunds": refunds, "issue_refund": issue_refund,
                                "LlmAgent": LlmAgent})
    agent, guard = ns["agent"], ns["guard"]

    agent.model = scenarios.ScriptedLlm()  # no Gemini here: the scripted model
    runner = InMemoryRunner(agent=agent, app_name="refunds")
    # The snippet's agent has no tool that reads the order: the premises it decided on are
    # in the session's state from the start (its ctx.state["premises"]).
    decided = {"premises": refunds.capture(ORDER)}

    async def run(session: str) -> None:
        await runner.session_service.create_session(app_name="refunds", user_id="u", session_id=session,
                                                    state=decided)
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
