"""The faults of docs/FAULTS.md through the MCP proxy, with the official Python MCP SDK as the
agent's client and as the upstream server (payments_server.py), parametrized over the proxy:
the Python one (``python -m interlock.mcp_proxy``) and the CLI's ``interlock mcp-proxy``
(INTERLOCK_CLI). Refunds are counted at the payments service's state file."""

import json
import os
import signal
import subprocess

import anyio
import pytest
from world import (
    LEASE,
    ORDER,
    REFUND,
    World,
    dump,
    free_port,
    http_session,
    outcome_of,
    text,
    wait_for_port,
)

from interlock import Interlock

ARGS = {"order_id": ORDER, "amount_cents": 2000}


def run(fn, *args):
    return anyio.run(fn, *args)


def call_once(world, tool, arguments, *options, lease=True):
    async def go():
        async with world.session(*options, lease=lease) as s:
            return await s.call_tool(tool, arguments)
    return run(go)


def receipt_of(world, effect_id):
    with world.gate() as g:
        assert g.verify().ok
        return g.receipt(effect_id)


# ---------------------------------------------------------------- crashes


def test_proxy_killed_after_forwarding_recovers_by_lookup(tmp_path, proxy):
    w = World(tmp_path, proxy, tier="2")
    w.kill_mid_send(ARGS)
    assert len(w.refunds()) == 1  # landed; its reply was lost with the proxy

    async def go():
        async with w.session() as s:  # recovery runs before the first call is served
            return await s.call_tool("create_refund", ARGS)
    r = run(go)
    assert not r.is_error, text(r)
    assert "already done" in text(r), text(r)
    assert outcome_of(r)["state"] == "COMMITTED" and outcome_of(r)["replayed"]
    assert len(w.refunds()) == 1
    rec = receipt_of(w, outcome_of(r)["effect_id"])
    assert rec["final"] == "COMMITTED" and rec["via"] == "recovery-query", rec
    assert rec["attempts"] == 1


def test_hand_refund_during_the_outage_is_refused_saying_what_changed(tmp_path, proxy):
    # F8: the proxy dies with the send lost (never applied); a person refunds by hand
    # meanwhile. The restarted proxy finds no refund of ours, re-checks, and refuses.
    w = World(tmp_path, proxy, tier="2")
    w.kill_mid_send(ARGS, applied=False)
    assert w.refunds() == []
    w.payments().refund_by_hand(ORDER, 2000)
    r = call_once(w, "create_refund", ARGS)
    assert r.is_error, text(r)
    out = outcome_of(r)
    assert out["state"] == "REFUSED" and out["reason"] == "premise_changed", out
    assert "refunded_total was 0, is now 2000" in text(r), text(r)
    assert [x["by_hand"] for x in w.refunds()] == [True]  # the person's only


def test_hand_refund_after_ours_landed_does_not_undo_it(tmp_path, proxy):
    # F8 the other way: ours landed before the crash; the lookup finds it: done, once.
    w = World(tmp_path, proxy, tier="2")
    w.kill_mid_send(ARGS)
    w.payments().refund_by_hand(ORDER, 2000)
    r = call_once(w, "create_refund", ARGS)
    assert not r.is_error and outcome_of(r)["state"] == "COMMITTED", text(r)
    assert sorted(x["by_hand"] for x in w.refunds()) == [False, True]


def test_lease_revoked_during_the_outage(tmp_path, proxy):
    # F9: the proxy dies mid-send; the lease is revoked while it is down.
    w = World(tmp_path, proxy, tier="2")
    w.kill_mid_send(ARGS, applied=False)
    with w.gate() as g:
        g.revoke_lease(LEASE)
    w.payments().add_order("882", 10_000)

    async def go():
        async with w.session() as s:
            again = await s.call_tool("create_refund", ARGS)
            other = await s.call_tool("create_refund", {"order_id": "882", "amount_cents": 100})
            return again, other
    again, other = run(go)
    assert w.refunds() == []  # never sent under the revoked lease
    for r in (again, other):
        assert r.is_error and outcome_of(r)["reason"] == "lease_revoked", dump(r)
        assert "no longer allowed (lease_revoked)" in text(r)


