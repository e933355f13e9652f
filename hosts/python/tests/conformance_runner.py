"""Plays the vectors in tests/conformance/ (format in its README.md) through the gate
component, the file journal and the simulated payments service, and reports every
difference from what the vector expects. hosts/cli/src/conformance.rs is the reference
interpretation of every op; this follows it step for step, so the journals are the same
bytes. The runner interprets the world's script; every decision is the component's."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from interlock.clock import FakeClock
from interlock.errors import GateError, SimulatedCrash
from interlock.gate import (
    AFTER_COMMIT,
    AFTER_INTENT,
    IN_RECOVERY,
    GateHost,
    JournalRef,
    Outcome,
    allowed,
    failed,
    to_request,
)
from interlock.journal import JOURNAL_FILE, FileJournal, TornTail
from interlock.payments_sim import Payments
from interlock.targets import PaymentsTarget

T0_MS = 1_800_000_000_000
LEASE = "case-4471"
LEASE_MS = 48 * 3_600_000
ORDER = "order_881"
PAID_CENTS = 10_000
DEFAULT_KEY = "refund:order_881"
PINS = "journal-pins.json"
HOST = "python"

TIERS = {"1": (True, False), "2": (False, True), "3": (False, False), "1+lookup": (True, True)}


def dumps(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def load_dir(d: Path) -> List[Tuple[Path, Dict[str, Any]]]:
    out = []
    for p in sorted(d.glob("*.json")):
        if p.name == PINS:
            continue
        out.append((p, json.loads(p.read_text())))
    return out


class World:
    """The payments target with switches that make the next premise reads or host checks
    fail, and the targets the current process routes (``None``: all of them)."""

    def __init__(self, target: PaymentsTarget):
        self.target = target
        self.failing_reads = 0
        self.failing_checks = 0
        self.routes_now: Optional[List[str]] = None

    def routes(self) -> List[str]:
        return self.target.routes() if self.routes_now is None else list(self.routes_now)

    def capture(self, req):
        if self.failing_reads > 0:
            self.failing_reads -= 1
            return failed("the order system did not answer")
        return self.target.capture(req)

    def authorize(self, req):
        if self.failing_checks > 0:
            self.failing_checks -= 1
            return failed("check unavailable")
        return allowed(True)

    def apply(self, req):
        return self.target.apply(req)

    def query(self, req):
        return self.target.query(req)


@dataclass
class Task:
    proposal: Dict[str, Any]
    finished: bool = False
    last: Optional[Dict[str, Any]] = None


def check(what: str, got: Dict[str, Any], want: Any) -> List[str]:
    if not isinstance(want, dict):
        return [f"{what}: expectation {want} is not an object"]
    return [
        f"{what}: {k} is {json.dumps(got.get(k))}, expected {json.dumps(w)} (outcome {got})"
        for k, w in want.items()
        if got.get(k) != w
    ]


@dataclass
class Report:
    refunded_cents: int = 0
    refund_records: int = 0
    tasks: Dict[str, Any] = field(default_factory=dict)
    journal_sha256: str = ""
    failures: List[str] = field(default_factory=list)


class Run:
    def __init__(self, vector: Dict[str, Any], workdir: Path):
        self.v = vector
        self.dir = workdir
        self.tier = TIERS[vector["tier"]]
        self.clock = FakeClock(T0_MS)
        payments = Payments.in_memory(vector["tier"])
        payments.add_order(ORDER, vector.get("paid_cents") or PAID_CENTS)
        self.journal = JournalRef(FileJournal.open(workdir))
        self.world = World(PaymentsTarget(payments, self.clock))
        self.worker: Optional[GateHost] = None
        self.tasks: Dict[str, Task] = {}
        self.order: List[str] = []
        self.failures: List[str] = []

    @property
    def payments(self) -> Payments:
        return self.world.target.payments

    def host(self) -> GateHost:
        if self.worker is None:
            self.worker = self.fresh_host()
        return self.worker

    def fresh_host(self) -> GateHost:
        return GateHost(self.journal, self.clock)

    def premises_now(self):
        return self.payments.premises(ORDER, None)

    def outcome_json(self, o: Outcome) -> Dict[str, Any]:
        v: Dict[str, Any] = {
            "state": o.status,
            "executed": o.executed,
            "replayed": o.replayed,
            "changed": [c.name for c in o.changed],
        }
        if o.reason:
            v["reason"] = o.reason
        if o.return_to is not None:
            v["return_to"] = o.return_to
        if o.status in ("COMMITTED", "CONFIRMED"):
            r = json.loads(self.host().receipt(o.effect_id))
            if "via" in r:
                v["via"] = r["via"]
        return v

    def record(self, task: str, o: Outcome) -> Dict[str, Any]:
        v = self.outcome_json(o)
        t = self.tasks[task]
        t.finished = o.final
        t.last = v
        return v

    def task(self, step: Dict[str, Any]) -> str:
        name = step["task"]
        if name not in self.tasks:
            raise ValueError(f"task {name!r} was never decided")
        return name

    def send(self, step):
        name = self.task(step)
        crash = step.get("crash")
        if crash == "before_intent":
            self.worker = None  # dies before it writes anything: the task stays on the list
            return
        if crash not in (None, AFTER_INTENT, AFTER_COMMIT):
            raise ValueError(f"unknown crash point {crash!r}")
        proposal = dumps(self.tasks[name].proposal)
        host = self.host()
        if crash:
            host.crash_at(crash)
        try:
            o = host.submit(proposal, self.world)
        except SimulatedCrash:
            self.worker = None
            return
        if crash:
            self.failures.append(f"send {name}: the crash point was never reached")
        got = self.record(name, o)
        if "expect" in step:
            self.failures += check(f"send {name}", got, step["expect"])

    def restart(self, step):
        routes = step.get("routes")
        if routes is not None and not (isinstance(routes, list) and all(isinstance(r, str) for r in routes)):
            raise ValueError(f"restart.routes must be a list of target names, got {routes!r}")
        self.world.routes_now = routes  # until the next restart
        self.worker = self.fresh_host()
        host = self.worker
        crash = step.get("crash")
        if crash not in (None, IN_RECOVERY):
            raise ValueError(f"unknown restart crash point {crash!r}")
        if crash:
            host.crash_at(IN_RECOVERY)
        try:
            recovered = host.recover_all(self.world)
        except SimulatedCrash:
            if not crash:
                raise
            self.worker = None  # recovery itself died: the next restart finishes its work
            return
        if crash:
            self.failures.append("restart: the recovery crash point was never reached")
        got = []
        for effect, result in recovered:
            if isinstance(result, Exception):
                raise RuntimeError(f"recover {effect}: {result}") from result
            got.append(self.outcome_json(result))
        want = step.get("expect")
        if isinstance(want, list):
            if len(want) != len(got):
                self.failures.append(
                    f"restart: recovered {len(got)} effects, expected {len(want)}: {got}"
                )
            for i, (g, w) in enumerate(zip(got, want)):
                self.failures += check(f"restart, effect {i}", g, w)
        # The agent's own restart: every unfinished task is sent again.
        for name in list(self.order):
            if self.tasks[name].finished:
                continue
            o = self.worker.submit(dumps(self.tasks[name].proposal), self.world)
            self.record(name, o)

    def race(self, step):
        names = step["tasks"]
        workers, steps = [], []
        for name in names:
            if name not in self.tasks:
                raise ValueError(f"task {name!r} was never decided")
            h = self.fresh_host()
            h.route(self.world)
            steps.append(h.submit_step(dumps(self.tasks[name].proposal)))
            workers.append(h)
        for i, (h, s) in enumerate(zip(workers, steps)):
            if s.ask.tag == "capture":
                reply = self.world.capture(to_request("capture", s.ask.payload))
                steps[i] = h.resume(s.op, reply)
        want = step.get("expect") or []
        for i, (h, first, name) in enumerate(zip(workers, steps, names)):
            o = h.drive(first, self.world)
            self.worker = h
            got = self.record(name, o)
            if i < len(want):
                self.failures += check(f"race {name}", got, want[i])

    def decide(self, step):
        name = step["task"]
        dedupes, lookup = self.tier
        authority: Dict[str, Any] = {"approval": step["approval"]} if "approval" in step else {"lease": LEASE}
        if step.get("host_check") is True:
            authority["host_check"] = True
        p = {
            "agent": "refund-agent",
            "target": {"name": "payments", "dedupes": dedupes, "lookup": lookup,
                       "dedupe_window_ms": 86_400_000, "timeout_ms": 1000},
            "key": step.get("key", DEFAULT_KEY),
            "effect": {"order": ORDER, "amount_cents": int(step["amount_cents"])},
            "authority": authority,
            "premises": self.premises_now(),
        }
        for extra in ("bounds", "cap"):
            if extra in step:
                p[extra] = step[extra]
        if name in self.tasks:
            raise ValueError(f"task {name!r} decided twice")
        self.tasks[name] = Task(p)
        self.order.append(name)

    def journal_file(self) -> Path:
        return self.dir / JOURNAL_FILE

    def journal_sha256(self) -> str:
        try:
            data = self.journal_file().read_bytes()
        except FileNotFoundError:
            data = b""
        return hashlib.sha256(data).hexdigest()

    def step(self, step):
        op = step["op"]
        if op == "decide":
            self.decide(step)
        elif op == "redecide":
            self.tasks[self.task(step)].proposal["effect"]["amount_cents"] = int(step["amount_cents"])
        elif op == "send":
            self.send(step)
        elif op == "restart":
            self.restart(step)
        elif op == "race":
            self.race(step)
        elif op == "approve":
            p = self.tasks[self.task(step)].proposal
            a = {
                "approval": step["approval"],
                "approver": step["approver"],
                "request": {"key": p["key"], "effect": p["effect"]},
                "premises_seen": self.premises_now(),
            }
            if "expires_in_ms" in step:
                a["expires_at_ms"] = self.clock.now_ms() + step["expires_in_ms"]
            self.host().approve(dumps(a))
        elif op == "lease":
            self.host().grant_lease(step["lease"], self.clock.now_ms() + step["expires_in_ms"])
        elif op == "revoke_lease":
            self.host().revoke_lease(step["lease"])
        elif op == "hand_refund":
            self.payments.refund_by_hand(ORDER, step["amount_cents"], self.clock.now_ms())
        elif op == "set_eligible":
            self.payments.set_eligible(ORDER, bool(step["eligible"]))
        elif op == "advance":
            self.clock.advance(step["ms"])
        elif op == "fail_reads":
            self.world.failing_reads = int(step["count"])
        elif op == "fail_checks":
            self.world.failing_checks = int(step["count"])
        elif op == "submit_raw":
            before = self.journal_sha256()
            want = step["expect_error"]
            text = step["text"] * int(step.get("repeat", 1))
            try:
                got = self.host().submit_step(text)
                self.failures.append(f"submit_raw: expected {want}, got a step {got}")
            except GateError as e:
                if e.case != want:
                    self.failures.append(f"submit_raw: expected {want}, got {e.case}: {e}")
            if self.journal_sha256() != before:
                self.failures.append("submit_raw: the journal changed")
        elif op == "tear_journal":
            path = self.journal_file()
            size = path.stat().st_size
            with open(path, "r+b") as f:
                f.truncate(max(0, size - int(step["bytes"])))
        elif op == "reopen":
            self.worker = None
            self.journal.close()
            want = step.get("expect_error")
            try:
                j = FileJournal.open(self.dir)
            except TornTail as e:
                if want != "torn-tail":
                    self.failures.append(f"reopen: got {e}, expected {want}")
                return
            except Exception as e:  # noqa: BLE001
                self.failures.append(f"reopen: got {e}, expected {want}")
                return
            self.journal.replace(j)
            if want is not None:
                self.failures.append(f"reopen: expected {want}, the journal opened")
        elif op == "repair":
            FileJournal.repair(self.dir)
        elif op == "verify":
            report = self.host().verify([])
            want = int(step.get("expect_problems", 0))
            if len(report.problems) != want:
                self.failures.append(
                    f"verify: {len(report.problems)} problems, expected {want}: {report.problems}"
                )
        else:
            raise ValueError(f"unknown op {op!r}")


def run(vector: Dict[str, Any], workdir: Path) -> Report:
    r = Run(vector, workdir)
    try:
        r.host().grant_lease(LEASE, T0_MS + LEASE_MS)
        for i, step in enumerate(vector["steps"]):
            try:
                r.step(step)
            except Exception as e:
                raise RuntimeError(f"{vector['id']} step {i} ({dumps(step)}): {e}") from e
        report = Report(
            refunded_cents=r.payments.refunded_cents(ORDER),
            refund_records=len(r.payments.refunds(ORDER)),
            tasks={k: t.last for k, t in r.tasks.items() if t.last is not None},
            journal_sha256=r.journal_sha256(),
            failures=list(r.failures),
        )
    finally:
        r.worker = None
        r.journal.close()
    expect = vector["expect"]
    for k, got in (("refunded_cents", report.refunded_cents), ("refund_records", report.refund_records)):
        if k not in expect:
            report.failures.append(f"the vector does not say {k}")
        elif expect[k] != got:
            report.failures.append(f"{k} is {got}, expected {expect[k]}")
    for name, want in (expect.get("tasks") or {}).items():
        if name in report.tasks:
            report.failures += check(f"task {name}", report.tasks[name], want)
        else:
            report.failures.append(f"task {name} never got an outcome")
    return report
