"""What the MCP proxies add to a tool call: the same calls made with the official Python MCP
client straight to the payments server (tests/mcp/payments_server.py), through the CLI's
`interlock mcp-proxy`, and through `python3 -m interlock.mcp_proxy`, in one run, over stdio.
A passed-through call (get_order) and a gated call (create_refund: premise read, journal
writes, the send), each timed end to end at the client; median and p99.

    python experiments/mcp-bench/bench.py --cli target/debug/interlock [--calls 200] [--out results/mcp.md]

--quick (CI) makes a few calls and checks the run works; it writes nothing.
Writes the "## Added latency" section of results/mcp.md, keeping the rest of the file.
"""

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "tests" / "mcp" / "payments_server.py"
SECTION = "## Added latency"


def config(journal: Path) -> dict:
    return {
        "journal_dir": str(journal),
        "tools": {
            "create_refund": {
                "key": ["order_id"],
                "premises": {
                    "tool": "get_order",
                    "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                    "fields": ["refunded_total"],
                },
                "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
                "idempotency_argument": "reference",
                "authority": {"lease": "bench"},
            }
        },
    }


async def timed(cmds: dict, calls: int, orders: list) -> dict:
    """Every path's session open at once, the calls made round-robin across them, so the
    machine's noise falls on all paths alike."""
    from contextlib import AsyncExitStack

    out = {name: {"passthrough": [], "gated": []} for name in cmds}
    async with AsyncExitStack() as stack:
        sessions = {}
        for name, cmd in cmds.items():
            params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            await session.call_tool("get_order", {"order_id": orders[0]})  # warm up
            sessions[name] = session
        for i in range(calls):
            for name, session in sessions.items():
                t = time.perf_counter()
                r = await session.call_tool("get_order", {"order_id": orders[i % len(orders)]})
                out[name]["passthrough"].append(time.perf_counter() - t)
                assert not r.is_error, r
        for i in range(calls):
            for name, session in sessions.items():
                t = time.perf_counter()
                r = await session.call_tool(
                    "create_refund", {"order_id": orders[i], "amount_cents": 100, "reference": f"direct-{i}"}
                )
                out[name]["gated"].append(time.perf_counter() - t)
                assert not r.is_error, r
    return out


def ms(xs: list, q: float) -> float:
    xs = sorted(xs)
    return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))]


def run(cli: str, calls: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        orders = [f"o{i}" for i in range(calls)]
        cmds = {}
        for name in ("direct", "cli", "python"):
            d = root / name
            d.mkdir()
            server = [sys.executable, str(SERVER), "--state", str(d / "payments.json"), "--tier", "2"]
            for o in orders:
                server += ["--order", f"{o}:10000"]
            cfg = d / "interlock.mcp.json"
            cfg.write_text(json.dumps(config(d / "journal")))
            (d / "journal").mkdir()
            # The lease every gated call names, granted the way an operator does it.
            subprocess.run([cli, "lease", "grant", str(d / "journal"), "bench", "--for", "48h"],
                           check=True, stdout=subprocess.DEVNULL)
            cmds[name] = {
                "direct": server,
                "cli": [cli, "mcp-proxy", "--config", str(cfg), "--", *server],
                "python": [sys.executable, "-m", "interlock.mcp_proxy", "--config", str(cfg), "--", *server],
            }[name]
        return asyncio.run(timed(cmds, calls, orders))


def render(results: dict, calls: int) -> str:
    direct = results["direct"]
    lines = [
        SECTION,
        "",
        f"`python experiments/mcp-bench/bench.py --cli target/debug/interlock --calls {calls}`, one run, "
        f"{platform.machine()}, {os.cpu_count()} cores (shared): {calls} calls of each kind per path, over stdio, "
        "the three paths open at once and called round-robin (the noise of a shared machine falls on all alike), timed at the official Python MCP client "
        f"(mcp {importlib.metadata.version('mcp')}). The proxies' journals are folders on the local disk "
        "(fsync on every durable append).",
        "",
        "| path | passed through (get_order) median / p99 | added median | gated (create_refund) median / p99 | added median |",
        "|---|---|---|---|---|",
    ]
    for name, label in (("direct", "straight to the server"), ("cli", "`interlock mcp-proxy`"),
                        ("python", "`python3 -m interlock.mcp_proxy`")):
        r = results[name]
        p50, p99 = ms(r["passthrough"], 0.5), ms(r["passthrough"], 0.99)
        g50, g99 = ms(r["gated"], 0.5), ms(r["gated"], 0.99)
        add_p = "" if name == "direct" else f"+{p50 - ms(direct['passthrough'], 0.5):.2f} ms"
        add_g = "" if name == "direct" else f"+{g50 - ms(direct['gated'], 0.5):.2f} ms"
        lines.append(f"| {label} | {p50:.2f} / {p99:.2f} ms | {add_p} | {g50:.2f} / {g99:.2f} ms | {add_g} |")
    lines += [
        "",
        "Straight to the server, create_refund is one call; through a proxy a gated call is the premise",
        "read, the proposal's durable appends, the re-check (a second premise read), the send and the",
        "outcome's append, so it costs about two extra tool calls plus the journal's fsyncs.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True, help="the interlock binary")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--out", default=str(ROOT / "results" / "mcp.md"))
    ap.add_argument("--quick", action="store_true", help="a few calls, nothing written (CI)")
    a = ap.parse_args()
    calls = 5 if a.quick else a.calls
    results = run(a.cli, calls)
    text = render(results, calls)
    print(text)
    if a.quick:
        return
    out = Path(a.out)
    old = out.read_text() if out.exists() else "# MCP proxy\n\n"
    if SECTION in old:
        head, _, rest = old.partition(SECTION)
        nxt = rest.find("\n## ")
        old = head + (rest[nxt + 1:] if nxt >= 0 else "")
    out.write_text(old.rstrip("\n") + "\n\n" + text)


if __name__ == "__main__":
    main()
