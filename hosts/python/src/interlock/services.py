"""The built-in targets that are not an SDK's (docs/targets.md): a PostgreSQL write
(``postgres.insert``, tier 2), a git repository (``git.commit``, ``git.merge``,
``git.push``, tier 2) and email over SMTP (``smtp.send``, tier 3).

    from interlock import Interlock
    from interlock.services import GitRepository, Postgres, Smtp, builtin

    gate = Interlock(".interlock")
    insert = builtin(gate, "postgres.insert", Postgres("postgres://..."), lease="case-4471")
    commit = builtin(gate, "git.commit", GitRepository("/path/to/repo"), target="repo")
    email = builtin(gate, "smtp.send", Smtp("127.0.0.1", 25))
    gate.recover()                                  # once, at startup
    out = commit({"branch": "main", "files": {...}, "message": "...", "base": seen}, key="task-17")

The clients below only do the calls they are told, exactly, and hand back what came back
(``("returned", value)``, ``("raised", {"error_type", "status", "code", "message"})`` or
``("no-answer", why)``); which statements, git runs and SMTP bytes each step takes, and what
any answer means (applied, refused, unknown), is the component's (guest/core/src/targets/:
postgres.rs, git.rs, smtp.rs), the same for every host.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from wasmtime.component import Variant

from .decorator import Builtin, Interlock, ServiceError, builtin_roles
from .errors import MissingExtra
from .gate import canonical_json

Answer = Tuple[str, Any]

__all__ = ["Postgres", "GitRepository", "Smtp", "Answer", "Client", "builtin"]


class Client(Protocol):
    """What a built-in target's service calls go to."""

    service: str

    def call(self, operation: str, params: Dict[str, Any], options: Dict[str, Any],
             timeout_ms: Optional[int]) -> Answer: ...


def perform(client: Client, call: Any) -> Variant:
    """One ``service-call`` made by ``client``, as the WIT ``service-answer``."""
    kind, value = client.call(call.operation, json.loads(call.params), json.loads(call.options),
                              getattr(call, "timeout-ms"))
    if kind == "returned":
        return Variant("returned", canonical_json(value))
    if kind == "raised":
        return Variant("raised", ServiceError(value.get("error_type"), value.get("status"), value.get("code"),
                                              str(value.get("message", ""))))
    return Variant("no-answer", str(value))


def builtin(gate: Interlock, name: str, client: Client, *, target: Optional[str] = None,
            timeout_ms: Optional[int] = None, agent: Optional[str] = None, approval: Optional[str] = None,
            key: Any = None, lease: Any = None, bounds: Any = None, cap: Any = None,
            allowed: Optional[Callable[[Dict[str, Any]], bool]] = None) -> Builtin:
    """The built-in target ``name`` (``postgres.insert``, ``git.commit``, ``git.merge``,
    ``git.push``, ``smtp.send``) as the effect ``target`` (default: ``name``), its calls made
    by ``client`` (a :class:`Postgres`, :class:`GitRepository` or :class:`Smtp`). Call it
    with the effect object (and, per call, ``key=``, ``lease=``, ``approval=``). ``key``,
    ``lease``, ``bounds``, ``cap``: a value, or a function of the effect object;
    ``allowed(effect)``: the host's own authority check."""
    definition: Dict[str, Any] = {"builtin": name, "target": target or name, "timeout_ms": timeout_ms,
                                  "agent": agent, "approval": approval}
    functions = builtin_roles(definition, {"key": key, "lease": lease, "bounds": bounds, "cap": cap,
                                           "allowed": allowed})
    return gate.builtin(definition, lambda call: perform(client, call), functions=functions)


def _returned(value: Any) -> Answer:
    return ("returned", value)


def _no_answer(why: str) -> Answer:
    return ("no-answer", why)


def _unknown_operation(service: str, operation: str) -> Exception:
    # The component asks only for its own operations: another one is a broken host or
    # component, never answered with a made-up reply.
    return RuntimeError(f"interlock: the {service} client has no operation {operation!r}")


