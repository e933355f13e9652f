"""The four rows (issue 15) in the OpenAI Agents SDK, alone and with Interlock inside.

    python experiments/frameworks/openai_agents.py           # writes results/frameworks/openai_agents.json
    python experiments/frameworks/openai_agents.py --quick   # runs every cell, checks, writes nothing

The SDK's real Runner loop, its human-in-the-loop approvals (``needs_approval``, the
interrupted run kept as ``RunState.to_json()`` and resumed with ``Runner.run(agent,
state)``, as its docs describe a long-running approval), and its own scripted test model
(``agents.testing.ScriptedModel``): no key, no network. The worker that sends is a real
process, SIGKILLed at the fault; the restart loads the saved run state and resumes it.

The flow of one case (the same alone and with Interlock):
1. decide: the model reads the order and asks for ``create_refund`` $20; the tool needs
   approval, so the run stops and its state is saved to disk.
2. approve: the manager approves in the approvals store (with Interlock also as an
   Interlock approval of exactly that call).
3. resume, in a worker process: the state is loaded, the store's decision applied
   (``state.approve`` / ``state.reject``), the run resumed; the fault kills the worker.
4. the outage (a hand refund, a revoked approval), then the restart: ``tools.recover()``
   (with Interlock), then step 3 again from the saved state.

Alone, ``create_refund`` passes the tool call's id as the service's idempotency key (the
original's "held with a key"; without one the reply-lost resume pays $40 too). Row 4 runs
two cases (two approvals of $20) at once; alone, the tool checks the $30 cap itself before
it refunds (a read, then the refund), with Interlock the cap is the config's and the
journal holds it.

Shared by the test (hosts/python/tests/frameworks/test_openai_agents_rows.py) and this
script: the cells come from :func:`run_row` only.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hosts" / "python" / "tests" / "frameworks"))

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # no exporter, no network

from agents import Agent, RunConfig, Runner, RunState, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import (  # noqa: E402
    ModelStep,
    ScriptedModel,
    assistant_message,  # noqa: E402
    function_call,
)
from agents.tool_context import ToolContext  # noqa: E402
from agents.version import __version__ as agents_version  # noqa: E402
from rows import APPROVAL, APPROVER, CAP_CENTS, ORDER, REFUND_CENTS, ROWS, World, not_run, write_results  # noqa: E402

from interlock.openai_agents import GatedFunctionTools, gated_function_tools  # noqa: E402

set_tracing_disabled(True)

CASE = "4471"
RACE_CASES = ("4471", "4472")
MODES = ("alone", "with")
OVERLAP_WAIT_S = 5.0  # how long a racing call waits for the other before going on alone


def approval_of(case: str) -> str:
    return APPROVAL if case == CASE else f"apr-{case}"


# ---------------------------------------------------------------- the agent


def decide(call: Any) -> Any:
    """The scripted model: reads the order, then asks for the $20 refund of its case, then
    says what happened; decided from the conversation, so a resumed run goes on where the
    saved state stopped."""
    items = call.input if isinstance(call.input, list) else []
    outputs = {i.get("call_id") for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"}
    calls = {i.get("call_id"): i for i in items if isinstance(i, dict) and i.get("type") == "function_call"}
    case = call.system_instructions.rsplit("#", 1)[1]
    if f"get_{case}" not in outputs:
        return [function_call("get_order", {"order_id": ORDER}, call_id=f"get_{case}")]
    if f"refund_{case}" not in calls:
        return [function_call("create_refund", {"order_id": ORDER, "amount_cents": REFUND_CENTS, "case_id": case},
                              call_id=f"refund_{case}")]
    return [assistant_message("Done: " + str([i.get("output") for i in items
                                               if isinstance(i, dict) and i.get("call_id") == f"refund_{case}"]))]


def model() -> ScriptedModel:
    return ScriptedModel([ModelStep.respond(decide) for _ in range(8)])


def plain_tools(world: World, cap: bool, overlap: Optional[threading.Barrier] = None) -> Dict[str, Any]:
    """The tools as an agent developer writes them for the SDK alone, over the world's: the
    tool call's id is the service's idempotency key; with ``cap``, the $30 cap checked
    before the refund. ``overlap``: both racing calls wait there between their check and
    their refund (both in flight at once, the race every run)."""
    base = world.tools()

    async def create_refund(ctx: ToolContext[Any], order_id: str, amount_cents: int, case_id: str) -> str:
        """Refunds amount_cents on an order for a support case."""
        if cap:
            got = await asyncio.to_thread(base["get_order"], order_id)
            if got["refunded_total"] + amount_cents > CAP_CENTS:
                return f"refused: the $30 cap would be exceeded ({got['refunded_total']} refunded)"
        if overlap is not None:
            await asyncio.to_thread(_meet, overlap)
        r = await asyncio.to_thread(base["create_refund"], order_id, amount_cents, ctx.tool_call_id, case_id)
        return json.dumps(r)

    return {"get_order": base["get_order"], "create_refund": create_refund}


def _meet(barrier: threading.Barrier) -> None:
    try:
        barrier.wait(timeout=OVERLAP_WAIT_S)
    except threading.BrokenBarrierError:
        pass  # the other call never came this far: go on alone


def gated_tools(world: World, cap: bool, overlap: Optional[threading.Event] = None) -> GatedFunctionTools:
    """The same tools with Interlock inside: the world's plain functions (the gate supplies
    the reference), gated by the world's config; the authority is the run's approval.
    ``overlap``: a send waits for it (set when the other racing run is over), so both
    calls are in flight at once, the race every run."""
    fns = world.tools()
    if overlap is not None:
        send = fns["create_refund"]

        def create_refund(order_id: str, amount_cents: int, reference: Optional[str] = None,
                          case_id: Optional[str] = None) -> Any:
            """Refunds amount_cents on an order."""
            overlap.wait(timeout=OVERLAP_WAIT_S)
            return send(order_id, amount_cents, reference, case_id)

        fns["create_refund"] = create_refund
    return gated_function_tools(fns, world.config(cap=cap, key=("order_id", "case_id")),
                                authority=lambda ctx: {"approval": ctx.context["approval"]},
                                options={"create_refund": {"needs_approval": True}})


def agent_for(world: World, mode: str, case: str, cap: bool, overlap: Any = None) -> tuple:
    if mode == "alone":
        t = plain_tools(world, cap, overlap)
        tools = [function_tool(t["get_order"]), function_tool(t["create_refund"], needs_approval=True)]
        gated = None
    else:
        gated = gated_tools(world, cap)
        tools = list(gated)
    agent = Agent(name="support", instructions=f"You handle refunds for support case #{case}", model=model(),
                  tools=tools)
    return agent, gated


# ---------------------------------------------------------------- the steps of a case


def _state_path(world: World, case: str) -> Path:
    return world.dir / f"run-{case}.json"


def _approvals_path(world: World) -> Path:
    return world.dir / "approvals.json"


def _store(world: World) -> Dict[str, str]:
    p = _approvals_path(world)
    return json.loads(p.read_text()) if p.exists() else {}


def _set_store(world: World, approval: str, decision: str) -> None:
    s = _store(world)
    s[approval] = decision
    _approvals_path(world).write_text(json.dumps(s))


def context_of(case: str) -> Dict[str, str]:
    return {"case_id": case, "approval": approval_of(case)}


async def step_decide(world: World, mode: str, case: str, cap: bool) -> Dict[str, Any]:
    """The run up to the approval interruption; its state saved. Returns the pending call."""
    agent, gated = agent_for(world, mode, case, cap)
    try:
        result = await Runner.run(agent, "Refund $20 on order 881.", context=context_of(case),
                                  run_config=RunConfig(tracing_disabled=True))
    finally:
        if gated is not None:
            gated.close()
    [item] = result.interruptions
    _state_path(world, case).write_text(json.dumps(result.to_state().to_json()))
    return {"tool": item.raw_item.name, "arguments": json.loads(item.raw_item.arguments)}


def step_approve(world: World, mode: str, case: str, pending: Dict[str, Any], cap: bool) -> None:
    """The manager approves the pending call (with Interlock: also in the journal)."""
    _set_store(world, approval_of(case), "approved")
    if mode == "with":
        with gated_tools(world, cap) as gated:
            gated.approve(approval_of(case), APPROVER, pending["tool"], pending["arguments"])


def step_revoke(world: World, mode: str, case: str, cap: bool) -> None:
    _set_store(world, approval_of(case), "revoked")
    if mode == "with":
        with gated_tools(world, cap) as gated:
            gated.revoke_approval(approval_of(case))


async def step_resume(world: World, mode: str, case: str, cap: bool, overlap: Any = None) -> Dict[str, Any]:
    """A worker (re)starting: recovery first (with Interlock), then the saved run resumed
    under the approvals store's decision. Returns what happened."""
    agent, gated = agent_for(world, mode, case, cap, overlap)
    out: Dict[str, Any] = {"recovered": []}
    try:
        if gated is not None:
            report = await asyncio.to_thread(gated.recover)
            out["recovered"] = [{"state": str(o.status), "reason": None if o.reason is None else str(o.reason)}
                                for o in report]
        state = await RunState.from_json(agent, json.loads(_state_path(world, case).read_text()))
        decision = _store(world).get(approval_of(case))
        for item in state.get_interruptions():
            if decision == "approved":
                state.approve(item)
            else:
                state.reject(item, rejection_message="the approval was revoked")
        result = await Runner.run(agent, state, run_config=RunConfig(tracing_disabled=True))
        out["final"] = str(result.final_output)
    finally:
        if gated is not None:
            gated.close()
    return out


