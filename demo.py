#!/usr/bin/env python3
"""The crash demo of `interlock demo`, on the Python host (the `interlock` package):

    python3 demo.py naive   # today: no gate, plain retry; the refund lands twice ($40)
    python3 demo.py 2       # Interlock, a payments API that can be looked up: lands once
    python3 demo.py 3       # Interlock, an API that can neither dedupe nor be looked up: AMBIGUOUS
    python3 demo.py 1       # Interlock, an API that dedupes on the idempotency key

A customer paid $100; case #4471 approves one $20 partial refund. A child process sends the
refund and really dies (os.abort) after the payments service applied it and before the reply
reached the gate; a new process recovers from the journal. The journal, the proposal and the
simulated service's state are in ./.interlock-demo/MODE (owner-only, wiped by the next run,
the CLI's demo folder too), and the lines printed are the ones `interlock demo MODE` prints:
`interlock receipt .interlock-demo/2 EFFECT_ID` reads the journal this leaves.

Needs the `interlock` package: `bash scripts/build-wasm.sh && pip install ./hosts/python`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Tuple

MODES = ("naive", "1", "2", "3")
ORDER = "order_881"
PAID_CENTS = 10_000
REFUND_CENTS = 2_000
LEASE = "case-4471"
AGENT = "refund-agent"
HOUR_S = 3600
DAY_MS = 86_400_000
SEND_TIMEOUT_MS = 1000  # short, so the restarted process waits only a second for the claim
BASE = Path(".interlock-demo")
MARKER = ".interlock-demo"  # marks a folder as a demo's own: only such a folder is wiped
INSTALL = ("the interlock package (the Python host) is not installed; at the repository root run\n"
           "  bash scripts/build-wasm.sh\n"
           "  pip install ./hosts/python\n"
           "then run the demo again")


class DemoFailed(Exception):
    """The demo did not go as planned (exit 1)."""


def say(line: str) -> None:
    print(line, flush=True)  # noqa: T201 - a demo talks to a person


def fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"demo.py: {message}\n")
    sys.exit(code)


def tier_of(mode: str) -> str:
    # Plain retry sends no key, so the tier does not matter; 3 is the honest case.
    return "3" if mode == "naive" else mode


def dollars(cents: int) -> str:
    return f"${cents // 100}" if cents % 100 == 0 else f"${cents // 100}.{cents % 100:02d}"


def need_interlock() -> None:
    try:
        import interlock  # noqa: F401
        import interlock.payments_sim  # noqa: F401
    except ImportError as e:
        fail(2, f"{INSTALL}\n({e})")


# ---------------------------------------------------------------- the refund, gated


def decorate(gate: Any, payments: Any, tier: str) -> Any:
    """The $20 refund as a gated effect named `payments`, the CLI demo's proposal: key
    refund:order_881, effect {order, amount_cents}, premises read from the service (our own
    refund left out), under lease case-4471; tier 1 dedupes, tier 2 is looked up."""
    def find(order: str, amount_cents: int, idempotency_key: str) -> Any:
        return payments.find_by_reference(idempotency_key)

    @gate.effect(name="payments", key=lambda order, amount_cents: f"refund:{order}",
                 premises=lambda order, amount_cents, idempotency_key: payments.premises(order, idempotency_key),
                 lookup=find if tier == "2" else None, dedupes=tier == "1", lease=LEASE,
                 timeout_ms=SEND_TIMEOUT_MS, dedupe_window_ms=DAY_MS)
    def refund(order: str, amount_cents: int, idempotency_key: str) -> Any:
        # The service's tier decides what the key and the reference do.
        return payments.refund(order, amount_cents, idempotency_key, idempotency_key)

    return refund


def child(phase: str, folder: Path) -> int:
    """The processes that really die (os.abort), as a crashed agent does, and the restart."""
    from interlock import Interlock, SimulatedCrash
    from interlock.payments_sim import Payments

    payments = Payments.open(folder / "payments.json")
    tier = payments.tier()
    if phase == "naive-send":
        payments.refund(ORDER, REFUND_CENTS)
        os.abort()
    if phase == "naive-rerun":
        payments.refund(ORDER, REFUND_CENTS)
        return 0
    gate = Interlock(folder, agent=AGENT)
    refund = decorate(gate, payments, tier)
    if phase == "send":
        proposal = json.loads((folder / "proposal.json").read_text())
        try:
            outcome = refund.gate.submit(proposal, crash_after_effect=True)
        except SimulatedCrash:
            os.abort()  # the service applied the refund; its reply never reaches the gate
        sys.stderr.write(f"the send ended {outcome.status} without reaching the service\n")
        return 1
    if phase == "recover":
        report = gate.recover()
        print(json.dumps([{"effect_id": o.effect_id, "state": str(o.status),  # noqa: T201 - to the parent
                           "reason": None if o.reason is None else str(o.reason)} for o in report]))
        gate.close()
        return 0 if not report.errors else 1
    raise DemoFailed(f"no such phase {phase!r}")


def run_child(phase: str, folder: Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", phase, str(folder)],
                          capture_output=True, text=True)


def child_text(p: "subprocess.CompletedProcess[str]") -> str:
    return f"status {p.returncode}\n{p.stdout}{p.stderr}"


# ---------------------------------------------------------------- the story


def write_private(path: Path, text: str) -> None:
    """A file only its owner reads, as every file beside a journal."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def owner_only(folder: Path) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)


