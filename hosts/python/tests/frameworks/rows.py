"""The world the framework rows run in (issue 15): one simulated payments service kept in a
state file, the refund tools an agent calls, the tool-gating config, and the results cells.

Shared by every Python framework's tests and experiment scripts (import it as ``rows``:
tests/frameworks/conftest.py puts this folder on ``sys.path``; a script does
``sys.path.insert(0, "<repo>/hosts/python/tests/frameworks")``). Keep the API small:

    world = World.create(tmp_path, tier="1+lookup")   # order_881 paid $100, nothing refunded
    world = World(tmp_path)                           # the same world, from another process
    tools = world.tools()                             # get_order, create_refund, find_refund
    config = world.config(cap=True)                   # the tool-gating config for create_refund
    world.arm("kill_after_refund"); world.trip(...)   # a fault that fires once, across processes
    world.hand_refund()                               # support refunds $20 by hand
    world.refund_count(), world.refunded_cents()      # counted at the service
    world.cell("note", state="COMMITTED")             # a results cell
    write_results("LangGraph", "langgraph", "1.2.0", rows)

The service is shared by processes: every call opens the state file under an exclusive
``flock`` and writes it back before the lock is released, so a killed worker and its
restart (or two racing workers) see one service, never two copies.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from interlock.payments_sim import Payments

REPO = Path(__file__).resolve().parents[4]
RESULTS_DIR = REPO / "results" / "frameworks"

ROWS = ("reply_lost", "hand_refund", "approval_revoked", "cap_race")
ORDER = "order_881"
PAID_CENTS = 10_000
REFUND_CENTS = 2_000
CAP_CENTS = 3_000
LEASE = "case-4471"
APPROVAL = "apr-4471"
APPROVER = "manager@shop"

PathLike = Union[str, "os.PathLike[str]"]


class World:
    """One refund case on disk: ``<dir>/payments.json`` (the service), ``<dir>/journal``
    (Interlock's journal, when there is one), ``<dir>/faults`` (armed faults)."""

    def __init__(self, dir: PathLike):
        self.dir = Path(dir)
        self.state_path = self.dir / "payments.json"
        self.journal_dir = self.dir / "journal"
        self.faults_dir = self.dir / "faults"
        if not self.state_path.exists():
            raise FileNotFoundError(f"no world at {self.dir}: World.create() it first")

    @classmethod
    def create(cls, dir: PathLike, tier: str = "1+lookup") -> "World":
        """A new case: order_881 paid $100, nothing refunded, at ``tier`` ("1", "2", "3",
        "1+lookup": "1+lookup" is Stripe's, keys deduped and refunds found by reference)."""
        d = Path(dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "faults").mkdir(exist_ok=True)
        p = Payments.create(d / "payments.json", tier)
        p.add_order(ORDER, PAID_CENTS)
        return cls(d)

    # -- the service, one process at a time

    @contextmanager
    def service(self) -> Iterator[Payments]:
        """The service, reloaded from its file under an exclusive lock (a mutation is
        written back before the lock is released)."""
        with open(self.dir / "payments.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield Payments.open(self.state_path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def refunds(self) -> List[Dict[str, Any]]:
        with self.service() as p:
            return p.refunds(ORDER)

    def refund_count(self) -> int:
        return len(self.refunds())

    def refunded_cents(self) -> int:
        with self.service() as p:
            return int(p.refunded_cents(ORDER))

    def hand_refund(self, cents: int = REFUND_CENTS) -> Dict[str, Any]:
        """Support refunds by hand (no key, no reference): the world changed."""
        with self.service() as p:
            return p.refund_by_hand(ORDER, cents)

    # -- faults that fire once, whichever process reaches them

    def arm(self, fault: str) -> None:
        self.faults_dir.mkdir(exist_ok=True)
        (self.faults_dir / fault).touch()

    def trip(self, fault: str) -> bool:
        """True once after :meth:`arm` (the marker is removed atomically), else False."""
        try:
            os.unlink(self.faults_dir / fault)
            return True
        except FileNotFoundError:
            return False

    def die_if(self, fault: str) -> None:
        """SIGKILLs this process if ``fault`` is armed (a real kill: no finally, no atexit)."""
        if self.trip(fault):
            os.kill(os.getpid(), signal.SIGKILL)

    # -- the agent's tools (plain functions, the shapes tests/mcp's server has)

    def tools(self, after_refund: Optional[Callable[[Dict[str, Any]], None]] = None
              ) -> Dict[str, Callable[..., Any]]:
        """``get_order(order_id, excluding=None)``, ``create_refund(order_id, amount_cents,
        reference=None)``, ``find_refund(reference)``. ``create_refund`` passes
        ``reference`` as the service's idempotency key and lookup reference (``case_id``,
        optional, only tells two requests on one order apart). It dies before refunding if
        ``kill_before_refund`` is armed (the worker died before sending), and after if
        ``kill_after_refund`` is (the service took the refund, the reply is lost); then it
        calls ``after_refund`` with the refund."""
        world = self

        def get_order(order_id: str, excluding: Optional[str] = None) -> Dict[str, Any]:
            """Reads an order: whether it can be refunded and how much was refunded."""
            with world.service() as p:
                got = p.premises(order_id, excluding)
            return {"order_id": order_id, "eligible": got["eligible"],
                    "refunded_total": got["refunded_by_others_cents"]}

        def create_refund(order_id: str, amount_cents: int, reference: Optional[str] = None,
                          case_id: Optional[str] = None) -> Dict[str, Any]:
            """Refunds amount_cents on an order."""
            world.die_if("kill_before_refund")
            with world.service() as p:
                refund = p.refund(order_id, amount_cents, reference, reference)
            world.die_if("kill_after_refund")
            if after_refund is not None:
                after_refund(refund)
            return refund

        def find_refund(reference: str) -> Dict[str, Any]:
            """Finds the refund made with this reference."""
            with world.service() as p:
                return {"found": p.find_by_reference(reference)}

        return {"get_order": get_order, "create_refund": create_refund, "find_refund": find_refund}

    def config(self, *, cap: bool = False, authority: Optional[Mapping[str, Any]] = None,
               timeout_ms: int = 1_000, key: Sequence[str] = ("order_id",), **extra: Any) -> Dict[str, Any]:
        """The tool-gating config (ARCHITECTURE.md, "Tool gating") gating ``create_refund``
        on this world's journal: premises ``refunded_total`` read excluding this effect,
        lookup by reference, the reference as the idempotency argument, deduped when the
        service's tier dedupes; ``cap=True`` adds the $30 cap on the order, in place of the
        premise read; ``key``: the
        arguments the effect key is made of (``("order_id", "case_id")`` for two requests on
        one order)."""
        with self.service() as p:
            dedupes = p.tier().startswith("1")
        tool: Dict[str, Any] = {
            "key": list(key),
            "premises": {"tool": "get_order", "arguments": {"order_id": "order_id", "excluding": "$effect_id"},
                         "fields": ["refunded_total"]},
            "lookup": {"tool": "find_refund", "arguments": {"reference": "$effect_id"}, "found": "found"},
            "idempotency_argument": "reference",
            "dedupes": dedupes,
            "timeout_ms": timeout_ms,
        }
        if cap:
            # Only the cap journal holds the race: two refunds of one order also change each
            # other's refunded_total, and which check refuses the loser (the cap or the
            # premise) would then depend on timing.
            del tool["premises"]
            tool["cap"] = {"name": ORDER, "limit_cents": CAP_CENTS, "amount_argument": "amount_cents"}
        if authority is not None:
            tool["authority"] = dict(authority)
        tool.update(extra)
        return {"journal_dir": str(self.journal_dir), "tools": {"create_refund": tool}}

    # -- results

    def cell(self, note: str, **extra: Any) -> Dict[str, Any]:
        """A results cell counted at the service now: ``refunded_cents``, ``refunds``,
        ``note``, plus ``extra`` (``state=`` for a "with" cell)."""
        return {"refunded_cents": self.refunded_cents(), "refunds": self.refund_count(), "note": note, **extra}


def not_run(why: str) -> Dict[str, Any]:
    return {"not_run": why}


def write_results(framework: str, package: str, version: str, rows: Mapping[str, Mapping[str, Any]],
                  language: str = "python", name: Optional[str] = None) -> Path:
    """Writes ``results/frameworks/<name>.json`` (``name`` defaults to the framework,
    lowercased, spaces as dashes), every row in :data:`ROWS` order; a missing row is an
    error, so a table cannot lose a row silently."""
    missing = [r for r in ROWS if r not in rows]
    if missing:
        raise ValueError(f"rows missing: {missing} (use not_run(why) for a row that cannot run)")
    extra = sorted(set(rows) - set(ROWS))
    if extra:
        raise ValueError(f"unknown rows: {extra}")
    doc = {"framework": framework, "package": package, "version": version, "language": language,
           "rows": {r: rows[r] for r in ROWS}}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name or framework.lower().replace(' ', '-')}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return path


__all__ = ["World", "ROWS", "ORDER", "PAID_CENTS", "REFUND_CENTS", "CAP_CENTS", "LEASE", "APPROVAL",
           "APPROVER", "REPO", "RESULTS_DIR", "not_run", "write_results"]
