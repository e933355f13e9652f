"""The SQL storages under a shared journal (``interlock:gate/storage``'s ``sql-batch``):
:class:`SqliteJournal` (many processes on one machine) and :class:`PostgresJournal` (many
machines). The journal's schema and statements are the component's (adapters/journal, the
same rows every host writes); this module runs a batch of them as one transaction and hands
back the rows: integers and text, nothing converted otherwise.

* a writing batch takes the write lock first (SQLite ``BEGIN IMMEDIATE``);
* durable: the commit waits for the disk (SQLite ``synchronous = FULL``, PostgreSQL
  ``synchronous_commit = on``), else ``NORMAL`` / ``off`` (flushed later, in order);
* a statement that does not change exactly the rows it expects rolls the batch back
  (``unexpected-changes``).

Libraries: the standard ``sqlite3`` module, and psycopg 3 for PostgreSQL, an optional
dependency (``pip install 'interlock[postgres]'``) imported only when a PostgreSQL journal
is opened. Each object has one connection, used by one batch at a time.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from .errors import MissingExtra, UnsupportedJournal
from .journal import FileJournal, JournalFileError, JournalIOError, Storage, StorageError, _make_dirs

SCHEMA_FILE = "schema.sql"
FILE_MODE = 0o600

# `postgres://...`, `sqlite:///...`, `file://...`: a URL, never a directory name.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")

#: The former name of a SQL journal's error: opening one fails with a JournalFileError.
SqlJournalError = JournalFileError


def schema_path() -> Path:
    """Where the SQL journals' schema is, for reading (the component carries its own copy):
    the copy in this package, else a checkout's adapters/journal/src/schema.sql."""
    packaged = Path(__file__).with_name("sql") / SCHEMA_FILE
    if packaged.is_file():
        return packaged
    # src/interlock/sql_journal.py -> hosts/python/src/interlock -> the repository root
    dev = Path(__file__).resolve().parents[4] / "adapters" / "journal" / "src" / SCHEMA_FILE
    if dev.is_file():
        return dev
    raise FileNotFoundError(f"the journal schema {SCHEMA_FILE} was not found in this package ({packaged}) nor in {dev}")


def _field(statement: Any, name: str) -> Any:
    return getattr(statement, name)  # wasmtime-py keeps WIT's kebab-case names


def _answer(cur: Any, i: int, s: Any) -> List[Any]:
    """Statement ``i``'s rows, or none after checking the rows it changed."""
    if cur.description is not None:
        return [_columns(row, i) for row in cur.fetchall()]
    want = _field(s, "expect-changes")
    if want is not None and cur.rowcount != want:
        raise StorageError("unexpected-changes", i)
    return []


def _columns(row: Any, i: int) -> List[Any]:
    out = []
    for c, v in enumerate(row):
        if isinstance(v, bool):
            v = int(v)
        elif not (v is None or isinstance(v, (int, str))):
            raise StorageError("io", f"column {c} of statement {i} is {type(v).__name__}, neither integer nor text")
        out.append(v)
    return out


