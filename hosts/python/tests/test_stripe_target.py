"""The built-in target ``stripe.refund`` (guest/core/src/targets/stripe.rs) through the
official ``stripe`` SDK, against localstripe (PyPI 1.15.10: a stateful fake Stripe server
written by others, run as its own process), with a proxy in front of it that answers badly
when told (tests/stripe_support.py).

localstripe does not implement ``Idempotency-Key``
(:func:`test_localstripe_ignores_idempotency_keys`), so here the target is declared
``dedupes=False``: it is recovered by its lookup alone (tier 2). Against real Stripe it is
tier 1 with lookup. Each test says which documented Stripe behaviour it relies on:

- [list]: refunds can be listed by charge (``GET /v1/refunds?charge=``), newest first, in
  pages (docs.stripe.com/api/refunds/list), and each carries the metadata it was created
  with (docs.stripe.com/api/metadata);
- [create]: ``POST /v1/refunds`` with ``charge``, ``amount`` and ``metadata`` creates one
  refund (docs.stripe.com/api/refunds/create);
- [errors]: a 4xx is a content error (nothing applied), a 5xx or a network error leaves the
  result unknown (docs.stripe.com/error-low-level);
- [charge]: a charge has ``amount`` and ``status`` (docs.stripe.com/api/charges/object);
- [webhooks]: events are signed ``Stripe-Signature: t=...,v1=HMAC-SHA256(t.body)``
  (docs.stripe.com/webhooks/signatures).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import stripe

from interlock import Interlock, SimulatedCrash
from interlock.clock import FakeClock
from interlock.gate import State
from interlock.stripe import client, refunds
from stripe_support import Proxy, charge, localstripe_server, refunds_of

LEASE = "case-4471"
KEY = "refund:case-4471"
TIMEOUT_MS = 1000
T0 = 1_800_000_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with localstripe_server(tmp_path_factory.mktemp("localstripe")) as url:
        yield url


@pytest.fixture
def proxy(server: str) -> Iterator[Proxy]:
    p = Proxy(server, delay_s=2.5)
    yield p
    p.close()


@pytest.fixture
def direct(server: str) -> stripe.StripeClient:
    """The SDK straight at localstripe: support's hand refunds, and what the tests count."""
    return client("sk_test_interlock", base_url=server, timeout_ms=10_000)


class Shop:
    """The agent's process: a journal, the refund target on it through the proxy. ``restart``
    is a new process on the same journal (the old one is dead or closed)."""

    def __init__(self, path: Path, proxy: Proxy, *, dedupes: bool = False, **kw: Any):
        self.path, self.proxy, self.dedupes, self.kw = path, proxy, dedupes, kw
        self.clock = FakeClock(T0)
        self.sdk = client("sk_test_interlock", base_url=proxy.url, timeout_ms=TIMEOUT_MS)
        self.open()
        self.gate.lease(LEASE, 48 * 3600)

    def open(self) -> None:
        self.gate = Interlock(self.path, clock=self.clock)
        kw = dict(lease=LEASE, timeout_ms=TIMEOUT_MS, **self.kw)
        self.refund = refunds(self.gate, self.sdk, dedupes=self.dedupes, **kw)

    def restart(self, after_ms: int = TIMEOUT_MS + 1) -> None:
        try:
            self.gate.close()
        except Exception:  # noqa: BLE001 - a crashed Interlock is closed already
            pass
        self.clock.advance(after_ms)
        self.open()

    def crash(self, effect: Dict[str, Any], *, after: bool, **kw: Any) -> str:
        """Submits the refund and "dies": before the send (the intent is durable) or after
        Stripe took it (its reply lost). Returns the effect id."""
        p = self.refund.proposal(effect, key=kw.pop("key", KEY), **kw)
        eid = self.gate.effect_id_of(p)
        with pytest.raises(SimulatedCrash):
            self.gate.submit(p, crash_after_effect=after, crash_before_effect=not after)
        return eid

    def close(self) -> None:
        try:
            self.gate.close()
        except Exception:  # noqa: BLE001
            pass


@pytest.fixture
def shop(tmp_path: Path, proxy: Proxy) -> Iterator[Shop]:
    s = Shop(tmp_path / "journal", proxy)
    yield s
    s.close()


