"""The latency a gated Stripe refund adds beside a direct SDK call (results/targets.md).

Against localstripe (its own process) through the official stripe SDK, on a file journal:
each round makes one direct ``refunds.create`` and one gated refund (``interlock.stripe``),
interleaved so machine noise falls on both alike. The gated refund's time is split into the
SDK calls it makes (the premise read when the proposal is made, the re-check right before
the send, the send) and the rest (the gate: proposal, checks, the journal's one fsync).

    INTERLOCK_WASM=dist/interlock_gate.wasm PYTHONPATH=hosts/python/src \\
      hosts/python/.venv/bin/python experiments/targets/stripe_latency.py [--rounds 200] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hosts" / "python" / "tests"))

from interlock import Interlock
from interlock.stripe import client, perform, refunds
from stripe_support import charge, localstripe_server


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"median_ms": round(statistics.median(xs), 2), "p90_ms": round(xs[int(len(xs) * 0.9)], 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="interlock-stripe-bench-"))
    with localstripe_server(work) as url:
        sdk = client("sk_test_bench", base_url=url, timeout_ms=10_000)
        gate = Interlock(work / "journal")
        gate.lease("bench", 3600)
        sdk_ms: list[float] = []
        calls: list[str] = []

        def timed(call: Any) -> Any:
            t = time.perf_counter()
            try:
                return perform(sdk, call)
            finally:
                sdk_ms.append((time.perf_counter() - t) * 1000)
                calls.append(call.operation)

        refund = refunds(gate, sdk, dedupes=False, lease="bench")
        refund.perform = timed
        direct, gated, in_sdk, per_effect = [], [], [], []
        for i in range(args.rounds + 10):
            ch = charge(sdk, 100_000)
            t = time.perf_counter()
            sdk.v1.refunds.create(params={"charge": ch, "amount": 100, "metadata": {"k": str(i)}},
                                  options={"idempotency_key": f"direct-{i}"})
            d = (time.perf_counter() - t) * 1000
            sdk_ms.clear()
            calls.clear()
            t = time.perf_counter()
            out = refund({"charge": ch, "amount_cents": 100}, key=f"bench-{i}")
            g = (time.perf_counter() - t) * 1000
            assert out.status == "COMMITTED", out
            if i >= 10:  # warm-up rounds left out
                direct.append(d)
                gated.append(g)
                in_sdk.append(sum(sdk_ms))
                per_effect.append(len(calls))
        gate.close()
    gate_only = [g - s for g, s in zip(gated, in_sdk)]
    result = {
        "rounds": args.rounds,
        "sdk_calls_per_gated_refund": statistics.mode(per_effect),
        "calls": calls,
        "direct_refunds_create": summary(direct),
        "gated_refund": summary(gated),
        "gated_in_sdk_calls": summary(in_sdk),
        "gated_outside_sdk_calls": summary(gate_only),
        "added_median_ms": round(statistics.median(gated) - statistics.median(direct), 2),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
