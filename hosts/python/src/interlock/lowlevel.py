"""The original's low-level API, as a thin layer over today's gate:

    gate = Gate(target=StripeTarget(client), journal_path="~/.interlock/journal.jsonl", leases=leases)
    result = gate.submit({"agent": "refund-bot", "lease": lease_id,
                          "premises": target.capture(order_id),
                          "effect": {"order": order_id, "amount": amount}})

An :class:`EffectTarget` is the original's adapter: ``capture`` (the premises, read when the
agent decides), ``validate_premises`` (what no longer holds, read now), ``apply``, optionally
``query``, and its ``tier``. The gate component decides everything (identity, authority,
the re-check at dispatch and at recovery, recovery by tier); this module translates the
original's proposal into the gate's schema (ARCHITECTURE.md, "Proposal") and answers the
gate's steps by calling the target. How each piece maps, and where it had to be
interpreted, is in :class:`Gate`'s documentation.
"""

from __future__ import annotations

import inspect
import os
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Union, runtime_checkable

from wasmtime.component import Variant

from .clock import SystemClock
from .decorator import Interlock, Receipt, RecoveryReport, _json_text, _report, _to_json
from .errors import InterlockError, InvalidField, Rejected, SimulatedCrash
from .gate import (
    AFTER_COMMIT,
    AFTER_INTENT,
    ClaimWait,
    Clock,
    GateHost,
    JournalRef,
    Outcome,
    Request,
    State,
    VerifyReport,
    allowed,
    applied,
    captured,
    failed,
    found,
    not_found,
    recover_each,
    rejected,
    unknown,
)
from .journal import MemoryJournal

#: The premise under which the target's own verdict is recorded: ``[]`` when the agent
#: decides; at a re-check, what ``validate_premises`` says no longer holds. The gate refuses
#: when it changed (``premise_changed``), exactly as for any other premise.
VIOLATIONS = "violations"

#: How long a lease granted in a :class:`Leases` without a ``ttl_s`` lives in the journal.
#: The host check (``leases.is_live``) still decides at every dispatch and recovery.
UNBOUNDED_LEASE_S = 10 * 365 * 24 * 3600

_ORIGINAL_FIELDS = ("agent", "lease", "approval", "premises", "effect", "request_id", "request", "key")


@runtime_checkable
class EffectTarget(Protocol):
    """The original's target adapter. ``tier``: 1 (dedupes on the effect id), 2 (can be
    looked up: ``query``), 3 (neither: a crash after the send ends AMBIGUOUS). A tier 1
    target with a ``query`` may say ``queryable = True`` (used once the dedupe window,
    ``dedup_window`` seconds, has passed).

    ``capture(...)``: the premises, read when the agent decides (your code calls it and
    puts the answer in the proposal). ``validate_premises(premises, effect_id)``: a list of
    what no longer holds (empty: all still hold), re-read from the system of record; a
    premise that counts this effect's own result must leave ``effect_id`` out.
    ``apply(effect_id, effect)``: the send (raise :class:`interlock.Rejected` when the
    service refused and applied nothing; any other exception leaves its fate unknown).
    ``query(effect_id, effect)``: truthy if the effect landed (its value is recorded)."""

    tier: int

    def validate_premises(self, premises: Dict[str, Any], effect_id: str) -> List[str]: ...

    def apply(self, effect_id: str, effect: Dict[str, Any]) -> Any: ...


class Leases:
    """The original's lease store: ``grant(id)``, ``revoke(id)``, ``is_live(id)``. Given to
    a :class:`Gate`, it is the authority of every proposal naming a lease: asked at dispatch
    and at every recovery (the gate's host check), and recorded in the journal: its live
    grants when the Gate opens, later grants and revokes as they are made. So the journal
    says under which lease each effect was sent, and a revoke holds across restarts until
    the lease is granted again. Any object with ``is_live(lease)`` (or ``allows(lease,
    effect)``) works as a store (only asked, then; its lease must be granted in the journal,
    ``gate.interlock.lease(name, ttl_s)``)."""

    def __init__(self) -> None:
        self._live: Dict[str, Optional[float]] = {}
        self._gates: List["Gate"] = []
        self._lock = threading.RLock()

    def grant(self, lease_id: str, scope: str = "*", ttl_s: Optional[float] = None) -> None:
        """Grants ``lease_id`` (``ttl_s``: its life in seconds; default: until revoked).
        ``scope`` is accepted for the original's signature and not used."""
        with self._lock:
            self._live[lease_id] = None if ttl_s is None else SystemClock().now_ms() / 1000 + ttl_s
            gates = list(self._gates)
        for g in gates:
            g._grant(lease_id, self.expires_at_ms(lease_id))

    def revoke(self, lease_id: str) -> None:
        with self._lock:
            self._live.pop(lease_id, None)
            gates = list(self._gates)
        for g in gates:
            g._revoke(lease_id)

    def is_live(self, lease_id: str) -> bool:
        with self._lock:
            if lease_id not in self._live:
                return False
            until = self._live[lease_id]
            return until is None or SystemClock().now_ms() / 1000 < until

    def expires_at_ms(self, lease_id: str) -> Optional[int]:
        with self._lock:
            until = self._live.get(lease_id)
            return None if until is None else int(until * 1000)

    def _attach(self, gate: "Gate") -> None:
        with self._lock:
            self._gates.append(gate)
            live = [lease for lease in self._live if self.is_live(lease)]
        for lease in live:
            gate._grant(lease, self.expires_at_ms(lease))