def total(direct: stripe.StripeClient, ch: str) -> int:
    return sum(int(r.amount) for r in refunds_of(direct, ch))


def effect(ch: str, amount: int = 2000) -> Dict[str, Any]:
    return {"charge": ch, "amount_cents": amount}


# ---------------------------------------------------------------- the service itself


def test_localstripe_ignores_idempotency_keys(direct: stripe.StripeClient) -> None:
    """Stripe returns the first request's saved result for a key reused within 24 hours
    (docs.stripe.com/api/idempotent_requests); localstripe creates a second refund. So these
    tests declare the target ``dedupes=False`` and rely on [list] to recover."""
    ch = charge(direct, 10_000)
    for _ in range(2):
        direct.v1.refunds.create(params={"charge": ch, "amount": 100}, options={"idempotency_key": "same-key"})
    assert len(refunds_of(direct, ch)) == 2


def test_a_refund_lands_once_carrying_the_effect_id(shop: Shop, direct: stripe.StripeClient) -> None:
    """[create] [list] [charge]: one refund, its metadata naming the effect; the premises
    read before it, the effect's own refund left out."""
    ch = charge(direct, 10_000)
    out = shop.refund(effect(ch), key=KEY)
    assert (out.status, out.executed) == (State.COMMITTED, "yes")
    [r] = refunds_of(direct, ch)
    assert (r.amount, r.metadata["interlock_effect_id"]) == (2000, out.effect_id)
    assert out.result == {"id": r.id, "amount": 2000, "charge": ch, "status": "succeeded"}
    receipt = shop.gate.receipt(out.effect_id)
    assert receipt["proposed"]["premises"] == {"eligible": True, "refunded_by_others_cents": 0}
    # What the component says of the target: its tier against real Stripe, and its premises.
    assert json.loads(shop.gate.host()._call("effects.builtins"))["stripe.refund"] == {
        "service": "stripe", "premises": ["eligible", "refunded_by_others_cents"],
        "dedupes": True, "dedupe_window_ms": 24 * 3600 * 1000, "lookup": True}
    assert (receipt["target"]["dedupes"], receipt["target"]["lookup"]) == (False, True)
    # The same request again: the first outcome, nothing sent (F3).
    again = shop.refund(effect(ch), key=KEY)
    assert (again.status, again.replayed) == (State.COMMITTED, True)
    assert total(direct, ch) == 2000


def test_a_content_error_refuses_the_refund_and_nothing_is_applied(shop: Shop, direct: stripe.StripeClient) -> None:
    """[errors]: localstripe answers 400 to a refund with a `reason` (it implements none):
    a content error, so REFUSED target_rejected, executed no."""
    ch = charge(direct, 10_000)
    out = shop.refund(dict(effect(ch), reason="requested_by_customer"), key=KEY)
    assert (out.status, out.reason, out.executed) == (State.REFUSED, "target_rejected", "no")
    assert refunds_of(direct, ch) == []


# ---------------------------------------------------------------- the original's three live faults


