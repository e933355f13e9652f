"""The built-in targets against real services (issue 27): a PostgreSQL write (tier 2), a
git repository (tier 2), email over SMTP (tier 3; aiosmtpd in its own process), each through
the Python host and the CLI host (``interlock effect``), with the fault catalogue
(docs/FAULTS.md) where it applies. The service is the truth: rows in the table, commits
carrying the trailer in the branch, messages in the mailbox.

Not run, and why: F10 (a retry past a dedupe window) needs a target that dedupes, and none of
these does; F11 (two approvals racing a cap) needs an amount, so it runs on PostgreSQL only;
F7, F8 and F12 need premises, and email reads none."""

from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest
from hosts import CRASHED, DEFINITIONS, KEY, LEASE


def setup(make_world: Any, make_host: Any, kind: str) -> Any:
    world = make_world(kind)
    return world, make_host(world, DEFINITIONS[kind])


def other(world: Any) -> Dict[str, Any]:
    """The same request, another payload (the model re-decided)."""
    if world.service == "postgres":
        return world.effect(3000)
    if world.service == "git":
        return world.effect(body="    99", agent="agent-a")
    return world.effect("Your $30 refund is on its way.")


def state(o: Any) -> Any:
    return o if o == CRASHED else (o["state"], o["reason"])


ALL = ["postgres", "git", "smtp"]
WITH_PREMISES = ["postgres", "git"]


