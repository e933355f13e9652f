"""The four rows in LangGraph (issue 15), alone and with Interlock inside: one module the
tests (test_langgraph_rows.py) and the experiment script (experiments/frameworks/langgraph_experiment.py)
both call.

The agent is LangGraph's prebuilt ``create_react_agent`` with its SQLite checkpointer
(langgraph-checkpoint-sqlite), the model LangChain's fake chat model replaying scripted tool
calls (no network, no key). Each worker is a real process: ``python langgraph_rows.py DIR
MODE ROW PHASE``. A worker killed with SIGKILL inside the tool node is restarted and resumes
the graph from its checkpoint (``graph.invoke(None, thread)``), which re-runs the tool node:
alone, the refund is sent again; with Interlock (``protect_tools`` and ``tools.recover()``
at startup) the re-run call is the same effect, settled once.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from rows import APPROVAL, APPROVER, LEASE, ORDER, REFUND_CENTS, World  # noqa: E402

MODES = ("alone", "with")
THREAD: Any = {"configurable": {"thread_id": "case-4471"}}  # a RunnableConfig
ASK = "I paid $100 and support approved a $20 refund on order_881. Can you send it?"


def _script(row: str) -> List[Any]:
    from langchain_core.messages import AIMessage

    refund = {"order_id": ORDER, "amount_cents": REFUND_CENTS}
    if row == "cap_race":
        calls = [{"name": "create_refund", "args": dict(refund, case_id=c), "id": f"call_{c}", "type": "tool_call"}
                 for c in ("case-1", "case-2")]
    else:
        calls = [{"name": "create_refund", "args": refund, "id": "call_refund", "type": "tool_call"}]
    return [AIMessage(content="", tool_calls=calls), AIMessage(content="The refund is handled.")]


def model(row: str) -> Any:
    """LangChain's fake chat model, made to bind tools and to answer by the conversation so
    far (its n-th AI turn), so a restarted process answers as the first one would have."""
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedChat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self  # the script already names the tools it calls

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            turn = sum(isinstance(m, AIMessage) for m in messages)
            return ChatResult(generations=[ChatGeneration(message=self.responses[min(turn, len(self.responses) - 1)])])

    return ScriptedChat(responses=_script(row))


def langchain_tools(world: World) -> List[Any]:
    from langchain_core.tools import StructuredTool

    return [StructuredTool.from_function(f) for f in world.tools().values()]


def config(world: World, row: str) -> Dict[str, Any]:
    if row == "cap_race":
        return world.config(cap=True, key=("order_id", "case_id"), authority={"lease": LEASE})
    if row == "approval_revoked":
        return world.config(authority={"approval": APPROVAL})
    return world.config(authority={"lease": LEASE})


# ---------------------------------------------------------------- one worker process


def worker(dir: str, mode: str, row: str, phase: str) -> Dict[str, Any]:
    """One run of the agent: ``start`` (a new conversation) or ``resume`` (from the
    checkpoint, after a kill). Returns what it saw (printed as JSON by ``main``)."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.prebuilt import create_react_agent

    world = World(dir)
    tools: List[Any] = langchain_tools(world)
    seen: Dict[str, Any] = {"phase": phase}
    protected = None
    if mode == "with":
        from interlock.langchain_tools import protect_tools

        protected = protect_tools(tools, config(world, row))
        if phase == "start":
            if row == "approval_revoked":
                refund = {"order_id": ORDER, "amount_cents": REFUND_CENTS}
                protected.approve(APPROVAL, APPROVER, "create_refund", refund)
            else:
                protected.lease(LEASE, 3600)
        else:
            seen["recovered"] = [{"state": str(o.status), "reason": o.reason and str(o.reason)}
                                 for o in protected.recover()]
        tools = list(protected)
    conn = sqlite3.connect(str(world.dir / "checkpoints.db"), check_same_thread=False)
    # Alone, the approval row uses LangGraph's own human-in-the-loop: stop before the tool
    # node, and a person's "go" is the resume.
    interrupt = ["tools"] if (mode == "alone" and row == "approval_revoked") else None
    graph = create_react_agent(model(row), tools, checkpointer=SqliteSaver(conn), interrupt_before=interrupt)
    if phase == "start":
        out = graph.invoke({"messages": [("user", ASK)]}, THREAD)
        if interrupt:
            seen["interrupted_before"] = list(graph.get_state(THREAD).next)
            out = graph.invoke(None, THREAD)  # the person approves: resume past the interrupt
    else:
        out = graph.invoke(None, THREAD)
    seen["tool_messages"] = [
        {"content": str(m.content), "artifact": getattr(m, "artifact", None)}
        for m in out["messages"] if getattr(m, "type", "") == "tool"
    ]
    seen["final"] = str(out["messages"][-1].content)
    if protected is not None:
        protected.close()
    return seen


