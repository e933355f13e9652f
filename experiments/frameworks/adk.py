"""The four rows (issue 15) in Google ADK, alone and with Interlock inside (the original's
``Guard`` as ``before_tool_callback``; an AP2 mandate as the approval).

    python experiments/frameworks/adk.py           # writes results/frameworks/adk.json
    python experiments/frameworks/adk.py --quick   # runs every cell, checks, writes nothing

ADK's real Runner, an ``App`` with ``ResumabilityConfig(is_resumable=True)`` and its SQLite
session service (``SqliteSessionService``): a worker forked from this process runs the
invocation and is SIGKILLed at the fault; the restart resumes the same invocation
(``runner.run_async(..., invocation_id=...)``), which ADK documents as at-least-once: the
interrupted tool call runs again. The model is a ``BaseLlm`` subclass answering scripted
function calls (no Gemini, no key, no network).

Alone, ``issue_refund`` passes ADK's function call id as the service's idempotency key. The
approval alone is the session's state (``state["approved"]``, written when the manager
approved): the resumed invocation reads it as it was. With Interlock the approval is an AP2
``CartMandate`` recorded by ``guard.approve_mandate`` and revoked in the journal.

Shared by hosts/python/tests/frameworks/test_adk_rows.py and this script: the cells come
from :func:`run_row` only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, AsyncGenerator, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hosts" / "python" / "tests" / "frameworks"))
warnings.filterwarnings("ignore", message=".*experimental.*")

from ap2.types.mandate import CartContents, CartMandate  # noqa: E402
from ap2.types.payment_request import (  # noqa: E402
    PaymentCurrencyAmount,
    PaymentDetailsInit,
    PaymentItem,
    PaymentMethodData,
    PaymentRequest,
)
from google.adk import version as adk_version  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App, ResumabilityConfig  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions.sqlite_session_service import SqliteSessionService  # noqa: E402
from google.genai import types  # noqa: E402
from rows import APPROVER, CAP_CENTS, LEASE, ORDER, REFUND_CENTS, ROWS, World, not_run, write_results  # noqa: E402

from interlock.integrations.adk import Guard  # noqa: E402
from interlock.lowlevel import Leases  # noqa: E402

APP = "refunds"
USER = "support"
MANDATE = "cart-4471"
MODES = ("alone", "with")
OVERLAP_WAIT_S = 5.0


class ScriptedLlm(BaseLlm):
    """Reads the order, asks for the $20 refund, then says what it got: decided from the
    conversation, so a resumed invocation goes on where it stopped."""

    model: str = "scripted"

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        answered = {p.function_response.name: p.function_response.response
                    for c in llm_request.contents for p in (c.parts or []) if p.function_response}
        if "get_order" not in answered:
            part = types.Part(function_call=types.FunctionCall(id="fc_get", name="get_order",
                                                               args={"order_id": ORDER}))
        elif "issue_refund" not in answered:
            part = types.Part(function_call=types.FunctionCall(id="fc_refund", name="issue_refund",
                                                               args={"order_id": ORDER, "amount": REFUND_CENTS}))
        else:
            part = types.Part(text="Done: " + json.dumps(answered["issue_refund"], default=str))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


class Refunds:
    """The payments service as the original's EffectTarget: tier 1 (it dedupes on the effect
    id, passed as the idempotency key and reference), looked up by reference too."""

    tier = 1
    queryable = True
    name = "refunds"

    def __init__(self, world: World):
        self.world = world
        self.tools = world.tools()

    def capture(self, order: str) -> Dict[str, Any]:
        return {"refunded_total": self.tools["get_order"](order)["refunded_total"]}

    def validate_premises(self, premises: Dict[str, Any], effect_id: str) -> List[str]:
        now = self.tools["get_order"](ORDER, effect_id)["refunded_total"]
        was = premises.get("refunded_total")
        return [] if now == was else [f"refunded_total was {was}, now {now}"]

    def apply(self, effect_id: str, effect: Dict[str, Any]) -> Any:
        return self.tools["create_refund"](effect["order"], effect["amount"], effect_id)

    def query(self, effect_id: str, effect: Dict[str, Any]) -> Any:
        return self.tools["find_refund"](effect_id)["found"]


def mandate(expires_in_s: int = 3600) -> CartMandate:
    """The AP2 cart mandate that approves the $20 refund of case #4471."""
    total = PaymentItem(label="refund order_881", amount=PaymentCurrencyAmount(currency="USD", value=20.0))
    return CartMandate(contents=CartContents(
        id=MANDATE, user_cart_confirmation_required=False, merchant_name=APPROVER,
        cart_expiry=(datetime.now(timezone.utc) + timedelta(seconds=expires_in_s)).isoformat(),
        payment_request=PaymentRequest(method_data=[PaymentMethodData(supported_methods="refund")],
                                       details=PaymentDetailsInit(id="case-4471", display_items=[total],
                                                                  total=total))))