def test_tier_3_says_ambiguous_to_the_model(tmp_path, proxy):
    tool = {k: v for k, v in REFUND.items() if k != "lookup"}
    w = World(tmp_path, proxy, tier="3", tool=tool)
    w.kill_mid_send(ARGS)
    r = call_once(w, "create_refund", ARGS)
    assert r.is_error and outcome_of(r)["state"] == "AMBIGUOUS", dump(r)
    assert "UNKNOWN whether create_refund happened" in text(r) and "a person must check" in text(r)
    assert len(w.refunds()) == 1


@pytest.mark.parametrize("excluding", [True, False], ids=["premise-excludes-the-effect", "premise-cannot-exclude"])
def test_a_premise_tool_that_cannot_exclude_the_effect(tmp_path, proxy, excluding):
    # Tier 1 (the service dedupes on the reference; no lookup): after a crash past the send
    # the restart re-checks the premise before it resends. A premise tool that leaves this
    # effect's own refund out sees nothing changed, and the deduped resend settles it. One
    # that cannot exclude it counts our own landed refund as a change: REFUSED
    # premise_changed, never a second refund, but a false alarm for a person (README).
    tool = {k: v for k, v in REFUND.items() if k != "lookup"}
    tool["dedupes"] = True
    if not excluding:
        tool["premises"] = {"tool": "get_order", "arguments": {"order_id": "order_id"}, "fields": ["refunded_total"]}
    w = World(tmp_path, proxy, tier="1", tool=tool)
    w.kill_mid_send(ARGS)
    assert len(w.refunds()) == 1
    r = call_once(w, "create_refund", ARGS)
    out = outcome_of(r)
    if excluding:
        assert not r.is_error and out["state"] == "COMMITTED", text(r)
    else:
        assert r.is_error and out["state"] == "REFUSED" and out["reason"] == "premise_changed", dump(r)
        assert "refunded_total was 0, is now 2000" in text(r), text(r)
    assert len(w.refunds()) == 1


# ---------------------------------------------------------------- the decision


def test_conflicting_payload(tmp_path, proxy):
    # F5: the same key (the order) with another amount.
    w = World(tmp_path, proxy)

    async def go():
        async with w.session() as s:
            return (await s.call_tool("create_refund", ARGS),
                    await s.call_tool("create_refund", {"order_id": ORDER, "amount_cents": 3000}))
    first, second = run(go)
    assert not first.is_error and outcome_of(first)["state"] == "COMMITTED"
    assert second.is_error and outcome_of(second)["reason"] == "conflicting_payload"
    assert "same key had other arguments" in text(second)
    assert len(w.refunds()) == 1


def test_duplicate_calls_sequential_and_concurrent(tmp_path, proxy):
    # F3: the model repeats the call, one after the other and four at once.
    w = World(tmp_path, proxy)
    results = []

    async def go():
        async with w.session() as s:
            results.append(await s.call_tool("create_refund", ARGS))
            results.append(await s.call_tool("create_refund", ARGS))

            async def one(args):
                results.append(await s.call_tool("create_refund", args))
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(one, {"order_id": "882", "amount_cents": 500})
    w.payments().add_order("882", 10_000)
    run(go)
    assert [r.is_error for r in results[:2]] == [False, False]
    assert outcome_of(results[1])["replayed"]
    committed = [r for r in results[2:] if outcome_of(r) and outcome_of(r)["state"] == "COMMITTED"]
    # Every concurrent duplicate either shares the one refund or is told to call again.
    assert committed, [dump(r) for r in results[2:]]
    assert len(w.refunds()) == 1
    assert len(w.payments().refunds("882")) == 1


