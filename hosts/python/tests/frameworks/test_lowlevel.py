"""The original's low-level API (``Gate``, ``EffectTarget``, ``Leases``, ``effect_id_for``)
over today's gate: the design story's snippet as written (its copy, tests/seeds/lowlevel.py),
and the faults it exists for."""

import json
import os

import pytest

from interlock import AMBIGUOUS, COMMITTED, REFUSED, InvalidField, SimulatedCrash
from interlock.lowlevel import VIOLATIONS, EffectTarget, Gate, Leases, effect_id_for
from interlock.payments_sim import Payments
from test_seeds import exec_seed

ORDER = "order_881"


class StripeTarget:
    """An EffectTarget over the simulated payments service, written as the original's
    adapters are: Stripe dedupes on the idempotency key (tier 1) and a refund can be found
    by its reference."""

    tier = 1
    queryable = True

    def __init__(self, client):
        self.client = client

    def capture(self, order_id):
        p = self.client.premises(order_id)
        return {"order": order_id, "eligible": p["eligible"], "refunded_by_others_cents": p["refunded_by_others_cents"]}

    def validate_premises(self, premises, effect_id):
        now = self.client.premises(premises["order"], effect_id)  # our own refund left out
        out = []
        if now["eligible"] != premises["eligible"]:
            out.append("eligibility changed")
        if now["refunded_by_others_cents"] != premises["refunded_by_others_cents"]:
            was, now_cents = premises["refunded_by_others_cents"], now["refunded_by_others_cents"]
            out.append(f"refunded by others: {was} -> {now_cents}")
        return out

    def apply(self, effect_id, effect):
        return self.client.refund(effect["order"], effect["amount"], idempotency_key=effect_id, reference=effect_id)

    def query(self, effect_id, effect):
        return self.client.find_by_reference(effect_id)


class EmailLikeTarget(StripeTarget):
    """The same service with neither dedupe nor lookup (tier 3)."""

    tier = 3
    queryable = False

    def apply(self, effect_id, effect):
        # No idempotency key; the reference only lets the premise read leave this refund out.
        return self.client.refund(effect["order"], effect["amount"], reference=effect_id)


@pytest.fixture
def client(tmp_path):
    c = Payments.create(tmp_path / "payments.json", "1+lookup")
    c.add_order(ORDER, 10_000)
    return c


def test_the_design_storys_snippet_runs_as_written(tmp_path, monkeypatch, client):
    monkeypatch.setenv("HOME", str(tmp_path))  # "~/.interlock/journal.jsonl" lands in tmp_path
    leases = Leases()
    lease_id = "case-4471"
    leases.grant(lease_id)
    target = StripeTarget(client)
    order_id, amount = ORDER, 2000
    assert isinstance(target, EffectTarget)

    # The snippet, as written in the design story (tests/seeds/lowlevel.py), given the names
    # it uses but does not define.
    ns = exec_seed("lowlevel.py", {"Gate": Gate, "StripeTarget": StripeTarget, "client": client, "leases": leases,
                                   "lease_id": lease_id, "target": target, "order_id": order_id, "amount": amount})
    gate, result = ns["gate"], ns["result"]

    assert result.status == COMMITTED == "COMMITTED", result
    assert client.refund_count() == 1 and client.refunded_cents(ORDER) == 2000
    assert (tmp_path / ".interlock" / "journal.jsonl").is_file()
    receipt = result.receipt()
    assert receipt.final == "COMMITTED" and receipt.executed == "yes"
    assert receipt["proposed"]["premises"][VIOLATIONS] == []
    assert receipt["proposed"]["authority"] == {"lease": lease_id, "host_check": True}
    assert gate.verify().ok
    # The same proposal again is the same effect: replayed, nothing sent.
    again = gate.submit({"agent": "refund-bot", "lease": lease_id, "premises": target.capture(order_id),
                         "effect": {"order": order_id, "amount": amount}})
    assert again.replayed and client.refund_count() == 1


def proposal(target, amount=2000, **extra):
    p = {"agent": "refund-bot", "lease": "case-4471", "request_id": "case-4471",
         "premises": target.capture(ORDER), "effect": {"order": ORDER, "amount": amount}}
    p.update(extra)
    return p


def open_gate(tmp_path, client, leases, target_cls=StripeTarget):
    # A send takes at most 0.3 s here, so a recovery waits out a dead worker's claim quickly.
    return Gate(target=target_cls(client), journal_path=tmp_path / "j" / "journal.jsonl", leases=leases,
                claim_ttl=0.3)


def granted():
    leases = Leases()
    leases.grant("case-4471")
    return leases


def test_reply_lost_then_recovered_once(tmp_path, client):
    gate = open_gate(tmp_path, client, granted())
    with pytest.raises(SimulatedCrash):
        gate.submit(proposal(gate.target), crash_after_effect=True)
    assert client.refund_count() == 1
    gate = open_gate(tmp_path, client, granted())  # the restart: a new process's store
    [o] = gate.recover()
    assert o.status == COMMITTED and client.refund_count() == 1, o


