"""Target adapters: how the host performs the steps the gate asks for.

An adapter routes and translates; it never decides. What a reply means (retry, look up,
refuse, AMBIGUOUS) is the gate's business, and which of the payments service's answers are
definitive is the service's own: its component answers ``capture``, ``apply`` and ``query``
(adapters/payments-sim, the same Rust the CLI's hosts/cli/src/targets.rs calls natively).
"""

from __future__ import annotations

from typing import Callable, List, Optional

from wasmtime.component import Variant

from .errors import UnknownTarget
from .gate import Clock, Request, failed
from .gate import allowed as allowed_reply
from .payments_sim import Payments

PAYMENTS = "payments"


def _ours(req: Request) -> None:
    if req.target != PAYMENTS:
        # Never a made-up reply for a target this adapter cannot reach: with routes()
        # declared the gate does not ask, and if it did, the operation is abandoned.
        raise UnknownTarget(req.target, req.effect_id)


class PaymentsTarget:
    """The simulated refund API as the target named ``payments``; its effect is
    ``{"order": "order_881", "amount_cents": 2000}``. The service answers every step but
    ``authorize``, which is this host's own check."""

    def __init__(self, payments: Payments, clock: Clock, authorizer: Optional[Callable[[Request], bool]] = None):
        self.payments = payments
        self.clock = clock
        # Without an authorizer the host check cannot be made: the effect stays open
        # (read_failed). It must not pass because the host forgot to install one, nor be
        # closed, since its send may already have landed.
        self.authorizer = authorizer

    def routes(self) -> List[str]:
        return [PAYMENTS]

    def capture(self, req: Request) -> Variant:
        _ours(req)
        return self.payments.capture(req)

    def authorize(self, req: Request) -> Variant:
        _ours(req)
        if self.authorizer is None:
            return failed("this host has no authority check installed")
        return allowed_reply(bool(self.authorizer(req)))

    def apply(self, req: Request) -> Variant:
        _ours(req)
        return self.payments.apply(req, self.clock.now_ms())

    def query(self, req: Request) -> Variant:
        _ours(req)
        return self.payments.query(req)