# ---------------------------------------------------------------- effect ids

_id_host: Optional[GateHost] = None
_id_lock = threading.Lock()


def effect_id_for(proposal: Mapping[str, Any], target: str = "target") -> str:
    """The effect id of an original-shape proposal: from its ``request_id`` (an approved
    request) when it has one, else from its ``effect``; never from model output or a retry.
    Computed by the gate component (nothing recorded, no journal needed), so it is the id
    :meth:`Gate.submit` journals the effect under. The id does not depend on ``target``."""
    global _id_host
    text = _json_text(_translate(proposal, {"name": target, "dedupes": False, "lookup": False},
                                 authority={"lease": "effect-id"}, violations=False))
    with _id_lock:
        if _id_host is None or _id_host.broken:
            _id_host = GateHost(JournalRef(MemoryJournal()), SystemClock())
        return _id_host.effect_id_of(text)


def _translate(p: Mapping[str, Any], target: Dict[str, Any], authority: Dict[str, Any],
               violations: bool) -> Dict[str, Any]:
    """The gate's proposal for an original-shape one."""
    if not isinstance(p, Mapping):
        raise InvalidField("/", "a proposal is an object")
    unknown_fields = sorted(set(p) - set(_ORIGINAL_FIELDS))
    if unknown_fields:
        # A misspelled field must not drop a check (the gate's own rule for its schema).
        raise InvalidField(f"/{unknown_fields[0]}", "is not a field of a proposal")
    for f in ("agent", "effect"):
        if f not in p:
            raise InvalidField(f"/{f}", "is required")
    premises = p.get("premises") or {}
    if not isinstance(premises, Mapping):
        raise InvalidField("/premises", "must be an object")
    if violations:
        if VIOLATIONS in premises:
            raise InvalidField(f"/premises/{VIOLATIONS}", "is the name the gate records the target's verdict under")
        premises = {**premises, VIOLATIONS: []}
    out: Dict[str, Any] = {"agent": p["agent"], "target": target, "effect": p["effect"], "authority": authority}
    key = p.get("request_id", p.get("key"))
    if key is not None:
        out["key"] = key
    if premises:
        out["premises"] = dict(premises)
    return out


# ---------------------------------------------------------------- the gate


