"""The crash demo against Stripe's API through the official ``stripe`` SDK: localstripe (PyPI,
a stateful fake Stripe server written by others) as its own process, a $100 charge, a $20
refund whose sender is SIGKILLed after Stripe took the refund and before the reply, a new
process that recovers it from the journal: one refund, and its receipt.

    bash scripts/demo-stripe.sh      # sets up a venv and runs this

The kill comes from a proxy in front of localstripe (hosts/python/tests/stripe_support.py):
once localstripe has created the refund it kills the agent's process, so the reply is lost
exactly where the original's live fault lost it."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from stripe_support import Proxy, charge, localstripe_server, refunds_of  # noqa: E402

from interlock import Interlock  # noqa: E402
from interlock.stripe import client, refunds  # noqa: E402

LEASE = "case-4471"
TIMEOUT_MS = 2000


def agent(journal: str, base_url: str, charge_id: str) -> None:
    """The agent's process: one refund through the gate."""
    gate = Interlock(journal)
    gate.lease(LEASE, 3600)
    refund = refunds(gate, api_key="sk_test_demo", base_url=base_url, dedupes=False, lease=LEASE, timeout_ms=TIMEOUT_MS)
    refund({"charge": charge_id, "amount_cents": 2000}, key="refund:case-4471")
    print("the agent was not killed: the demo did not crash it", flush=True)


def main() -> None:
    journal = Path(".interlock-demo/stripe")
    shutil.rmtree(journal, ignore_errors=True)
    logs = Path(tempfile.mkdtemp(prefix="interlock-demo-stripe-"))
    with localstripe_server(logs) as url:
        sdk = client("sk_test_demo", base_url=url, timeout_ms=10_000)
        proxy = Proxy(url)
        ch = charge(sdk, 10_000)
        print("system: INTERLOCK, Stripe refunds through the official stripe SDK, against localstripe "
              "(its own process, at " + url + ")")
        print("        localstripe ignores Idempotency-Key, so the target is declared tier 2: recovered by lookup")
        print(f"customer paid $100 (charge {ch}). case #4471 approves one $20 partial refund.")
        print("agent decides: refund $20")
        print("── refunds.create goes out; Stripe takes the refund; the agent dies before the reply ──")
        child = subprocess.Popen([sys.executable, __file__, "agent", str(journal), proxy.url, ch])
        proxy.on_forwarded = lambda: os.kill(child.pid, signal.SIGKILL)
        proxy.arm("call-after")
        assert child.wait(60) == -signal.SIGKILL, "the agent was not killed"
        print(f"💥 SIGKILL (pid {child.pid})")
        print("── process restarts ──")
        time.sleep(TIMEOUT_MS / 1000 + 0.1)  # the dead sender's claim runs out
        gate = Interlock(journal)
        refunds(gate, sdk, dedupes=False, lease=LEASE, timeout_ms=TIMEOUT_MS)
        [effect_id] = gate.open_effects()
        [out] = gate.recover()
        receipt = gate.receipt(effect_id)
        print(f"journal says DISPATCHED with no COMMITTED → recovery: {out.status} (via {receipt['via']})")
        found = refunds_of(sdk, ch)
        print(f"refunded on {ch}: ${sum(r.amount for r in found) / 100:.0f} ({len(found)} refund(s): "
              + ", ".join(f"{r.id} metadata.interlock_effect_id={r.metadata['interlock_effect_id']}" for r in found)
              + ")")
        print("journal:")
        for e in receipt["entries"]:
            print(f"  {e['state']:<11} {effect_id} {e.get('via') or ''}".rstrip())
        print("receipt:")
        print(json.dumps(receipt, indent=2, sort_keys=True))
        print(f"final {receipt['final']}")
        assert (out.status, len(found)) == ("COMMITTED", 1), "not one refund"
        gate.close()
        proxy.close()
    shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["agent"]:
        agent(*sys.argv[2:5])
    else:
        main()