def test_concurrent_calls_race_one_cap(tmp_path, proxy):
    # F11: two refunds of one order, 2000 and 1500, under a 3000 cap, at once.
    tool = {"key": ["order_id", "amount_cents"], "lookup": REFUND["lookup"],
            "idempotency_argument": "reference", "timeout_ms": 2000,
            "cap": {"name": "order-881", "limit_cents": 3000, "amount_argument": "amount_cents"}}
    w = World(tmp_path, proxy, tool=tool)
    results = []

    async def go():
        async with w.session() as s:
            async def one(amount):
                results.append(await s.call_tool("create_refund", {"order_id": ORDER, "amount_cents": amount}))
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 2000)
                tg.start_soon(one, 1500)
    run(go)
    states = sorted((outcome_of(r)["state"], outcome_of(r)["reason"]) for r in results)
    assert states == [("COMMITTED", None), ("REFUSED", "cap_exceeded")], states
    assert len(w.refunds()) == 1


def test_pass_through_tools_are_untouched(tmp_path, proxy):
    w = World(tmp_path, proxy)

    async def direct():
        from mcp import ClientSession, StdioServerParameters, stdio_client
        cmd = w.server_cmd()
        async with stdio_client(StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ))) as (r, wr):
            async with ClientSession(r, wr) as s:
                await s.initialize()
                return ((await s.list_tools()).tools, await s.call_tool("echo", {"text": "hi"}),
                        await s.call_tool("get_order", {"order_id": ORDER}))

    async def proxied():
        async with w.session() as s:
            return ((await s.list_tools()).tools, await s.call_tool("echo", {"text": "hi"}),
                    await s.call_tool("get_order", {"order_id": ORDER}))
    d, p = run(direct), run(proxied)
    assert [dump(t) for t in d[0]] == [dump(t) for t in p[0]]  # listed unchanged, gated ones too
    assert dump(d[1]) == dump(p[1]) and dump(d[2]) == dump(p[2])
    assert w.effect_streams() == []  # nothing recorded for them


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("config,pointer", [
    ("{not json", None),
    ({"tools": {"create_refund": {"key": []}}}, "/tools/create_refund/key"),
    ({"tools": {"create_refund": dict(REFUND, premise={})}}, "/tools/create_refund/premise"),
    ({"tools": {"create_refund": {"key": ["order_id"], "cap": {"name": "c", "limit_cents": 1}}}},
     "/tools/create_refund/cap/amount_argument"),
])
def test_a_malformed_config_is_refused_at_start(tmp_path, proxy, config, pointer):
    w = World(tmp_path, proxy)
    before = w.journal_lines()
    if isinstance(config, dict):
        config = json.dumps(dict(config, journal_dir=str(w.journal)))
    w.config_path.write_text(config)
    p = subprocess.run(w.proxy_cmd("--lease", LEASE), capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2, (p.returncode, p.stderr)
    if pointer:
        assert pointer in p.stderr, p.stderr
    assert w.journal_lines() == before and len(w.refunds()) == 0


def test_no_authority_is_refused_at_start_when_strict(tmp_path, proxy):
    w = World(tmp_path, proxy)
    before = w.journal_lines()
    p = subprocess.run(w.proxy_cmd("--strict"), capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and "/tools/create_refund/authority" in p.stderr, p.stderr
    assert w.journal_lines() == before and len(w.refunds()) == 0


def test_no_authority_runs_under_the_standing_lease_said_at_start(tmp_path, proxy):
    # The original's configuration names no authority: it runs as written, visibly.
    w = World(tmp_path, proxy)

    async def call():
        async with w.session(lease=False) as s:
            return await s.call_tool("create_refund", {"order_id": ORDER, "amount_cents": 2000})
    r = run(call)
    assert not r.is_error and outcome_of(r)["state"] == "COMMITTED", text(r)
    assert "gating under standing lease mcp-proxy-standing" in (tmp_path / "proxy.stderr").read_text()
    entries = [json.loads(line) for line in w.journal_lines().splitlines()]
    grants = [e for e in entries if e["stream"] == "lease:mcp-proxy-standing"]
    assert [e["state"] for e in grants] == ["GRANTED"]
    assert len(w.refunds()) == 1


def test_bad_calls_are_refused_before_anything_is_recorded(tmp_path, proxy):
    tool = dict(REFUND, premises=dict(REFUND["premises"], fields=["refunded_total", "refunded_totl"]))
    w = World(tmp_path, proxy)
    typo = World(tmp_path / "typo", proxy, tool=tool)

    async def go(world, calls):
        async with world.session() as s:
            return [await s.call_tool(*c) for c in calls]
    missing_key, premise_error = run(go, w, [
        ("create_refund", {"amount_cents": 2000}),                       # no key argument
        ("create_refund", {"order_id": "nope", "amount_cents": 2000}),   # the premise tool errs
    ])
    (missing_field,) = run(go, typo, [("create_refund", ARGS)])
    assert missing_key.is_error and "/arguments/order_id" in text(missing_key), text(missing_key)
    assert premise_error.is_error and "get_order" in text(premise_error), text(premise_error)
    assert missing_field.is_error and "/premises/refunded_totl" in text(missing_field), text(missing_field)
    for world in (w, typo):
        assert world.refunds() == [] and world.effect_streams() == []
        with world.gate() as g:
            assert g.verify().ok


def test_an_upstream_that_dies(tmp_path, proxy):
    w = World(tmp_path, proxy)

    async def go():
        async with w.session() as s:
            await s.call_tool("echo", {"text": "up"})
            os.kill(int(w.pid_file.read_text()), signal.SIGKILL)
            await anyio.sleep(0.5)
            gated = await s.call_tool("create_refund", ARGS)
            passed = await s.call_tool("echo", {"text": "down"})
            return gated, passed
    gated, passed = run(go)
    assert gated.is_error and "get_order" in text(gated), text(gated)
    assert passed.is_error
    assert w.refunds() == [] and w.effect_streams() == []
    with w.gate() as g:
        assert g.verify().ok


# ---------------------------------------------------------------- Streamable HTTP, both sides


def test_streamable_http_on_both_sides(tmp_path, proxy):
    w = World(tmp_path, proxy)
    sport, pport = free_port(), free_port()
    server = subprocess.Popen(w.server_cmd("--http", str(sport)), stderr=open(tmp_path / "server.err", "w"))
    prox = None
    try:
        wait_for_port(sport, server)
        cmd = w.proxy_cmd("--lease", LEASE, "--listen", f"127.0.0.1:{pport}",
                          upstream=f"http://127.0.0.1:{sport}/mcp")
        prox = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=open(tmp_path / "proxy.err", "w"))
        wait_for_port(pport, prox)

        async def go():
            async with http_session(f"http://127.0.0.1:{pport}/mcp") as s:
                return (await s.call_tool("create_refund", ARGS), await s.call_tool("create_refund", ARGS),
                        await s.call_tool("echo", {"text": "hi"}))
        first, again, echo = run(go)
    finally:
        for p in (prox, server):
            if p is not None:
                p.kill()
                p.wait(30)
    assert not first.is_error and outcome_of(first)["state"] == "COMMITTED", text(first)
    assert outcome_of(again)["replayed"]
    assert echo.structured_content == {"echo": "hi"}
    assert len(w.refunds()) == 1


def test_proxy_killed_over_streamable_http_recovers(tmp_path, proxy):
    # The agent and the upstream over HTTP: the proxy is killed with the reply lost.
    w = World(tmp_path, proxy)
    sport, pport = free_port(), free_port()
    server = subprocess.Popen(w.server_cmd("--http", str(sport)), stderr=open(tmp_path / "server.err", "w"))
    procs = [server]
    try:
        wait_for_port(sport, server)
        cmd = w.proxy_cmd("--lease", LEASE, "--listen", f"127.0.0.1:{pport}",
                          upstream=f"http://127.0.0.1:{sport}/mcp")
        first = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=open(tmp_path / "proxy1.err", "w"))
        procs.append(first)
        wait_for_port(pport, first)
        w.flag.write_text("hang")

        async def doomed():
            with anyio.move_on_after(60):
                async with http_session(f"http://127.0.0.1:{pport}/mcp") as s:
                    async with anyio.create_task_group() as tg:
                        async def call():
                            try:
                                await s.call_tool("create_refund", ARGS)
                            except Exception:  # noqa: BLE001 - the proxy dies under it
                                pass
                        tg.start_soon(call)
                        marker = w.flag.with_name(w.flag.name + ".hung")
                        while not marker.exists():
                            await anyio.sleep(0.05)
                        first.send_signal(signal.SIGKILL)
                        first.wait(30)
                        tg.cancel_scope.cancel()
        run(doomed)
        assert len(w.refunds()) == 1
        # The server hangs in that call's thread; a fresh one serves the restart.
        server.kill()
        server.wait(30)
        w.flag.with_name(w.flag.name + ".hung").unlink()
        sport = free_port()
        server = subprocess.Popen(w.server_cmd("--http", str(sport)), stderr=open(tmp_path / "server2.err", "w"))
        procs.append(server)
        wait_for_port(sport, server)
        pport = free_port()
        cmd = w.proxy_cmd("--lease", LEASE, "--listen", f"127.0.0.1:{pport}",
                          upstream=f"http://127.0.0.1:{sport}/mcp")
        second = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=open(tmp_path / "proxy2.err", "w"))
        procs.append(second)
        wait_for_port(pport, second)

        async def again():
            async with http_session(f"http://127.0.0.1:{pport}/mcp") as s:
                return await s.call_tool("create_refund", ARGS)
        r = run(again)
    finally:
        for p in procs:
            p.kill()
            p.wait(30)
    assert not r.is_error and outcome_of(r)["replayed"], text(r)
    assert len(w.refunds()) == 1