def test_hand_refund_during_the_outage_is_refused(tmp_path, client):
    gate = open_gate(tmp_path, client, granted())
    with pytest.raises(SimulatedCrash):
        gate.submit(proposal(gate.target), crash_before_effect=True)
    client.refund_by_hand(ORDER, 2000)
    gate = open_gate(tmp_path, client, granted())
    [o] = gate.recover()
    assert o.status == REFUSED and o.reason == "premise_changed", o
    [change] = o.changed
    assert change.name == VIOLATIONS and change.was == [] and "0 -> 2000" in change.now[0]
    assert client.refund_count() == 1 and client.refunded_cents(ORDER) == 2000


def test_lease_revoked_during_the_outage_is_refused(tmp_path, client):
    leases = granted()
    gate = open_gate(tmp_path, client, leases)
    with pytest.raises(SimulatedCrash):
        gate.submit(proposal(gate.target), crash_before_effect=True)
    leases.revoke("case-4471")  # the crashed Gate is closed: only the store knows
    gate = open_gate(tmp_path, client, Leases())  # the new process's store has no such grant
    [o] = gate.recover()
    assert o.status == REFUSED and o.reason == "not_allowed", o
    assert client.refund_count() == 0


def test_a_revoke_is_recorded_in_the_journal_and_holds_across_restarts(tmp_path, client):
    leases = granted()
    gate = open_gate(tmp_path, client, leases)
    assert gate.submit(proposal(gate.target)).status == COMMITTED
    leases.revoke("case-4471")
    gate.close()
    marks = [json.loads(x).get("state") for x in (tmp_path / "j" / "journal.jsonl").read_text().splitlines()]
    assert marks.count("GRANTED") == 1 and marks.count("REVOKED") == 1, marks
    # A new process whose store asks nothing (``is_live`` always true): the journal's revoke refuses.
    class Lenient:
        def is_live(self, lease):
            return True
    gate = open_gate(tmp_path, client, Lenient())
    o = gate.submit(proposal(gate.target, request_id="case-4472"))
    assert o.status == REFUSED and o.reason == "lease_revoked", o
    gate.close()
    # Granting it again is a new grant, recorded: the lease is live again.
    gate = open_gate(tmp_path, client, granted())
    assert gate.submit(proposal(gate.target, request_id="case-4473")).status == COMMITTED
    assert client.refund_count() == 2


def test_tier_3_crash_after_the_send_is_ambiguous_never_resent(tmp_path, client):
    gate = open_gate(tmp_path, client, granted(), EmailLikeTarget)
    with pytest.raises(SimulatedCrash):
        gate.submit(proposal(gate.target), crash_after_effect=True)
    gate = open_gate(tmp_path, client, granted(), EmailLikeTarget)
    [o] = gate.recover()
    assert o.status == AMBIGUOUS and o.executed == "unknown", o
    assert client.refund_count() == 1


def test_effect_id_for_is_the_journaled_id_and_binds_the_request(tmp_path, client):
    gate = open_gate(tmp_path, client, granted())
    p = proposal(gate.target)
    o = gate.submit(p)
    assert o.effect_id == effect_id_for(p) == gate.effect_id(p)
    # The model re-decides $30 on the retry: the same request, so the same id; refused.
    p30 = proposal(gate.target, amount=3000)
    assert effect_id_for(p30) == o.effect_id
    o30 = gate.submit(p30)
    assert o30.status == REFUSED and o30.reason == "conflicting_payload", o30
    # Without a request id the id is the effect's.
    bare = {"agent": "a", "lease": "l", "effect": {"order": ORDER, "amount": 2000}}
    assert effect_id_for(bare) != o.effect_id
    assert client.refund_count() == 1


@pytest.mark.parametrize("bad,pointer", [
    ({"agent": "refund-bot", "effect": {"order": ORDER}}, "/lease"),
    ({"agent": "refund-bot", "lease": "case-4471", "effect": {"order": ORDER}, "premise": {}}, "/premise"),
    ({"lease": "case-4471", "effect": {"order": ORDER}}, "/agent"),
    ({"agent": "refund-bot", "lease": "case-4471", "effect": {"order": ORDER},
      "premises": {VIOLATIONS: 1}}, f"/premises/{VIOLATIONS}"),
    ({"agent": "refund-bot", "lease": "case-4471", "effect": {"order": ORDER, "at": float("nan")}}, "/effect/at"),
])
def test_bad_proposals_are_refused_and_record_nothing(tmp_path, client, bad, pointer):
    gate = open_gate(tmp_path, client, granted())
    journal = tmp_path / "j" / "journal.jsonl"
    before = journal.read_bytes() if journal.exists() else b""
    with pytest.raises(InvalidField) as e:
        gate.submit(bad)
    assert e.value.field == pointer
    assert (journal.read_bytes() if journal.exists() else b"") == before
    assert client.refund_count() == 0


def test_a_journal_file_must_be_journal_jsonl_and_sqlite_is_shared(tmp_path, client):
    with pytest.raises(InvalidField):
        Gate(target=StripeTarget(client), journal_path=tmp_path / "refunds.jsonl", leases=granted())
    gate = Gate(target=StripeTarget(client), journal_path=tmp_path / "journal.db", leases=granted())
    assert gate.submit(proposal(gate.target)).status == COMMITTED
    assert os.path.isfile(tmp_path / "journal.db") and client.refund_count() == 1


def test_not_an_effect_target_is_a_type_error(tmp_path):
    with pytest.raises(TypeError):
        Gate(target=object(), journal_path=tmp_path / "j", leases=granted())