def fork_worker(world: World, mode: str, case: str) -> int:
    """:func:`step_resume` in a worker process of its own, forked from this one (the SDK's
    import costs 3 to 12 s per process on this machine; a fork costs none) and run from
    what is on disk; a fault SIGKILLs it. Returns its exit status, ``-9`` when killed.
    Called outside any event loop, with no journal open here."""
    pid = os.fork()
    if pid == 0:  # the worker
        code = 1
        try:
            asyncio.run(step_resume(world, mode, case, cap=False))
            code = 0
        except BaseException:  # noqa: BLE001 - reported by the exit status; the parent raises
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


# ---------------------------------------------------------------- the rows


def _gate_state(out: Dict[str, Any]) -> Dict[str, Any]:
    rec = out.get("recovered") or []
    return {"state": rec[0]["state"] if rec else None, "reason": rec[0]["reason"] if rec else None}


def _crash_row(world: World, mode: str, fault: str, outage: Any) -> Dict[str, Any]:
    pending = asyncio.run(step_decide(world, mode, CASE, cap=False))
    step_approve(world, mode, CASE, pending, cap=False)
    world.arm(fault)
    rc = fork_worker(world, mode, CASE)
    if rc != -9:
        raise RuntimeError(f"the worker was not killed at {fault} (exit status {rc})")
    outage()
    return asyncio.run(step_resume(world, mode, CASE, cap=False))