# ---------------------------------------------------------------- one journal format


def scripted_run(world):
    """The same calls, on a fixed clock: a refund, its duplicate, a conflict, a bad call."""
    async def go():
        async with world.session() as s:
            for args in (ARGS, ARGS, {"order_id": ORDER, "amount_cents": 3000}, {"amount_cents": 1}):
                await s.call_tool("create_refund", args)
            await s.call_tool("echo", {"text": "x"})
    run(go)
    return world.journal_lines()


def test_the_same_calls_write_the_same_journal_bytes(tmp_path):
    # The Python proxy against itself: the fixed clock makes a run reproducible.
    a = scripted_run(World(tmp_path / "a", "python", clock_ms=1_800_000_000_000))
    b = scripted_run(World(tmp_path / "b", "python", clock_ms=1_800_000_000_000))
    assert a == b and a.count(b"\n") > 4


@pytest.mark.skipif(not os.environ.get("INTERLOCK_CLI"),
                    reason="INTERLOCK_CLI is unset: the CLI's `interlock mcp-proxy` is not run here (CI sets it)")
def test_both_proxies_write_the_same_journal_bytes(tmp_path):
    py = scripted_run(World(tmp_path / "py", "python", clock_ms=1_800_000_000_000))
    cli = scripted_run(World(tmp_path / "cli", os.environ["INTERLOCK_CLI"], clock_ms=1_800_000_000_000))
    assert py == cli


def test_the_journal_stays_verifiable_after_every_fault(tmp_path):
    w = World(tmp_path, "python")
    w.kill_mid_send(ARGS)
    with Interlock(w.journal) as g:
        assert g.verify().ok and len(g.open_effects()) == 1

