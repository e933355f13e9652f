"""The two shared journal backends as the tests use them: SQLite files under a temporary
directory, and a throwaway PostgreSQL cluster started (and stopped) with the project's own
scripts/postgres.sh, each test in a schema of its own. Also a way past the journal to the
tables, to see what a backend stored."""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any, List, Optional

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "postgres.sh"


class NotInstalled(Exception):
    """PostgreSQL is not installed (scripts/postgres.sh exits 3); the text says how to."""


class Cluster:
    """A PostgreSQL cluster under a temporary directory of its own, on a port of its own."""

    _databases = itertools.count()

    def __init__(self) -> None:
        # Directly under the system's temporary directory: as root, the script runs the
        # server as the postgres user, which must reach the directory.
        self.dir = Path(tempfile.mkdtemp(prefix="interlock-pg-"))
        self.port = 55500 + os.getpid() % 400
        self._journals: Optional[str] = None
        try:
            self.url = self._script("start")
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    @staticmethod
    def installed() -> Optional[str]:
        """None, or why PostgreSQL cannot be used here (not installed)."""
        d = tempfile.mkdtemp(prefix="interlock-pg-check-")
        try:
            out = subprocess.run(["bash", str(SCRIPT), "check", d], capture_output=True, text=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        if out.returncode == 3:
            return out.stderr.strip()
        if out.returncode != 0:
            raise RuntimeError(f"scripts/postgres.sh check failed ({out.returncode}): {out.stderr}")
        return None

    def _script(self, verb: str) -> str:
        out = subprocess.run(["bash", str(SCRIPT), verb, str(self.dir)], capture_output=True, text=True,
                             env={**os.environ, "PGPORT": str(self.port)}, timeout=180)
        if out.returncode == 3:
            raise NotInstalled(out.stderr.strip())
        if out.returncode != 0:
            raise RuntimeError(f"scripts/postgres.sh {verb} failed ({out.returncode}): {out.stderr}")
        return out.stdout.strip()

    def restart(self) -> None:
        """Stops the server (fast: sessions are ended) and starts it again."""
        self._script("stop")
        self._script("start")

    def stop(self) -> None:
        try:
            self._script("stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def admin(self) -> Any:
        return _connect(self.url)

    def url_of(self, database: str) -> str:
        assert self.url.endswith("/postgres"), self.url
        return self.url[: -len("postgres")] + database

    def database(self, encoding: Optional[str] = None) -> str:
        """A new, empty database; its URL. (Each costs a copy of the template, which the
        server flushes at its shutdown checkpoint: most tests take a schema instead.)"""
        name = f"db_{next(self._databases)}"
        extra = f" ENCODING '{encoding}' TEMPLATE template0" if encoding else ""
        with self.admin() as c:
            c.execute(f"CREATE DATABASE {name}{extra}")
        return self.url_of(name)

    def journal_url(self) -> str:
        """The URL of a new, empty journal: a schema of its own in the database
        ``journals``, chosen by the URL's ``options`` (libpq's; the Rust crate reads it
        too)."""
        if self._journals is None:
            with self.admin() as c:
                c.execute("CREATE DATABASE journals")
            self._journals = self.url_of("journals")
        schema = f"j_{next(self._databases)}"
        with _connect(self._journals) as c:
            c.execute(f"CREATE SCHEMA {schema}")
        return f"{self._journals}?options=-csearch_path%3D{schema}"


def _connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


class Backend:
    """Makes new journals of one backend and reaches their tables directly."""

    name = ""

    def fresh(self) -> str:
        raise NotImplementedError

    def execute(self, url: str, sql: str) -> None:
        """Runs SQL statements on the journal's database, past the journal."""
        raise NotImplementedError

    def query(self, url: str, sql: str) -> List[Any]:
        """The first column of every row of ``sql``."""
        raise NotImplementedError


class SqliteBackend(Backend):
    name = "sqlite"

    def __init__(self, root: Path):
        self.root = root
        self._n = itertools.count()

    def fresh(self) -> str:
        return f"sqlite://{self.root}/j{next(self._n)}/journal.db"

    @staticmethod
    def path(url: str) -> Path:
        assert url.startswith("sqlite://"), url
        return Path(url[len("sqlite://"):])

    def execute(self, url: str, sql: str) -> None:
        self.path(url).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path(url))
        try:
            conn.executescript(sql)
        finally:
            conn.close()

    def query(self, url: str, sql: str) -> List[Any]:
        conn = sqlite3.connect(self.path(url))
        try:
            return [r[0] for r in conn.execute(sql).fetchall()]
        finally:
            conn.close()


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def fresh(self) -> str:
        return self.cluster.journal_url()

    def execute(self, url: str, sql: str) -> None:
        with _connect(url) as c:
            c.execute(sql)

    def query(self, url: str, sql: str) -> List[Any]:
        with _connect(url) as c:
            return [r[0] for r in c.execute(sql).fetchall()]
