"""Two tool-calling loops as an agent developer writes them, on the official ``openai`` and
``anthropic`` SDKs, with the tools wrapped by ``protect()``; and the payments tools as plain
functions over the payments simulator's state file.

Run as a worker process (the fault tests kill it mid-send):

    python llm_loops.py openai|anthropic BASE_URL STATE CONFIG [--crash after|before]
"""

import json
import os
import signal
import sys
from typing import Any, Dict, List, Optional

from interlock import Rejected
from interlock.payments_sim import Payments, ServiceError
from interlock.tools import protect

LEASE = "case-4471"
SPECS = {
    "get_order": {"order_id": "string", "excluding": "string"},
    "create_refund": {"order_id": "string", "amount_cents": "integer", "reference": "string"},
    "find_refund": {"reference": "string"},
    "echo": {"text": "string"},
}


def payments_tools(state: str, crash: Optional[str] = None) -> Dict[str, Any]:
    """The payments tools as plain functions (the state file read afresh each call).
    ``crash``: ``"after"`` kills this process right after the refund is applied (the reply
    lost), ``"before"`` right before (the send lost)."""

    def get_order(order_id: str, excluding: Optional[str] = None) -> Dict[str, Any]:
        p = Payments.open(state).premises(order_id, excluding)
        return {"order_id": order_id, "refunded_total": p["refunded_by_others_cents"], "eligible": p["eligible"]}

    def create_refund(order_id: str, amount_cents: int, reference: Optional[str] = None) -> Dict[str, Any]:
        if crash == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            r = Payments.open(state).refund(order_id, amount_cents, reference, reference)
        except ServiceError as e:
            raise Rejected(str(e)) from None  # the service refused: nothing applied
        if crash == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return r

    def find_refund(reference: str) -> Dict[str, Any]:
        return {"found": Payments.open(state).find_by_reference(reference)}

    def echo(text: str) -> Dict[str, Any]:
        return {"echo": text}

    return {"get_order": get_order, "create_refund": create_refund, "find_refund": find_refund, "echo": echo}


def _content(out: Any) -> str:
    # A gated tool's message is what the model reads; an un-gated tool's value as JSON.
    return out["message"] if isinstance(out, dict) and "message" in out else json.dumps(out)


def openai_loop(base_url: str, tools: Any, prompt: str = "Refund $20 on order 881.") -> List[Any]:
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    specs = [{"type": "function", "function": {"name": n, "parameters": {
        "type": "object", "properties": {k: {"type": t} for k, t in props.items()}}}} for n, props in SPECS.items()]
    messages: List[Dict[str, Any]] = [{"role": "user", "content": prompt}]
    outs: List[Any] = []
    while True:
        resp = client.chat.completions.create(model="scripted", messages=messages, tools=specs)  # type: ignore[arg-type]
        msg = resp.choices[0].message
        if not msg.tool_calls:
            return outs
        messages.append(msg.model_dump(exclude_none=True))
        for tc in msg.tool_calls:
            out = tools[tc.function.name](**json.loads(tc.function.arguments))
            outs.append(out)
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": _content(out)})


def anthropic_loop(base_url: str, tools: Any, prompt: str = "Refund $20 on order 881.") -> List[Any]:
    from anthropic import Anthropic

    client = Anthropic(base_url=base_url, api_key="unused", max_retries=0)
    specs = [{"name": n, "input_schema": {"type": "object", "properties": {k: {"type": t} for k, t in props.items()}}}
             for n, props in SPECS.items()]
    messages: List[Dict[str, Any]] = [{"role": "user", "content": prompt}]
    outs: List[Any] = []
    while True:
        resp = client.messages.create(model="scripted", max_tokens=1024, messages=messages, tools=specs)  # type: ignore[arg-type]
        if resp.stop_reason != "tool_use":
            return outs
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in resp.content]})
        results = []
        for b in resp.content:
            if b.type == "tool_use":
                out = tools[b.name](**b.input)
                outs.append(out)
                ok = out.get("ok", True) if isinstance(out, dict) else True
                results.append({"type": "tool_result", "tool_use_id": b.id, "content": _content(out),
                                "is_error": not ok})
        messages.append({"role": "user", "content": results})


LOOPS = {"openai": openai_loop, "anthropic": anthropic_loop}


def main() -> None:
    api, base_url, state, config_path = sys.argv[1:5]
    crash = sys.argv[6] if len(sys.argv) > 6 and sys.argv[5] == "--crash" else None
    with open(config_path) as f:
        config = json.load(f)
    tools = protect(payments_tools(state, crash), config, agent="refund-agent", authority={"lease": LEASE})
    tools.recover()  # once, at startup
    outs = LOOPS[api](base_url, tools)
    print(json.dumps([{k: v for k, v in o.items() if k != "error"} if isinstance(o, dict) else o for o in outs]))  # noqa: T201 - the result, for the test


if __name__ == "__main__":
    main()
