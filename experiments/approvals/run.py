#!/usr/bin/env python3
"""The original's approvals experiment, redone on this gate: a simulated day of refund
requests through the Python API (a file journal in a temporary directory, a fake clock),
approval rules and routes as a shop would write them, scripted people who decide from the
inbox with response times, an agent that resubmits after approval, and the repository's
payments simulator (payments_sim.wasm) as the service whose ledger is the ground truth.

    python experiments/approvals/run.py            # 100 requests: results/approvals.{md,json}
    python experiments/approvals/run.py --quick    # 25 requests, prints the figures only

Every figure is measured from the gate's answers, the inbox and the simulator's ledger; the
mix of requests is an assumption (MIX below), as the original's was.
"""
from __future__ import annotations

import argparse
import datetime
import json
import random
import statistics
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from interlock import Interlock, InvalidField
from interlock.clock import FakeClock
from interlock.gate import Reason, State
from interlock.payments_sim import Payments, ServiceError

ROOT = Path(__file__).resolve().parents[2]
MIN = 60_000
HOUR = 60 * MIN
#: Monday 2026-11-30, 09:00 UTC: the simulated day starts here.
T0 = int(datetime.datetime(2026, 11, 30, 9, tzinfo=datetime.timezone.utc).timestamp() * 1000)
STEP = 5 * MIN
#: The simulation runs until every request is settled or this long after T0.
HORIZON = 30 * HOUR

#: The rules a shop writes: fraud signals and repeat refunds go to a person whatever the
#: amount; large ones to a support lead, very large ones to two people in finance; small,
#: clean, eligible ones are approved by rule. First match decides.
RULES: Dict[str, Any] = {
    "rules": [
        {"name": "fraud_signal", "target": "refund",
         "when": [{"field": "/premises/flagged", "equals": True}], "then": "person", "route": "risk"},
        {"name": "repeat_refund", "target": "refund",
         "when": [{"field": "/premises/refunded_by_others_cents", "over": 0}],
         "then": "person", "route": "support_leads"},
        {"name": "very_large", "target": "refund",
         "when": [{"field": "/effect/amount_cents", "over": 100_000}],
         "then": "person", "route": "finance", "approvers_needed": 2},
        {"name": "large", "target": "refund",
         "when": [{"field": "/effect/amount_cents", "over": 15_000}], "then": "person", "route": "support_leads"},
        {"name": "small_clean", "target": "refund",
         "when": [{"field": "/effect/amount_cents", "at_most": 15_000},
                  {"field": "/premises/eligible", "equals": True}],
         "then": "approve"},
    ],
    "routes": {
        "support_leads": {"primary_approvers": ["alice@shop", "bob@shop"],
                          "duration_before_escalation_ms": 2 * HOUR,
                          "escalation_approvers": ["head-of-support@shop"],
                          "duration_before_expiry_ms": 24 * HOUR},
        "risk": {"primary_approvers": ["carol@shop"],
                 "duration_before_escalation_ms": 3 * HOUR,
                 "escalation_approvers": ["head-of-risk@shop"],
                 "duration_before_expiry_ms": 8 * HOUR,
                 "justification_required": True},
        "finance": {"primary_approvers": ["dave@shop", "erin@shop"],
                    "duration_before_escalation_ms": 4 * HOUR,
                    "escalation_approvers": ["cfo@shop"],
                    "duration_before_expiry_ms": 24 * HOUR,
                    "justification_required": True},
    },
}

#: The day's mix: (category, count, what happens). The counts sum to 100.
MIX: List[Tuple[str, int, str]] = [
    ("small_clean", 46, "up to $150, eligible, no flag: should be refunded"),
    ("retry_same", 4, "the agent submits a case again after it went out (a restart): one refund only"),
    ("retry_changed", 2, "the agent submits a case again with another amount (the model changed its mind)"),
    ("race_by_hand", 5, "small; support refunds it by hand while the agent's send is in flight"),
    ("ineligible", 4, "small; the order is no longer eligible (chargeback opened)"),
    ("over_balance", 3, "small, but more than the order has left (the model added shipping twice)"),
    ("large_clean", 14, "$150 to $1,000, clean: a support lead approves"),
    ("very_large", 4, "over $1,000: two people in finance approve"),
    ("flagged_fraud", 5, "fraud signal on the customer, and it is fraud: risk rejects"),
    ("flagged_legit", 3, "fraud signal on the customer, but legitimate: risk approves"),
    ("flagged_late", 2, "fraud signal, asked after risk left for the day: nobody decides in time"),
    ("second_case_dup", 2, "a second case for a refund already paid (the customer asked twice): a lead rejects"),
    ("second_case_legit", 2, "a second case on a refunded order, another item returned: a lead approves"),
    ("stale_full", 3, "large, approved; support refunds it by hand before the agent sends: returned, rejected"),
    ("stale_partial", 1, "large, approved; a small hand refund of another item meanwhile: returned, re-approved"),
]

