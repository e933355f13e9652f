"""An agent that makes one tool call through an MCP server started by a command (the proxy),
over stdio with the official client, and prints the result as JSON. The fault suite runs it
as a process of its own, so it can be killed together with the proxy mid-call.

    python agent.py '["proxy", "args"...]' TOOL '{"arguments": ...}'
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def main() -> None:
    cmd, tool, args = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool(tool, args)
            print(json.dumps(r.model_dump(by_alias=True, exclude_none=True, mode="json")), flush=True)  # noqa: T201 - the result, for the test


if __name__ == "__main__":
    anyio.run(main)