def run_row(row: str, mode: str, world: World) -> Dict[str, Any]:
    """One cell: ``row`` in :data:`rows.ROWS`, ``mode`` "alone" or "with"; counted at the
    service."""
    if row == "reply_lost":
        out = _crash_row(world, mode, "kill_after_refund", lambda: None)
        note = ("the worker was killed after the service took the refund; the resumed run re-ran the "
                "approved call")
        if mode == "alone":
            return world.cell(note + " with the tool call's id as the idempotency key (deduped)")
        g = _gate_state(out)
        return world.cell(note + "; recover() settled the effect first, so the re-run was a replay", **g)
    if row == "hand_refund":
        out = _crash_row(world, mode, "kill_before_refund", world.hand_refund)
        note = "killed after the approval, before the send; support refunded $20 by hand; the run resumed"
        if mode == "alone":
            return world.cell(note + " and sent its $20 (a new key: nothing checks the order changed)")
        g = _gate_state(out)
        return world.cell(note + "; recover() re-read refunded_total and refused the resend", **g)
    if row == "approval_revoked":
        out = _crash_row(world, mode, "kill_before_refund",
                               lambda: step_revoke(world, mode, CASE, cap=False))
        note = "killed after the approval, before the send; the approval was revoked during the outage"
        if mode == "alone":
            return world.cell(note + "; the saved run state still awaits the approval (state.approve() is applied "
                                     "in memory at resume), so the restart asked the approvals store again: "
                                     "revoked, state.reject(), nothing sent")
        g = _gate_state(out)
        return world.cell(note + "; recover() refused the effect under the revoked Interlock approval", **g)
    if row == "cap_race":
        pendings = [asyncio.run(step_decide(world, mode, c, cap=True)) for c in RACE_CASES]
        for c, p in zip(RACE_CASES, pendings):
            step_approve(world, mode, c, p, cap=True)
        if mode == "alone":
            overlap = threading.Barrier(len(RACE_CASES))
            asyncio.run(_gather(*(step_resume(world, mode, c, cap=True, overlap=overlap) for c in RACE_CASES)))
            return world.cell("two approved $20 refunds resumed at once, both in flight together (held between "
                              "check and refund); each tool checked the $30 cap, then refunded")
        return world.cell("two approved $20 refunds resumed at once on one journal, both in flight together "
                          "(a send held until the other run was over); the cap stream let one through",
                          **asyncio.run(_race_with(world)))
    raise ValueError(f"unknown row {row!r}")