#: Who may be told to look, and when they look: desk hours (UTC hours of the day), how often
#: they check the inbox, and how long an item waits for them once it is theirs (minutes).
PEOPLE: Dict[str, Dict[str, Any]] = {
    "alice@shop": {"hours": [(9, 13), (16, 18)], "every": 20, "delay": (10, 60)},
    "bob@shop": {"hours": [(9, 18)], "every": 15, "delay": (5, 45)},
    "head-of-support@shop": {"hours": [(9, 19)], "every": 30, "delay": (0, 30)},
    "carol@shop": {"hours": [(9, 15)], "every": 30, "delay": (20, 90)},
    "head-of-risk@shop": {"hours": [(9, 10)], "every": 60, "delay": (0, 10)},
    "dave@shop": {"hours": [(9, 18)], "every": 30, "delay": (30, 120)},
    "erin@shop": {"hours": [(9, 18)], "every": 30, "delay": (30, 120)},
    "cfo@shop": {"hours": [(10, 17)], "every": 60, "delay": (0, 60)},
    # Support operations acknowledges refusals the gate shows in the inbox (dismiss).
    "ops@shop": {"hours": [(9, 18)], "every": 60, "delay": (0, 30)},
}
#: bob moves to another team at 13:00: his lease is revoked; he does not know yet.
REVOKED = ("bob@shop", T0 + 4 * HOUR)
#: The agent looks at its pending requests this often.
AGENT_POLL = 10 * MIN
#: The gate's refusals that are mechanical checks, by what checked.
CHECKS = {
    Reason.CONFLICTING_PAYLOAD: "effect identity: another amount under the same case",
    Reason.PREMISE_CHANGED: "premises re-read right before the send",
    Reason.NOT_ALLOWED: "the shop's own check at dispatch (allowed: order eligible)",
    Reason.APPROVAL_STALE: "approval returned: the premises its approvers saw changed",
    Reason.APPROVAL_EXPIRED: "deadline: expired, never a person's no",
    Reason.TARGET_REJECTED: "the payments service's balance check (the service's, not the gate's)",
}


@dataclass
class Request:
    n: int
    category: str
    case: str
    order: str
    amount: int
    at_ms: int
    should_send: bool
    #: A later request that repeats this case (retry_*) names the earlier one here.
    repeats: Optional[str] = None
    #: A hand refund by support, and when: ("in_flight" | "after_approval", cents).
    by_hand: Optional[Tuple[str, int]] = None
    effect_id: Optional[str] = None
    outcomes: List[str] = field(default_factory=list)
    final: Optional[str] = None


def day(quick: bool, rng: random.Random) -> Tuple[List[Request], Dict[str, int], Dict[str, bool], Set[str]]:
    """The requests of the day, the orders (paid cents), the fraud flags, ineligible orders."""
    mix = [(c, max(1, round(n / 5)) if quick else n) for c, n, _ in MIX]
    reqs: List[Request] = []
    paid: Dict[str, int] = {}
    flagged: Dict[str, bool] = {}
    ineligible: Set[str] = set()
    n = 0

    def arrival(lo_h: float = 0.0, hi_h: float = 8.5) -> int:
        return T0 + int(rng.uniform(lo_h, hi_h) * HOUR) // MIN * MIN

    def new(category: str, amount: int, paid_cents: int, should_send: bool, at: int) -> Request:
        nonlocal n
        n += 1
        r = Request(n, category, f"case_{n:03d}", f"order_{n:03d}", amount, at, should_send)
        paid[r.order] = paid_cents
        return r

    smalls: List[Request] = []
    for category, count in mix:
        for _ in range(count):
            if category in ("small_clean", "race_by_hand", "ineligible", "over_balance"):
                amount = rng.randrange(500, 15_001, 100)
                paid_cents = amount * rng.choice([1, 2, 3]) if category != "over_balance" else amount // 2
                r = new(category, amount, paid_cents, category == "small_clean", arrival(0, 7.5))
                if category == "small_clean":
                    smalls.append(r)
                if category == "race_by_hand":
                    r.by_hand = ("in_flight", amount)
                if category == "ineligible":
                    ineligible.add(r.order)
            elif category in ("large_clean", "stale_full", "stale_partial"):
                amount = rng.randrange(15_100, 100_001, 100)
                r = new(category, amount, amount * 2, category != "stale_full", arrival(0, 7))
                if category == "stale_full":
                    r.by_hand = ("after_approval", amount)
                if category == "stale_partial":
                    r.by_hand = ("after_approval", 2_500)
            elif category == "very_large":
                amount = rng.randrange(100_100, 400_001, 100)
                r = new(category, amount, amount, True, arrival(0, 6))
            elif category.startswith("flagged"):
                amount = rng.randrange(2_000, 60_001, 100)
                at = arrival(7.5, 8.5) if category == "flagged_late" else arrival(0, 5)
                r = new(category, amount, amount, category == "flagged_legit", at)
                flagged[r.order] = True
            else:
                continue  # the categories that refer to earlier requests, below
            reqs.append(r)
    later = sorted(smalls, key=lambda r: r.at_ms)
    for category, count in mix:
        for _ in range(count):
            if category not in ("retry_same", "retry_changed", "second_case_dup", "second_case_legit"):
                continue
            base = later.pop(0)  # each refers to a different earlier small refund
            n += 1
            amount = base.amount
            if category == "retry_changed":
                amount = base.amount + 500
            r = Request(n, category, base.case, base.order, amount, base.at_ms + 30 * MIN, False,
                        repeats=base.case)
            if category.startswith("second_case"):
                r.case = f"case_{n:03d}"
                r.repeats = None
                r.at_ms = base.at_ms + 2 * HOUR
                if category == "second_case_legit":
                    # Another item of the order comes back: the order has that much left.
                    paid[base.order] += 3_000
                    r.amount = 2_000
                    r.should_send = True
            reqs.append(r)
    reqs.sort(key=lambda r: (r.at_ms, r.n))
    return reqs, paid, flagged, ineligible


