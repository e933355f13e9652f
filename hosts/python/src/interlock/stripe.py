"""Stripe refunds through the official ``stripe`` SDK (``pip install 'interlock[stripe]'``):
the built-in target ``stripe.refund`` (guest/core/src/targets/stripe.rs, docs/targets.md).

    import stripe
    from interlock import Interlock
    from interlock.stripe import refunds

    gate = Interlock(".interlock")
    refund = refunds(gate, api_key="sk_test_...", lease="case-4471")
    gate.recover()                                   # once, at startup
    out = refund({"charge": "ch_...", "amount_cents": 2000}, key="refund:case-4471")

Which calls are made for each step (the charge and its refunds for the premises,
``refunds.create`` with the effect id as ``Idempotency-Key`` and as metadata for the send,
the charge's refunds for the lookup), and what every answer or error means, is the
component's. This module only makes the SDK call it is told and hands back what came back.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Optional

import stripe
from wasmtime.component import Variant

from .decorator import Builtin, Interlock, ServiceError, builtin_roles

BUILTIN = "stripe.refund"


def client(api_key: str, *, base_url: Optional[str] = None, timeout_ms: int = 30_000) -> stripe.StripeClient:
    """A client for the target: pointed at ``base_url`` (default Stripe's API), giving up on
    a request after ``timeout_ms`` (the send's claim lasts that long: a send still waited on
    after it could be taken over), and never retrying on its own."""
    return stripe.StripeClient(api_key, base_addresses={"api": base_url} if base_url else None,
                               http_client=stripe.RequestsClient(timeout=timeout_ms / 1000), max_network_retries=0)


def perform(sdk: stripe.StripeClient, call: Any) -> Variant:
    """One ``service-call`` through the SDK: ``resource.method(id?, params, options)``."""
    resource, method = call.operation.split(".")
    params: Dict[str, Any] = json.loads(call.params)
    options: Dict[str, Any] = json.loads(call.options)
    args = [params.pop("id")] if "id" in params else []
    fn = getattr(getattr(sdk.v1, resource), method)
    try:
        obj = fn(*args, params=params or None, options=options or None)
    except stripe.StripeError as e:
        error_type = getattr(e.error, "type", None) if e.error is not None else None
        return Variant("raised", ServiceError(error_type or type(e).__name__, e.http_status, e.code,
                                               e.user_message or str(e)))
    return Variant("returned", json.dumps(obj.to_dict(for_json=True)))


def refunds(gate: Interlock, sdk: Optional[stripe.StripeClient] = None, *, api_key: Optional[str] = None,
            base_url: Optional[str] = None, target: str = BUILTIN, dedupes: Optional[bool] = None,
            dedupe_window_ms: Optional[int] = None, timeout_ms: Optional[int] = None, agent: Optional[str] = None,
            key: Any = None, lease: Any = None, approval: Optional[str] = None, bounds: Any = None, cap: Any = None,
            allowed: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Builtin:
    """Stripe refunds as the effect ``target``: call it with ``{"charge", "amount_cents"}``
    (and ``reason``, ``metadata``). ``sdk``: a ``stripe.StripeClient`` (its requests must give
    up within ``timeout_ms``); without one, :func:`client` makes it from ``api_key`` and
    ``base_url``. ``dedupes=False`` declares a stand-in server that ignores idempotency keys
    (localstripe): the target is then recovered by lookup alone (tier 2). ``key``, ``lease``,
    ``bounds``, ``cap``: a value, or a function of the effect object; ``allowed(effect)``:
    the host's own authority check."""
    if sdk is None:
        if api_key is None:
            raise TypeError("refunds: give a stripe.StripeClient or an api_key")
        sdk = client(api_key, base_url=base_url, timeout_ms=timeout_ms or gate.host().defaults()["timeout_ms"])
    definition: Dict[str, Any] = {"builtin": BUILTIN, "target": target, "dedupes": dedupes,
                                  "dedupe_window_ms": dedupe_window_ms, "timeout_ms": timeout_ms,
                                  "agent": agent, "approval": approval}
    functions = builtin_roles(definition, {"key": key, "lease": lease, "bounds": bounds, "cap": cap,
                                           "allowed": allowed})
    made = sdk
    return gate.builtin(definition, lambda call: perform(made, call), functions=functions)