# ---------------------------------------------------------------- the agent


def _meet(barrier: threading.Barrier) -> None:
    try:
        barrier.wait(timeout=OVERLAP_WAIT_S)
    except threading.BrokenBarrierError:
        pass  # the other call never came this far: go on alone


def _tools(world: World, overlap: Optional[threading.Barrier] = None) -> List[Any]:
    base = world.tools()

    def get_order(order_id: str, tool_context: Any) -> Dict[str, Any]:
        """Reads an order: whether it can be refunded and how much was refunded."""
        got = base["get_order"](order_id)
        # What the agent decides on (the original's ctx.state["premises"]).
        tool_context.state["premises"] = {"refunded_total": got["refunded_total"]}
        return got

    async def issue_refund(order_id: str, amount: int, tool_context: Any) -> Dict[str, Any]:
        """Refunds amount (cents) on an order; the call's id is the idempotency key."""
        if tool_context.state.get("approved") is False:
            return {"status": "not approved"}
        if overlap is not None:  # the cap, checked by the tool itself before it refunds
            got = await asyncio.to_thread(base["get_order"], order_id)
            if got["refunded_total"] + amount > CAP_CENTS:
                return {"status": "refused: the $30 cap would be exceeded"}
            await asyncio.to_thread(_meet, overlap)
        return await asyncio.to_thread(base["create_refund"], order_id, amount, tool_context.function_call_id)

    return [get_order, issue_refund]


def guard_for(world: World, authority: str) -> Guard:
    """The original's snippet, as written but for the authority (a lease, or the AP2
    mandate's approval)."""
    leases = Leases()
    leases.grant(LEASE)
    refunds = Refunds(world)
    guard = Guard(world.dir / "adk", leases, claim_ttl=1.0)
    auth = {"lease": LEASE} if authority == "lease" else {"approval": MANDATE}
    guard.gate("issue_refund",
               target_for=lambda effect: refunds,
               proposal=lambda args, ctx: {**auth, "request_id": "case-4471",
                                           "premises": ctx.state["premises"],
                                           "effect": {"order": args["order_id"], "amount": args["amount"]}})
    return guard


def runner_for(world: World, guard: Optional[Guard], overlap: Any = None) -> Runner:
    agent = LlmAgent(name="support", model=ScriptedLlm(), tools=_tools(world, overlap),
                     before_tool_callback=guard.before_tool_callback if guard is not None else None)
    app = App(name=APP, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))
    return Runner(app=app, session_service=SqliteSessionService(str(world.dir / "sessions.db")))


async def _run(runner: Runner, session: str, world: World, invocation: Optional[str] = None) -> None:
    msg = None if invocation else types.Content(role="user", parts=[types.Part(text="Refund $20 on order 881.")])
    async for ev in runner.run_async(user_id=USER, session_id=session, new_message=msg, invocation_id=invocation):
        (world.dir / f"invocation-{session}").write_text(ev.invocation_id)


async def start(world: World, mode: str, session: str, authority: str, overlap: Any = None) -> None:
    guard = guard_for(world, authority) if mode == "with" else None
    runner = runner_for(world, guard, overlap)
    try:
        await runner.session_service.create_session(app_name=APP, user_id=USER, session_id=session,
                                                    state={"approved": True})
        await _run(runner, session, world)
    finally:
        if guard is not None:
            guard.close()


async def restart(world: World, mode: str, session: str, authority: str) -> Dict[str, Any]:
    """The worker's restart: ``guard.recover()`` first (with Interlock), then ADK resumes
    the interrupted invocation."""
    guard = guard_for(world, authority) if mode == "with" else None
    out: Dict[str, Any] = {}
    try:
        if guard is not None:
            report = guard.recover()
            out = {"state": str(report[0].status), "reason": None if report[0].reason is None
                   else str(report[0].reason)} if len(report) else {"state": None, "reason": None}
        await _run(runner_for(world, guard), session, world, (world.dir / f"invocation-{session}").read_text())
    finally:
        if guard is not None:
            guard.close()
    return out