class Person:
    """A scripted person: looks at the inbox in desk hours, decides items that are theirs
    once their response time has passed, the way the day's truth says."""

    def __init__(self, name: str, spec: Dict[str, Any], rng: random.Random):
        self.name, self.spec, self.rng = name, spec, rng
        self.delays: Dict[Tuple[str, int], int] = {}
        self.next_look = T0
        self.told_no_access = False

    def at_desk(self, now: int) -> bool:
        hour = ((now - T0) / HOUR + 9) % 24
        return any(a <= hour < b for a, b in self.spec["hours"])

    def delay(self, item: str, rnd: int) -> int:
        if (item, rnd) not in self.delays:
            lo, hi = self.spec["delay"]
            self.delays[(item, rnd)] = int(self.rng.uniform(lo, hi) * MIN)
        return self.delays[(item, rnd)]


def run(quick: bool = False, seed: int = 25, workdir: Optional[Path] = None) -> Dict[str, Any]:
    rng = random.Random(seed)
    reqs, paid, flagged, ineligible = day(quick, rng)
    tmp = tempfile.TemporaryDirectory(prefix="interlock-approvals-") if workdir is None else None
    base = Path(tmp.name) if tmp else Path(workdir)  # type: ignore[arg-type]
    clock = FakeClock(T0)
    payments = Payments.create(str(base / "payments.json"), "2")
    for order, cents in paid.items():
        payments.add_order(order, cents)
    for order in ineligible:
        payments.set_eligible(order, False)
    gate = Interlock(str(base / "journal"), agent="refund-agent", clock=clock, strict=True)
    gate.set_approval_rules(RULES)
    gate.lease("refund-agent", expires_at_ms=T0 + 48 * HOUR)
    for person in PEOPLE:
        gate.lease(person, expires_at_ms=T0 + 48 * HOUR)
    by_case = {r.case: r for r in reqs if r.repeats is None}
    premise_reads: Counter = Counter()

    def premises(order: str, amount_cents: int, case: str, effect_id: str) -> Dict[str, Any]:
        premise_reads[effect_id] += 1
        r = by_case.get(case)
        # A support rep refunds by hand between the agent's proposal and its send.
        if r is not None and r.by_hand and r.by_hand[0] == "in_flight" and premise_reads[effect_id] == 2:
            payments.refund_by_hand(order, r.by_hand[1], now_ms=clock.now_ms())
            r.by_hand = ("done", r.by_hand[1])
        return {**payments.premises(order, effect_id), "flagged": flagged.get(order, False)}

    @gate.effect(key=lambda order, amount_cents, case: f"refund:{case}", lease="refund-agent",
                 premises=premises,
                 allowed=lambda order, amount_cents, case: payments.premises(order)["eligible"],
                 lookup=lambda order, amount_cents, case, effect_id: payments.find_by_reference(effect_id),
                 rejects=(ServiceError,))
    def refund(order: str, amount_cents: int, case: str, idempotency_key: str) -> Dict[str, Any]:
        return payments.refund(order, amount_cents, reference=idempotency_key, now_ms=clock.now_ms())

    people = {name: Person(name, spec, random.Random(f"{seed}:{name}")) for name, spec in PEOPLE.items()}
    seen_items: Dict[str, Set[str]] = defaultdict(set)  # item -> kinds it was shown as
    statuses: Dict[str, Set[str]] = defaultdict(set)  # approval item -> statuses seen
    round_start: Dict[Tuple[str, int], int] = {}
    decisions: List[Dict[str, Any]] = []
    refused_decisions: List[Dict[str, Any]] = []
    decided_rounds: Dict[Tuple[str, int], int] = {}
    returned: Dict[str, List[Dict[str, Any]]] = {}
    pending: Dict[str, Request] = {}  # effect id -> request waiting for a person
    hand_after: Set[str] = set()
    by_effect: Dict[str, Request] = {}
    catches: List[Dict[str, Any]] = []
    committed_at: Dict[str, int] = {}
    item_route: Dict[str, str] = {}

    def caught(check: str, r: Request) -> None:
        """A mechanical check stopped this refund: would the service itself have paid it
        now (its own balance check is the only one it has)?"""
        remaining = paid[r.order] - payments.refunded_cents(r.order)
        catches.append({"check": check, "case": r.case, "category": r.category, "at": _hhmm(clock.now_ms()),
                        "amount_cents": r.amount, "service_would_have_paid": r.amount <= remaining})

    def submit(r: Request) -> None:
        out = refund(r.order, r.amount, r.case)
        r.effect_id = r.effect_id or out.effect_id
        by_effect.setdefault(out.effect_id, r)
        label = f"{out.status}" + (f" ({out.reason})" if out.reason else "") + (" replayed" if out.replayed else "")
        r.outcomes.append(label)
        if out.replayed and out.status == State.COMMITTED:
            caught("effect identity: the same case again", r)
        elif out.status == State.COMMITTED:
            committed_at[out.effect_id] = clock.now_ms()
        elif out.reason in CHECKS:
            caught(CHECKS[out.reason], r)
        if out.status == State.PROPOSED:
            pending[out.effect_id] = r
            if out.reason == Reason.APPROVAL_STALE:
                returned.setdefault(out.effect_id, []).append(
                    {"at_ms": clock.now_ms(), "changed": [c.__dict__ for c in out.changed]})
            return
        pending.pop(out.effect_id, None)
        r.final = label

    def truth_of(item: Dict[str, Any]) -> Request:
        return by_case[item["effect"]["case"]]

    def verdict(person: str, item: Dict[str, Any]) -> Tuple[str, str]:
        r = truth_of(item)
        if item["kind"] != "approval":
            return "dismiss", f"seen: {item.get('reason')}"
        if item.get("changed") and item["round"] > 0:
            # A returned approval: the person reads what changed, premise by premise.
            if r.category == "stale_full":
                return "reject", "refunded by hand meanwhile: " + json.dumps(item["changed"])
            return "approve", "the hand refund was another item; still owed"
        # A stale_full refund is owed when first asked: the hand refund comes after.
        if r.should_send or r.category == "stale_full":
            return "approve", "checked the order and the customer"
        return "reject", {"flagged_fraud": "fraud pattern", "second_case_dup": "already refunded for this item"}.get(
            r.category, "not owed")

    def people_look(now: int) -> None:
        for p in people.values():
            if now < p.next_look or not p.at_desk(now):
                continue
            p.next_look = now + p.spec["every"] * MIN
            for item in gate.inbox():
                if item["kind"] == "approval":
                    if item["status"] == "expired" or p.name not in item["approvers"]:
                        continue
                    if p.name in item.get("approved_by", []):
                        continue
                    rnd = item["round"]
                    start = round_start.get((item["item"], rnd), item["requested_at_ms"])
                    if now < start + p.delay(item["item"], rnd):
                        continue
                elif p.name != "ops@shop" or "dismiss" not in item["actions"]:
                    continue
                if p.told_no_access:
                    continue
                v, why = verdict(p.name, item)
                try:
                    after = gate.decide(item["item"], p.name, v, why=why)
                except InvalidField as e:
                    refused_decisions.append({"decider": p.name, "item": item["item"], "verdict": v,
                                              "at_ms": now, "field": e.field, "problem": e.problem})
                    if "lease" in e.problem:
                        p.told_no_access = True
                    continue
                decisions.append({"decider": p.name, "item": item["item"], "verdict": v, "at_ms": now,
                                  "kind": item["kind"], "round": item.get("round", 0),
                                  "escalated": item.get("status") == "escalated"})
                if item["kind"] == "approval":
                    key = (item["item"], item["round"])
                    done = v == "reject" or len(after.get("approved_by", [])) >= item["approvals_needed"]
                    if done and key not in decided_rounds:
                        decided_rounds[key] = now
                        r = truth_of(item)
                        if v == "approve" and r.by_hand and r.by_hand[0] == "after_approval":
                            hand_after.add(item["item"])

    def observe(now: int) -> None:
        for item in gate.inbox():
            seen_items[item["item"]].add(item["kind"])
            if item["kind"] == "approval":
                statuses[item["item"]].add(item["status"])
                item_route[item["item"]] = item["route"]
                round_start.setdefault((item["item"], item["round"]),
                                       item["requested_at_ms"] if item["round"] == 0 else now)

    queue = list(reqs)
    last_poll = T0
    now = T0
    revoked = False
    while now <= T0 + HORIZON:
        while queue and queue[0].at_ms <= now:
            submit(queue.pop(0))
        if now >= REVOKED[1] and not revoked:
            gate.revoke_lease(REVOKED[0])
            revoked = True
        observe(now)
        people_look(now)
        # Support refunds by hand right after some approvals, before the agent's resend.
        for item in sorted(hand_after):
            r = by_effect[item]
            assert r.by_hand is not None
            payments.refund_by_hand(r.order, r.by_hand[1], now_ms=now)
            r.by_hand = ("done", r.by_hand[1])
        hand_after.clear()
        if now - last_poll >= AGENT_POLL:
            last_poll = now
            for r in list(pending.values()):
                submit(r)
        if not queue and not pending and not any(
                i["kind"] != "approval" or i["status"] != "expired" for i in gate.inbox()):
            break
        now += STEP
        clock.advance(STEP)
    gate.close()
    figures = measure(reqs, payments, seen_items, statuses, decisions, refused_decisions,
                      decided_rounds, round_start, returned, quick, seed, base)
    figures["caught"] = catches
    by_route: Dict[str, List[float]] = defaultdict(list)
    for (item, rnd), at in decided_rounds.items():
        if (item, rnd) in round_start:
            by_route[item_route[item]].append((at - round_start[(item, rnd)]) / MIN)
    figures["minutes_to_decision_by_route"] = {k: _spread(sorted(v)) for k, v in sorted(by_route.items())}
    # Approvals given before the approver lost access, counted in the round that let a
    # refund out after it.
    who, when = REVOKED
    last_round = {d["item"]: d["round"] for d in sorted(decisions, key=lambda d: d["at_ms"])}
    figures["sent_after_revocation_on_an_earlier_approval_by_" + who.split("@")[0]] = sorted(
        by_effect[d["item"]].case for d in decisions
        if d["decider"] == who and d["verdict"] == "approve" and d["at_ms"] < when
        and d["round"] == last_round[d["item"]] and committed_at.get(d["item"], 0) >= when)
    escalation_approvers = {a for r in RULES["routes"].values() for a in r.get("escalation_approvers", [])}
    figures["decided_by_an_escalation_approver"] = len({
        d["item"] for d in decisions if d["kind"] == "approval" and d["decider"] in escalation_approvers})
    figures["approval_then_approver_revoked_then_send"] = approval_after_revocation(base)
    figures["decisions_log"] = [{"decider": d["decider"], "case": by_effect[d["item"]].case, "verdict": d["verdict"],
                                 "kind": d["kind"], "round": d["round"], "at": _hhmm(d["at_ms"]),
                                 "item_escalated": d["escalated"]} for d in decisions]
    if tmp:
        tmp.cleanup()
    return figures


