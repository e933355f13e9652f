"""The worker of the seeds' Temporal snippets, run by test_temporal_snippet.py and
test_seeds.py (``python temporal_snippet.py HOST:PORT`` in an empty folder): it runs the
seeds' RefundWorkflow on order_881 and prints its result. The gate, the activity and the
workflow are the seeds' own, as written (temporal_snippet_activities.py loads them from
tests/seeds); the worker around them is this file's."""

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor

import temporal_snippet_activities as seeds
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

# The workflow is defined in the seeds' module, which also holds the gate: the sandbox takes
# that module as it is (never re-imported inside it: the gate never runs in a workflow).
RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules(seeds.__name__))


async def main(address: str) -> None:
    refund, refund_workflow = vars(seeds)["refund"], vars(seeds)["RefundWorkflow"]
    client = await Client.connect(address)
    with ThreadPoolExecutor() as pool:  # a `def` activity runs in a thread
        async with Worker(client, task_queue="refunds", workflows=[refund_workflow], activities=[refund],
                          activity_executor=pool, workflow_runner=RUNNER):
            print(await client.execute_workflow(refund_workflow.run, "order_881",
                                                id="refund-881", task_queue="refunds"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
