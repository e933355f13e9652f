"""The README's quickstarts: each test's body between the markers IS the snippet."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def test_protect_quickstart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from interlock.payments_sim import Payments
    service = Payments.create("payments.json", "2")
    service.add_order("881", 10_000)
    # --- quickstart: protect() ---
    from interlock.tools import protect

    def get_order(order_id, excluding=None):  # excluding: leave this effect's own refund out
        p = service.premises(order_id, excluding)
        return {"order_id": order_id, "refunded_total": p["refunded_by_others_cents"]}

    def create_refund(order_id, amount_cents, reference=None):
        return service.refund(order_id, amount_cents, reference=reference)

    def find_refund(reference):
        return {"found": service.find_by_reference(reference)}

    config = {"journal_dir": ".interlock/tools",
              "tools": {"create_refund": {
                  "key": ["order_id"],
                  "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                               "fields": ["refunded_total"]},
                  "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
                  "idempotency_argument": "reference",
                  "dedupes": False}}}

    tools = protect({"get_order": get_order, "create_refund": create_refund, "find_refund": find_refund}, config)
    tools.recover()                                  # once, at startup
    out = tools["create_refund"](order_id="881", amount_cents=2000)
    print(out["message"])                            # hand this back to the model
    # create_refund done; it happened once (effect ...). Result: {...}
    # --- end ---
    receipt = json.loads(tools.gate.host().receipt(out["outcome"]["effect_id"], None))
    tools.close()
    assert out["ok"] and out["outcome"]["state"] == "COMMITTED" and service.refund_count() == 1
    assert receipt["proposed"]["authority"] == {"lease": "agent-standing"}  # named no authority


@pytest.mark.parametrize("scoped", [False, True], ids=["as-written", "scoped-by-a-lease"])
@pytest.mark.parametrize("proxy", ["python", "cli"])
def test_proxy_quickstart(tmp_path, proxy, scoped, request):
    pytest.importorskip("mcp")
    cli = request.getfixturevalue("cli") if proxy == "cli" or scoped else None
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client
    server = REPO / "tests" / "mcp" / "payments_server.py"
    # --- quickstart: the MCP proxy (interlock.mcp.json) ---
    config = {"journal_dir": ".interlock/mcp",
              "tools": {"create_refund": {
                  "key": ["order_id"],
                  "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                               "fields": ["refunded_total"]},
                  "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
                  "idempotency_argument": "reference",
                  "dedupes": False}}}
    # --- end ---
    (tmp_path / "interlock.mcp.json").write_text(json.dumps(config, indent=1))
    # --- quickstart: the MCP proxy (command) ---
    command = {
        "cli": "interlock mcp-proxy --config interlock.mcp.json -- "
               "python3 payments_server.py --state payments.json",
        "python": "python3 -m interlock.mcp_proxy --config interlock.mcp.json -- "
                  "python3 payments_server.py --state payments.json",
    }[proxy]
    # --- end ---
    # --- quickstart: the MCP proxy, scoped by a lease ---
    grant = "interlock lease grant .interlock/mcp case-4471 --for 48h"
    scope = "--lease case-4471"
    # --- end ---
    lease = "mcp-proxy-standing"
    if scoped:
        argv = grant.split()
        argv[0] = str(cli)
        subprocess.run(argv, cwd=tmp_path, check=True)
        command = command.replace(" -- ", f" {scope} -- ")
        lease = "case-4471"
    argv = command.split()
    argv[0] = sys.executable if proxy == "python" else str(cli)
    argv[argv.index("payments_server.py") - 1:argv.index("payments_server.py") + 1] = [sys.executable, str(server)]

    async def agent():
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=str(tmp_path))
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool("create_refund", {"order_id": "881", "amount_cents": 2000})
    r = anyio.run(agent)
    assert not r.is_error and r.meta["interlock/outcome"]["state"] == "COMMITTED", r
    effect_id = r.meta["interlock/outcome"]["effect_id"]
    entries = [json.loads(line) for line in (tmp_path / ".interlock/mcp/journal.jsonl").read_text().splitlines()]
    proposed = next(e for e in entries if e["stream"] == f"effect:{effect_id}")
    assert proposed["proposal"]["authority"] == {"lease": lease}