def approval_after_revocation(base: Path) -> Dict[str, Any]:
    """Apart from the day: an item approved by bob, bob's lease revoked, then the agent's
    resubmit. Does the approval still let the refund out?"""
    clock = FakeClock(T0)
    payments = Payments.create(str(base / "probe-payments.json"), "2")
    payments.add_order("order_probe", 100_000)
    gate = Interlock(str(base / "probe-journal"), agent="refund-agent", clock=clock, strict=True)
    gate.set_approval_rules(RULES)
    gate.lease("refund-agent", expires_at_ms=T0 + HOUR)
    gate.lease("bob@shop", expires_at_ms=T0 + HOUR)

    @gate.effect(key=lambda order, amount_cents: f"refund:{order}", lease="refund-agent",
                 premises=lambda order, amount_cents, effect_id: {
                     **payments.premises(order, effect_id), "flagged": False},
                 lookup=lambda order, amount_cents, effect_id: payments.find_by_reference(effect_id))
    def refund(order: str, amount_cents: int, idempotency_key: str) -> Dict[str, Any]:
        return payments.refund(order, amount_cents, reference=idempotency_key, now_ms=clock.now_ms())

    first = refund("order_probe", 20_000)
    gate.decide(first.effect_id, "bob@shop", "approve", why="checked")
    clock.advance(MIN)
    gate.revoke_lease("bob@shop")
    clock.advance(MIN)
    after = refund("order_probe", 20_000)
    gate.close()
    return {"first": str(first), "after_revocation": str(after), "refunds_in_ledger": payments.refund_count()}


