"""Measures what a gated call costs in this host (README.md, "Cost"). Run with the
package installed (or PYTHONPATH=src): python bench.py [N]"""

import os
import statistics
import sys
import tempfile
import time

from interlock import Interlock
from interlock.clock import SystemClock
from interlock.gate import GateHost, JournalRef
from interlock.journal import FileJournal
from interlock.payments_sim import Payments


def per_call_us(f, n):
    samples = []
    for _ in range(n):
        t = time.perf_counter_ns()
        f()
        samples.append((time.perf_counter_ns() - t) / 1000)
    return statistics.median(samples)


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        host = GateHost(JournalRef(FileJournal.open(os.path.join(d, "raw"))), SystemClock())
        print(f"first instance (compile or cache load + instantiate): {(time.perf_counter() - t) * 1000:.1f} ms")
        t = time.perf_counter()
        GateHost(host.journal, SystemClock())
        print(f"another instance: {(time.perf_counter() - t) * 1000:.2f} ms")
        p = '{"agent":"a","target":{"name":"t"},"key":"k","effect":{"x":1},"authority":{"lease":"l"}}'
        print(f"one crossing (effect-id-of): {per_call_us(lambda: host.effect_id_of(p), n):.0f} us")

        payments = Payments.in_memory("2")
        for i in range(2 * n):
            payments.add_order(f"o{i}", 10_000)
        gate = Interlock(os.path.join(d, "decorated"), standing_lease=True)

        @gate.effect(key=lambda order, amount: f"refund:{order}",
                     premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key),
                     lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
        def refund(order, amount, idempotency_key):
            return payments.refund(order, amount, reference=idempotency_key)

        proposals = [refund.proposal(f"o{i}", 100) for i in range(n)]
        it = iter(proposals)
        fs0 = gate._journal.journal.fsyncs
        print(f"submit to COMMITTED (3 gate calls, 1 fdatasync, premises read + refund in the "
              f"payments component): {per_call_us(lambda: refund.gate.submit(next(it)), n):.0f} us "
              f"({(gate._journal.journal.fsyncs - fs0) / n:.1f} fsyncs per submit)")
        import interlock.journal as journal_module

        real_sync = journal_module.os.fdatasync
        journal_module.os.fdatasync = lambda fd: None
        more = [refund.proposal(f"o{i}", 100) for i in range(n, 2 * n)]
        it2 = iter(more)
        print(f"the same submits with fdatasync stubbed out (host + component work only): "
              f"{per_call_us(lambda: refund.gate.submit(next(it2)), n):.0f} us")
        journal_module.os.fdatasync = real_sync
        it = iter(proposals)
        replayed = per_call_us(lambda: refund.gate.submit(next(it)), n)
        print(f"the same request again (replayed outcome): {replayed:.0f} us")
        print(f"fn.proposal (effect-id-of + premises read): "
              f"{per_call_us(lambda: refund.proposal('o0', 100), n):.0f} us")
        fd = os.open(os.path.join(d, "x"), os.O_WRONLY | os.O_CREAT)
        print(f"for scale, one write + fdatasync on this disk: "
              f"{per_call_us(lambda: (os.write(fd, b'x' * 600), os.fdatasync(fd)), n):.0f} us")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