class Postgres:
    """A PostgreSQL database (psycopg 3): ``transaction`` runs the statements as one
    transaction, their parameters bound as text, and answers each statement's rows (every
    column text or null); an error PostgreSQL raised comes back with its SQLSTATE, a lost
    connection or an unacknowledged commit as no answer. One connection, one call at a time."""

    service = "postgres"

    def __init__(self, url: str, *, connect_timeout_s: int = 10):
        try:
            import psycopg  # noqa: F401
        except ImportError as e:  # pragma: no cover - psycopg is the postgres extra
            raise MissingExtra("interlock.services.Postgres", "postgres", str(e)) from None
        self.url = url
        self.connect_timeout_s = connect_timeout_s
        self._conn: Any = None
        self._mutex = threading.Lock()

    def close(self) -> None:
        with self._mutex:
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - thrown away anyway
                pass

    def call(self, operation: str, params: Dict[str, Any], options: Dict[str, Any],
             timeout_ms: Optional[int]) -> Answer:
        if operation != "transaction":
            raise _unknown_operation(self.service, operation)
        import psycopg

        with self._mutex:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout_s,
                                                 cursor_factory=psycopg.RawCursor)
                conn = self._conn
            except psycopg.Error as e:
                return _no_answer(f"cannot connect: {e}")
            # Give up after timeout_ms: cancel what runs (the component also sets the
            # server's statement_timeout).
            timer = threading.Timer(timeout_ms / 1000, conn.cancel) if timeout_ms else None
            if timer is not None:
                timer.daemon = True
                timer.start()
            try:
                cur = conn.cursor()
                cur.execute("BEGIN")
                rows: List[Any] = []
                for s in params["statements"]:
                    cur.execute(s["sql"], s["params"])
                    rows.append([[None if c is None else str(c) for c in r] for r in cur.fetchall()]
                                if cur.description is not None else [])
                cur.execute("COMMIT")
                return _returned({"rows": rows})
            except psycopg.Error as e:
                code = getattr(e, "sqlstate", None)
                lost = conn.closed or code is None
                if lost:
                    self._drop()
                    return _no_answer(f"{'connection lost: ' if conn.closed else ''}{e}")
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    self._drop()
                return ("raised", {"error_type": "postgres", "status": None, "code": code, "message": str(e)})
            finally:
                if timer is not None:
                    timer.cancel()


class GitRepository:
    """A git repository: ``run`` runs ``git -C <path> <args>`` with the given standard input
    and environment, and answers its exit status, standard output and standard error (as
    UTF-8, bad bytes replaced); git that cannot be started, or that is still running after
    ``timeout_ms`` (then killed with everything it started), is no answer."""

    service = "git"

    def __init__(self, path: "os.PathLike[str] | str", *, git: str = "git"):
        self.path = os.fspath(path)
        self.git = git

    def call(self, operation: str, params: Dict[str, Any], options: Dict[str, Any],
             timeout_ms: Optional[int]) -> Answer:
        if operation != "run":
            raise _unknown_operation(self.service, operation)
        env = {**os.environ, **params.get("env", {})}
        stdin = params.get("stdin")
        try:
            p = subprocess.Popen([self.git, "-C", self.path, *params["args"]], env=env, start_new_session=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            return _no_answer(f"git could not be started: {e}")
        try:
            out, err = p.communicate(None if stdin is None else stdin.encode("utf-8"),
                                     timeout=None if timeout_ms is None else timeout_ms / 1000)
        except subprocess.TimeoutExpired:
            # Its hooks too: a child left holding the pipes would keep communicate() waiting.
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return _no_answer(f"git {params['args'][0]} did not end within {timeout_ms} ms; killed")
        return _returned({"status": p.returncode, "stdout": out.decode("utf-8", "replace"),
                          "stderr": err.decode("utf-8", "replace")})


class Smtp:
    """TCP connections to an SMTP server, moving bytes as told (the dialogue is the
    component's): ``connect`` (its ``timeout_ms`` is the whole exchange's: every later call
    on that connection fails once it has passed), ``send`` (answers once every byte was
    handed to the connection), ``receive`` (what arrived, at least a byte; ``""`` when the
    server closed it), ``close``."""

    service = "smtp"

    def __init__(self, host: str, port: int, *, timeout_ms: int = 30_000):
        self.host, self.port = host, port
        self.timeout_ms = timeout_ms
        self._connections: Dict[int, Tuple[socket.socket, float]] = {}
        self._ids = itertools.count(1)
        self._mutex = threading.Lock()

    def call(self, operation: str, params: Dict[str, Any], options: Dict[str, Any],
             timeout_ms: Optional[int]) -> Answer:
        if operation == "connect":
            budget_s = (timeout_ms or self.timeout_ms) / 1000
            deadline = time.monotonic() + budget_s
            try:
                sock = socket.create_connection((self.host, self.port), timeout=budget_s)
            except OSError as e:
                return _no_answer(f"cannot connect to {self.host}:{self.port}: {e}")
            with self._mutex:
                n = next(self._ids)
                self._connections[n] = (sock, deadline)
            return _returned({"connection": n})
        n = int(params.get("connection") or 0)
        with self._mutex:
            found = self._connections.pop(n, None) if operation == "close" else self._connections.get(n)
        if operation == "close":
            if found is not None:
                found[0].close()
            return _returned({})
        if operation not in ("send", "receive"):
            raise _unknown_operation(self.service, operation)
        if found is None:
            return _no_answer("no such connection")
        sock, deadline = found
        left = deadline - time.monotonic()
        if left <= 0:
            return _no_answer("the exchange's time is up")
        try:
            sock.settimeout(left)
            if operation == "send":
                sock.sendall(params["data"].encode("utf-8"))
                return _returned({})
            return _returned({"data": sock.recv(65536).decode("utf-8", "replace")})
        except OSError as e:
            return _no_answer(f"{operation}: {e}")