def measure(reqs: List[Request], payments: Payments, seen_items: Dict[str, Set[str]],
            statuses: Dict[str, Set[str]], decisions: List[Dict[str, Any]],
            refused_decisions: List[Dict[str, Any]], decided_rounds: Dict[Tuple[str, int], int],
            round_start: Dict[Tuple[str, int], int], returned: Dict[str, List[Dict[str, Any]]],
            quick: bool, seed: int, base: Path) -> Dict[str, Any]:
    ledger = json.loads(payments.snapshot())["refunds"]
    owner = {r.effect_id: r for r in reqs if r.repeats is None}
    agent_refunds: Counter = Counter()
    wrong: List[Dict[str, Any]] = []
    for entry in ledger:
        if entry.get("by_hand"):
            continue
        r = owner.get(entry.get("reference"))
        if r is None:
            wrong.append({"why": "a refund no request asked for", "entry": entry})
            continue
        agent_refunds[r.case] += 1
        if not r.should_send:
            wrong.append({"why": "sent, should not have been", "case": r.case, "category": r.category})
        elif entry["amount_cents"] != r.amount:
            wrong.append({"why": "sent another amount", "case": r.case})
    for case, k in agent_refunds.items():
        if k > 1:
            wrong.append({"why": f"sent {k} times", "case": case})
    missed = [r.case for r in reqs if r.repeats is None and r.should_send and agent_refunds[r.case] == 0]

    # Requests by what ended them.
    ends: Counter = Counter()
    by_category: Dict[str, Counter] = defaultdict(Counter)
    for r in reqs:
        end = r.final or "never settled"
        ends[end] += 1
        by_category[r.category][end] += 1
    journal = [json.loads(line) for line in (base / "journal" / "journal.jsonl").read_text().splitlines()]
    requested = [e for e in journal if str(e.get("stream", "")).startswith("request:")
                 and e.get("state") == "REQUESTED"]
    by_rule = sum(1 for e in requested if e.get("by_rule"))
    to_person = len(requested) - by_rule
    approval_items = set(statuses)
    reached = set(seen_items)
    acknowledged = {i for i, kinds in seen_items.items() if kinds != {"approval"}}
    waits = sorted((decided_rounds[k] - round_start[k]) / MIN for k in decided_rounds if k in round_start)
    first_round = sorted((decided_rounds[k] - round_start[k]) / MIN for k in decided_rounds
                         if k in round_start and k[1] == 0)
    escalated = {i for i, s in statuses.items() if "escalated" in s}
    expired = {i for i, s in statuses.items() if "expired" in s}
    timeouts_as_no = [e for e in journal if e.get("verdict") == "reject"
                      and e.get("decider") not in PEOPLE]
    per_request = [{"n": r.n, "category": r.category, "case": r.case, "order": r.order, "amount_cents": r.amount,
                    "at": _hhmm(r.at_ms), "should_send": r.should_send, "outcomes": _runs(r.outcomes),
                    "final": r.final, "effect_id": r.effect_id} for r in reqs]
    return {
        "mode": "quick" if quick else "full",
        "seed": seed,
        "requests": len(reqs),
        "mix": {c: sum(1 for r in reqs if r.category == c) for c, _, _ in MIX},
        "approval_requests_recorded": len(requested),
        "approved_by_rule": by_rule,
        "sent_to_a_person_for_approval": to_person,
        "approval_items_in_inbox": len(approval_items),
        "items_shown_in_inbox": len(reached),
        "refusals_shown_to_acknowledge": len(acknowledged),
        "decisions": Counter(d["verdict"] for d in decisions),
        "decisions_refused": [{k: d[k] for k in ("decider", "verdict", "problem")} for d in refused_decisions],
        "returned_stale": len(returned),
        "returned_changes": {i: v for i, v in returned.items()},
        "escalated": len(escalated),
        "expired": len(expired),
        "timeouts_recorded_as_a_no": len(timeouts_as_no),
        "minutes_to_decision": _spread(waits),
        "minutes_to_first_decision": _spread(first_round),
        "ends": dict(ends),
        "ends_by_category": {c: dict(v) for c, v in by_category.items()},
        "ledger_refunds": {"by_agent": sum(agent_refunds.values()),
                           "by_hand": sum(1 for e in ledger if e.get("by_hand"))},
        "wrong_refunds": wrong,
        "owed_but_not_sent": missed,
        "requests_detail": per_request,
    }


