"""localstripe (PyPI: a stateful fake Stripe server written by others) as a real process, and
a proxy in front of it that answers one refund badly (a 500, a malformed body, a reply that
never comes), for the Stripe tests. Nothing here judges an answer: the component does."""
from __future__ import annotations

import contextlib
import http.client
import http.server
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

import stripe


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def localstripe_server(log_dir: Path) -> Iterator[str]:
    """localstripe on a free port, its own process, from scratch; yields its base URL."""
    port = free_port()
    log = (log_dir / "localstripe.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "localstripe", "--port", str(port), "--from-scratch"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("localhost", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"localstripe did not start (exit {proc.poll()})") from None
                time.sleep(0.1)
        yield f"http://localhost:{port}"
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def charge(sdk: stripe.StripeClient, amount_cents: int) -> str:
    """A card charge of ``amount_cents`` that succeeded; its id."""
    card = sdk.v1.payment_methods.create(params={
        "type": "card", "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}})
    return str(sdk.v1.charges.create(params={"amount": amount_cents, "currency": "usd", "source": card.id}).id)


def refunds_of(sdk: stripe.StripeClient, charge_id: str) -> List[Any]:
    """Every refund of the charge, as Stripe lists them."""
    return list(sdk.v1.refunds.list(params={"charge": charge_id, "limit": 100}).data)


#: How the proxy answers the next POST /v1/refunds ("call-after": it calls ``on_forwarded``
#: once localstripe took the refund, then drops the connection: a test kills the sender there).
MODES = ("500-before", "500-after", "429-before", "garbage-after", "delay-after", "drop-after", "call-after")


class Proxy:
    """An HTTP proxy in front of localstripe. Armed with a mode, it answers the next refund
    creation badly, before or after localstripe took it; everything else passes through.
    ``refunds_forwarded`` counts the refund creations that reached localstripe."""

    def __init__(self, upstream: str, delay_s: float = 3.0):
        host, port = upstream.rsplit("//", 1)[1].split(":")
        self.mode: Optional[str] = None
        self.refunds_forwarded = 0
        self.delay_s = delay_s
        self.on_forwarded: Optional[Callable[[], None]] = None
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                refund = self.command == "POST" and self.path.split("?")[0] == "/v1/refunds"
                mode, proxy.mode = (proxy.mode, None) if refund else (None, proxy.mode)
                if mode in ("500-before", "429-before"):
                    status = int(mode[:3])
                    kind = "api_error" if status == 500 else "invalid_request_error"
                    self._answer(status, b'{"error": {"type": "%s", "message": "from the proxy"}}' % kind.encode())
                    return
                up = http.client.HTTPConnection(host, int(port), timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                up.request(self.command, self.path, body=body, headers=headers)
                r = up.getresponse()
                data = r.read()
                up.close()
                if refund:
                    proxy.refunds_forwarded += 1
                if mode == "500-after":
                    self._answer(500, b'{"error": {"type": "api_error", "message": "from the proxy"}}')
                elif mode == "garbage-after":
                    self._answer(200, data[: len(data) // 2])
                elif mode in ("drop-after", "call-after"):
                    if mode == "call-after" and proxy.on_forwarded is not None:
                        proxy.on_forwarded()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                else:
                    if mode == "delay-after":
                        time.sleep(proxy.delay_s)
                    self._answer(r.status, data, r.getheader("Content-Type") or "application/json")

            do_GET = do_POST = do_DELETE = _relay  # noqa: N815 - http.server's spelling

            def _answer(self, status: int, data: bytes, content_type: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up waiting (a delayed reply): nothing to say to it

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def arm(self, mode: str) -> None:
        assert mode in MODES, mode
        self.mode = mode

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
