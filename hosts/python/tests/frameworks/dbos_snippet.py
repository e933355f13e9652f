"""The README's DBOS section as a program, run by test_dbos_snippet.py
(``python dbos_snippet.py`` in an empty folder; ``KILL_AFTER_REFUND=1`` dies once the
service took the refund, before the step's output is recorded)."""

import os

# ---- README: DBOS ----
from dbos import DBOS, SetWorkflowID

from interlock import Interlock
from interlock.dbos import gated
from interlock.payments_sim import charge_for, is_eligible, refund_exists, refunded_total, stripe

DBOS(config={"name": "refunds", "system_database_url": "sqlite:///refunds.sqlite"})
gate = Interlock(".interlock", standing_lease=True)


@gate.effect(key=lambda order, amount: f"refund:{order}",
             premises=lambda order, amount, idempotency_key: {
                 "eligible": is_eligible(order),
                 "refunded_by_others": refunded_total(order, excluding=idempotency_key)},
             lookup=lambda order, amount, idempotency_key: refund_exists(idempotency_key),
             dedupes=True, timeout_ms=2_000)  # how long a send may take: a crash's claim is waited out
def refund_money(order, amount, idempotency_key):
    refund = stripe.Refund.create(charge=charge_for(order), amount=amount, idempotency_key=idempotency_key)
    if os.environ.pop("KILL_AFTER_REFUND", None):  # the test's crash: the reply is lost
        os.kill(os.getpid(), 9)
    return refund


@DBOS.step()
def refund(order: str, amount: int) -> str:
    # recovers this refund if a crash left it in flight, else submits
    return gated(refund_money.gate, refund_money.proposal(order, amount))


@DBOS.workflow()
def refund_workflow(order: str) -> str:
    return refund(order, 20)


if __name__ == "__main__":
    gate.recover()  # once, on startup
    DBOS.launch()   # DBOS resumes the workflows a killed process left PENDING
    with SetWorkflowID("refund-881"):
        print(refund_workflow("order_881"))
    DBOS.destroy()
# ---- end ----
