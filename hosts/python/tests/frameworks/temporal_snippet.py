"""The seeds' Temporal snippet, its workflow (as written) and a worker, run by
test_temporal_snippet.py (``python temporal_snippet.py HOST:PORT`` in an empty folder);
the activity is temporal_snippet_activities.py. Between the README markers: the README's
Temporal section, workflows.py."""

# ---- README: Temporal, workflows.py ----
import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():  # the gate never runs inside a workflow
    from temporal_snippet_activities import refund


@workflow.defn
class RefundWorkflow:
    @workflow.run
    async def run(self, order: str) -> str:
        return await workflow.execute_activity(
            refund, args=[order, 20],
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=5))


async def main(address: str) -> None:
    client = await Client.connect(address)
    with ThreadPoolExecutor() as pool:  # a `def` activity runs in a thread
        async with Worker(client, task_queue="refunds", workflows=[RefundWorkflow],
                          activities=[refund], activity_executor=pool):
            print(await client.execute_workflow(RefundWorkflow.run, "order_881",
                                                id="refund-881", task_queue="refunds"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
# ---- end ----