class SqliteJournal(Storage):
    """A SQLite database file in WAL mode; every process opens its own, and SQLite's file
    locks make each batch atomic across all of them. The file must be on a local disk."""

    backend = "sqlite"
    #: How long a write waits for another process's transaction before it fails (s).
    BUSY_TIMEOUT_S = 10

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self.name = f"SQLite journal {path}"
        self._conn: Optional[sqlite3.Connection] = conn
        self._full = False
        self._mutex = threading.Lock()
        #: Committed writing batches, and how many of them waited for the disk.
        self.commits = self.durable_commits = 0

    @classmethod
    def open(cls, path: Union[str, "os.PathLike[str]"]) -> "SqliteJournal":
        """Opens (or creates, owner-only, with missing parent folders) the database at
        ``path`` and switches it to WAL mode."""
        path = Path(path)

        def fail(what: str, e: object) -> JournalIOError:
            return JournalIOError(f"SQLite journal {path}: {what}: {e}")

        try:
            _make_dirs(path.parent)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
            os.close(fd)
        except OSError as e:
            raise fail("cannot create the database file", e) from None
        try:
            # isolation_level=None: every transaction here is an explicit BEGIN.
            conn = sqlite3.connect(str(path), timeout=cls.BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                conn.close()
                raise fail("cannot switch to WAL mode", f"it stays in {mode} mode")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as e:
            raise fail("cannot open", e) from None
        return cls(path, conn)

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def sql_batch(self, statements: List[Any], write: bool, durable: bool) -> List[Any]:
        with self._mutex:
            conn = self._conn
            if conn is None:
                raise StorageError("io", f"{self.name} is closed")
            try:
                if write and self._full != durable:
                    conn.execute("PRAGMA synchronous = FULL" if durable else "PRAGMA synchronous = NORMAL")
                    self._full = durable
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    out = [self._run(conn, i, s) for i, s in enumerate(statements)]
                    conn.execute("COMMIT")
                    self._count(write, durable)
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                return out
            except sqlite3.Error as e:
                busy = "locked" in str(e) or "busy" in str(e)
                why = f"other writers held the database for longer than {self.BUSY_TIMEOUT_S} s: " if busy else ""
                raise StorageError("io", f"{self.name}: {why}{e}") from None

    @staticmethod
    def _run(conn: sqlite3.Connection, i: int, s: Any) -> List[Any]:
        return _answer(conn.execute(s.sql, list(s.params)), i, s)


def _psycopg() -> Any:
    """psycopg 3, imported when a PostgreSQL journal is first opened (the ``postgres``
    extra)."""
    try:
        import psycopg
    except ImportError as e:
        raise MissingExtra("a PostgreSQL journal (postgres://)", "postgres", str(e)) from None
    return psycopg


class PostgresJournal(Storage):
    """A PostgreSQL database; every worker connects its own. A lost connection fails the
    batch (``io``) and the next one connects again; nothing is retried here. A commit that
    was not acknowledged is ``io`` saying so: it may or may not have committed."""

    backend = "postgres"
    #: How long a connection attempt may take when the URL does not say (s).
    CONNECT_TIMEOUT_S = 10

    def __init__(self, conninfo: str, name: str, args: Dict[str, Any]):
        self._conninfo, self._args = conninfo, args
        self.name = f"PostgreSQL journal {name}"
        self._conn: Any = None
        self._closed = False
        self._synchronous: Optional[bool] = None
        self._mutex = threading.Lock()
        #: Committed writing batches, and how many of them waited for the disk.
        self.commits = self.durable_commits = 0

    @classmethod
    def open(cls, url: str) -> "PostgresJournal":
        """Connects to ``url`` (a ``postgres://`` URL or a libpq ``key=value`` string); the
        database must be UTF8, so that entries are stored byte for byte."""
        psycopg = _psycopg()
        try:
            params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as e:
            raise UnsupportedJournal("postgres", f"not a PostgreSQL connection string: {e}") from None
        args: Dict[str, Any] = {"autocommit": True, "client_encoding": "UTF8",
                                "cursor_factory": psycopg.RawCursor}
        if "connect_timeout" not in params:
            args["connect_timeout"] = cls.CONNECT_TIMEOUT_S
        journal = cls(url, _describe(params), args)
        try:
            conn = journal._connection()
            encoding = conn.execute("SHOW server_encoding").fetchone()[0]
        except (psycopg.Error, StorageError) as e:
            raise JournalIOError(f"{journal.name}: cannot connect: {e}") from None
        if encoding != "UTF8":
            journal.close()
            raise JournalIOError(f"{journal.name}: the database must be UTF8 to store entries byte for "
                                 f"byte: it is {encoding} (CREATE DATABASE ... ENCODING 'UTF8')")
        return journal

    def _connection(self) -> Any:
        if self._closed:
            raise StorageError("io", f"{self.name} is closed")
        if self._conn is None or self._conn.closed:
            psycopg = _psycopg()
            try:
                self._conn = psycopg.connect(self._conninfo, **self._args)
            except psycopg.Error as e:
                raise StorageError("io", f"{self.name}: cannot connect: {e}") from None
            self._synchronous = None
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - the connection is thrown away anyway
                pass

    def close(self) -> None:
        with self._mutex:
            self._closed = True
            self._drop()

    def sql_batch(self, statements: List[Any], write: bool, durable: bool) -> List[Any]:
        psycopg = _psycopg()
        with self._mutex:
            conn = self._connection()
            try:
                if write and self._synchronous != durable:
                    conn.execute("SET synchronous_commit = on" if durable else "SET synchronous_commit = off")
                    self._synchronous = durable
                cur = conn.cursor()
                cur.execute("BEGIN")
                try:
                    out = [self._run(cur, i, s) for i, s in enumerate(statements)]
                except StorageError:
                    cur.execute("ROLLBACK")
                    raise
            except psycopg.Error as e:
                lost = conn.closed
                self._drop()  # lost, or inside a failed transaction: the next batch reconnects
                raise StorageError("io", f"{self.name}: {'connection lost: ' if lost else ''}{e}") from None
            try:
                cur.execute("COMMIT")
            except psycopg.Error as e:
                self._drop()
                raise StorageError("io", f"{self.name}: the commit of a batch of {len(statements)} statements "
                                         f"was not acknowledged ({e}); it may or may not have committed: "
                                         "read the journal again") from None
            self._count(write, durable)
            return out

    @staticmethod
    def _run(cur: Any, i: int, s: Any) -> List[Any]:
        from psycopg.types.numeric import Int8

        return _answer(cur.execute(s.sql, [Int8(p) if isinstance(p, int) else p for p in s.params]), i, s)


def _describe(params: Dict[str, Any]) -> str:
    """``database on host:port as user`` (a unix socket as ``dir/.s.PGSQL.port``), for
    messages: never the password."""
    hosts = [h for h in str(params.get("host") or "").split(",") if h]
    ports = [p for p in str(params.get("port") or "").split(",") if p]
    places = []
    for i, h in enumerate(hosts):
        port = ports[i] if i < len(ports) else (ports[0] if len(ports) == 1 else "5432")
        places.append(f"{h}/.s.PGSQL.{port}" if h.startswith("/") else f"{h}:{port}")
    return (f"{params.get('dbname') or '(default database)'} on "
            f"{','.join(places) or '(default host)'} as {params.get('user') or '(default user)'}")


def open_url(url: str) -> Union[SqliteJournal, PostgresJournal]:
    """The shared journal's storage at ``url``: ``sqlite:///abs/path.db`` (everything after
    ``sqlite://`` is the absolute path), ``postgres://...`` or ``postgresql://...`` as libpq
    reads it, or a libpq ``key=value`` string. Anything else is
    :class:`~interlock.UnsupportedJournal`, nothing created."""
    if url.startswith("sqlite:"):
        rest = url[len("sqlite:"):]
        if not rest.startswith("//"):
            raise UnsupportedJournal("sqlite", "a SQLite URL is sqlite:// followed by an absolute path")
        path = rest[2:]
        if not path.startswith("/") or path == "/":
            raise UnsupportedJournal("sqlite", "a SQLite URL needs an absolute path to a file: sqlite:///abs/path.db")
        return SqliteJournal.open(path)
    if url.startswith(("postgres://", "postgresql://")) or ("://" not in url and "=" in url):
        return PostgresJournal.open(url)
    scheme = _URL.match(url)
    raise UnsupportedJournal(scheme.group(1) if scheme else "unknown")


def is_url(where: Union[str, bytes, "os.PathLike[str]"]) -> Optional[str]:
    """The scheme of ``where`` if it is a URL (``scheme://``), else None (a folder path)."""
    if isinstance(where, (str, bytes)):
        m = _URL.match(os.fsdecode(where))
        if m:
            return m.group(1)
    return None


def open_journal(where: Union[str, "os.PathLike[str]"], lock_wait_ms: Optional[int] = None) -> Storage:
    """The storage ``where`` names: a ``sqlite://`` or ``postgres://`` URL (:func:`open_url`),
    else a file journal's folder (``lock_wait_ms`` as in :meth:`FileJournal.open`)."""
    if is_url(where) is not None:
        return open_url(os.fsdecode(where))
    return FileJournal.open(where, lock_wait_ms)