def fork_start(world: World, mode: str, authority: str) -> int:
    """:func:`start` in a forked worker process; returns its status (-9: killed)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            asyncio.run(start(world, mode, "s1", authority))
            code = 0
        except BaseException:  # noqa: BLE001 - reported by the exit status
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


# ---------------------------------------------------------------- the rows


def _crash_row(world: World, mode: str, fault: str, authority: str, outage: Any) -> Dict[str, Any]:
    if mode == "with" and authority == "mandate":
        with guard_for(world, authority) as guard:  # the AP2 mandate approves exactly this call
            guard.approve_mandate("issue_refund", mandate(), {"order_id": ORDER, "amount": REFUND_CENTS},
                                  _Ctx({"premises": {"refunded_total": 0}}))
    world.arm(fault)
    rc = fork_start(world, mode, authority)
    if rc != -9:
        raise RuntimeError(f"the worker was not killed at {fault} (exit status {rc})")
    outage()
    return asyncio.run(restart(world, mode, "s1", authority))


class _Ctx:
    """A tool context for the approval, made before any run: the premises the approver saw."""

    def __init__(self, state: Dict[str, Any]):
        self.state = state


def _revoke(world: World, mode: str) -> None:
    if mode == "with":
        with guard_for(world, "mandate") as guard:
            guard.revoke_approval("issue_refund", MANDATE, {"order": ORDER, "amount": REFUND_CENTS})
    # Alone, ADK has nothing to revoke: the session's state still says approved.


def run_row(row: str, mode: str, world: World) -> Dict[str, Any]:
    """One cell, counted at the service."""
    if row == "reply_lost":
        out = _crash_row(world, mode, "kill_after_refund", "lease", lambda: None)
        note = "the worker was killed after the service took the refund; ADK resumed the invocation and re-ran the call"
        if mode == "alone":
            return world.cell(note + " with its function call id as the idempotency key (deduped)")
        return world.cell(note + "; guard.recover() settled the effect first, so the re-run was a replay", **out)
    if row == "hand_refund":
        out = _crash_row(world, mode, "kill_before_refund", "lease", world.hand_refund)
        note = "killed before the send; support refunded $20 by hand; ADK resumed the invocation"
        if mode == "alone":
            return world.cell(note + " and the tool sent its $20 (nothing re-checks the order)")
        return world.cell(note + "; guard.recover() re-checked the premises and refused", **out)
    if row == "approval_revoked":
        out = _crash_row(world, mode, "kill_before_refund", "mandate", lambda: _revoke(world, mode))
        note = "approved, killed before the send, the approval revoked during the outage; ADK resumed"
        if mode == "alone":
            return world.cell(note + "; the session state still said approved and the tool sent $20 (ADK's "
                                     "require_confirmation flow not run)")
        return world.cell(note + "; the AP2 CartMandate was the Interlock approval, revoked in the journal: "
                                 "guard.recover() refused", **out)
    if row == "cap_race":
        if mode == "with":
            return not_run("the original's Guard proposal (agent, lease or approval, premises, effect, "
                           "request_id) has no cap; the original ran ADK with Interlock on rows 1 to 3 only")
        overlap = threading.Barrier(2)

        async def both() -> None:
            await asyncio.gather(*(start(world, mode, s, "lease", overlap) for s in ("r1", "r2")))
        asyncio.run(both())
        return world.cell("two approved $20 refunds in two sessions started at once in one event loop (each "
                          "tool checks the $30 cap, then refunds, held at a barrier between the two): measured "
                          "one refund; ADK did not run the two tool calls at once here (not investigated further)")
    raise ValueError(f"unknown row {row!r}")


def run_all(base: Path) -> Dict[str, Dict[str, Any]]:
    rows: Dict[str, Dict[str, Any]] = {}
    for row in ROWS:
        rows[row] = {mode: run_row(row, mode, World.create(base / f"{row}-{mode}")) for mode in MODES}
    return rows


def main(argv: List[str]) -> int:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        rows = run_all(Path(d))
    print(json.dumps(rows, indent=2))  # noqa: T201 - the script's report
    if "--quick" not in argv:
        path = write_results("Google ADK", "google-adk", adk_version.__version__, rows, name="adk")
        print("wrote", path)  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
