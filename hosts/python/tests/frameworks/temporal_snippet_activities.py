"""The seeds' Temporal snippet, its "activities.py" (the gate and the activity), as written;
temporal_snippet.py is its workflow and worker. Between the README markers: the README's
Temporal section."""

# ---- README: Temporal, activities.py ----
from temporalio import activity

from interlock import Interlock
from interlock.payments_sim import can_refund, charge_for, is_eligible, refund_exists, refunded_total, stripe
from interlock.temporal import gated

gate = Interlock(".interlock")


@gate.effect(key=lambda order, amount: f"refund:{order}",
             premises=lambda order, amount, idempotency_key: {
                 "eligible": is_eligible(order),
                 "refunded_by_others": refunded_total(order, excluding=idempotency_key)},
             allowed=lambda order, amount: can_refund(order),
             lookup=lambda order, amount, idempotency_key: refund_exists(idempotency_key),
             dedupes=True)
def refund_money(order, amount, idempotency_key):
    return stripe.Refund.create(charge=charge_for(order), amount=amount,
                                idempotency_key=idempotency_key)


gate.recover()  # once, on startup


@activity.defn
def refund(order: str, amount: int) -> str:
    # recovers this refund if a crash left it in flight, else submits
    return gated(refund_money.gate, refund_money.proposal(order, amount))
# ---- end ----