class Gate:
    """The original's gate on one target and one journal.

    ``journal_path``: a JSONL file named ``journal.jsonl`` (its folder is the journal, the
    same files as every host), a folder, a ``.db``/``.sqlite``/``.sqlite3`` file (the shared
    SQLite journal, as in the original) or a ``sqlite://``/``postgres://`` URL. ``leases``:
    the authority store (:class:`Leases`, or any object with ``is_live``). ``claim_ttl``
    (seconds): how long a send may take, the claim recovery waits out (default: the gate's).

    How the original maps onto the gate:

    - the proposal ``{"agent", "lease" (or "approval"), "premises", "effect",
      "request_id"}`` becomes the gate's proposal: ``request_id`` is its ``key``; the target
      is ``{"name": target.name or its class name, "dedupes": tier == 1, "lookup": tier == 2
      or target.queryable}``; the authority is the lease, with the host check on (the
      ``leases`` store is asked at dispatch and at every recovery).
    - premises: the gate re-checks them right before the send and before any resend. The
      target's ``validate_premises`` is the original's re-read; its verdict is recorded as
      the premise ``violations`` (``[]`` when deciding), so any violation is a change the
      gate refuses (REFUSED ``premise_changed``, ``changed`` naming what the target said).
    - ``submit`` returns an :class:`interlock.Outcome` (``status`` equals the original's
      strings for ``COMMITTED``, ``REFUSED``, ``AMBIGUOUS``; ``reason`` says why);
      ``recover()`` a list of them. REFUSED and AMBIGUOUS are outcomes, not errors.
    """

    def __init__(self, target: Any, journal_path: Union[str, "os.PathLike[str]"], leases: Any = None, *,
                 claim_ttl: Optional[float] = None, agent: str = "agent", clock: Optional[Clock] = None,
                 claim_wait: Union[bool, ClaimWait] = True):
        for m in ("apply",):
            if not callable(getattr(target, m, None)):
                raise TypeError(f"the target has no {m}(): it is not an EffectTarget")
        tier = getattr(target, "tier", None)
        if tier not in (1, 2, 3):
            raise TypeError(f"the target's tier must be 1, 2 or 3, not {tier!r}")
        self.target = target
        self.tier: int = tier
        self.name: str = getattr(target, "name", None) or type(target).__name__
        self.leases = leases
        self.queryable = bool(getattr(target, "queryable", tier == 2)) and callable(getattr(target, "query", None))
        self.interlock = Interlock(_journal_of(journal_path), agent=agent, clock=clock, claim_wait=claim_wait)
        self._target_json: Dict[str, Any] = {"name": self.name, "dedupes": tier == 1, "lookup": self.queryable}
        window = getattr(target, "dedup_window", None)
        if tier == 1 and isinstance(window, (int, float)) and window != float("inf"):
            self._target_json["dedupe_window_ms"] = int(window * 1000)
        if claim_ttl is not None:
            self._target_json["timeout_ms"] = int(claim_ttl * 1000)
        # What each effect submitted here was decided on (premises, authority): the gate
        # re-checks before the PROPOSED entry is written, so the journal cannot say yet.
        self._decided: Dict[str, Dict[str, Any]] = {}
        self._lock = threading.RLock()
        if isinstance(leases, Leases):
            leases._attach(self)  # its grants so far are recorded now, later ones as they come

    # -- the proposal

    def proposal(self, p: Mapping[str, Any]) -> Dict[str, Any]:
        """The gate's proposal for the original-shape ``p`` (nothing recorded)."""
        if "approval" in p:
            authority: Dict[str, Any] = {"approval": p["approval"]}
        elif "lease" in p:
            authority = {"lease": p["lease"]}
            if self.leases is not None:
                authority["host_check"] = True
        else:
            raise InvalidField("/lease", "is required (or an approval): never a silent default")
        return _translate(p, dict(self._target_json), authority,
                          violations=callable(getattr(self.target, "validate_premises", None)))

    def effect_id(self, p: Mapping[str, Any]) -> str:
        return self.interlock.effect_id_of(self.proposal(p))

    def _grant(self, lease: str, until_ms: Optional[int]) -> None:
        # A grant in the store is a grant in the journal (explicit, never a default); the
        # store's own check still decides at every dispatch and recovery.
        if until_ms is None:
            until_ms = self.interlock.clock.now_ms() + UNBOUNDED_LEASE_S * 1000
        with self._lock:
            self.interlock.lease(lease, expires_at_ms=until_ms)

    def _revoke(self, lease: str) -> None:
        with self._lock:
            try:
                self.interlock.revoke_lease(lease)
            except InterlockError:
                pass  # this Gate is closed or crashed; the host check refuses it anyway

    # -- operations

    def submit(self, proposal: Mapping[str, Any], crash_after_effect: bool = False,
               crash_before_effect: bool = False) -> Outcome:
        """Gates one proposal to its outcome. ``crash_after_effect``: the target applies it,
        then this process "dies" before the reply reaches the gate
        (:class:`interlock.SimulatedCrash`; this Gate is closed, as at a process exit: open
        a new one on the same journal and call :meth:`recover`). ``crash_before_effect``:
        dies once the intent is durable, before the send."""
        ours = self.proposal(proposal)
        text = _json_text(ours)
        with self._lock:
            host = self.interlock.host()
            # A proposal the gate refuses records nothing, the lease's grant included.
            eid = host.effect_id_of(text)
            self._decided[eid] = ours
        crash = AFTER_INTENT if crash_before_effect else AFTER_COMMIT if crash_after_effect else None
        try:
            if crash is not None:
                host.crash_at(crash)
            o = host.submit(text, _Steps(self))
        except SimulatedCrash:
            self.close()
            raise
        finally:
            if crash is not None and not host.broken:
                host.crash_at(None)
        object.__setattr__(o, "_interlock", self.interlock)
        return o

    def recover(self, claim_wait: Optional[Union[bool, ClaimWait]] = None) -> RecoveryReport:
        """After a crash: resolves every open effect of this target by the gate's recovery
        table (re-checking the lease and the premises before anything is sent again)."""
        wait = self.interlock.claim_wait if claim_wait is None else claim_wait
        host, steps = self.interlock.host(), _Steps(self)
        return _report(recover_each(host, lambda e: self.interlock._attach(host.recover(e, steps, wait))))

    def approve(self, approval: str, approver: str, proposal: Mapping[str, Any], *,
                expires_at_ms: Optional[int] = None) -> Dict[str, Any]:
        """Records an approval of exactly this request (the premises the approver saw are
        the proposal's); returns the proposal with the approval as its authority."""
        ours = self.proposal({k: v for k, v in proposal.items() if k not in ("lease", "approval")}
                             | {"approval": approval})
        self.interlock.approve(approval, approver, ours, expires_at_ms=expires_at_ms)
        out = {k: v for k, v in proposal.items() if k != "lease"}
        out["approval"] = approval
        return out

    def revoke_approval(self, approval: str) -> None:
        self.interlock.revoke_approval(approval)

    def status(self, effect_id: str) -> State:
        return self.interlock.status(effect_id)

    def receipt(self, proposal_or_id: Union[str, Mapping[str, Any]], key: Optional[bytes] = None) -> Receipt:
        """The effect's receipt, by id or by its proposal (the original took the proposal)."""
        eid = proposal_or_id if isinstance(proposal_or_id, str) else self.effect_id(proposal_or_id)
        return self.interlock.receipt(eid, key)

    def verify(self) -> VerifyReport:
        return self.interlock.verify()

    def open_effects(self) -> List[str]:
        return self.interlock.open_effects()

    def close(self) -> None:
        self.interlock.close()

    def __enter__(self) -> "Gate":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _journal_of(path: Union[str, "os.PathLike[str]"]) -> str:
    s = os.fsdecode(path)
    if "://" in s:
        return s
    p = Path(os.path.expanduser(s))
    if p.suffix in (".db", ".sqlite", ".sqlite3"):
        return "sqlite://" + str(p.resolve())
    if p.suffix == ".jsonl":
        if p.name != "journal.jsonl":
            raise InvalidField("/journal_path", f"a JSONL journal is a folder's journal.jsonl, not {p.name}")
        return str(p.parent)
    return str(p)