def fresh(folder: Path) -> None:
    """The demo's folder, emptied: only an empty folder or an earlier demo's is wiped."""
    if folder.exists():
        if any(folder.iterdir()) and not (folder / MARKER).exists():
            fail(2, f"{folder} is not empty and not a demo folder; the demo wipes its folder")
        shutil.rmtree(folder)
    owner_only(folder)
    write_private(folder / MARKER, "made by `python3 demo.py` (or `interlock demo`); wiped by the next one\n")


def totals(folder: Path) -> Tuple[int, int]:
    from interlock.payments_sim import Payments

    payments = Payments.open(folder / "payments.json")
    refunded, records = int(payments.refunded_cents(ORDER)), len(payments.refunds(ORDER))
    say(f"refunded on order #881: {dollars(refunded)} ({records} refund record(s))")
    return refunded, records


def last_state(receipt: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    entries = receipt.get("entries") or []
    last = entries[-1] if entries else {}
    return str(last.get("state") or receipt.get("state") or "?"), last.get("via")


def demo(mode: str) -> int:
    from interlock import Interlock
    from interlock.payments_sim import Payments

    owner_only(BASE)
    folder = BASE / mode
    fresh(folder)
    tier = tier_of(mode)
    payments = Payments.create(folder / "payments.json", tier)
    payments.add_order(ORDER, PAID_CENTS)

    if mode == "naive":
        say(f"system: no gate (plain retry), payments API at tier {tier}")
    else:
        say(f"system: INTERLOCK, payments API at tier {tier}")
    say(f"customer paid {dollars(PAID_CENTS)}. case #4471 approves one {dollars(REFUND_CENTS)} partial refund.")
    say(f"agent decides: refund {dollars(REFUND_CENTS)}")

    effect: Optional[str] = None
    if mode != "naive":
        # The decision: premises read from the system of record now, authority granted.
        with Interlock(folder, agent=AGENT) as gate:
            refund = decorate(gate, payments, tier)
            proposal = refund.proposal(ORDER, REFUND_CENTS)
            write_private(folder / "proposal.json", json.dumps(proposal))
            effect = gate.effect_id_of(proposal)
            gate.lease(LEASE, ttl_s=HOUR_S)

    say("── refund executes, then the process dies before the ack ──")
    sent = run_child("send" if effect else "naive-send", folder)
    if sent.returncode >= 0:  # a real crash is a signal (SIGABRT)
        raise DemoFailed(f"the child process did not crash as planned:\n{child_text(sent)}")
    say("💥 crash")
    say("── process restarts ──")

    if effect is None:
        rerun = run_child("naive-rerun", folder)
        if rerun.returncode != 0:
            raise DemoFailed(f"the restarted process failed:\n{child_text(rerun)}")
        say("no journal: the restarted process re-runs the step and refunds again")
        refunded, _ = totals(folder)
        if refunded > REFUND_CENTS:
            say("Paid twice.")
        say(f"final {dollars(refunded)} refunded for one approved {dollars(REFUND_CENTS)}")
        return 0

    with Interlock(folder, agent=AGENT) as gate:
        before, _ = last_state(gate.receipt(effect))
    # A new process recovers from the journal.
    rec = run_child("recover", folder)
    try:
        outcomes: List[Dict[str, Any]] = json.loads(rec.stdout)
    except ValueError:
        raise DemoFailed(f"recovery failed:\n{child_text(rec)}") from None
    reason = next((o["reason"] for o in outcomes if o["effect_id"] == effect), None)
    with Interlock(folder, agent=AGENT) as gate:
        receipt = gate.receipt(effect)
    state, via = last_state(receipt)
    said = "DISPATCHED with no COMMITTED" if before == "DISPATCHED" else before
    how = ", ".join(([f"via {via}"] if via else []) + ([reason] if reason else []))
    say(f"journal says {said} → recovery: {state}{f' ({how})' if how else ''}")
    totals(folder)
    say("journal:")
    for entry in receipt.get("entries") or []:
        say(f"  {entry.get('state', '?'):<11} {effect} {entry.get('via') or ''}".rstrip())
    say(f"receipt: final {receipt.get('final', '?')}, executed {receipt.get('executed', '?')}, "
        f"attempts {receipt.get('attempts')}; full JSON: interlock receipt {folder} {effect}")
    say(f"final {state}")
    return 0


def main(argv: List[str]) -> int:
    if len(argv) == 3 and argv[0] == "--child":
        need_interlock()
        return child(argv[1], Path(argv[2]))
    if len(argv) != 1 or argv[0] not in MODES:
        fail(2, "usage: python3 demo.py naive|1|2|3  (naive: plain retry; 1, 2, 3: Interlock against a "
                "payments API that dedupes, can be looked up, or neither)")
    need_interlock()
    try:
        return demo(argv[0])
    except DemoFailed as e:
        fail(1, str(e))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
