"""The MCP proxy: the gate in front of an MCP server's tools, with no change to the agent or
the server (ARCHITECTURE.md, "Tool gating"). On the official ``mcp`` SDK
(``pip install 'interlock[mcp]'``).

    python3 -m interlock.mcp_proxy --config interlock.mcp.json -- <server command...>
    python3 -m interlock.mcp_proxy --config interlock.mcp.json --upstream http://127.0.0.1:8000/mcp
        [--listen HOST:PORT] [--agent NAME] [--lease NAME] [--strict] [--journal DIR|URL]

To the agent it is an MCP server over stdio (Streamable HTTP at ``http://HOST:PORT/mcp``
with ``--listen``); to the real server an MCP client, of a child process over stdio or of
``--upstream URL``. It lists the upstream's tools unchanged, passes every call of a tool
the configuration does not list through unchanged, and gates the listed ones through the
component's ``tools`` interface: a REFUSED or AMBIGUOUS call answers ``isError: true`` with
the component's message as text and the outcome as ``structuredContent``. Before its first
call it recovers every open effect, waiting out a live claim. Calls run concurrently on one
journal. The CLI's ``interlock mcp-proxy`` takes the same options and writes the same
journal bytes for the same calls.

``--agent`` (default ``mcp-proxy``) proposes; ``--lease`` is the host's authority for the
tools whose configuration names none (grant it first: ``interlock lease grant``); without
it such tools run under the agent's standing lease, which the gate grants and records at
first use and the proxy announces on stderr at start. ``--strict`` refuses such a tool at
start instead. ``--journal`` overrides ``journal_dir``. A bad configuration is refused at
start: exit 2, the JSON pointer of the problem on stderr.

A gated call that waits for a person's approval, when the configuration names a
``decider`` (``"decider": "alice@shop"``), asks the person at the agent's client (an MCP
``elicitation/create``, form mode, worded by the component) where the client declared the
``elicitation`` capability; the answer is recorded as the decider's decision, and the call
goes on from there (approved: sent, once, in the same call). Otherwise it answers pending.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Dict, List, Optional, Sequence, Tuple

from .clock import FakeClock
from .errors import InterlockError, InvalidField, InvalidJson, MissingExtra
from .tools import ToolGate, ToolResult

PROG = "interlock mcp-proxy"
DEFAULT_AGENT = "mcp-proxy"


class Usage(InterlockError):
    """The command line is wrong (exit 2)."""


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    argv = list(argv)
    command: List[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(prog=PROG, description="The gate in front of an MCP server's tools.")
    ap.add_argument("--config", required=True, help="the tool-gating configuration (JSON)")
    ap.add_argument("--listen", metavar="HOST:PORT", help="serve Streamable HTTP at http://HOST:PORT/mcp, not stdio")
    ap.add_argument("--upstream", metavar="URL", help="the real server's Streamable HTTP URL, not a child process")
    ap.add_argument("--agent", default=DEFAULT_AGENT, help="who proposes (default mcp-proxy)")
    ap.add_argument("--lease", help="the host's authority for tools whose configuration names none "
                    "(grant it first: interlock lease grant JOURNAL NAME --for 48h); without it, "
                    "the agent's standing lease")
    ap.add_argument("--strict", action="store_true",
                    help="refuse a gated tool with no authority at start, instead of its standing lease")
    ap.add_argument("--journal", metavar="DIR|URL", help="the journal, in place of the configuration's journal_dir")
    ap.add_argument("--clock-ms", type=int, help=argparse.SUPPRESS)  # a fixed clock: reproducible journals
    a = ap.parse_args(argv)
    if bool(command) == bool(a.upstream):
        raise Usage("give the server either as a command after `--` or as --upstream URL (one of them)")
    a.command = command
    if a.listen is not None:
        host, sep, port = a.listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise Usage(f"--listen takes HOST:PORT, not {a.listen!r}")
        a.listen_at = (host.strip("[]"), int(port))
    return a


def open_gate(a: argparse.Namespace) -> ToolGate:
    """The configuration checked, the journal opened. InvalidField/InvalidJson: a bad
    configuration (exit 2)."""
    try:
        with open(a.config, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise Usage(f"cannot read the configuration {a.config}: {e.strerror or e}") from None
    return ToolGate(text, journal=a.journal, agent=a.agent,
                    authority={"lease": a.lease} if a.lease else None, strict=a.strict, results="mcp",
                    clock=FakeClock(a.clock_ms) if a.clock_ms is not None else None)


def _say(message: str) -> None:
    """A line for the person running the proxy (stdout is the agent's, with stdio)."""
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()


def _dump(result: Any) -> str:
    return json.dumps(result.model_dump(by_alias=True, exclude_none=True, mode="json"))


@asynccontextmanager
async def upstream(a: argparse.Namespace) -> AsyncIterator[Any]:
    """An initialized ClientSession to the real server."""
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if a.upstream:
        transport = streamable_http_client(a.upstream)
    else:
        transport = stdio_client(StdioServerParameters(command=a.command[0], args=a.command[1:]))
    async with transport as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


class Proxy:
    """The gate between an agent and one upstream session."""

    def __init__(self, gate: ToolGate, session: Any):
        self.gate = gate
        self.session = session

    async def call_upstream(self, tool: str, arguments: Dict[str, Any]) -> str:
        """A tool call the gate asked for: its ``CallToolResult``, which the component reads."""
        return _dump(await self.session.call_tool(tool, arguments))

    async def recover(self) -> None:
        report = await self.gate.arecover(self.call_upstream)
        for o in report:
            _say(f"recovered {o.effect_id}: {o.status}{f' ({o.reason})' if o.reason else ''}")
        for effect_id, e in report.errors.items():
            _say(f"could not recover {effect_id}: {e}")

    @staticmethod
    def result(r: ToolResult) -> Any:
        from mcp import types

        # Done: the tool's own answer, as its output schema expects. Not done: the outcome (or
        # the typed error). The outcome is in _meta either way, as the CLI's proxy puts it.
        if r.ok:
            structured = r.result if isinstance(r.result, dict) else None
        else:
            structured = r.outcome if r.outcome is not None else (r.extra or None)
        meta = {"interlock/outcome": r.outcome} if r.outcome is not None else None
        return types.CallToolResult(content=[types.TextContent(type="text", text=r.message)],
                                    structured_content=structured, is_error=not r.ok, _meta=meta)

    async def list_tools(self, _ctx: Any, params: Any) -> Any:
        return await self.session.list_tools(params=params)  # unchanged

    @staticmethod
    def asker(ctx: Any) -> Any:
        """How the component's question for a person reaches the agent's client: an MCP
        elicitation (form mode), where the client declared the capability."""

        async def ask(request: Dict[str, Any]) -> str:
            have = ctx.session.client_capabilities
            e = have.elicitation if have is not None else None
            if e is None or (e.form is None and e.url is not None):
                raise InterlockError("the client declared no form elicitation")
            return _dump(await ctx.session.elicit_form(request["message"], request["requestedSchema"],
                                                       related_request_id=ctx.request_id))
        return ask

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        from mcp import types

        name, arguments = params.name, dict(params.arguments or {})
        if not self.gate.is_gated(name):
            try:
                return await self.session.call_tool(name, arguments)  # unchanged
            except Exception as e:  # noqa: BLE001 - the agent is told; nothing was gated
                why = f"the upstream server failed: {type(e).__name__}: {e}"
                return types.CallToolResult(content=[types.TextContent(type="text", text=why)], is_error=True)
        return self.result(await self.gate.acall(name, arguments, self.call_upstream, self.asker(ctx)))

    def server(self) -> Any:
        from mcp.server.lowlevel import Server

        return Server("interlock-mcp-proxy", on_list_tools=self.list_tools, on_call_tool=self.call_tool)


async def serve(a: argparse.Namespace, gate: ToolGate) -> None:
    async with upstream(a) as session:
        # Every tool the configuration names must be the upstream's (the component's rule).
        listed = await session.list_tools()
        gate.check_tools([t.name for t in listed.tools])
        proxy = Proxy(gate, session)
        # Every open effect is resolved before the first call is served.
        await proxy.recover()
        server = proxy.server()
        if a.listen is None:
            from mcp.server.stdio import stdio_server

            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            import uvicorn

            host, port = a.listen_at
            app = server.streamable_http_app(host=host)
            await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        a = parse_args(sys.argv[1:] if argv is None else argv)
        gate = open_gate(a)
    except (Usage, InvalidField, InvalidJson) as e:
        _say(str(e) if isinstance(e, Usage) else f"the configuration is refused: {e}")
        return 2
    except InterlockError as e:
        _say(f"cannot start: {e}")
        return 1
    try:
        import anyio
    except ImportError as e:
        raise MissingExtra("the MCP proxy", "mcp", str(e)) from None
    try:
        anyio.run(serve, a, gate)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - the reason, not a traceback, on stderr
        _say(f"stopped: {_describe(e)}")
        return 1
    finally:
        gate.close()
    return 0


def _describe(e: BaseException) -> str:
    subs: Tuple[BaseException, ...] = tuple(getattr(e, "exceptions", ()))
    if subs:
        return "; ".join(_describe(s) for s in subs)
    return f"{type(e).__name__}: {e}"


if __name__ == "__main__":
    sys.exit(main())
