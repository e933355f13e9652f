from interlock.temporal import gated
@activity.defn
def refund(order: str, amount: int) -> str:
    # refund_money is the @gate.effect function from the Python tab
    return gated(refund_money.gate, refund_money.proposal(order, amount))
