from interlock.temporal import gated
@activity.defn
def refund(order: str, amount: int) -> str:
    # recovers this refund if a crash left it in flight, else submits
    return gated(refund_money.gate, refund_money.proposal(order, amount))
@workflow.defn
class RefundWorkflow:
    @workflow.run
    async def run(self, order: str) -> str:
        return await workflow.execute_activity(
            refund, args=[order, 20],
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=5))
