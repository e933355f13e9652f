"""A payments MCP server on the official Python SDK (``MCPServer``, mcp 2's FastMCP), backed by
the payments simulator component (interlock.payments_sim) with its state in a file, so the
refunds survive the proxy and this server being SIGKILLed, and tests count them there.

    python payments_server.py --state S.json [--tier 1|2|3|1+lookup] [--order 881:10000]...
                              [--hang-after-apply FLAG] [--clock-ms MS] [--http PORT]

Tools: get_order(order_id, excluding=None) -> {order_id, amount_cents, refunded_total,
eligible} (refunded_total leaves out the refund whose reference is ``excluding``);
create_refund(order_id, amount_cents, reference=None) (the reference is also the
idempotency key, so tier 1 dedupes on it); find_refund(reference) -> {"found": refund or
null}; refund_by_hand(order_id, amount_cents) (a person's refund: F8); echo(text) (never
gated). A service refusal is the tool's error (isError).

``--hang-after-apply FLAG``: while the file FLAG exists, the next create_refund applies the
refund, deletes FLAG, writes FLAG.hung ({"pid", "ppid"}: this server and its parent, the
proxy that spawned it) and never answers: the reply is lost, and a test kills the proxy.
``--hang-before-apply FLAG``: the same, before the refund is applied (the send is lost).
``--pid-file``: where to write this process's id. ``--clock-ms``: a fixed clock for the
refunds' times (reproducible journals).
"""

import argparse
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Optional

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from interlock.payments_sim import Payments, ServiceError


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state", required=True)
    ap.add_argument("--tier", default="2")
    ap.add_argument("--order", action="append", default=[], help="ORDER:PAID_CENTS (default 881:10000)")
    ap.add_argument("--hang-after-apply")
    ap.add_argument("--hang-before-apply")
    ap.add_argument("--clock-ms", type=int)
    ap.add_argument("--http", type=int, help="serve Streamable HTTP on 127.0.0.1:PORT (/mcp)")
    ap.add_argument("--pid-file", help="write this process's id there (a test kills the upstream)")
    a = ap.parse_args()
    if a.pid_file:
        Path(a.pid_file).write_text(str(os.getpid()))

    state = Path(a.state)
    lock = threading.Lock()
    if not state.exists():
        p = Payments.create(state, a.tier)
        for spec in a.order or ["881:10000"]:
            order, paid = spec.split(":")
            p.add_order(order, int(paid))

    def now() -> int:
        return a.clock_ms if a.clock_ms is not None else time.time_ns() // 1_000_000

    def service() -> Payments:
        # Read afresh each call: a test (or a person) may change the file between calls.
        return Payments.open(state)

    def refused(e: ServiceError) -> ToolError:
        return ToolError(f"{e.case}: {e}")

    def hang_now(flag_name: Optional[str]) -> bool:
        """True once per FLAG file: it is deleted and FLAG.hung written (pid, ppid)."""
        flag = Path(flag_name) if flag_name else None
        if flag is None or not flag.exists():
            return False
        flag.unlink()
        Path(str(flag) + ".hung").write_text(json.dumps({"pid": os.getpid(), "ppid": os.getppid()}))
        return True

    app = MCPServer("payments")

    @app.tool()
    def get_order(order_id: str, excluding: Optional[str] = None) -> dict[str, Any]:
        """An order: what was paid and what is refunded (leaving out the refund `excluding`)."""
        with lock:
            p = service()
            try:
                premises = p.premises(order_id, excluding)
            except ServiceError as e:
                raise refused(e) from None
            paid = json.loads(p.snapshot())["orders"][order_id]["paid_cents"]
        return {"order_id": order_id, "amount_cents": paid,
                "refunded_total": premises["refunded_by_others_cents"], "eligible": premises["eligible"]}

    @app.tool()
    def create_refund(order_id: str, amount_cents: int, reference: Optional[str] = None) -> dict[str, Any]:
        """Refunds amount_cents of an order; `reference` is kept with it (and dedupes at tier 1)."""
        if hang_now(a.hang_before_apply):
            time.sleep(3600)  # the send arrived and is never applied
        with lock:
            try:
                r = service().refund(order_id, amount_cents, reference, reference, now())
            except ServiceError as e:
                raise refused(e) from None
            hang = hang_now(a.hang_after_apply)
        if hang:
            time.sleep(3600)  # the refund is applied and durable; the reply never comes
        return r

    @app.tool()
    def find_refund(reference: str) -> dict[str, Any]:
        """The refund carrying `reference`, if any: {"found": refund or null}."""
        with lock:
            try:
                return {"found": service().find_by_reference(reference)}
            except ServiceError as e:
                raise refused(e) from None

    @app.tool()
    def refund_by_hand(order_id: str, amount_cents: int) -> dict[str, Any]:
        """A person's refund, made outside the agent (F8)."""
        with lock:
            try:
                return service().refund_by_hand(order_id, amount_cents, now())
            except ServiceError as e:
                raise refused(e) from None

    @app.tool()
    def echo(text: str) -> dict[str, Any]:
        """Says `text` back (a tool nobody gates)."""
        return {"echo": text}

    if a.http is not None:
        app.run("streamable-http", host="127.0.0.1", port=a.http)
    else:
        app.run()


if __name__ == "__main__":
    main()
