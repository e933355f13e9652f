"""protect() in an OpenAI-style and an Anthropic-style tool-calling loop, driven by the official
``openai`` and ``anthropic`` SDKs against a local server replaying scripted tool calls
(tests/mcp/scripted_llm.py: no key, no network). The faults of docs/FAULTS.md, one refund
each, counted at the payments service's state file; a crash is a worker process killed with
SIGKILL mid-send, then a new worker that recovers at startup."""

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "mcp"))

from llm_loops import LEASE, LOOPS, payments_tools  # type: ignore[import-not-found]  # noqa: E402
from scripted_llm import ScriptedLLM  # type: ignore[import-not-found]  # noqa: E402

from interlock import Interlock  # noqa: E402
from interlock.payments_sim import Payments  # noqa: E402
from interlock.tools import protect  # noqa: E402

ORDER = "881"
ARGS = {"order_id": ORDER, "amount_cents": 2000}
REFUND = {
    "key": ["order_id"],
    "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                 "fields": ["refunded_total"]},
    "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
    "idempotency_argument": "reference",
    "dedupes": False,
    "timeout_ms": 2000,
}
WORKER = REPO / "tests" / "mcp" / "llm_loops.py"

pytestmark = pytest.mark.parametrize("api", ["openai", "anthropic"])


class World:
    def __init__(self, root: Path, tier: str = "2", tool: Any = None):
        self.state = root / "payments.json"
        self.journal = root / "journal"
        self.config = {"journal_dir": str(self.journal), "tools": {"create_refund": tool or REFUND}}
        self.config_path = root / "config.json"
        self.config_path.write_text(json.dumps(self.config))
        p = Payments.create(self.state, tier)
        p.add_order(ORDER, 10_000)
        with Interlock(self.journal) as g:
            g.lease(LEASE, ttl_s=3600)

    def refunds(self):
        return Payments.open(self.state).refunds(ORDER)

    def worker(self, api: str, llm: Any, crash: Optional[str] = None) -> Any:
        cmd = [sys.executable, str(WORKER), api, llm.openai_url if api == "openai" else llm.anthropic_url,
               str(self.state), str(self.config_path)] + (["--crash", crash] if crash else [])
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def protect(self, crash: Optional[str] = None) -> Any:
        return protect(payments_tools(str(self.state), crash), self.config, agent="refund-agent",
                       authority={"lease": LEASE})


def crashed(p):
    assert p.returncode == -9, (p.returncode, p.stdout, p.stderr)


def outs_of(p):
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_killed_mid_send_then_recovered_one_refund(tmp_path, api):
    w = World(tmp_path)
    with ScriptedLLM([[("create_refund", ARGS)], [("create_refund", ARGS)], "refunded"]) as llm:
        crashed(w.worker(api, llm, crash="after"))
        assert len(w.refunds()) == 1
        (out,) = outs_of(w.worker(api, llm))
        sent_back = json.dumps(llm.requests[-1])
    assert out["ok"] and out["outcome"]["replayed"] and "already done" in out["message"], out
    assert "already done" in sent_back  # the model was handed the message
    assert len(w.refunds()) == 1


def test_hand_refund_during_the_outage(tmp_path, api):
    # F8: the worker dies before the send lands; a person refunds by hand meanwhile.
    w = World(tmp_path)
    with ScriptedLLM([[("create_refund", ARGS)], [("create_refund", ARGS)], "stop"]) as llm:
        crashed(w.worker(api, llm, crash="before"))
        Payments.open(w.state).refund_by_hand(ORDER, 2000)
        (out,) = outs_of(w.worker(api, llm))
    assert not out["ok"] and out["outcome"]["reason"] == "premise_changed", out
    assert "refunded_total was 0, is now 2000" in out["message"]
    assert [r["by_hand"] for r in w.refunds()] == [True]


def test_lease_revoked_during_the_outage(tmp_path, api):
    # F9
    w = World(tmp_path)
    with ScriptedLLM([[("create_refund", ARGS)], [("create_refund", ARGS)], "stop"]) as llm:
        crashed(w.worker(api, llm, crash="before"))
        with Interlock(w.journal) as g:
            g.revoke_lease(LEASE)
        (out,) = outs_of(w.worker(api, llm))
    assert not out["ok"] and out["outcome"]["reason"] == "lease_revoked", out
    assert w.refunds() == []


def test_tier_3_is_ambiguous(tmp_path, api):
    w = World(tmp_path, tier="3", tool={k: v for k, v in REFUND.items() if k != "lookup"})
    with ScriptedLLM([[("create_refund", ARGS)], [("create_refund", ARGS)], "stop"]) as llm:
        crashed(w.worker(api, llm, crash="after"))
        (out,) = outs_of(w.worker(api, llm))
    assert not out["ok"] and out["outcome"]["state"] == "AMBIGUOUS", out
    assert "a person must check" in out["message"]
    assert len(w.refunds()) == 1


def test_duplicate_calls(tmp_path, api):
    # F3: the model repeats itself, twice in one turn and once more.
    w = World(tmp_path)
    with ScriptedLLM([[("create_refund", ARGS), ("create_refund", ARGS)], [("create_refund", ARGS)],
                      [("echo", {"text": "hi"})], "stop"]) as llm, w.protect() as tools:
        tools.recover()
        outs = LOOPS[api](llm.openai_url if api == "openai" else llm.anthropic_url, tools)
    assert [o["ok"] for o in outs[:3]] == [True, True, True]
    assert [o["outcome"]["replayed"] for o in outs[:3]] == [False, True, True]
    assert outs[3] == {"echo": "hi"}  # passed through unchanged
    assert len(w.refunds()) == 1


def test_conflicting_payload(tmp_path, api):
    # F5
    w = World(tmp_path)
    with ScriptedLLM([[("create_refund", ARGS)], [("create_refund", dict(ARGS, amount_cents=3000))],
                      "stop"]) as llm, w.protect() as tools:
        outs = LOOPS[api](llm.openai_url if api == "openai" else llm.anthropic_url, tools)
    assert outs[0]["ok"] and not outs[1]["ok"]
    assert outs[1]["outcome"]["reason"] == "conflicting_payload"
    assert len(w.refunds()) == 1


def test_two_loops_race_one_cap(tmp_path, api):
    # F11: two agents' loops at once, 2000 and 1500 under a 3000 cap on one order.
    cap = {"key": ["order_id", "amount_cents"], "lookup": REFUND["lookup"], "idempotency_argument": "reference",
           "timeout_ms": 2000, "cap": {"name": "order-881", "limit_cents": 3000, "amount_argument": "amount_cents"}}
    w = World(tmp_path, tool=cap)
    outs = []
    with ScriptedLLM([[("create_refund", ARGS)], [("create_refund", dict(ARGS, amount_cents=1500))],
                      "stop", "stop"]) as llm, w.protect() as tools:
        url = llm.openai_url if api == "openai" else llm.anthropic_url
        threads = [threading.Thread(target=lambda: outs.extend(LOOPS[api](url, tools))) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    states = sorted((o["outcome"]["state"], o["outcome"]["reason"]) for o in outs)
    assert states == [("COMMITTED", None), ("REFUSED", "cap_exceeded")], states
    assert len(w.refunds()) == 1
