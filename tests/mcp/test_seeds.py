"""Issue 23: the seeds' MCP configurations, run as the landing page says. The configurations
are tests/seeds/landing_mcp.json (the "Your code" MCP tab, with journal_dir) and
tests/seeds/interlock.mcp.json (the shorter one, "only the tools with real effects"). Each
goes through each proxy (the ``proxy`` fixture: Python's always, the CLI's when
INTERLOCK_CLI names it). The command is tests/seeds/mcp_proxy.sh as written:

    python3 -m interlock.mcp_proxy --config interlock.mcp.json -- python3 payments_server.py

For the CLI's proxy it is the same line with ``interlock mcp-proxy``. The folder starts
empty; the test adds the configuration as interlock.mcp.json and a payments_server.py,
which is this suite's payments MCP server (payments_server.py here, run as is, with
``--state payments.json``, since the seed's command names no state). The agent is the
official MCP client; it asks for the $20 refund on order 881, and a restarted proxy is
asked again."""

import json
import os
import shlex
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from world import SERVER, outcome_of, text

from interlock import Interlock
from interlock.payments_sim import Payments

REPO = Path(__file__).resolve().parents[2]
SEEDS = REPO / "tests" / "seeds"
PYTHON_HEAD = "python3 -m interlock.mcp_proxy"
AGENT = "mcp-proxy"  # both proxies' default agent: its standing lease is mcp-proxy-standing
CALL = {"order_id": "881", "amount_cents": 2000}  # the $20 refund, in the upstream tool's words
PAYMENTS_SERVER = f'''"""The landing page's payments_server.py: the payments MCP server of tests/mcp, its
state in payments.json here (tier 2: refunds can be looked up; order 881 paid $100)."""
import runpy
import sys

sys.argv[1:] = ["--state", "payments.json", *sys.argv[1:]]
runpy.run_path({str(SERVER)!r}, run_name="__main__")
'''


def command(proxy: str) -> List[str]:
    """tests/seeds/mcp_proxy.sh as written; for the CLI's proxy, its head is `interlock mcp-proxy`."""
    [line] = (SEEDS / "mcp_proxy.sh").read_text().splitlines()
    assert line.startswith(PYTHON_HEAD + " "), line
    if proxy == "python":
        return shlex.split(line)
    return [proxy, "mcp-proxy", *shlex.split(line[len(PYTHON_HEAD):])]


def environment(folder: Path) -> Dict[str, str]:
    """This environment, with ``python3`` the interpreter running the tests (the venv's: a
    wrapper, since a symlink would lose the venv)."""
    bin_dir = folder.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    python3 = bin_dir / "python3"
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_PAYMENTS_")}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    return env


@asynccontextmanager
async def session(cmd: List[str], folder: Path, errlog: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=environment(folder), cwd=str(folder))
    with open(errlog, "a") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


async def ask(cmd: List[str], folder: Path, errlog: Path) -> Any:
    async with session(cmd, folder, errlog) as s:
        return await s.call_tool("create_refund", CALL)


def the_notice(tmp: Path) -> str:
    """The gate's own words for the proxy agent's standing lease (asked of the component)."""
    with Interlock(tmp / "notice") as g:
        return g.host().standing_notice(AGENT)


@pytest.mark.parametrize("config", ["landing_mcp.json", "interlock.mcp.json"])
def test_a_seed_configuration_through_a_proxy(request: pytest.FixtureRequest, tmp_path: Path, proxy: str,
                                              config: str) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "interlock.mcp.json").write_text((SEEDS / config).read_text())
    (folder / "payments_server.py").write_text(PAYMENTS_SERVER)
    errlog = tmp_path / "proxy.stderr"
    cmd = command(proxy)

    results = []
    for _ in range(2):  # the second proxy is a restart on the same journal
        results.append(anyio.run(ask, cmd, folder, errlog))
    first, again = (outcome_of(r) for r in results)
    assert not results[0].is_error and first["state"] == "COMMITTED" and not first["replayed"], text(results[0])
    assert not results[1].is_error and again["state"] == "COMMITTED" and again["replayed"], text(results[1])
    assert again["effect_id"] == first["effect_id"]

    # One refund at the service, under the gate's key.
    refunds = Payments.open(folder / "payments.json").refunds("881")
    assert [(r["amount_cents"], r["reference"]) for r in refunds] == [(2000, first["effect_id"])], refunds
    # The standing lease: GRANTED once, at its first use, and named in the receipt.
    journal = folder / ".interlock" / "mcp"
    entries = [json.loads(x) for x in (journal / "journal.jsonl").read_text().splitlines()]
    assert [e["lease"] for e in entries if e["state"] == "GRANTED"] == [f"{AGENT}-standing"], entries
    with Interlock(journal) as g:
        assert g.verify().ok
        receipt = g.receipt(first["effect_id"])
    assert receipt["proposed"]["authority"]["lease"] == f"{AGENT}-standing", receipt["proposed"]
    assert (receipt.final, receipt.executed) == ("COMMITTED", "yes")
    # Announced at each start (the gate's words), never silent.
    assert errlog.read_text().count(the_notice(tmp_path)) == 2, errlog.read_text()
    assert journal.stat().st_mode & 0o777 == 0o700  # owner-only, as every journal folder
