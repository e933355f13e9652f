"""Bad answers from each real service, and a process SIGKILLed mid-send, through the Python
and CLI hosts (issue 27): a server error, a refusal, a malformed answer, a timeout after the
request was sent, a dropped connection after it. Each is unknown or refused as the
component's table for the target says, never guessed, and nothing is sent twice: counted at
the service."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
from hosts import DEFINITIONS, KEY, CliHost, PythonHost

HERE = Path(__file__).resolve().parent


def open_after(o: Dict[str, Any]) -> None:
    """Left open for recovery, its send of unknown fate: nothing concluded."""
    assert (o["state"], o["reason"], o["executed"]) == ("DISPATCHED", "target_unavailable", "unknown"), o


def until(cond: Callable[[], bool], timeout_s: float = 20) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("the world never got there")
        time.sleep(0.02)


def detail(host: Any, effect_id: str) -> str:
    """What the target said when it refused (the REFUSED entry's ``detail``), from the journal."""
    lines = (Path(host.journal) / "journal.jsonl").read_text().splitlines()
    [refused] = [e for e in map(json.loads, lines) if e["stream"] == f"effect:{effect_id}" and e["state"] == "REFUSED"]
    return str(refused.get("detail", ""))


def trigger(world: Any, body: str) -> None:
    world.sql(f"""CREATE FUNCTION misbehave() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NEW; END $$;
                  CREATE TRIGGER misbehave BEFORE INSERT ON refunds FOR EACH ROW EXECUTE FUNCTION misbehave();""")


def untrigger(world: Any) -> None:
    world.sql("DROP TRIGGER misbehave ON refunds; DROP FUNCTION misbehave();")


# ------------------------------------------------------------------ PostgreSQL


@pytest.mark.parametrize("misbehaviour", [
    "RAISE EXCEPTION 'disk on fire' USING ERRCODE = 'XX000';",   # a server error
    "PERFORM pg_sleep(3);",                                       # a timeout after the request was sent
    "PERFORM pg_terminate_backend(pg_backend_pid());",            # the connection dropped after it
])
def test_postgres_an_unknown_answer_is_settled_by_the_lookup(make_world: Any, make_host: Any,
                                                             misbehaviour: str) -> None:
    world = make_world("postgres")
    host = make_host(world, DEFINITIONS["postgres"])
    trigger(world, misbehaviour)
    open_after(host.call(world.effect(), KEY))
    assert world.count() == 0
    untrigger(world)
    host.restart()
    [o] = host.recover()  # the lookup finds nothing, the premises hold: sent once
    assert (o["state"], o["executed"]) == ("COMMITTED", "yes"), o
    assert world.count() == 1


def test_postgres_a_refusal_by_the_database_is_rejected(make_world: Any, make_host: Any) -> None:
    world = make_world("postgres")
    host = make_host(world, DEFINITIONS["postgres"])
    o = host.call(world.effect(0), KEY)  # CHECK (amount_cents > 0)
    assert (o["state"], o["reason"], o["executed"]) == ("REFUSED", "target_rejected", "no"), o
    assert world.count() == 0


def test_postgres_a_malformed_answer_is_never_guessed(make_world: Any, make_host: Any) -> None:
    world = make_world("postgres")
    host = make_host(world, DEFINITIONS["postgres"])
    effect = world.effect()
    effect["premises"]["eligible"] = {"sql": "SELECT status = 'paid' FROM orders"}  # one row, for now
    assert host.call(effect, KEY, crash="before-send") == "crashed"
    world.sql("INSERT INTO orders VALUES ('order_882', 'paid', 500)")  # now the query answers two
    host.restart()
    [o] = host.recover()
    assert (o["state"], o["reason"]) == ("DISPATCHED", "read_failed"), o
    assert world.count() == 0


# ------------------------------------------------------------------ git


def test_git_a_hook_refusing_the_ref_update_is_unknown_then_sent_once(make_world: Any, make_host: Any) -> None:
    world = make_world("git")
    host = make_host(world, DEFINITIONS["git"])
    world.hook("reference-transaction", '[ "$1" = prepared ] && exit 1\nexit 0\n')
    open_after(host.call(world.effect(), KEY))
    assert world.count() == 0
    world.unhook("reference-transaction")
    host.restart()
    [o] = host.recover()
    assert o["state"] == "COMMITTED" and world.count() == 1


def test_git_a_timeout_after_the_ref_moved_is_found_by_the_lookup(make_world: Any, make_host: Any) -> None:
    world = make_world("git")
    host = make_host(world, DEFINITIONS["git"])
    world.hook("reference-transaction", '[ "$1" = committed ] && sleep 5\nexit 0\n')
    open_after(host.call(world.effect(), KEY))  # killed after its 1000 ms
    assert world.count() == 1
    world.unhook("reference-transaction")
    host.restart()
    [o] = host.recover()
    assert o["state"] == "COMMITTED" and world.count() == 1, o


def test_git_a_merge_that_conflicts_is_refused_with_nothing_written(make_world: Any, make_host: Any) -> None:
    world = make_world("git")
    host = make_host(world, dict(DEFINITIONS["git"], builtin="git.merge"))
    world.commit_locally("agent-a", "src/lib.rs", "pub fn parse() {}\n")
    world.change()  # main changes the same lines
    before = world.head()
    o = host.call({"branch": "main", "from": "agent-a"}, KEY)
    assert (o["state"], o["reason"]) == ("REFUSED", "target_rejected"), o
    assert "conflicts in src/lib.rs; nothing was written" in detail(host, o["effect_id"])
    assert world.head() == before


def test_git_a_merge_is_found_by_its_trailer_after_a_crash(make_world: Any, make_host: Any) -> None:
    world = make_world("git")
    host = make_host(world, dict(DEFINITIONS["git"], builtin="git.merge"))
    reviewed = world.commit_locally("agent-a", "NOTES.md")
    assert host.call({"branch": "main", "from": "agent-a"}, KEY, crash="after-send") == "crashed"
    host.restart()
    [o] = host.recover()
    assert o["state"] == "COMMITTED" and world.count() == 1, o
    # The merge commit: main's tip, its second parent the reviewed commit.
    assert world.commits_carrying() == [world.head()] and world.head("main^2") == reviewed


def test_git_a_push_the_remote_refuses_is_rejected(make_world: Any, make_host: Any) -> None:
    world = make_world("git")
    remote = world.add_remote()
    (remote / "hooks" / "pre-receive").write_text("#!/bin/sh\necho 'main is frozen' >&2\nexit 1\n")
    (remote / "hooks" / "pre-receive").chmod(0o755)
    host = make_host(world, dict(DEFINITIONS["git"], builtin="git.push"))
    commit = world.commit_locally()
    o = host.call({"remote": "origin", "branch": "main", "commit": commit}, KEY)
    assert (o["state"], o["reason"]) == ("REFUSED", "target_rejected"), o
    assert "origin refused the update" in detail(host, o["effect_id"])
    assert commit not in world.remote_log(remote)


def test_git_a_push_is_found_at_the_remote_after_a_crash(make_world: Any, make_host: Any) -> None:
    world = make_world("git")
    remote = world.add_remote()
    host = make_host(world, dict(DEFINITIONS["git"], builtin="git.push"))
    commit = world.commit_locally()
    assert host.call({"remote": "origin", "branch": "main", "commit": commit}, KEY, crash="after-send") == "crashed"
    host.restart()
    [o] = host.recover()
    assert o["state"] == "COMMITTED", o
    assert world.remote_log(remote)[0] == commit


# ------------------------------------------------------------------ SMTP


@pytest.mark.parametrize("fault", ["reject_rcpt", "refuse_data"])
def test_smtp_a_refusal_sends_nothing(make_world: Any, make_host: Any, fault: str) -> None:
    world = make_world("smtp")
    host = make_host(world, DEFINITIONS["smtp"])
    world.arm(fault)
    o = host.call(world.effect(), KEY)
    assert (o["state"], o["reason"], o["executed"]) == ("REFUSED", "target_rejected", "no"), o
    assert world.count() == 0


@pytest.mark.parametrize("fault", ["drop_after_data", "hang_after_data", "malformed_after_data"])
def test_smtp_an_unknown_answer_after_data_is_ambiguous_never_a_second_email(make_world: Any, make_host: Any,
                                                                             fault: str) -> None:
    world = make_world("smtp")
    host = make_host(world, DEFINITIONS["smtp"])
    world.arm(fault)
    open_after(host.call(world.effect(), KEY))
    host.restart()
    [o] = host.recover()
    assert (o["state"], o["reason"], o["executed"]) == ("AMBIGUOUS", "no_dedupe_no_lookup", "unknown"), o
    [msg] = world.delivered()
    assert msg["Interlock-Effect"] == o["effect_id"] and msg["Message-ID"] == f"<{o['effect_id']}@interlock>"


# ------------------------------------------------------------------ a process SIGKILLed mid-send


def worker(host: Any, world: Any, definition: Dict[str, Any], effect: Dict[str, Any]) -> "subprocess.Popen[str]":
    """The effect in a process of its own, through ``host``'s kind."""
    where = {"postgres": getattr(world, "url", ""), "git": str(getattr(world, "repo", "")),
             "smtp": f"{getattr(world, 'host', '')}:{getattr(world, 'port', '')}"}[world.service]
    if isinstance(host, PythonHost):
        host.close()  # the worker holds the journal's lock while it runs
        args = [sys.executable, str(HERE / "worker.py"), str(host.journal), world.service, where,
                json.dumps(definition), json.dumps(effect), KEY]
    else:
        assert isinstance(host, CliHost)
        args = [str(host.cli), "effect", str(host.journal), *host.service, "--definition", json.dumps(definition),
                "--key", KEY, json.dumps(effect)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("kind", ["postgres", "git", "smtp"])
def test_a_worker_killed_mid_send(make_world: Any, make_host: Any, kind: str) -> None:
    world = make_world(kind)
    definition = dict(DEFINITIONS[kind], timeout_ms=3000)
    host = make_host(world, definition)
    stuck: Callable[[], bool]
    if kind == "postgres":
        trigger(world, "PERFORM pg_sleep(1.5);")  # the insert runs, uncommitted, when the worker dies
        stuck = lambda: bool(world.sql("SELECT 1 FROM pg_stat_activity WHERE query LIKE 'INSERT INTO \"refunds\"%'"))  # noqa: E731
    elif kind == "git":
        world.hook("reference-transaction", '[ "$1" = committed ] && sleep 10\nexit 0\n')
        stuck = lambda: world.count() == 1  # noqa: E731  the ref moved, the run not over
    else:
        world.arm("hang_after_data")
        stuck = lambda: world.count() == 1  # noqa: E731  delivered, no answer
    w = worker(host, world, definition, world.effect())
    until(stuck)
    w.send_signal(signal.SIGKILL)
    w.wait()
    if kind == "postgres":
        untrigger(world)
    elif kind == "git":
        world.unhook("reference-transaction")
    host.restart()
    [o] = host.recover()
    want = {"postgres": "COMMITTED", "git": "COMMITTED", "smtp": "AMBIGUOUS"}[kind]
    assert o["state"] == want, o
    assert world.count() == 1
