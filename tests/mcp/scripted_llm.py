"""A small local HTTP server that speaks the OpenAI chat.completions API
(``POST /v1/chat/completions``) and the Anthropic messages API (``POST /v1/messages``) and
replays scripted tool calls, so the official ``openai`` and ``anthropic`` SDKs drive a
tool-calling loop with no key and no network.

    llm = ScriptedLLM([[("create_refund", {"order_id": "881", "amount_cents": 2000})], "done"])
    llm.start()   # llm.openai_url -> http://127.0.0.1:PORT/v1, llm.anthropic_url
    ...
    llm.stop()

Each request answers the next turn of the script: a list of ``(tool, arguments)`` calls, or a
final text. ``requests`` keeps every request body (the tool results the loop sent back).
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Sequence, Tuple, Union

Turn = Union[str, Sequence[Tuple[str, Dict[str, Any]]]]


class ScriptedLLM:
    def __init__(self, script: Sequence[Turn]):
        self.script: List[Turn] = list(script)
        self.requests: List[Dict[str, Any]] = []
        self._lock = threading.Lock()
        self._n = 0
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                path = self.path.split("?")[0].rstrip("/")
                if path.endswith("/chat/completions"):
                    answer = llm._turn(body, llm._openai)
                elif path.endswith("/messages"):
                    answer = llm._turn(body, llm._anthropic)
                else:
                    self.send_error(404, f"no such endpoint {path}")
                    return
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.openai_url = f"http://127.0.0.1:{self.port}/v1"
        self.anthropic_url = f"http://127.0.0.1:{self.port}"

    def start(self) -> "ScriptedLLM":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "ScriptedLLM":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _turn(self, body: Dict[str, Any], shape: Any) -> Dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            turn: Turn = self.script.pop(0) if self.script else "(the script is over)"
            self._n += 1
            return shape(turn, self._n)

    @staticmethod
    def _openai(turn: Turn, n: int) -> Dict[str, Any]:
        if isinstance(turn, str):
            message: Dict[str, Any] = {"role": "assistant", "content": turn}
            finish = "stop"
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": tool, "arguments": json.dumps(args)}}
                for i, (tool, args) in enumerate(turn)]}
            finish = "tool_calls"
        return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": "scripted",
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    @staticmethod
    def _anthropic(turn: Turn, n: int) -> Dict[str, Any]:
        if isinstance(turn, str):
            content: List[Dict[str, Any]] = [{"type": "text", "text": turn}]
            stop = "end_turn"
        else:
            content = [{"type": "tool_use", "id": f"toolu_{n}_{i}", "name": tool, "input": args}
                       for i, (tool, args) in enumerate(turn)]
            stop = "tool_use"
        return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": "scripted",
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1}}