async def _gather(*aws: Any) -> List[Any]:
    return list(await asyncio.gather(*aws))


async def _race_with(world: World) -> Dict[str, Any]:
    """Both approved runs resumed at once in one process, sharing one set of gated tools
    (each call's authority is its run's approval): the calls race the cap."""
    other_over = threading.Event()
    gated = gated_tools(world, cap=True, overlap=other_over)
    try:
        async def one(case: str) -> None:
            agent = Agent(name="support", instructions=f"You handle refunds for support case #{case}",
                          model=model(), tools=list(gated))
            state = await RunState.from_json(agent, json.loads(_state_path(world, case).read_text()))
            for item in state.get_interruptions():
                state.approve(item)
            try:
                await Runner.run(agent, state, run_config=RunConfig(tracing_disabled=True))
            finally:
                other_over.set()

        await asyncio.gather(*(one(c) for c in RACE_CASES))
    finally:
        gated.close()
    got = sorted((c["outcome"]["state"], c["outcome"]["reason"] or "-") for c in gated.calls
                 if c["tool"] == "create_refund" and c["outcome"] is not None)
    return {"state": "/".join(s for s, _ in got), "reason": "/".join(r for _, r in got)}


def run_all(base: Path) -> Dict[str, Dict[str, Any]]:
    rows: Dict[str, Dict[str, Any]] = {}
    for row in ROWS:
        rows[row] = {}
        for mode in MODES:
            world = World.create(base / f"{row}-{mode}")
            rows[row][mode] = run_row(row, mode, world)
    return rows


def main(argv: List[str]) -> int:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        rows = run_all(Path(d))
    print(json.dumps(rows, indent=2))  # noqa: T201 - the script's report
    if "--quick" not in argv:
        path = write_results("OpenAI Agents SDK", "openai-agents", agents_version, rows, name="openai_agents")
        print("wrote", path)  # noqa: T201
    return 0


__all__ = ["run_row", "run_all", "not_run"]

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