@pytest.mark.parametrize("kind", ALL)
def test_f1_crash_after_the_intent_before_the_send(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    assert host.call(world.effect(), KEY, crash="before-send") == CRASHED
    assert world.count() == 0
    host.restart()
    [o] = host.recover()
    if world.tier == "3":
        # Nothing can say whether it went: never a guess, never a send.
        assert (o["state"], o["reason"], o["executed"]) == ("AMBIGUOUS", "no_dedupe_no_lookup", "unknown")
        assert world.count() == 0
    else:
        assert (o["state"], o["executed"]) == ("COMMITTED", "yes")
        assert world.count() == 1


@pytest.mark.parametrize("kind", ALL)
def test_f2_crash_after_the_send_before_the_reply(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    assert host.call(world.effect(), KEY, crash="after-send") == CRASHED
    assert world.count() == 1
    host.restart()
    [o] = host.recover()
    if world.tier == "3":
        assert (o["state"], o["reason"], o["executed"]) == ("AMBIGUOUS", "no_dedupe_no_lookup", "unknown")
    else:
        assert (o["state"], o["executed"]) == ("COMMITTED", "yes"), o  # found by the lookup
    assert world.count() == 1


@pytest.mark.parametrize("kind", ALL)
def test_f3_the_same_request_twice(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    first = host.call(world.effect(), KEY)
    again = host.call(world.effect(), KEY)
    assert state(first) == ("COMMITTED", None) and again["replayed"] is True
    assert again["result"] == first["result"] and again["effect_id"] == first["effect_id"]
    assert world.count() == 1


@pytest.mark.parametrize("kind", ALL)
def test_f4_the_model_re_decides_after_a_crash(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    assert host.call(world.effect(), KEY, crash="after-send") == CRASHED
    host.restart()
    assert state(host.call(other(world), KEY)) == ("REFUSED", "conflicting_payload")
    [o] = host.recover()
    assert o["state"] == ("AMBIGUOUS" if world.tier == "3" else "COMMITTED")
    assert world.count() == 1
    if world.service == "postgres":
        assert world.total() == 2000
    if world.service == "git":
        assert "s.len() as u32 + 1" in world.file_at("main")


@pytest.mark.parametrize("kind", ALL)
def test_f5_the_same_request_with_another_payload(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    assert state(host.call(world.effect(), KEY)) == ("COMMITTED", None)
    assert state(host.call(other(world), KEY)) == ("REFUSED", "conflicting_payload")
    assert world.count() == 1


@pytest.mark.parametrize("kind", ALL)
def test_f6_the_lease_is_revoked_before_the_send(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    decided = host.propose(world.effect(), KEY)
    host.revoke(LEASE)
    assert state(host.submit(decided)) == ("REFUSED", "lease_revoked")
    assert world.count() == 0


@pytest.mark.parametrize("kind", WITH_PREMISES)
def test_f7_a_premise_changes_before_the_send(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    decided = host.propose(world.effect(), KEY)
    if world.service == "postgres":
        world.make_ineligible()
        o = host.submit(decided)
        assert state(o) == ("REFUSED", "premise_changed") and o["changed"] == [["eligible", True, False]]
        assert world.count() == 0
    else:
        # Two coding agents read src/lib.rs at the same commit; agent B's edit lands first.
        b = host.call(world.effect(body="    42", agent="agent-b"), "task:b")
        assert state(b) == ("COMMITTED", None)
        o = host.submit(decided)
        was = decided["premises"]["file:src/lib.rs"]
        assert state(o) == ("REFUSED", "premise_changed"), o
        [[name, before, now]] = o["changed"]
        assert (name, before) == ("file:src/lib.rs", was) and now != was
        assert world.count() == 1 and "    42" in world.file_at("main")


@pytest.mark.parametrize("kind", WITH_PREMISES)
def test_f8_a_person_acts_by_hand_during_the_outage(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    assert host.call(world.effect(), KEY, crash="before-send") == CRASHED
    world.change()
    host.restart()
    [o] = host.recover()
    assert (o["state"], o["reason"], o["executed"]) == ("REFUSED", "premise_changed", "no"), o
    if world.service == "postgres":
        assert (world.count(), world.total()) == (1, 2000)  # the hand refund alone
    else:
        assert world.count() == 0 and "    0\n" in world.file_at("main")  # the hand commit stands


@pytest.mark.parametrize("kind", ALL)
def test_f9_the_lease_is_revoked_during_the_outage(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    assert host.call(world.effect(), KEY, crash="before-send") == CRASHED
    host.restart()
    host.revoke(LEASE)
    [o] = host.recover()
    assert (o["state"], o["reason"]) == ("REFUSED", "lease_revoked")
    assert world.count() == 0


def test_f11_two_approvals_race_one_cap(make_world: Any, make_host: Any) -> None:
    world = make_world("postgres")
    cap = {"name": "order_881", "limit_cents": 3000, "amount_cents": 2000}
    definition = dict(DEFINITIONS["postgres"], cap=cap)
    # Only the cap holds the race (a premise on the others' refunds would catch the second too).
    effect = {"table": "refunds", "row": {"order_id": "order_881", "amount_cents": 2000}}
    # Two workers at once: two threads of one Python gate, or two CLI processes on one journal.
    host = make_host(world, definition)
    outs: List[Any] = []
    run = [threading.Thread(target=lambda case=case: outs.append(host.call(effect, case)))
           for case in ("case-a", "case-b")]
    for t in run:
        t.start()
    for t in run:
        t.join()
    assert sorted(state(o) for o in outs) == [("COMMITTED", None), ("REFUSED", "cap_exceeded")], outs
    assert (world.count(), world.total()) == (1, 2000)


@pytest.mark.parametrize("kind", WITH_PREMISES)
def test_f12_a_stale_approval_goes_back_to_the_approver(make_world: Any, make_host: Any, kind: str) -> None:
    world, host = setup(make_world, make_host, kind)
    seen = host.propose(world.effect(), KEY)
    host.approve("apr-7", "manager@shop", seen)
    world.change()
    o = host.call(world.effect(), KEY, approval="apr-7")
    assert (o["state"], o["reason"], o["return_to"]) == ("REFUSED", "approval_stale", "manager@shop"), o
    assert world.count() == (1 if world.service == "postgres" else 0)


def test_git_a_symbol_read_is_a_premise_of_its_own(make_world: Any, make_host: Any) -> None:
    """An agent documents parse() in README.md, having read parse's text: a change to
    another function of src/lib.rs does not refuse it; a change to parse's does."""
    world = make_world("git")
    host = make_host(world, DEFINITIONS["git"])

    def doc(key: str) -> Any:
        effect = {"branch": "main", "files": {"README.md": "# shop\n\nparse(s) counts bytes.\n"},
                  "message": "docs: parse", "base": world.head(), "reads": ["symbol:src/lib.rs#parse"]}
        return host.propose(effect, key)

    decided = doc("docs:1")
    assert decided["premises"]["symbol:src/lib.rs#parse"] == "pub fn parse(s: &str) -> u32 {\n    s.len() as u32\n}"
    world.change(text="pub fn parse(s: &str) -> u32 {\n    s.len() as u32\n}\n\npub fn third() {}\n")  # not parse
    assert state(host.submit(decided)) == ("COMMITTED", None)
    decided = doc("docs:2")
    world.change(text="pub fn parse(s: &str) -> u32 {\n    s.chars().count() as u32\n}\n")  # parse itself
    o = host.submit(decided)
    assert state(o) == ("REFUSED", "premise_changed"), o
    [[name, _, now]] = o["changed"]
    assert name == "symbol:src/lib.rs#parse" and "chars()" in now