def test_reply_lost_after_stripe_took_the_refund_in_a_killed_process(
        tmp_path: Path, proxy: Proxy, direct: stripe.StripeClient) -> None:
    """F2 with a real kill: a child process sends the refund; once localstripe took it the
    proxy SIGKILLs the child before any reply. A new process recovers it by [list]: one
    refund."""
    ch = charge(direct, 10_000)
    journal = tmp_path / "journal"
    script = (
        "import sys\n"
        "from interlock import Interlock\n"
        "from interlock.stripe import refunds\n"
        "gate = Interlock(sys.argv[1])\n"
        "gate.lease('case-4471', 3600)\n"
        "refund = refunds(gate, api_key='sk_test_interlock', base_url=sys.argv[2], dedupes=False,"
        " lease='case-4471', timeout_ms=1000)\n"
        "refund({'charge': sys.argv[3], 'amount_cents': 2000}, key='refund:case-4471')\n"
        "print('the child was not killed')\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(journal), proxy.url, ch])
    proxy.on_forwarded = lambda: os.kill(child.pid, signal.SIGKILL)
    proxy.arm("call-after")
    assert child.wait(30) == -signal.SIGKILL
    assert total(direct, ch) == 2000
    gate = Interlock(journal)
    refunds(gate, api_key="sk_test_interlock", base_url=proxy.url, dedupes=False, lease=LEASE, timeout_ms=1000)
    [open_id] = gate.open_effects()
    time.sleep(1.1)  # the dead sender's claim (its timeout) runs out on the real clock
    [out] = gate.recover()
    assert (out.effect_id, out.status, gate.receipt(open_id)["via"]) == (open_id, State.COMMITTED, "recovery-query")
    assert (total(direct, ch), proxy.refunds_forwarded) == (2000, 1)
    gate.close()


def test_reply_lost_after_stripe_took_the_refund(shop: Shop, direct: stripe.StripeClient) -> None:
    """F2: the refund lands, the process dies before the reply; restart: [list] finds it."""
    ch = charge(direct, 10_000)
    eid = shop.crash(effect(ch), after=True)
    shop.restart()
    [out] = shop.gate.recover()
    assert (out.effect_id, out.status) == (eid, State.COMMITTED)
    assert shop.gate.receipt(eid)["via"] == "recovery-query"
    assert total(direct, ch) == 2000


def test_support_refunded_by_hand_during_the_outage(shop: Shop, direct: stripe.StripeClient) -> None:
    """F8: the intent is durable, the agent dies before the send; support refunds $20 by
    hand with the SDK; restart: the re-check reads $20 refunded by others ([list]) and the
    retry is refused. $20 in all."""
    ch = charge(direct, 10_000)
    eid = shop.crash(effect(ch), after=False)
    direct.v1.refunds.create(params={"charge": ch, "amount": 2000})
    shop.restart()
    [out] = shop.gate.recover()
    assert (out.effect_id, out.status, out.reason) == (eid, State.REFUSED, "premise_changed")
    assert [(c.name, c.was, c.now) for c in out.changed] == [("refunded_by_others_cents", 0, 2000)]
    assert total(direct, ch) == 2000


def test_approval_revoked_during_the_outage(shop: Shop, direct: stripe.StripeClient) -> None:
    """The approval the refund was sent under is revoked while the agent is down: nothing
    is sent."""
    ch = charge(direct, 10_000)
    p = shop.refund.proposal(effect(ch), key=KEY)
    approved = shop.gate.approve("apr-7", "manager@shop", p)
    with pytest.raises(SimulatedCrash):
        shop.gate.submit(approved, crash_before_effect=True)
    shop.restart()
    shop.gate.revoke_approval("apr-7")
    [out] = shop.gate.recover()
    assert (out.status, out.reason) == (State.REFUSED, "approval_revoked")
    assert refunds_of(direct, ch) == []


# ---------------------------------------------------------------- bad answers: unknown, never guessed


@pytest.mark.parametrize("mode", ["500-after", "garbage-after", "delay-after", "drop-after"])
def test_a_bad_answer_after_stripe_took_the_refund_is_settled_by_the_lookup(
        mode: str, shop: Shop, direct: stripe.StripeClient) -> None:
    """[errors] [list]: a 500, a body cut in half, a reply later than the timeout, a dropped
    connection, each after localstripe took the refund: unknown (the effect stays open),
    then the lookup finds it. One refund."""
    ch = charge(direct, 10_000)
    shop.proxy.arm(mode)
    first = shop.refund(effect(ch), key=KEY)
    assert (first.status, first.reason) == (State.DISPATCHED, "target_unavailable"), mode
    shop.clock.advance(TIMEOUT_MS + 1)
    [out] = shop.gate.recover()
    assert (out.status, shop.gate.receipt(out.effect_id)["via"]) == (State.COMMITTED, "recovery-query")
    assert (total(direct, ch), shop.proxy.refunds_forwarded) == (2000, 1)


@pytest.mark.parametrize("mode", ["500-before", "429-before"])
def test_a_bad_answer_before_stripe_took_it_is_sent_again_once(
        mode: str, shop: Shop, direct: stripe.StripeClient) -> None:
    """[errors] [list]: a 500 or a 429 that never reached Stripe: unknown, the lookup finds
    nothing, the resend lands. One refund."""
    ch = charge(direct, 10_000)
    shop.proxy.arm(mode)
    first = shop.refund(effect(ch), key=KEY)
    assert (first.status, first.reason) == (State.DISPATCHED, "target_unavailable")
    shop.clock.advance(TIMEOUT_MS + 1)
    [out] = shop.gate.recover()
    assert (out.status, shop.gate.receipt(out.effect_id)["via"]) == (State.COMMITTED, "recovery-retry")
    assert (total(direct, ch), shop.proxy.refunds_forwarded) == (2000, 1)


def test_the_sdk_never_resends_on_its_own(tmp_path: Path, proxy: Proxy, direct: stripe.StripeClient) -> None:
    """A client built to retry twice (the SDK's default is 2) still sends once: the send
    asks for no network retries, so a dropped reply is the gate's to settle."""
    ch = charge(direct, 10_000)
    gate = Interlock(tmp_path / "journal", clock=FakeClock(T0))
    gate.lease(LEASE, 3600)
    eager = stripe.StripeClient("sk_test_interlock", base_addresses={"api": proxy.url}, max_network_retries=2)
    refund = refunds(gate, eager, dedupes=False, lease=LEASE, timeout_ms=TIMEOUT_MS)
    proxy.arm("drop-after")
    assert refund(effect(ch), key=KEY).status == State.DISPATCHED
    assert (proxy.refunds_forwarded, total(direct, ch)) == (1, 2000)
    gate.close()


# ---------------------------------------------------------------- the fault catalogue, F1-F12


def test_f1_crash_before_the_send(shop: Shop, direct: stripe.StripeClient) -> None:
    """[list] [create]: nothing found, so the recovery sends it, once."""
    ch = charge(direct, 10_000)
    shop.crash(effect(ch), after=False)
    shop.restart()
    [out] = shop.gate.recover()
    assert (out.status, shop.gate.receipt(out.effect_id)["via"]) == (State.COMMITTED, "recovery-retry")
    assert total(direct, ch) == 2000


def test_f4_the_model_says_30_on_the_retry(shop: Shop, direct: stripe.StripeClient) -> None:
    ch = charge(direct, 10_000)
    shop.crash(effect(ch), after=True)
    shop.restart()
    assert shop.refund(effect(ch, 3000), key=KEY).reason == "conflicting_payload"
    [out] = shop.gate.recover()
    assert out.status == State.COMMITTED
    assert total(direct, ch) == 2000


def test_f5_the_same_request_with_another_amount(shop: Shop, direct: stripe.StripeClient) -> None:
    ch = charge(direct, 10_000)
    assert shop.refund(effect(ch), key=KEY).status == State.COMMITTED
    out = shop.refund(effect(ch, 3000), key=KEY)
    assert (out.status, out.reason) == (State.REFUSED, "conflicting_payload")
    assert total(direct, ch) == 2000


def test_f6_the_lease_is_revoked_before_the_send(shop: Shop, direct: stripe.StripeClient) -> None:
    ch = charge(direct, 10_000)
    p = shop.refund.proposal(effect(ch), key=KEY)
    shop.gate.revoke_lease(LEASE)
    out = shop.gate.submit(p)
    assert (out.status, out.reason, out.executed) == (State.REFUSED, "lease_revoked", "no")
    assert refunds_of(direct, ch) == []


def test_f7_the_charge_stops_being_eligible(shop: Shop, direct: stripe.StripeClient) -> None:
    """[charge] [list]: decided while the charge could be refunded; support refunds all of
    it by hand before the send: refused, saying which premises changed."""
    ch = charge(direct, 10_000)
    p = shop.refund.proposal(effect(ch), key=KEY)
    direct.v1.refunds.create(params={"charge": ch, "amount": 10_000})
    out = shop.gate.submit(p)
    assert (out.status, out.reason) == (State.REFUSED, "premise_changed")
    assert {c.name: (c.was, c.now) for c in out.changed} == {
        "eligible": (True, False), "refunded_by_others_cents": (0, 10_000)}
    assert total(direct, ch) == 10_000


def test_f9_the_lease_is_revoked_during_the_outage(shop: Shop, direct: stripe.StripeClient) -> None:
    ch = charge(direct, 10_000)
    shop.crash(effect(ch), after=False)
    shop.restart()
    shop.gate.revoke_lease(LEASE)
    [out] = shop.gate.recover()
    assert (out.status, out.reason) == (State.REFUSED, "lease_revoked")
    assert refunds_of(direct, ch) == []


def test_f10_a_retry_after_the_24_hour_window_is_found_not_resent(
        tmp_path: Path, proxy: Proxy, direct: stripe.StripeClient) -> None:
    """As against real Stripe (tier 1, a 24-hour window, with lookup): restarted 25 hours
    later the lookup ([list]) finds the refund and nothing is resent. Relies on [list] only:
    nothing here depends on localstripe deduping."""
    s = Shop(tmp_path / "journal", proxy, dedupes=True)
    try:
        ch = charge(direct, 10_000)
        eid = s.crash(effect(ch), after=True)
        s.restart(after_ms=25 * 3600 * 1000)
        [out] = s.gate.recover()
        assert (out.effect_id, out.status, s.gate.receipt(eid)["via"]) == (eid, State.COMMITTED, "recovery-query")
        assert s.gate.receipt(eid)["target"]["dedupe_window_ms"] == 24 * 3600 * 1000
        assert (total(direct, ch), proxy.refunds_forwarded) == (2000, 1)
    finally:
        s.close()


def test_f11_two_approvals_race_one_30_dollar_cap(tmp_path: Path, proxy: Proxy, direct: stripe.StripeClient) -> None:
    """Two $20 refunds of one charge, two support cases, at once, under a $30 cap on the
    charge: one lands, the other is refused."""
    cap = lambda e: {"name": e["charge"], "limit_cents": 3000, "amount_cents": e["amount_cents"]}  # noqa: E731
    s = Shop(tmp_path / "journal", proxy, cap=cap)
    try:
        ch = charge(direct, 10_000)
        outs: List[Any] = []
        go = threading.Barrier(2)

        def one(case: str) -> None:
            go.wait()
            outs.append(s.refund(effect(ch), key=f"refund:{case}"))

        threads = [threading.Thread(target=one, args=(c,)) for c in ("case-1", "case-2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted((o.status, o.reason) for o in outs) == [
            (State.COMMITTED, None), (State.REFUSED, "cap_exceeded")]
        assert total(direct, ch) == 2000
    finally:
        s.close()


def test_f12_a_stale_approval_goes_back_to_the_approver(shop: Shop, direct: stripe.StripeClient) -> None:
    """A manager approves $120 seeing nothing refunded; support refunds $120 by hand; the
    agent's send is refused and goes back to the manager with what changed."""
    ch = charge(direct, 50_000)
    p = shop.refund.proposal(effect(ch, 12_000), key=KEY)
    approved = shop.gate.approve("apr-12", "manager@shop", p)
    direct.v1.refunds.create(params={"charge": ch, "amount": 12_000})
    out = shop.gate.submit(approved)
    assert (out.status, out.reason, out.return_to) == (State.REFUSED, "approval_stale", "manager@shop")
    assert [(c.name, c.now) for c in out.changed] == [("refunded_by_others_cents", 12_000)]
    assert total(direct, ch) == 12_000


# ---------------------------------------------------------------- confirmations


def test_a_signed_refund_event_confirms_the_refund(shop: Shop, direct: stripe.StripeClient) -> None:
    """[webhooks]: localstripe sends no refund events (it schedules none for refunds), so the
    event is made of the refund localstripe holds and signed as Stripe signs; Stripe's own
    library accepts it, then the gate records Stripe's word: CONFIRMED."""
    ch = charge(direct, 10_000)
    out = shop.refund(effect(ch), key=KEY)
    [r] = refunds_of(direct, ch)
    body = json.dumps({"id": "evt_refund_1", "object": "event", "type": "charge.refund.updated",
                       "data": {"object": r.to_dict(for_json=True)}}).encode()
    secret = "whsec_interlock_refunds"
    t = str(int(time.time()))
    v1 = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    header = f"t={t},v1={v1}"
    assert stripe.Webhook.construct_event(body, header, secret)["type"] == "charge.refund.updated"
    shop.clock.advance(int(t) * 1000 - shop.clock.now_ms())
    recorded = shop.gate.webhook("stripe", {"Stripe-Signature": header}, body, secret)
    assert recorded == {"effect_id": out.effect_id, "event": "evt_refund_1", "recorded": "confirmed"}
    assert shop.gate.status(out.effect_id) == State.CONFIRMED
