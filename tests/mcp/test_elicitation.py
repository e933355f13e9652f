"""A gated call that waits for a person's approval asks the person at the agent's client (MCP
elicitation, form mode) when the proxy's configuration names a ``decider``: the official
Python MCP SDK is the agent's client (``ClientSession(elicitation_callback=...)``) and the
upstream server (payments_server.py), parametrized over the proxy (the Python one and the
CLI's ``interlock mcp-proxy``). Refunds are counted at the payments service's state file;
decisions are read back from the journal."""

import json
import subprocess

import anyio
from mcp import types
from world import LEASE, ORDER, REFUND, World, free_port, http_session, outcome_of, text, wait_for_port

ARGS = {"order_id": ORDER, "amount_cents": 2000}
PEOPLE = ("alice@shop", "bob@shop")
RULES = {
    "rules": [{"name": "large-refund", "target": "create_refund",
               "when": [{"field": "/effect/amount_cents", "over": 1000}],
               "then": "person", "route": "finance"}],
    "routes": {"finance": {"primary_approvers": list(PEOPLE)}},
}
PENDING = "create_refund is pending a person's approval (item "


def world(tmp_path, proxy, decider="alice@shop", leases=PEOPLE):
    """Refunds over 1,000 cents wait for a person on route finance; the proxy decides as
    ``decider`` (none: not named); ``leases``: the people granted a lease."""
    config = {"journal_dir": str(tmp_path / "journal"), "tools": {"create_refund": dict(REFUND)}}
    if decider is not None:
        config["decider"] = decider
    w = World(tmp_path, proxy, config=config)
    with w.gate() as g:
        g.set_approval_rules(RULES)
        for person in leases:
            g.lease(person, 3600)
    return w


class Person:
    """The person at the client: answers the questions with ``answers`` (ElicitResults), in
    turn, and keeps the questions asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    async def __call__(self, _context, params):
        self.asked.append(params)
        return self.answers.pop(0)


def calls(w, n, elicitation_callback=None):
    """The agent's same call, ``n`` times in one session."""
    async def go():
        async with w.session(elicitation_callback=elicitation_callback) as s:
            return [await s.call_tool("create_refund", ARGS) for _ in range(n)]
    return anyio.run(go)


def call(w, elicitation_callback=None):
    return calls(w, 1, elicitation_callback)[0]


def decisions(w):
    """The decisions the journal records, as (decider, verdict, why)."""
    out = []
    for line in w.journal_lines().splitlines():
        e = json.loads(line)
        if e["stream"].startswith("request:") and "verdict" in e:
            out.append((e["decider"], e["verdict"], e.get("why")))
    return out


def test_approved_at_the_client_is_sent_once_in_the_same_call(tmp_path, proxy):
    w = world(tmp_path, proxy)
    alice = Person(types.ElicitResult(action="accept", content={"verdict": "approve", "why": "known customer"}))
    r, again = calls(w, 2, alice)
    assert not r.is_error, text(r)
    assert "create_refund done; it happened once" in text(r), text(r)
    assert outcome_of(r)["state"] == "COMMITTED"
    assert len(w.refunds()) == 1
    # What the person was asked: the call, its rule and route, a flat form.
    [q] = alice.asked
    assert isinstance(q, types.ElicitRequestFormParams)
    for part in ("mcp-proxy asks to call create_refund with {\"amount_cents\":2000,\"order_id\":\"881\"}",
                 "Rule large-refund", "route finance", f"item {outcome_of(r)['effect_id']}",
                 "It rests on {\"refunded_total\":0}", "You decide as alice@shop"):
        assert part in q.message, (part, q.message)
    schema = q.requested_schema
    assert schema["properties"]["verdict"]["enum"] == ["approve", "reject"]
    assert all(p["type"] == "string" for p in schema["properties"].values())
    assert decisions(w) == [("alice@shop", "approve", "known customer")]
    # The agent calls again: the first outcome; no one asked, nothing sent.
    assert outcome_of(again)["replayed"] and len(alice.asked) == 1
    assert len(w.refunds()) == 1


