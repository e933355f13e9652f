"""Target adapters: how the host performs the steps the gate asks for.

An adapter translates; it never decides. What a reply means (retry, look up, refuse,
AMBIGUOUS) is the gate's business. The one judgement an adapter makes is which of its
service's answers are definitive (``rejected``: nothing applied) and which leave the send's
fate unknown (``unknown``). This is the Python twin of hosts/cli/src/targets.rs.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Tuple

from wasmtime.component import Variant

from .errors import UnknownTarget
from .gate import Clock, Request, applied, canonical_json, captured, failed, found, not_found, rejected, unknown
from .gate import allowed as allowed_reply
from .payments_sim import Payments, ServiceError

PAYMENTS = "payments"


def _ours(req: Request) -> None:
    if req.target != PAYMENTS:
        # Never a made-up reply for a target this adapter cannot reach: with routes()
        # declared the gate does not ask, and if it did, the operation is abandoned.
        raise UnknownTarget(req.target, req.effect_id)


def _effect(req: Request) -> Tuple[str, int]:
    _ours(req)
    try:
        v = json.loads(req.effect)
    except ValueError as e:
        raise ValueError(f"effect is not JSON: {e}") from None
    order, amount = v.get("order"), v.get("amount_cents")
    if not isinstance(order, str) or not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
        raise ValueError(
            f'effect must be {{"order": string, "amount_cents": integer}}, got {req.effect}'
        )
    return order, amount


def _refund_json(r: Dict[str, Any]) -> str:
    return canonical_json({"refund_id": r["id"], "amount_cents": r["amount_cents"]})


class PaymentsTarget:
    """The simulated refund API as the target named ``payments``; its effect is
    ``{"order": "order_881", "amount_cents": 2000}``."""

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
        try:
            order, _ = _effect(req)
        except ValueError as e:
            return failed(str(e))
        try:
            # The effect's own refund (reference = effect id) never counts against it.
            everything = self.payments.premises(order, req.effect_id)
        except ServiceError as e:
            return failed(str(e))
        asked = {}
        for name in req.names:
            if name not in everything:
                return failed(f"the payments service has no premise {json.dumps(name)}")
            asked[name] = everything[name]
        return captured(asked)

    def authorize(self, req: Request) -> Variant:
        _ours(req)
        if self.authorizer is None:
            return failed("this host has no authority check installed")
        return allowed_reply(bool(self.authorizer(req)))

    def apply(self, req: Request) -> Variant:
        try:
            order, amount = _effect(req)
        except ValueError as e:
            return rejected(str(e))  # nothing was sent, so this is definitive
        try:
            r = self.payments.refund(order, amount, req.idempotency_key, req.effect_id, self.clock.now_ms())
        except ServiceError as e:
            if e.case in ("unknown-order", "exceeds-balance", "idempotency-mismatch"):
                return rejected(str(e))  # the service checked and created nothing
            return unknown(str(e))
        except OSError as e:
            # The state file failed after the refund was made in memory: fate unknown.
            return unknown(f"payments state i/o: {e}")
        return applied(_refund_json(r))

    def query(self, req: Request) -> Variant:
        try:
            _effect(req)
        except ValueError as e:
            return failed(str(e))
        try:
            r = self.payments.find_by_reference(req.effect_id)
        except ServiceError as e:
            return failed(str(e))
        return not_found() if r is None else found(_refund_json(r))