def _live(leases: Any, lease: Any, effect: Any) -> bool:
    allows = getattr(leases, "allows", None)
    if callable(allows):
        return bool(allows(lease, effect))
    return bool(leases.is_live(lease))


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class _Steps:
    """The gate's steps, answered by the target (what each answer means is the gate's)."""

    def __init__(self, gate: Gate):
        self.gate = gate
        self.target = gate.target

    def routes(self) -> List[str]:
        return [self.gate.name]

    def _decided(self, req: Request) -> Dict[str, Any]:
        # What the decision was made on: the proposal submitted here, else (recovery in a
        # new process) as the journal recorded it.
        with self.gate._lock:
            mine = self.gate._decided.get(req.effect_id)
        return mine if mine is not None else self.gate.interlock.receipt(req.effect_id)["proposed"]

    def _recorded(self, req: Request) -> Dict[str, Any]:
        return dict(self._decided(req).get("premises") or {})

    def capture(self, req: Request) -> Variant:
        validate = getattr(self.target, "validate_premises", None)
        if not callable(validate):
            return failed(f"{self.gate.name} has no validate_premises()")
        try:
            recorded = self._recorded(req)
            mine = {k: v for k, v in recorded.items() if k != VIOLATIONS}
            params = len(inspect.signature(validate).parameters)
            violations = validate(mine, req.effect_id) if params >= 2 else validate(mine)
            now = dict(recorded)
            now[VIOLATIONS] = [str(v) for v in (violations or [])]
            return captured({n: now[n] for n in req.names})
        except Exception as e:  # noqa: BLE001 - a read that failed: the effect stays open
            return failed(_why(e))

    def authorize(self, req: Request) -> Variant:
        leases = self.gate.leases
        if leases is None:
            return failed("this Gate has no leases store to ask")
        try:
            lease = self._decided(req)["authority"].get("lease")
            return allowed(_live(leases, lease, req.args))
        except Exception as e:  # noqa: BLE001 - a check that could not be made is not a "no"
            return failed(_why(e))

    def apply(self, req: Request) -> Variant:
        try:
            result = self.target.apply(req.effect_id, req.args)
        except SimulatedCrash:
            raise
        except Rejected as e:
            return rejected(_why(e))
        except Exception as e:  # noqa: BLE001 - the gate resolves an unknown send by tier
            return unknown(_why(e))
        try:
            return applied(_to_json(result))
        except (TypeError, ValueError) as e:
            return unknown(f"the result is not JSON: {e}")

    def query(self, req: Request) -> Variant:
        query = getattr(self.target, "query", None)
        if not callable(query):
            return failed(f"{self.gate.name} has no query()")
        try:
            got = query(req.effect_id, req.args)
        except Exception as e:  # noqa: BLE001 - a lookup that could not be made
            return failed(_why(e))
        return not_found() if got is None or got is False else found(_to_json(got))


__all__ = ["Gate", "EffectTarget", "Leases", "effect_id_for", "VIOLATIONS"]
