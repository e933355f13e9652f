"""The refund effect the Temporal and DBOS rows gate (the seeds' snippet's
``@gate.effect``), on a :class:`rows.World`'s payments service, and the Interlock journal
they share with the driver. Used by temporal_worker.py and dbos_worker.py."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from rows import CAP_CENTS, World

from interlock import Interlock
from interlock.decorator import Gated

#: How long a send may take (the claim a recovery waits out): short, so rows run fast.
CLAIM_MS = 2_000


def use_postgres(world: World, system_database_url: str, journal_url: str) -> None:
    """Puts the world's DBOS system database and its Interlock journal in PostgreSQL (both
    URLs kept in the world's folder, so every process of a row reads the same ones)."""
    (world.dir / "postgres.json").write_text(
        json.dumps({"system_database_url": system_database_url, "journal_url": journal_url}), encoding="utf-8")


def postgres_urls(world: World) -> Optional[Dict[str, str]]:
    """The world's PostgreSQL URLs (:func:`use_postgres`), or None."""
    path = world.dir / "postgres.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def journal_url(world: World) -> str:
    pg = postgres_urls(world)
    if pg is not None:
        return pg["journal_url"]
    # A SQLite journal: the driver approves and revokes while a worker may hold it.
    return "sqlite://" + str((world.dir / "journal.db").resolve())


def define(gate: Interlock, world: World) -> Gated:
    """The refund effect, declared as the seeds' snippet declares it, keyed by the approved
    case (so two approvals are two effects), under the case's lease, with the $30 cap on
    the order. ``kill_before_refund`` and ``kill_after_refund`` (the world's faults) SIGKILL
    the process once the intent is durable / once the service took the refund."""

    def premises(order: str, amount: int, case: str, idempotency_key: str) -> Dict[str, Any]:
        with world.service() as p:
            got = p.premises(order, idempotency_key)
        return {"eligible": got["eligible"], "refunded_by_others": got["refunded_by_others_cents"]}

    def lookup(order: str, amount: int, case: str, idempotency_key: str) -> Any:
        with world.service() as p:
            return p.find_by_reference(idempotency_key)

    @gate.effect(key=lambda order, amount, case: f"refund:{order}:{case}",
                 premises=premises, lookup=lookup, dedupes=True, timeout_ms=CLAIM_MS,
                 lease=lambda order, amount, case: case,
                 cap=lambda order, amount, case: {"name": order, "limit_cents": CAP_CENTS, "amount_cents": amount})
    def refund_money(order: str, amount: int, case: str, idempotency_key: str) -> Dict[str, Any]:
        world.die_if("kill_before_refund")
        with world.service() as p:
            refund = p.refund(order, amount, idempotency_key, idempotency_key)
        world.die_if("kill_after_refund")
        return refund

    return refund_money


def proposal(refund_money: Gated, order: str, amount: int, case: str, approval: Optional[str]) -> Dict[str, Any]:
    """The refund's proposal, under ``approval`` (an Interlock approval) when given."""
    p = refund_money.proposal(order, amount, case)
    if approval:
        p["authority"] = {"approval": approval}
    return p


def approve(world: World, case: str, approval: str, approver: str, order: str, amount: int) -> str:
    """Records an Interlock approval of the refund under ``case``; its id."""
    with Interlock(journal_url(world), agent="refund-agent") as gate:
        refund_money = define(gate, world)
        gate.approve(approval, approver, refund_money.proposal(order, amount, case))
    return approval


def revoke(world: World, approval: str) -> None:
    with Interlock(journal_url(world), agent="refund-agent") as gate:
        gate.revoke_approval(approval)


def grant_lease(world: World, lease: str) -> None:
    with Interlock(journal_url(world), agent="refund-agent") as gate:
        gate.lease(lease, 3600)
