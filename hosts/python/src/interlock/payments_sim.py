"""The simulated payments service (adapters/payments-sim), run from its component
``payments_sim.wasm``: the tier rules, and the service's answers to the gate's steps (its
``target`` export: which refusals are definitive), are written once, in Rust, never here.

The service lives in the component's memory; this wrapper keeps its state durable apart
from the gate's journal: after every successful mutation it stores ``snapshot()`` to its
file exactly as the Rust crate's ``write_state_file`` does (``<file>.tmp``, fsync, rename,
fsync the directory), so the CLI reads what Python wrote and the other way round.

The module also offers the free functions the original's snippet calls (``stripe``,
``charge_for``, ``is_eligible``, ``refunded_total``, ``can_refund``, ``refund_exists``),
bound to one service chosen with :func:`use`.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import wasmtime
from wasmtime import Store
from wasmtime.component import Func, Linker, Record, Variant

from .clock import SystemClock
from .errors import GateTrap, InterlockError
from .gate import PAYMENTS_WASM, Request, engine, load_component, wasm_path

SERVICE_INTERFACE = "interlock:payments-sim/service@0.1.0"
TARGET_INTERFACE = "interlock:payments-sim/target@0.1.0"


class ServiceError(InterlockError):
    """The payments service refused a call (WIT ``service-error``); ``case`` is the WIT
    case, the message the Rust crate's words (the component's ``message``). Except for
    ``corrupt``/``invalid-json`` (restore), nothing was created."""

    def __init__(self, case: str, payload: Any, message: str):
        self.case = case
        self.payload = payload
        super().__init__(message)


def _record(**fields: Any) -> Record:
    """A WIT record for the component; field names with ``-`` as the WIT spells them."""
    r = Record()
    for name, value in fields.items():
        setattr(r, name.replace("_", "-"), value)
    return r


def write_state_file(path: Path, snapshot: str) -> None:
    """The Rust crate's ``write_state_file``: a crash leaves the old file or the new one."""
    path = Path(path)
    tmp = Path(str(path) + ".tmp")
    # Owner-only, like the journal it may sit beside.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        data = snapshot.encode("utf-8") + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent if str(path.parent) else Path("."), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class Payments:
    """One simulated refund API (tier "1", "2", "3" or "1+lookup"), in memory or kept in a
    state file. Amounts are cents; times Unix ms. Safe to call from several threads, as a
    real service is: one call at a time enters the component."""

    def __init__(self, path: Union[str, "os.PathLike[str]", None] = None):
        self._lock = threading.RLock()
        component = load_component(wasm_path(PAYMENTS_WASM))
        self.store = Store(engine())
        try:
            instance = Linker(engine()).instantiate(self.store, component)
        except wasmtime.WasmtimeError as e:
            raise GateTrap(f"payments_sim.wasm does not instantiate: {e}") from e
        si = instance.get_export_index(self.store, SERVICE_INTERFACE)
        if si is None:
            raise GateTrap(f"payments_sim.wasm does not export {SERVICE_INTERFACE}")
        ti = instance.get_export_index(self.store, TARGET_INTERFACE)
        if ti is None:
            raise GateTrap(f"payments_sim.wasm does not export {TARGET_INTERFACE}")
        self._funcs: Dict[str, Func] = {}
        for iface, names in (
            (si, ("create", "restore", "snapshot", "add-order", "set-eligible", "refund",
                  "refund-by-hand", "find-by-reference", "premises", "refunded-cents",
                  "refund-count", "tier", "message")),
            (ti, ("capture", "apply", "query")),
        ):
            for name in names:
                idx = instance.get_export_index(self.store, name, iface)
                func = instance.get_func(self.store, idx) if idx is not None else None
                if func is None:
                    raise GateTrap(f"payments_sim.wasm lacks the export {name!r}")
                self._funcs[name] = func
        self.path = Path(path) if path is not None else None

    # -- construction

    @classmethod
    def in_memory(cls, tier: str) -> "Payments":
        p = cls()
        p._call("create", str(tier))
        return p

    @classmethod
    def create(cls, path: Union[str, "os.PathLike[str]"], tier: str) -> "Payments":
        """A new, empty service persisted at ``path`` (an existing file is replaced)."""
        p = cls(path)
        p._mutate("create", str(tier))
        return p

    @classmethod
    def open(cls, path: Union[str, "os.PathLike[str]"]) -> "Payments":
        """Reloads a service from its state file (written by any host)."""
        p = cls(path)
        text = Path(path).read_text(encoding="utf-8")
        p._call("restore", text)
        return p

    # -- calls

    def _invoke(self, name: str, *args: Any) -> Any:
        try:
            with self._lock:
                return self._funcs[name](self.store, *args)
        except (wasmtime.WasmtimeError, wasmtime.Trap) as e:
            raise GateTrap(f"payments_sim.wasm trapped in {name}: {e}") from e

    def _call(self, name: str, *args: Any) -> Any:
        """A service call: its WIT error (a variant) raised as a :class:`ServiceError`."""
        r = self._invoke(name, *args)
        if isinstance(r, Variant):
            raise ServiceError(r.tag, r.payload, self._invoke("message", r))
        return r

    def _mutate(self, name: str, *args: Any) -> Any:
        with self._lock:  # the state file keeps up with the calls, in their order
            r = self._call(name, *args)
            if self.path is not None:
                # Durable before anyone acts on the result (the WIT contract of the service).
                write_state_file(self.path, self.snapshot())
            return r

    def snapshot(self) -> str:
        return self._call("snapshot")

    def add_order(self, order: str, paid_cents: int) -> None:
        self._mutate("add-order", order, int(paid_cents))

    def set_eligible(self, order: str, eligible: bool) -> None:
        self._mutate("set-eligible", order, bool(eligible))

    def refund(
        self,
        order: str,
        amount_cents: int,
        idempotency_key: Optional[str] = None,
        reference: Optional[str] = None,
        now_ms: Optional[int] = None,
    ) -> Dict[str, Any]:
        now = SystemClock().now_ms() if now_ms is None else int(now_ms)
        return json.loads(
            self._mutate("refund", order, int(amount_cents), idempotency_key, reference, now)
        )

    def refund_by_hand(self, order: str, amount_cents: int, now_ms: Optional[int] = None) -> Dict[str, Any]:
        now = SystemClock().now_ms() if now_ms is None else int(now_ms)
        return json.loads(self._mutate("refund-by-hand", order, int(amount_cents), now))

    def find_by_reference(self, reference: str) -> Optional[Dict[str, Any]]:
        r = self._call("find-by-reference", reference)
        return None if r is None else json.loads(r)

    def premises(self, order: str, excluding_reference: Optional[str] = None) -> Dict[str, Any]:
        return json.loads(self._call("premises", order, excluding_reference))

    def refunded_cents(self, order: str) -> int:
        return self._call("refunded-cents", order)

    def refund_count(self) -> int:
        return self._call("refund-count")

    def refunds(self, order: str) -> List[Dict[str, Any]]:
        return [r for r in json.loads(self.snapshot())["refunds"] if r["order"] == order]

    def tier(self) -> str:
        return self._call("tier")

    # -- the gate's steps, answered by the service (WIT ``target``)

    def capture(self, req: Request) -> Variant:
        """The gate's capture step: ``captured`` or ``failed``."""
        return self._invoke("capture", _record(
            effect_id=req.effect_id, target=req.target, effect=req.effect, names=list(req.names)))

    def apply(self, req: Request, now_ms: int) -> Variant:
        """The gate's apply step at ``now_ms``: ``applied`` or ``rejected``. An applied
        refund is stored before this returns; when that fails the refund may or may not
        survive, so the answer is ``unknown`` (the WIT's rule for a host that cannot keep
        the state)."""
        request = _record(effect_id=req.effect_id, target=req.target, effect=req.effect,
                          idempotency_key=req.idempotency_key, attempt=req.attempt)
        with self._lock:  # the state file keeps up with the calls, in their order
            reply = self._invoke("apply", request, int(now_ms))
            if reply.tag == "applied" and self.path is not None:
                try:
                    write_state_file(self.path, self.snapshot())
                except OSError as e:
                    return Variant("unknown", f"state_io: message={json.dumps(str(e), ensure_ascii=False)}")
            return reply

    def query(self, req: Request) -> Variant:
        """The gate's query step: ``found``, ``not-found`` or ``failed``."""
        return self._invoke("query", _record(effect_id=req.effect_id, target=req.target, effect=req.effect))


