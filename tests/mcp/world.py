"""The fault suite's world: a payments MCP server (payments_server.py) with its state file, a
tool-gating configuration, a journal, and the proxy under test (the Python one, or the CLI's
``interlock mcp-proxy``), driven by the official Python MCP client."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List, Optional

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from interlock import Interlock
from interlock.clock import FakeClock
from interlock.payments_sim import Payments

HERE = Path(__file__).resolve().parent
SERVER = HERE / "payments_server.py"
AGENT = HERE / "agent.py"
ORDER = "881"
LEASE = "case-4471"
CLOCK_MS = 1_800_000_000_000  # the fixed clock of reproducible runs

# The original's configuration, with a short send timeout so a recovery waits out a dead
# proxy's claim in 2 s.
REFUND = {
    "key": ["order_id"],
    "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                 "fields": ["refunded_total"]},
    "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
    "idempotency_argument": "reference",
    "dedupes": False,
    "timeout_ms": 2000,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: Optional[subprocess.Popen] = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited ({proc.returncode}) before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port} after {timeout} s")


class World:
    def __init__(self, root: Path, proxy: str, tier: str = "2", tool: Optional[Dict[str, Any]] = None,
                 config: Optional[Dict[str, Any]] = None, lease: bool = True, clock_ms: Optional[int] = None):
        self.root = root
        self.proxy = proxy  # "python" or the CLI binary's path
        self.tier = tier
        self.state = root / "payments.json"
        self.journal = root / "journal"
        self.flag = root / "hang.flag"
        self.flag_before = root / "hang-before.flag"
        self.pid_file = root / "server.pid"
        self.clock_ms = clock_ms
        self.config_path = root / "interlock.mcp.json"
        self.config = config if config is not None else {
            "journal_dir": str(self.journal), "tools": {"create_refund": dict(tool or REFUND)}}
        root.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(json.dumps(self.config, indent=1))
        p = Payments.create(self.state, tier)
        p.add_order(ORDER, 10_000)
        if lease:
            with self.gate() as g:
                g.lease(LEASE, 3600)

    # -- the parts

    def gate(self) -> Interlock:
        """The journal, opened (only while no proxy holds it)."""
        return Interlock(self.journal, clock=FakeClock(self.clock_ms) if self.clock_ms else None)

    def payments(self) -> Payments:
        return Payments.open(self.state)

    def refunds(self) -> List[Dict[str, Any]]:
        return self.payments().refunds(ORDER)

    def server_cmd(self, *extra: str) -> List[str]:
        cmd = [sys.executable, str(SERVER), "--state", str(self.state), "--tier", self.tier,
               "--hang-after-apply", str(self.flag),
               "--hang-before-apply", str(self.flag_before), "--pid-file", str(self.pid_file)]
        if self.clock_ms:
            cmd += ["--clock-ms", str(self.clock_ms)]
        return cmd + list(extra)

    def proxy_cmd(self, *options: str, upstream: Optional[str] = None) -> List[str]:
        opts = ["--config", str(self.config_path), *options]
        if self.proxy == "python":
            head = [sys.executable, "-m", "interlock.mcp_proxy"]
            if self.clock_ms:
                opts += ["--clock-ms", str(self.clock_ms)]
        else:
            head = [self.proxy] + (["--clock-ms", str(self.clock_ms)] if self.clock_ms else []) + ["mcp-proxy"]
        tail = ["--upstream", upstream] if upstream else ["--", *self.server_cmd()]
        return head + opts + tail

    # -- sessions

    @asynccontextmanager
    async def session(self, *options: str, lease: bool = True,
                      elicitation_callback: Any = None) -> AsyncIterator[ClientSession]:
        """An agent's session through a proxy over stdio, the server its child; ``lease``:
        the proxy is given --lease (the host's authority); ``elicitation_callback``: the
        client declares the ``elicitation`` capability and answers with it."""
        cmd = self.proxy_cmd(*(["--lease", LEASE] if lease else []), *options)
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
        with open(self.root / "proxy.stderr", "a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, elicitation_callback=elicitation_callback) as s:
                    await s.initialize()
                    yield s

    def kill_mid_send(self, arguments: Dict[str, Any], tool: str = "create_refund", applied: bool = True) -> None:
        """An agent calls ``tool`` through a proxy; the server applies the refund (or, with
        ``applied=False``, does not) and hangs; the proxy is SIGKILLed with the reply lost
        (and the server and agent with it)."""
        flag = self.flag if applied else self.flag_before
        flag.write_text("hang")
        cmd = self.proxy_cmd("--lease", LEASE)
        agent = subprocess.Popen([sys.executable, str(AGENT), json.dumps(cmd), tool, json.dumps(arguments)],
                                 stdout=subprocess.PIPE, stderr=open(self.root / "agent.stderr", "w"),
                                 env=dict(os.environ))
        marker = Path(str(flag) + ".hung")
        deadline = time.monotonic() + 90
        while not marker.exists():
            if agent.poll() is not None:
                raise AssertionError(f"the agent ended before the send: {agent.stdout.read() if agent.stdout else ''}"
                                     f" {(self.root / 'agent.stderr').read_text()}")
            if time.monotonic() > deadline:
                agent.kill()
                raise AssertionError("the server never applied the refund")
            time.sleep(0.05)
        time.sleep(0.1)  # the marker is written whole by now
        hung = json.loads(marker.read_text())
        os.kill(hung["ppid"], signal.SIGKILL)  # the proxy, with the reply lost
        os.kill(hung["pid"], signal.SIGKILL)
        agent.kill()
        agent.wait(30)
        marker.unlink()

    def journal_lines(self) -> bytes:
        return (self.journal / "journal.jsonl").read_bytes()

    def effect_streams(self) -> List[str]:
        return [json.loads(line)["stream"] for line in self.journal_lines().splitlines()
                if not json.loads(line)["stream"].startswith("lease:")]


@asynccontextmanager
async def http_session(url: str, elicitation_callback: Any = None) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicitation_callback) as s:
            await s.initialize()
            yield s


def dump(result: Any) -> Dict[str, Any]:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def outcome_of(result: Any) -> Any:
    """The gate's outcome of a gated call: in the result's _meta (both proxies), and in its
    structuredContent too when the call was not done."""
    return (result.meta or {}).get("interlock/outcome")


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")