def _runs(labels: List[str]) -> List[str]:
    """Repeated answers in a row as one, with a count: the agent asks every few minutes."""
    out: List[List[Any]] = []
    for label in labels:
        if out and out[-1][0] == label:
            out[-1][1] += 1
        else:
            out.append([label, 1])
    return [f"{label} x{k}" if k > 1 else label for label, k in out]


def _hhmm(ms: int) -> str:
    d = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return d.strftime("%a %H:%M")


def _spread(xs: List[float]) -> Dict[str, Any]:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median": statistics.median(xs), "p90": xs[min(len(xs) - 1, int(0.9 * len(xs)))],
            "max": max(xs)}


def _money(cents: int) -> str:
    return f"${cents / 100:,.0f}" if cents % 100 == 0 else f"${cents / 100:,.2f}"


def _cases(cases: List[str]) -> str:
    return f" ({', '.join(cases)})" if cases else ""


def _spread_text(d: Dict[str, Any]) -> str:
    if not d.get("n"):
        return "none"
    return f"{d['median']:.0f} / {d['p90']:.0f} / {d['max']:.0f} min (n = {d['n']})"


def render(f: Dict[str, Any]) -> str:
    """results/approvals.md from the figures of a full run (every number is one of them)."""
    mix = {c: (n, what) for c, n, what in MIX}
    ends = f["ends_by_category"]
    rows = "\n".join(
        f"| `{c}` | {f['mix'][c]} | {mix[c][1]} | "
        + ", ".join(f"{k}: {v}" for k, v in sorted(ends.get(c, {}).items())) + " |"
        for c in f["mix"])
    caught: Dict[str, List[Dict[str, Any]]] = defaultdict(list)
    for c in f["caught"]:
        caught[c["check"]].append(c)
    what = {
        "effect identity: the same case again":
            "the agent asked again for a case already paid (after a restart): the same effect id, the recorded "
            "outcome answered, nothing sent; the service (tier 2) keeps no idempotency keys",
        "effect identity: another amount under the same case":
            "the agent asked again for a paid case with another amount: refused as conflicting_payload",
        "premises re-read right before the send":
            "support refunded by hand while the agent's send was in flight: the re-read saw "
            "refunded_by_others_cents move, refused before the send",
        "the shop's own check at dispatch (allowed: order eligible)":
            "a chargeback made the order ineligible; the rule did not approve it (it asks eligible = true) and "
            "the shop's allowed check refused it at dispatch",
        "approval returned: the premises its approvers saw changed":
            "approved, then support refunded by hand before the agent's resend: returned to the same approvers "
            "with what changed, premise by premise, instead of sent",
        "deadline: expired, never a person's no":
            "nobody on the route decided in time: recorded EXPIRED, the agent told approval_expired",
        "the payments service's balance check (the service's, not the gate's)":
            "more than the order had left: the simulator's own balance check refused it (listed because it "
            "counts in the outcomes; no gate check was needed)",
    }
    check_rows = "\n".join(
        f"| {check} | {len(cs)} | {sum(1 for c in cs if c['service_would_have_paid'])} | {what.get(check, '')} |"
        for check, cs in caught.items())
    routes = "\n".join(f"| {route} | {_spread_text(d)} |" for route, d in f["minutes_to_decision_by_route"].items())
    refused = f["decisions_refused"]
    revoked_name = REVOKED[0].split("@")[0]
    after = f[f"sent_after_revocation_on_an_earlier_approval_by_{revoked_name}"]
    probe = f["approval_then_approver_revoked_then_send"]
    wrong = f["wrong_refunds"]
    d = f["decisions"]
    return f"""# Approvals: the original's experiment, redone on this gate

The original's landing page: "On a synthetic day of 100 refund requests (the mix is an
assumption), rules plus Interlock took reviews from 100 to 36 with zero wrong refunds." Its
mix is not in the seeds we have, so the day below is ours, written down before it was run,
with every assumption in `experiments/approvals/run.py` (`MIX`, `RULES`, `PEOPLE`).

Command (full run, about 25 s; writes this file and `results/approvals.json`):

    PYTHONPATH=hosts/python/src hosts/python/.venv/bin/python experiments/approvals/run.py

`--quick` runs a day of {sum(max(1, round(n / 5)) for _, n, _ in MIX)} requests and writes nothing; CI runs it in
`hosts/python/tests/test_approvals_experiment.py`, which asserts zero wrong refunds and that
every count adds up.

## The day

The Python API on a file journal in a temporary directory, a fake clock (Monday 09:00 UTC
onwards, 5-minute steps), the repository's payments simulator (`payments_sim.wasm`, tier 2:
no idempotency keys, refunds found by reference) as the service, its ledger the ground truth.
The refund effect's key is the support case (`refund:<case>`); its premises are the
simulator's (`eligible`, `refunded_by_others_cents`, excluding this effect's own refund) and
the shop's fraud flag (`flagged`); its `allowed` check asks the simulator whether the order is
still eligible. The agent (`refund-agent`, a named lease) submits when a request comes in and
every {AGENT_POLL // MIN} minutes resubmits what is waiting for a person.

Rules, first match decides: `fraud_signal` (flagged: route `risk`, a justification),
`repeat_refund` (the order already has a refund: route `support_leads`), `very_large` (over
$1,000: route `finance`, two distinct approvers, a justification), `large` (over $150: route
`support_leads`), `small_clean` (at most $150 and eligible: approved by rule). Routes (Graph's
approval-stage fields): `support_leads` alice and bob, escalating to head-of-support after 2 h,
expiring after 24 h; `risk` carol, escalating to head-of-risk after 3 h, expiring after 8 h;
`finance` dave and erin, escalating to the CFO after 4 h, expiring after 24 h.

People are scripted: each looks at `gate.inbox()` in desk hours (alice 9-13 and 16-18, bob
9-18, carol 9-15, head-of-risk 9-10, finance 9-18, ...) every 15 to 60 minutes and decides an
item once their response time for it (drawn per item, 5 to 120 minutes) has passed, as the
day's truth says. At 13:00 bob moves to another team: his lease is revoked and he is not told.
Support operations (`ops`) dismisses the refusals the inbox shows. Seed {f['seed']}.

| category | requests | what happens | how it ended (the gate's outcome) |
|---|---|---|---|
{rows}

## Results

| | every refund approved by a person | the original (rules + Interlock) | here (rules + this gate) |
|---|---|---|---|
| requests | 100 | 100 | {f['requests']} |
| approval items a person decides | 100 | 36 | **{f['sent_to_a_person_for_approval']}** |
| approved by rule (recorded with the rule) | 0 | not given | {f['approved_by_rule']} |
| no approval item: a repeat of a case (effect identity) or no rule matched (ineligible) | 0 | not given | \
{f['requests'] - f['approval_requests_recorded']} |
| refusals shown in the inbox to acknowledge (dismiss) | - | not given | {f['refusals_shown_to_acknowledge']} |
| wrong refunds (ledger) | - | 0 | **{len(wrong)}** |

The 36 is the mix's arithmetic, as the original's was its mix's: {f['sent_to_a_person_for_approval']} of our 100
requests fall in categories a rule sends to a person (large, very large, flagged, repeat
refunds, stale). That ours equals the original's is a coincidence of two assumed mixes, not a
replication. What the run measures is the rest: that the other
{f['requests'] - f['sent_to_a_person_for_approval']} needed no person's judgment and still no wrong refund went out,
which checks did that, and how long people took.

People made {d.get('approve', 0)} approvals, {d.get('reject', 0)} rejections and {d.get('dismiss', 0)} dismissals
(a round of a two-person item counts each approval). The ledger holds
{f['ledger_refunds']['by_agent']} refunds by the agent and {f['ledger_refunds']['by_hand']} by hand.

**Wrong refunds: {len(wrong)}.** Checked from the simulator's ledger alone: every refund the
agent sent carries its effect id as the reference; it is wrong when the day's truth says that
request should not be paid (fraud, a repeat claim, refunded by hand, ineligible, expired), when
it pays another amount than asked, or when one case is paid more than once.
{"" if not wrong else "Found: " + json.dumps(wrong)}
Owed but not paid: {len(f['owed_but_not_sent'])}{_cases(f['owed_but_not_sent'])}.

## What each mechanical check caught

"Service would have paid": at the moment of the check, the simulator had the balance to
accept that refund (its only check), so without the gate's check the money would have gone
out.

| check | caught | service would have paid | what it was |
|---|---|---|---|
{check_rows}

The approver who lost access: {len(refused)} decision refused after 13:00
({"; ".join(f"{r['decider']} tried to {r['verdict']}: {r['problem']}" for r in refused)}). His items waited,
escalated after 2 h and were decided by head-of-support. On this day {len(after)} refund(s) that
bob approved before 13:00 went out after it{(" (" + ", ".join(after) + ")") if after else ""}: an
approval stops working the moment its approver loses access, as the original's page says. Apart
from the day, the run approves an item as bob, revokes his lease, and has the agent resubmit:
{probe['after_revocation'].split(' ')[0]}, {probe['refunds_in_ledger']} refund(s) in the ledger; the gate re-checks each
approver's lease when the approved effect is about to be sent, and an approval whose approver
lost access sends the item back to its route for a new round (the inbox says which approver,
and why).

## Time to decision (simulated)

From the item's request (or its return, for a returned approval) to the decision that settles
the round: median / p90 / max.

| route | time to decision |
|---|---|
{routes}
| all | {_spread_text(f['minutes_to_decision'])} |

Deadlines: {f['escalated']} items escalated (their primary approvers out, in meetings, or
bob gone); {f['decided_by_an_escalation_approver']} were then decided by an escalation approver.
{f['expired']} expired with nobody deciding (fraud-flagged refunds carol had not reached when she
left at 15:00, or asked after; head-of-risk reads the inbox once a morning): recorded EXPIRED, the agent told
`approval_expired`, left in the inbox; {f['timeouts_recorded_as_a_no']} timeouts were recorded as a person's "no".
Returned approvals: {f['returned_stale']} (each with what changed, e.g.
`refunded_by_others_cents` 0 -> the hand refund).

## What this does not show

- The mix, the people's hours and their response times are assumptions; change `MIX`,
  `PEOPLE` or `--seed` and the figures move. One seed is reported.
- The scripted people are never wrong: a person approving a fraud refund would be a wrong
  refund no mechanical check catches, as in the original.
- Requests are handled one at a time in simulated time; the premise race is staged by
  refunding by hand between the agent's two premise reads of one submit.
"""


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="25 requests; print the figures, write nothing")
    ap.add_argument("--seed", type=int, default=25)
    args = ap.parse_args(argv)
    figures = run(quick=args.quick, seed=args.seed)
    summary = {k: v for k, v in figures.items() if k not in ("requests_detail", "returned_changes", "caught")}
    print(json.dumps(summary, indent=1, default=str))
    if not args.quick:
        (ROOT / "results" / "approvals.json").write_text(json.dumps(figures, indent=1, default=str) + "\n")
        (ROOT / "results" / "approvals.md").write_text(render(figures))
        print("wrote results/approvals.md and results/approvals.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
