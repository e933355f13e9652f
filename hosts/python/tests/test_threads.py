"""One Interlock shared by threads (and by asyncio tasks): calls into the gate take turns,
effect functions run concurrently, and the journal stays whole."""

import asyncio
import random
import threading
import time

from interlock import COMMITTED, Interlock
from interlock.journal import FileJournal
from interlock.payments_sim import Payments

THREADS = 8
CALLS = 200
ORDERS = 150  # so 50 calls repeat an earlier request and race it


def test_threads_share_one_interlock_and_the_journal_stays_whole(tmp_path):
    # Tier 2 (no dedupe): a request sent twice would show as two refunds.
    payments = Payments.in_memory("2")
    for i in range(ORDERS):
        payments.add_order(f"order_{i}", 10_000)
    d = tmp_path / ".interlock"
    # A fresh journal and no lease named: the standing lease (asked for) is granted once.
    gate = Interlock(d, standing_lease=True)
    sends = []

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key),
                 allowed=lambda order, amount: True,
                 lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
    def refund(order, amount, idempotency_key):
        gate.open_effects()  # an effect function may call back into the gate
        time.sleep(random.random() / 1000)  # let the other threads' steps interleave
        sends.append(idempotency_key)
        return payments.refund(order, amount, reference=idempotency_key)

    calls = [f"order_{i % ORDERS}" for i in range(CALLS)]
    random.Random(7).shuffle(calls)
    errors, outcomes, start = [], [], threading.Barrier(THREADS)

    def worker(mine):
        start.wait()
        for order in mine:
            try:
                outcomes.append(refund(order, 100))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(calls[t::THREADS],)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread is stuck: a deadlock"
    assert errors == []
    assert len(outcomes) == CALLS
    # A request that lost the race to its twin is reported open (claim_live) or replayed.
    assert all(o.status == COMMITTED or o.reason == "claim_live" for o in outcomes), outcomes
    gate.close()

    FileJournal.open(d).close()  # the file still opens: no duplicate seq anywhere
    with Interlock(d, standing_lease=True) as again:
        assert again.verify().ok
        assert again.open_effects() == []
        ids = {o.effect_id for o in outcomes}
        assert len(ids) == ORDERS
        assert all(again.status(i) == COMMITTED for i in ids)
    assert payments.refund_count() == ORDERS == len(sends)  # one send per distinct effect
    granted = [line for line in (d / "journal.jsonl").read_text().splitlines()
               if '"stream":"lease:agent-standing"' in line]
    assert len(granted) == 1, granted


def test_async_effects_interleave_on_one_interlock(tmp_path):
    payments = Payments.in_memory("2")
    for i in range(20):
        payments.add_order(f"order_{i}", 10_000)
    gate = Interlock(tmp_path / ".interlock", standing_lease=True)

    async def premises(order, amount, idempotency_key):
        await asyncio.sleep(0)
        return payments.premises(order, idempotency_key)

    @gate.effect(key=lambda order, amount: f"refund:{order}", premises=premises)
    async def refund(order, amount, idempotency_key):
        await asyncio.sleep(random.random() / 1000)  # the others' steps run meanwhile
        return payments.refund(order, amount, reference=idempotency_key)

    async def main():
        return await asyncio.gather(*(refund(f"order_{i % 20}", 100) for i in range(40)))

    outcomes = asyncio.run(main())
    assert all(o.status == COMMITTED or o.reason == "claim_live" for o in outcomes), outcomes
    assert gate.verify().ok and gate.open_effects() == []
    assert payments.refund_count() == 20
    gate.close()