def main(argv: List[str]) -> None:
    dir, mode, row, phase = argv
    print(json.dumps(worker(dir, mode, row, phase), default=str), flush=True)


# ---------------------------------------------------------------- the rows, orchestrated


def _run(world: World, mode: str, row: str, phase: str) -> Dict[str, Any]:
    p = subprocess.run([sys.executable, __file__, str(world.dir), mode, row, phase],
                       capture_output=True, text=True, timeout=120, env=os.environ.copy())
    if p.returncode == -9:
        return {"killed": True}
    if p.returncode != 0:
        raise RuntimeError(f"worker {mode}/{row}/{phase} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]), killed=False)


def _states(seen: Dict[str, Any]) -> List[str]:
    out = []
    for m in seen.get("tool_messages", []):
        a = m.get("artifact") or {}
        if isinstance(a, dict) and a.get("outcome"):
            out.append(a["outcome"]["state"] + (f" ({a['outcome']['reason']})" if a["outcome"].get("reason") else ""))
    return out


def run_row(row: str, mode: str, dir: Path, tier: str = "1+lookup") -> Dict[str, Any]:
    """Runs one row in one mode in a new world under ``dir``; returns its results cell."""
    world = World.create(Path(dir) / f"{row}-{mode}", tier)
    runs: List[Dict[str, Any]] = []
    revoke_note = ""
    if row == "cap_race":
        runs.append(_run(world, mode, row, "start"))
    else:
        world.arm("kill_after_refund" if row == "reply_lost" else "kill_before_refund")
        runs.append(_run(world, mode, row, "start"))
        assert runs[0]["killed"], f"{row}/{mode}: the worker was meant to be killed: {runs[0]}"
        if row == "hand_refund":
            world.hand_refund()
        elif row == "approval_revoked":
            if mode == "with":
                from interlock.langchain_tools import protect_tools

                with protect_tools(langchain_tools(world), config(world, row)) as t:
                    t.revoke_approval(APPROVAL)
                revoke_note = "the Interlock approval revoked during the outage"
            else:
                revoke_note = ("the person's go (the resume past interrupt_before=['tools']) is in the checkpoint; "
                               "LangGraph has no way to take it back, so nothing is re-asked")
        runs.append(_run(world, mode, row, "resume"))
    states = [s for r in runs for s in _states(r)]
    recovered = [f"{o['state']}" + (f" ({o['reason']})" if o.get("reason") else "")
                 for r in runs for o in r.get("recovered", [])]
    story = {
        "reply_lost": "killed (SIGKILL) after the service took the refund, before the reply; restarted, resumed from "
                      "the SQLite checkpoint: the tool node re-ran",
        "hand_refund": "killed before the send; $20 refunded by hand during the outage; restarted and resumed: "
                       "the tool node re-ran",
        "approval_revoked": "approved, killed before the send; " + revoke_note + "; restarted and resumed",
        "cap_race": "one model turn with two $20 refund calls on order_881 (two cases); the tool node runs them "
                    "concurrently" + ("; the $30 cap is Interlock's cap journal, both calls under one lease "
                                      "(protect_tools takes one authority per tool, so not two approvals)"
                                      if mode == "with" else "; no cap"),
    }[row]
    if mode == "alone":
        return world.cell(story + "; no idempotency key in the tool call, as the quickstart writes it")
    note = story + (f"; recover() at startup: {', '.join(recovered)}" if recovered else "")
    note += f"; the tool calls answered: {', '.join(states)}"
    final: Optional[str]
    if row == "cap_race":
        final = " + ".join(sorted(states))
    else:
        final = states[-1].split(" ")[0] if states else (recovered[-1].split(" ")[0] if recovered else None)
    return world.cell(note, state=final, states=states, recovered=recovered)


def run_all(dir: Path) -> Dict[str, Dict[str, Any]]:
    from rows import ROWS

    return {row: {mode: run_row(row, mode, dir) for mode in MODES} for row in ROWS}


if __name__ == "__main__":
    main(sys.argv[1:])