# ---------------------------------------------------------------- the original's free functions
#
# The original's snippet calls `stripe.Refund.create(charge=charge_for(order), amount=...,
# idempotency_key=...)`, `is_eligible(order)`, `refunded_total(order, excluding=key)`,
# `can_refund(order)` and `refund_exists(key)`. These are bound to one simulated service.

_current: Optional[Payments] = None
_not_allowed: set = set()


def use(service: Payments) -> Payments:
    """Makes ``service`` the one the free functions below talk to."""
    global _current
    _current = service
    _not_allowed.clear()
    return service


def service() -> Payments:
    """The current service; by default ``.interlock/payments.json`` (created at tier
    "1+lookup" with order_881 paid 10000 cents if missing), since the original's snippet says
    ``dedupes=True`` and passes a ``lookup``."""
    global _current
    if _current is None:
        path = Path(os.environ.get("INTERLOCK_PAYMENTS_STATE", ".interlock/payments.json"))
        if path.exists():
            _current = Payments.open(path)
        else:
            path.parent.mkdir(0o700, parents=True, exist_ok=True)
            _current = Payments.create(path, os.environ.get("INTERLOCK_PAYMENTS_TIER", "1+lookup"))
            _current.add_order("order_881", 10_000)
    return _current


def charge_for(order: str) -> str:
    return f"ch_{order}"


def _order_of(charge: str) -> str:
    return charge[3:] if charge.startswith("ch_") else charge


class _Refund:
    @staticmethod
    def create(*, charge: str, amount: int, idempotency_key: Optional[str] = None,
               **_ignored: Any) -> Dict[str, Any]:
        """A Stripe-like refund (amount in cents). The idempotency key is also attached as
        the reference a lookup finds: the gate makes them the same (the effect id)."""
        return service().refund(_order_of(charge), amount, idempotency_key, idempotency_key)


class stripe:  # noqa: N801 - named as the original's snippet uses it
    Refund = _Refund


def is_eligible(order: str) -> bool:
    return bool(service().premises(order)["eligible"])


def refunded_total(order: str, excluding: Optional[str] = None) -> int:
    return int(service().premises(order, excluding)["refunded_by_others_cents"])


def can_refund(order: str) -> bool:
    """The host's own authority check; :func:`forbid` turns it off for an order."""
    return order not in _not_allowed


def forbid(order: str, forbidden: bool = True) -> None:
    (_not_allowed.add if forbidden else _not_allowed.discard)(order)


def refund_exists(idempotency_key: str) -> Optional[Dict[str, Any]]:
    """The refund carrying this reference, or None (raises on a tier without lookup)."""
    return service().find_by_reference(idempotency_key)
