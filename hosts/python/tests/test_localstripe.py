"""Stripe webhooks signed by a real third party: the `localstripe` server (PyPI), run as its
own process, driven through the official `stripe` SDK, delivers `payment_intent.succeeded`
events signed with the endpoint's secret (`Stripe-Signature: t=...,v1=...`). Each delivery
is handed to `Interlock.webhook('stripe', ...)` exactly as the receiver got it.

localstripe 1.15.10 sends events for payment intents, invoices, customers, payouts and
subscriptions, none for refunds or charges (resources.py: `Refund` schedules no webhook):
so the gated effect here is a charge made through the Payment Intents API, its intent
carrying `metadata.interlock_effect_id`, the shape `webhooks::stripe_event` reads."""
from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import stripe

from interlock import Interlock, InvalidField, SimulatedCrash
from interlock.clock import FakeClock
from interlock.gate import State
from stripe_support import localstripe_server

SECRET = "whsec_localstripe_endpoint_secret"
Delivery = Tuple[List[Tuple[str, str]], bytes]


class Receiver:
    """The shop's webhook endpoint: keeps every delivery as received (headers, raw body)."""

    def __init__(self) -> None:
        self.deliveries: List[Delivery] = []
        received = self.deliveries

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's spelling
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((list(self.headers.items()), body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/stripe"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def for_effect(self, effect_id: str, timeout_s: float = 15) -> Delivery:
        """The delivery whose intent names ``effect_id`` (localstripe sends after ~1 s)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for headers, body in list(self.deliveries):
                meta = json.loads(body)["data"]["object"].get("metadata", {})
                if meta.get("interlock_effect_id") == effect_id:
                    return headers, body
            time.sleep(0.05)
        raise AssertionError(f"localstripe delivered nothing for {effect_id} in {timeout_s} s")


@pytest.fixture(scope="module")
def localstripe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """localstripe as a real process on a free port; its base URL."""
    with localstripe_server(tmp_path_factory.mktemp("localstripe")) as url:
        yield url


def register(base: str, receiver: Receiver) -> None:
    """localstripe's own configuration route: deliver payment_intent.succeeded, signed."""
    data = urllib.parse.urlencode({"url": receiver.url, "secret": SECRET,
                                   "events[]": "payment_intent.succeeded"}).encode()
    with urllib.request.urlopen(f"{base}/_config/webhooks/interlock", data) as r:
        assert r.status == 200


def journal_bytes(tmp_path: Path) -> bytes:
    return (tmp_path / "journal" / "journal.jsonl").read_bytes()


def test_localstripe_deliveries_confirm_and_bad_ones_record_nothing(localstripe: str, tmp_path: Path) -> None:
    receiver = Receiver()
    register(localstripe, receiver)
    client = stripe.StripeClient("sk_test_interlock", base_addresses={"api": localstripe})
    card = client.v1.payment_methods.create(params={
        "type": "card", "card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2030, "cvc": "123"}})
    clock = FakeClock(int(time.time() * 1000))

    def gate_on_journal() -> Tuple[Interlock, Any]:
        gate = Interlock(str(tmp_path / "journal"), clock=clock)

        # No lookup, no dedupe: after a lost reply only the service can say what happened.
        @gate.effect(key=lambda customer, amount: f"charge:{customer}", timeout_ms=5000)
        def charge(customer: str, amount: int, idempotency_key: str) -> Dict[str, Any]:
            intent = client.v1.payment_intents.create(params={
                "amount": amount, "currency": "usd", "payment_method": card.id, "confirm": True,
                "metadata": {"interlock_effect_id": idempotency_key}})
            return {"payment_intent": intent.id, "status": intent.status}

        return gate, charge

    gate, charge = gate_on_journal()
    committed = charge("cus_ada", 2000)
    assert committed.status == State.COMMITTED
    # The second charge lands at Stripe, then the process dies before the reply is recorded.
    with pytest.raises(SimulatedCrash):
        charge.gate.submit(charge.proposal("cus_bob", 3500), crash_after_effect=True)
    gate, charge = gate_on_journal()
    [lost] = gate.recover()
    assert lost.status == State.AMBIGUOUS
    assert [(i["item"], i["kind"]) for i in gate.inbox()] == [(lost.effect_id, "ambiguous")]
    late = charge("cus_cy", 4100)
    assert late.status == State.COMMITTED
    # An intent made outside the gate, naming an effect this journal never held.
    stranger = "0" * 32
    client.v1.payment_intents.create(params={
        "amount": 999, "currency": "usd", "payment_method": card.id, "confirm": True,
        "metadata": {"interlock_effect_id": stranger}})

    headers, body = receiver.for_effect(committed.effect_id)
    signature = dict((k.lower(), v) for k, v in headers)["stripe-signature"]
    assert signature.startswith("t=") and ",v1=" in signature
    # Stripe's own library agrees this delivery is genuine, and that a changed body is not.
    assert stripe.Webhook.construct_event(body, signature, SECRET)["type"] == "payment_intent.succeeded"
    tampered = body.replace(b'"amount": 2000', b'"amount": 200000')
    assert tampered != body
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(tampered, signature, SECRET)

    before = journal_bytes(tmp_path)
    with pytest.raises(InvalidField, match="changed, or signed with another secret") as e:
        gate.webhook("stripe", headers, tampered, SECRET)
    assert e.value.field == "/signature"
    with pytest.raises(InvalidField, match="changed, or signed with another secret"):
        gate.webhook("stripe", headers, body, "whsec_someone_else")
    assert journal_bytes(tmp_path) == before, "a bad webhook recorded something"

    assert gate.webhook("stripe", headers, body, SECRET) == {
        "effect_id": committed.effect_id, "event": json.loads(body)["id"], "recorded": "confirmed"}
    assert gate.status(committed.effect_id) == State.CONFIRMED
    receipt = gate.receipt(committed.effect_id)
    assert receipt.final == "CONFIRMED"

    before = journal_bytes(tmp_path)
    with pytest.raises(InvalidField, match="already recorded \\(a replay\\)") as e:
        gate.webhook("stripe", headers, body, SECRET)
    assert e.value.field == "/body/id"
    s_headers, s_body = receiver.for_effect(stranger)
    with pytest.raises(InvalidField, match=f"no effect {stranger} in this journal"):
        gate.webhook("stripe", s_headers, s_body, SECRET)
    assert journal_bytes(tmp_path) == before, "a replay or an unknown reference recorded something"

    # The charge whose reply was lost: Stripe's word settles it, and the inbox empties.
    a_headers, a_body = receiver.for_effect(lost.effect_id)
    assert gate.webhook("stripe", a_headers, a_body, SECRET)["recorded"] == "confirmed"
    assert gate.status(lost.effect_id) == State.CONFIRMED
    assert gate.inbox() == []

    # The last delivery handed over 301 s after it was signed: outside Stripe's tolerance.
    l_headers, l_body = receiver.for_effect(late.effect_id)
    signed_at = int(dict((k.lower(), v) for k, v in l_headers)["stripe-signature"].split(",")[0][2:])
    clock.advance((signed_at + 301) * 1000 - clock.now_ms())
    before = journal_bytes(tmp_path)
    with pytest.raises(InvalidField, match="301 s from now, outside the 300 s tolerance"):
        gate.webhook("stripe", l_headers, l_body, SECRET)
    assert journal_bytes(tmp_path) == before, "a stale webhook recorded something"
    assert gate.status(late.effect_id) == State.COMMITTED
    # Only its age was wrong: with a wider tolerance the same bytes confirm.
    assert gate.webhook("stripe", l_headers, l_body, SECRET, tolerance_s=400)["recorded"] == "confirmed"
    assert gate.verify().ok
    gate.close()
