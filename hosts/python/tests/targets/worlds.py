"""The real services the built-in targets' tests run against, each set up fresh per test
and counted at the service (the truth): a PostgreSQL database (the session's throwaway
cluster, scripts/postgres.sh), a git repository (the git binary), an SMTP server (aiosmtpd,
its own process: smtp_server.py). Every world can make the world change under an effect
(``change()``: what a person does by hand during an outage) and count what landed
(``count()``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from email import message_from_bytes
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent

ORDER = "order_881"


def _git(repo: Path, *args: str, stdin: Optional[str] = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Support", "GIT_AUTHOR_EMAIL": "support@shop.test",
           "GIT_COMMITTER_NAME": "Support", "GIT_COMMITTER_EMAIL": "support@shop.test"}
    out = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {out.stderr}")
    return out.stdout


class PgWorld:
    """A database with ``orders`` (order_881, paid $100) and ``refunds``, whose
    ``interlock_effect_id`` is unique: the effect is a refund row."""

    service = "postgres"
    tier = "2"

    def __init__(self, cluster: Any):
        from sql_backends import _connect

        self._connect = _connect
        self.url = cluster.database()
        self.sql("""
            CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL, paid_cents bigint NOT NULL);
            CREATE TABLE refunds (id bigserial PRIMARY KEY, order_id text NOT NULL REFERENCES orders(id),
                                  amount_cents bigint NOT NULL CHECK (amount_cents > 0),
                                  interlock_effect_id text UNIQUE);
            INSERT INTO orders VALUES ('order_881', 'paid', 10000);""")

    def sql(self, text: str, params: Any = None) -> List[Any]:
        with self._connect(self.url) as c:
            cur = c.execute(text, params)
            return cur.fetchall() if cur.description else []

    def effect(self, amount_cents: int = 2000) -> Dict[str, Any]:
        return {"table": "refunds", "row": {"order_id": ORDER, "amount_cents": amount_cents},
                "premises": {
                    "refunded_by_others_cents": {"select": "sum", "column": "amount_cents",
                                                 "where": {"order_id": ORDER}},
                    "eligible": {"sql": "SELECT status = 'paid' FROM orders WHERE id = $1", "params": [ORDER]}}}

    def count(self) -> int:
        return int(self.sql("SELECT count(*) FROM refunds")[0][0])

    def total(self) -> int:
        return int(self.sql("SELECT coalesce(sum(amount_cents), 0) FROM refunds")[0][0])

    def change(self) -> None:
        """Support refunds $20 by hand (a row with no effect id)."""
        self.sql("INSERT INTO refunds (order_id, amount_cents) VALUES ('order_881', 2000)")

    def make_ineligible(self) -> None:
        self.sql("UPDATE orders SET status = 'disputed' WHERE id = 'order_881'")


LIB = "pub fn parse(s: &str) -> u32 {\n    s.len() as u32\n}\n\npub fn other() -> u32 {\n    1\n}\n"


class GitWorld:
    """A repository whose ``main`` holds src/lib.rs (two functions) and README.md; the
    effect is a commit of src/lib.rs by an agent, on the commit it read (``base``)."""

    service = "git"
    tier = "2"

    def __init__(self, root: Path):
        self.repo = root / "repo"
        self.repo.mkdir(parents=True)
        _git(self.repo, "init", "-q", "-b", "main")
        (self.repo / "src").mkdir()
        (self.repo / "src" / "lib.rs").write_text(LIB)
        (self.repo / "README.md").write_text("# shop\n")
        _git(self.repo, "add", "-A")
        _git(self.repo, "commit", "-q", "-m", "start")
        self.base = self.head()

    def head(self, branch: str = "main") -> str:
        return _git(self.repo, "rev-parse", f"refs/heads/{branch}").strip()

    def effect(self, body: str = "    s.len() as u32 + 1", agent: str = "agent-a") -> Dict[str, Any]:
        text = LIB.replace("    s.len() as u32", body, 1)
        return {"branch": "main", "files": {"src/lib.rs": text}, "message": f"parse: {agent}'s change",
                "base": self.base, "author": {"name": agent, "email": f"{agent}@agents.test"}}

    def commits_carrying(self) -> List[str]:
        """The commits on main that carry an Interlock-Effect trailer."""
        out = _git(self.repo, "log", "--format=%H %(trailers:key=Interlock-Effect,valueonly,separator=%x20)",
                   "main")
        return [line.split()[0] for line in out.splitlines() if len(line.split()) > 1]

    def count(self) -> int:
        return len(self.commits_carrying())

    def change(self, text: str = "pub fn parse(s: &str) -> u32 {\n    0\n}\n") -> None:
        """Someone else commits another src/lib.rs on main (through a worktree, as a person)."""
        # The gate moves main without a worktree: the person starts from main as it is.
        _git(self.repo, "checkout", "-q", "-f", "main")
        _git(self.repo, "reset", "-q", "--hard", "main")
        (self.repo / "src" / "lib.rs").write_text(text + LIB[LIB.index("\npub fn other"):])
        _git(self.repo, "commit", "-q", "-am", "parse: by hand")

    def add_remote(self) -> Path:
        """A bare repository as ``origin``, holding main as it is now."""
        remote = self.repo.parent / "remote.git"
        _git(self.repo.parent, "init", "-q", "--bare", "-b", "main", str(remote))
        _git(self.repo, "remote", "add", "origin", str(remote))
        _git(self.repo, "push", "-q", "origin", "main")
        return remote

    def commit_locally(self, branch: str = "main", path: str = "NOTES.md", text: str = "notes\n") -> str:
        """A commit of ``path`` on ``branch`` (created from main when missing), by hand; its id."""
        if branch != "main" and not _git(self.repo, "branch", "--list", branch).strip():
            _git(self.repo, "branch", branch, "main")
        _git(self.repo, "checkout", "-q", "-f", branch)
        _git(self.repo, "reset", "-q", "--hard", branch)
        (self.repo / path).write_text(text)
        _git(self.repo, "add", path)
        _git(self.repo, "commit", "-q", "-m", f"{path} on {branch}")
        oid = self.head(branch)
        _git(self.repo, "checkout", "-q", "-f", "main")
        return oid

    def remote_log(self, remote: Path, branch: str = "main") -> List[str]:
        return _git(remote, "log", "--format=%H", branch).split()

    def file_at(self, rev: str, path: str = "src/lib.rs") -> str:
        return _git(self.repo, "show", f"{rev}:{path}")

    def hook(self, name: str, script: str) -> None:
        p = self.repo / ".git" / "hooks" / name
        p.write_text("#!/bin/sh\n" + script)
        p.chmod(0o755)

    def unhook(self, name: str) -> None:
        (self.repo / ".git" / "hooks" / name).unlink()


class SmtpWorld:
    """aiosmtpd in its own process (smtp_server.py), delivering to a folder; the effect is
    one email."""

    service = "smtp"
    tier = "3"

    def __init__(self, root: Path):
        self.root = root / "smtp"
        self.root.mkdir(parents=True)
        self.proc = subprocess.Popen([sys.executable, str(HERE / "smtp_server.py"), str(self.root)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.host = "127.0.0.1"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def effect(self, text: str = "Your $20 refund on order_881 is on its way.") -> Dict[str, Any]:
        return {"from": "support@shop.test", "to": ["customer@example.test"], "subject": "Your refund",
                "text": text}

    def arm(self, fault: str) -> None:
        (self.root / "faults" / fault).touch()

    def delivered(self) -> List[Any]:
        return [message_from_bytes(p.read_bytes()) for p in sorted((self.root / "mail").glob("*.eml"))]

    def count(self) -> int:
        return len(self.delivered())

    def wait_delivered(self, n: int, timeout_s: float = 10) -> None:
        end = time.monotonic() + timeout_s
        while self.count() < n:
            if time.monotonic() > end:
                raise TimeoutError(f"{n} message(s) never arrived")
            time.sleep(0.02)


def outcome_of(o: Any) -> Dict[str, Any]:
    """An outcome as the tests compare it, from either host: a Python :class:`Outcome` or
    the CLI's JSON (``state``, ``reason``, ``executed``, ``changed`` as ``[name, was, now]``)."""
    if isinstance(o, dict):
        return {"state": o["state"], "reason": o["reason"], "executed": o["executed"],
                "changed": [[c["name"], c["was"], c["now"]] for c in o["changed"]], "result": o.get("result"),
                "return_to": o.get("return_to"), "replayed": o.get("replayed"), "effect_id": o["effect_id"]}
    return {"state": str(o.status), "reason": None if o.reason is None else str(o.reason),
            "executed": str(o.executed), "changed": [[c.name, c.was, c.now] for c in o.changed],
            "result": o.result, "return_to": o.return_to, "replayed": o.replayed, "effect_id": o.effect_id}