def test_rejected_at_the_client_sends_nothing_and_says_who_and_why(tmp_path, proxy):
    w = world(tmp_path, proxy, decider="bob@shop")
    bob = Person(types.ElicitResult(action="accept", content={"verdict": "reject", "why": "past the refund window"}))
    r = call(w, bob)
    assert r.is_error
    out = outcome_of(r)
    assert (out["state"], out["reason"], out["executed"]) == ("REFUSED", "approval_rejected", "no"), out
    assert "a person (bob@shop) rejected it" in text(r), text(r)
    assert 'Their reason: "past the refund window".' in text(r), text(r)
    assert w.refunds() == []
    assert decisions(w) == [("bob@shop", "reject", "past the refund window")]


def test_declined_or_no_elicitation_at_the_client_answers_pending_as_before(tmp_path, proxy):
    # The words without a decider are the words after a decline, and for a client that
    # cannot be asked.
    plain = call(world(tmp_path / "no-decider", proxy, decider=None))
    assert PENDING in text(plain), text(plain)
    w = world(tmp_path / "decider", proxy)
    alice = Person(types.ElicitResult(action="decline"), types.ElicitResult(action="cancel"))
    declined, cancelled = calls(w, 2, alice)
    assert len(alice.asked) == 2
    answers = {"decline": declined, "cancel": cancelled, "no elicitation capability": call(w)}
    for how, r in answers.items():
        assert r.is_error and text(r) == text(plain), (how, text(r))
        out = outcome_of(r)
        assert (out["state"], out["reason"], out["return_to"]) == ("PROPOSED", "approval_pending", "finance"), out
    assert w.refunds() == [] and decisions(w) == []


def test_a_decider_without_a_lease_is_refused_and_the_call_stays_pending(tmp_path, proxy):
    w = world(tmp_path, proxy, leases=("bob@shop",))
    alice = Person(types.ElicitResult(action="accept", content={"verdict": "approve", "why": "fine"}))
    r = call(w, alice)
    assert len(alice.asked) == 1
    assert r.is_error and outcome_of(r)["reason"] == "approval_pending", text(r)
    assert PENDING in text(r), text(r)
    assert ("alice@shop's decision at the client was not recorded: invalid input at /decider: "
            "alice@shop may not decide: their lease is missing") in text(r), text(r)
    assert w.refunds() == [] and decisions(w) == []
    # Bob (on the route, with a lease) approves in the inbox: the agent's next call is sent.
    with w.gate() as g:
        [item] = [i for i in g.inbox() if i["kind"] == "approval"]
        g.decide(item["item"], "bob@shop", "approve", why="checked")
    r = call(w)
    assert not r.is_error and outcome_of(r)["state"] == "COMMITTED", text(r)
    assert len(w.refunds()) == 1


def test_asked_over_streamable_http(tmp_path, proxy):
    # The agent reaches the proxy over Streamable HTTP: the question rides the call's stream.
    w = world(tmp_path, proxy)
    port = free_port()
    prox = subprocess.Popen(w.proxy_cmd("--lease", LEASE, "--listen", f"127.0.0.1:{port}"),
                            stdin=subprocess.DEVNULL, stderr=open(tmp_path / "proxy.err", "w"))
    alice = Person(types.ElicitResult(action="accept", content={"verdict": "approve"}))
    try:
        wait_for_port(port, prox)

        async def go():
            async with http_session(f"http://127.0.0.1:{port}/mcp", elicitation_callback=alice) as s:
                return await s.call_tool("create_refund", ARGS)
        r = anyio.run(go)
    finally:
        prox.kill()
        prox.wait(30)
    assert not r.is_error and outcome_of(r)["state"] == "COMMITTED", text(r)
    assert len(alice.asked) == 1 and len(w.refunds()) == 1
    assert decisions(w) == [("alice@shop", "approve", None)]
