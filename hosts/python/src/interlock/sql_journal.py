"""The shared backends of ``interlock:gate/journal``: :class:`SqliteJournal` (many processes
on one machine) and :class:`PostgresJournal` (many machines), the same rows as the Rust
crate adapters/sql-journal writes, so a journal written by the CLI is read here and the other
way round.

Both run the one schema, ``schema.sql`` (adapters/sql-journal/src/schema.sql: this package
carries a copy, made by setup.py when the wheel is built, and a checkout reads the
original); its README is the contract in prose, and this module follows it statement for
statement (the statements are the Rust backends' constants, in this driver's spelling):

* compare-and-append in one transaction: SQLite ``BEGIN IMMEDIATE`` (the write lock, taken
  before the length is read); PostgreSQL ``SELECT ... FOR UPDATE`` on the stream's row, a
  new stream's row by ``ON CONFLICT DO NOTHING``, and the ``(stream, seq)`` primary key as
  the last guard. A lost race is :class:`~interlock.journal.Conflict`, nothing written.
* every batch checked by the journal-format component's ``validate-append`` (as the file
  journal does), refused with its text, nothing written.
* the format version in the ``interlock_meta`` row ``format`` (the component's
  ``format-file-text``), checked with its ``check-format-file``: a newer journal is
  refused before anything is created or changed.
* durability = a commit that waits for the disk (SQLite ``synchronous = FULL``, one WAL
  fsync; PostgreSQL ``synchronous_commit = on``); non-durable appends commit without
  waiting (``NORMAL``, ``off``) and the next durable commit or :meth:`sync` flushes them,
  in order (group commit).
* ``open_streams`` answered from the partial index ``interlock_open_streams``.

Libraries: the standard ``sqlite3`` module, and psycopg 3 for PostgreSQL, an optional
dependency (``pip install 'interlock[postgres]'``) imported only when a PostgreSQL journal
is opened. Each journal object has one connection and one lock: the threads of a process
may share it (each call is one atomic step); every process opens its own.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union

from .errors import MissingExtra, UnsupportedJournal
from .journal import (
    FORMAT_FILE,
    Conflict,
    FileJournal,
    Journal,
    JournalFileError,
    UnknownFormat,
    _Format,
    _locked,
    validate_append,
)

if TYPE_CHECKING:
    import psycopg

SCHEMA_FILE = "schema.sql"
#: The key of the ``interlock_meta`` row holding the format version.
FORMAT_KEY = "format"
#: The largest BIGINT: lengths and positions are stored as one.
BIGINT_MAX = 2**63 - 1

# The schema's two dialect differences, the tokens schema.sql asks a reader to replace.
_TYPES: Dict[str, Dict[str, str]] = {
    "sqlite": {
        "position_key": "INTEGER PRIMARY KEY",
        "ordinal_key": "INTEGER NOT NULL UNIQUE",
    },
    "postgres": {
        "position_key": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "ordinal_key": "BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE",
    },
}

# `postgres://...`, `sqlite:///...`, `file://...`: a URL, never a directory name.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")


def schema_path() -> Path:
    """Where the one schema is: the copy in this package (setup.py puts it there when it
    builds), else a checkout's adapters/sql-journal/src/schema.sql."""
    packaged = Path(__file__).with_name("sql") / SCHEMA_FILE
    if packaged.is_file():
        return packaged
    # src/interlock/sql_journal.py -> hosts/python/src/interlock -> the repository root
    dev = Path(__file__).resolve().parents[4] / "adapters" / "sql-journal" / "src" / SCHEMA_FILE
    if dev.is_file():
        return dev
    raise FileNotFoundError(
        f"the journal schema {SCHEMA_FILE} was not found in this package ({packaged}) nor in {dev}"
    )


@functools.lru_cache(maxsize=None)
def schema(dialect: str) -> Tuple[str, ...]:
    """The schema's statements in ``dialect`` (``sqlite``, ``postgres``): the meta table
    first (the same in every version), then the rest. Split as schema.sql says: at ";" at
    the end of a line."""
    text = schema_path().read_text(encoding="utf-8")
    for token, sql_type in _TYPES[dialect].items():
        text = text.replace("{" + token + "}", sql_type)
    statements = (s.strip() for s in text.split(";\n"))
    return tuple(s for s in statements
                 if any(line.strip() and not line.startswith("--") for line in s.splitlines()))


class SqlJournalError(JournalFileError):
    """A SQL journal failed; ``case`` is the WIT ``journal-error`` case (``io``: the storage
    or the connection, ``corrupt``: a stored row is unreadable, ``other``). The texts are
    the Rust backends'."""

    def __init__(self, case: str, message: str):
        self.case = case
        super().__init__(message)


def _check_format_row(value: Any, journal: str) -> None:
    """Checks the format row of an existing journal (None: a new one, to be stamped) with the
    journal-format component, as the file journal checks journal.format."""
    if value is None:
        return
    if not isinstance(value, str):
        raise SqlJournalError("corrupt", f"{journal}: its interlock_meta row {FORMAT_KEY!r} is not text")
    try:
        _Format.call("check-format-file", value)
    except UnknownFormat as e:
        message = str(e)
        if e.version is None:
            # The component words it for a file; the Rust backends name the row instead.
            file_words = f"journal format file {FORMAT_FILE} is not valid: "
            if message.startswith(file_words):
                message = (f'its interlock_meta row "{FORMAT_KEY}" is not a format version: '
                           + message[len(file_words):])
        raise UnknownFormat(e.version, f"{journal}: {message}") from None


def _check_run(journal: str, stream: str, start: int, seqs: Sequence[Any]) -> None:
    """Rows read for ``stream`` from ``start`` must run seq = start, start + 1, ..."""
    for i, seq in enumerate(seqs):
        if seq != start + i:
            raise SqlJournalError(
                "corrupt",
                f"{journal}: interlock_entries of stream {stream!r}: seq {start + i} is missing (found {seq})",
            )


def _bigint(n: int) -> int:
    if n > BIGINT_MAX:
        raise SqlJournalError("other", f"{n} is beyond a BIGINT")
    return n


_T = TypeVar("_T")


class _SqlJournal:
    """What both backends share: the lock, the empty batch, the seq check, the counts."""

    def __init__(self, name: str) -> None:
        # Reentrant: an empty durable append syncs under the same lock.
        self._mutex = threading.RLock()
        #: The journal, for messages (``SQLite journal /path``; never a password).
        self.name = name
        #: Transactions this handle committed (appends; on PostgreSQL, syncs that flushed).
        self.commits = 0
        #: Commits and syncs of this handle that waited for the disk.
        self.durable_commits = 0

    # -- each backend's own

    def _append(self, stream: str, expected_len: int, entries: Sequence[str], durable: bool,
                is_open: bool) -> None:
        raise NotImplementedError

    def _rows(self, stream: str, start: int) -> List[Tuple[Any, Any]]:
        raise NotImplementedError

    def _length(self, stream: str) -> int:
        raise NotImplementedError

    def _names(self, open_only: bool) -> List[str]:
        raise NotImplementedError

    def _in_order(self) -> List[str]:
        raise NotImplementedError

    # -- the contract

    @_locked
    def append(self, stream: str, expected_len: int, entries: Sequence[str], durable: bool,
               is_open: bool) -> None:
        """Compare-and-append in one transaction. An empty batch writes nothing and leaves
        the stream (and its ``open``) as it is; if ``durable``, it still syncs. As with the
        file journal, a conflict is reported before the entries are checked."""
        if len(entries) == 0:
            actual = self._length(stream)
            if actual != expected_len:
                raise Conflict(actual)
            if durable:
                self.sync()
            return
        self._append(stream, expected_len, entries, durable, is_open)

    @_locked
    def read(self, stream: str, start: int) -> List[str]:
        start = max(0, start)
        rows = self._rows(stream, min(start, BIGINT_MAX))
        _check_run(self.name, stream, start, [seq for seq, _ in rows])
        out = []
        for seq, entry in rows:
            if not isinstance(entry, str):
                raise SqlJournalError(
                    "corrupt", f"{self.name}: a stored value is unreadable: entry {seq} of stream "
                               f"{stream!r} is a {type(entry).__name__}, not text")
            out.append(entry)
        return out

    @_locked
    def length(self, stream: str) -> int:
        return self._length(stream)

    @_locked
    def open_streams(self) -> List[str]:
        return self._names(True)

    @_locked
    def streams(self) -> List[str]:
        return self._names(False)

    def sync(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @_locked
    def entries_in_order(self) -> List[str]:
        """Every entry in append order (by ``ordinal``): each followed by a newline, the bytes
        a file journal of the same appends holds."""
        return self._in_order()

    def journal_bytes(self) -> bytes:
        """:meth:`entries_in_order`, each followed by ``"\\n"``: what the conformance pins
        and the cross-host checks compare."""
        return b"".join(e.encode("utf-8") + b"\n" for e in self.entries_in_order())

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- SQLite

_SQLITE_BUSY = 5
# The Rust backend's statements (src/sqlite.rs).
_SQLITE_LENGTH = "SELECT length FROM interlock_streams WHERE name = ?1"
_SQLITE_CREATE_STREAM = "INSERT INTO interlock_streams (name, length, open) VALUES (?1, ?2, ?3)"
_SQLITE_UPDATE_STREAM = "UPDATE interlock_streams SET length = ?2, open = ?3 WHERE name = ?1"
# The ordinal is max + 1: the write lock (BEGIN IMMEDIATE) is held, and the UNIQUE index
# answers the max.
_SQLITE_INSERT_ENTRY = (
    "INSERT INTO interlock_entries (stream, seq, entry, ordinal) "
    "VALUES (?1, ?2, ?3, (SELECT COALESCE(MAX(ordinal), 0) + 1 FROM interlock_entries))"
)
_IN_ORDER = "SELECT entry FROM interlock_entries ORDER BY ordinal"
_SQLITE_READ = "SELECT seq, entry FROM interlock_entries WHERE stream = ?1 AND seq >= ?2 ORDER BY seq"
#: Recovery's work list: answered from the partial index ``interlock_open_streams``.
OPEN_STREAMS = "SELECT name FROM interlock_streams WHERE open ORDER BY position"
_STREAMS = "SELECT name FROM interlock_streams ORDER BY position"
_SQLITE_FORMAT_ROW = "SELECT value FROM interlock_meta WHERE key = ?1"
_SQLITE_STAMP_FORMAT = "INSERT INTO interlock_meta (key, value) VALUES (?1, ?2)"
_SQLITE_HAS_META = "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'interlock_meta')"

DIR_MODE = 0o700
FILE_MODE = 0o600


class SqliteJournal(_SqlJournal):
    """A journal in a SQLite database file in WAL mode. Every process opens its own;
    SQLite's file locks make compare-and-append atomic across all of them.

    A durable append commits with ``synchronous = FULL`` (one fsync of the write-ahead log,
    which also covers every earlier commit, whoever made it); a non-durable one with
    ``synchronous = NORMAL`` (in the log, not synced): the next durable commit or
    :meth:`sync` of any process makes them durable, in log order. The file must be on a
    local disk (WAL needs shared memory): one machine; several machines use PostgreSQL."""

    #: How long a write waits for another process's transaction before it fails (s).
    BUSY_TIMEOUT_S = 10

    def __init__(self, path: Path, conn: sqlite3.Connection, wal: Path) -> None:
        super().__init__(f"SQLite journal {path}")
        self.path = path
        self._conn: Optional[sqlite3.Connection] = conn
        #: The database's write-ahead log, which :meth:`sync` flushes.
        self.wal = wal
        self._synchronous_full = False

    @classmethod
    def open(cls, path: Union[str, "os.PathLike[str]"]) -> "SqliteJournal":
        """Opens (or creates, owner-only, with missing parent directories) the journal
        database at ``path``, switches it to WAL mode, creates the schema if needed and checks
        its format version (a newer one is :class:`~interlock.journal.UnknownFormat`,
        nothing changed)."""
        path = Path(path)
        name = f"SQLite journal {path}"

        def fail(what: str, e: object) -> SqlJournalError:
            return SqlJournalError("io", f"{name}: {what}: {e}")

        try:
            _create_owner_only(path)
        except OSError as e:
            raise fail("cannot create the database file", e) from None
        try:
            # isolation_level=None: no transaction is begun behind our back; every
            # transaction here is an explicit BEGIN IMMEDIATE.
            conn = sqlite3.connect(str(path), timeout=cls.BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as e:
            raise fail("cannot open", e) from None
        try:
            # A newer journal is refused before anything (even its journal mode) is changed.
            try:
                stamped = _sqlite_format_row(conn)
            except sqlite3.Error as e:
                raise fail("cannot read the format version", e) from None
            _check_format_row(stamped, name)
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.Error as e:
                raise fail("cannot switch to WAL mode", e) from None
            if str(mode).lower() != "wal":
                raise fail("cannot switch to WAL mode", f"it stays in {mode} mode")
            try:
                conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.Error as e:
                raise fail("cannot set synchronous", e) from None
            try:
                _sqlite_set_up(conn, name)
                db_file = next(row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main")
            except sqlite3.Error as e:
                raise fail("cannot set up the schema", e) from None
        except BaseException:
            conn.close()
            raise
        return cls(path, conn, Path((db_file or str(path)) + "-wal"))

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise SqlJournalError("io", f"{self.name} is closed")
        return self._conn

    def _error(self, e: sqlite3.Error) -> SqlJournalError:
        code = getattr(e, "sqlite_errorcode", None)
        busy = (code & 0xFF == _SQLITE_BUSY) if code is not None else "database is locked" in str(e)
        if busy:
            return SqlJournalError("io", f"{self.name}: other writers held the database for longer "
                                         f"than {self.BUSY_TIMEOUT_S} s: {e}")
        if "decode to UTF-8" in str(e):
            return SqlJournalError("corrupt", f"{self.name}: a stored value is unreadable: {e}")
        return SqlJournalError("io", f"{self.name}: {e}")

    def _query(self, sql: str, args: Tuple[Any, ...] = ()) -> List[Any]:
        try:
            return self._connection().execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise self._error(e) from None

    def _set_synchronous(self, conn: sqlite3.Connection, full: bool) -> None:
        if self._synchronous_full != full:
            conn.execute("PRAGMA synchronous = FULL" if full else "PRAGMA synchronous = NORMAL")
            self._synchronous_full = full

    def _append(self, stream: str, expected_len: int, entries: Sequence[str], durable: bool,
                is_open: bool) -> None:
        conn = self._connection()
        try:
            self._set_synchronous(conn, durable)
            # IMMEDIATE takes the write lock before the length is read, so no other writer
            # can advance the stream between the check and the insert.
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as e:
            raise self._error(e) from None
        try:
            row = conn.execute(_SQLITE_LENGTH, (stream,)).fetchone()
            actual = 0 if row is None else int(row[0])
            if actual != expected_len:
                raise Conflict(actual)
            batch = validate_append(entries, stream, expected_len, is_open)
            new_len = _bigint(expected_len + len(batch))
            conn.execute(_SQLITE_CREATE_STREAM if actual == 0 else _SQLITE_UPDATE_STREAM,
                         (stream, new_len, is_open))
            conn.executemany(_SQLITE_INSERT_ENTRY,
                             [(stream, expected_len + i, entry) for i, entry in enumerate(batch)])
            conn.execute("COMMIT")
        except BaseException as e:
            _sqlite_roll_back(conn)
            if isinstance(e, sqlite3.Error):
                raise self._error(e) from None
            raise
        self.commits += 1
        if durable:
            self.durable_commits += 1

    def _rows(self, stream: str, start: int) -> List[Tuple[Any, Any]]:
        return [(seq, entry) for seq, entry in self._query(_SQLITE_READ, (stream, start))]

    def _length(self, stream: str) -> int:
        rows = self._query(_SQLITE_LENGTH, (stream,))
        return int(rows[0][0]) if rows else 0

    def _names(self, open_only: bool) -> List[str]:
        return [r[0] for r in self._query(OPEN_STREAMS if open_only else _STREAMS)]

    def _in_order(self) -> List[str]:
        return [r[0] for r in self._query(_IN_ORDER)]

    @_locked
    def sync(self) -> None:
        """One fsync of the write-ahead log. Every commit of every process is in the log
        (or was checkpointed into the database file, which SQLite syncs when it
        checkpoints), so this makes every append so far durable, other processes' too."""
        self._connection()
        try:
            fd = os.open(self.wal, os.O_RDONLY)
        except FileNotFoundError:
            fd = None  # no log: everything was checkpointed into the database file and synced
        except OSError as e:
            raise SqlJournalError("io", f"{self.name}: cannot open {self.wal} to sync it: {e}") from None
        if fd is not None:
            try:
                os.fdatasync(fd)
            except OSError as e:
                raise SqlJournalError("io", f"{self.name}: fsync of {self.wal} failed: {e}") from None
            finally:
                os.close(fd)
        self.durable_commits += 1

    @_locked
    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()


def _sqlite_roll_back(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite rolled back itself (a failed COMMIT): nothing of the batch stays


def _sqlite_format_row(conn: sqlite3.Connection) -> Any:
    """The format row, if the database has a meta table."""
    if not conn.execute(_SQLITE_HAS_META).fetchone()[0]:
        return None
    row = conn.execute(_SQLITE_FORMAT_ROW, (FORMAT_KEY,)).fetchone()
    return None if row is None else row[0]


def _sqlite_set_up(conn: sqlite3.Connection, name: str) -> None:
    """Creates the schema under the write lock, so that processes opening a new journal at
    once do not race; a newer format is refused before anything but the meta table (the
    same in every version) is created, and the transaction is rolled back."""
    statements = schema("sqlite")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(statements[0])
        row = conn.execute(_SQLITE_FORMAT_ROW, (FORMAT_KEY,)).fetchone()
        stamped = None if row is None else row[0]
        _check_format_row(stamped, name)
        for statement in statements[1:]:
            conn.execute(statement)
        if stamped is None:
            conn.execute(_SQLITE_STAMP_FORMAT, (FORMAT_KEY, _Format.call("format-file-text")))
        conn.execute("COMMIT")
    except BaseException:
        _sqlite_roll_back(conn)
        raise


def _create_owner_only(path: Path) -> None:
    """Creates the database file (empty: a valid empty database) and its missing parent
    directories owner-only, whatever the umask, as the file journal does: a journal holds
    customers' orders and amounts. SQLite gives its -wal and -shm files the database
    file's mode."""
    missing = []
    parent = path.parent
    while not parent.is_dir():
        missing.append(parent)
        parent = parent.parent
    for d in reversed(missing):
        try:
            d.mkdir(DIR_MODE)
        except FileExistsError:
            continue  # made by another opener: its mode stands
        os.chmod(d, DIR_MODE)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- PostgreSQL

# The Rust backend's statements (src/pg.rs), in psycopg's placeholders.
_PG_LOCK_STREAM = "SELECT length FROM interlock_streams WHERE name = %s FOR UPDATE"
_PG_LENGTH = "SELECT length FROM interlock_streams WHERE name = %s"
# Two writers may create one stream at once: the second waits for the first, inserts
# nothing, and reports the conflict.
_PG_CREATE_STREAM = (
    "INSERT INTO interlock_streams (name, length, open) VALUES (%s, %s, %s) ON CONFLICT (name) DO NOTHING"
)
_PG_UPDATE_STREAM = "UPDATE interlock_streams SET length = %s, open = %s WHERE name = %s"
# Ordinals are taken in the batch's order.
_PG_INSERT_ENTRIES = (
    "INSERT INTO interlock_entries (stream, seq, entry) "
    "SELECT %s, %s::bigint + e.i - 1, e.entry FROM unnest(%s::text[]) WITH ORDINALITY AS e(entry, i) "
    "ORDER BY e.i"
)
_PG_READ = "SELECT seq, entry FROM interlock_entries WHERE stream = %s AND seq >= %s ORDER BY seq"
# Flushes the WAL up to everything committed so far. A commit flushes only if its
# transaction wrote WAL; a transactional logical message is the smallest such write (no
# table, no lock). Nothing is written when the WAL is already flushed.
_PG_SYNC = (
    "BEGIN; SET LOCAL synchronous_commit = on; "
    "SELECT CASE WHEN pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn() "
    "THEN pg_logical_emit_message(true, 'interlock-journal', 'sync') END; COMMIT"
)
# Serializes schema creation between workers opening a new database at once
# (CREATE TABLE IF NOT EXISTS alone races in PostgreSQL). The key spells "intlock".
_PG_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(29670243599410027)"
_PG_FORMAT_ROW = "SELECT value FROM interlock_meta WHERE key = %s"
_PG_STAMP_FORMAT = "INSERT INTO interlock_meta (key, value) VALUES (%s, %s)"
# Connection (08), resources (53), operator intervention (57: a shutdown, a cancel), system
# (58) and internal (XX) errors: the storage failed.
_PG_IO_CLASSES = ("08", "53", "57", "58", "XX")


def _psycopg() -> Any:
    """psycopg 3, imported when a PostgreSQL journal is first opened (an optional
    dependency: the ``postgres`` extra)."""
    try:
        import psycopg
    except ImportError as e:
        raise MissingExtra("a PostgreSQL journal (postgres://)", "postgres", str(e)) from None
    return psycopg


class PostgresJournal(_SqlJournal):
    """A journal in a PostgreSQL database; every worker (process, or thread with its own
    Interlock) connects its own.

    An append is one transaction: the stream's row locked (``SELECT ... FOR UPDATE``), its
    length compared, the entries inserted and the row advanced, then committed. A durable
    append commits with ``synchronous_commit = on``; a non-durable one with ``off``:
    visible at once, flushed in WAL order by the WAL writer, the next durable commit or
    :meth:`sync`.

    A lost connection fails the call (``io``); the next call reconnects (nothing is retried
    for you). An append whose commit was not acknowledged fails too: its fate is unknown and
    the gate reads the stream again; it is never reported as done."""

    #: How long a connection attempt may take when the URL does not say (s).
    CONNECT_TIMEOUT_S = 10

    def __init__(self, conninfo: str, name: str, connect_args: Dict[str, Any]) -> None:
        super().__init__(f"PostgreSQL journal {name}")
        self._conninfo = conninfo
        self._connect_args = connect_args
        self._conn: Optional["psycopg.Connection[Any]"] = None
        self._closed = False
        # The session's synchronous_commit (None: not set on this connection yet).
        self._synchronous: Optional[bool] = None

    @classmethod
    def open(cls, url: str) -> "PostgresJournal":
        """Connects to the journal at ``url`` (a ``postgres://`` URL or a libpq
        ``key=value`` string), creates the schema if needed and checks the format version (a
        newer one is :class:`~interlock.journal.UnknownFormat`, nothing changed). The
        database must be UTF8, so that entries are stored byte for byte."""
        psycopg = _psycopg()
        try:
            params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as e:
            raise UnsupportedJournal("postgres", f"not a PostgreSQL connection string: {e}") from None
        args: Dict[str, Any] = {"autocommit": True, "client_encoding": "UTF8"}
        if "connect_timeout" not in params:
            args["connect_timeout"] = cls.CONNECT_TIMEOUT_S
        journal = cls(url, _describe(params), args)
        name = journal.name

        def fail(what: str, e: object) -> SqlJournalError:
            return SqlJournalError("io", f"{name}: {what}: {e}")

        try:
            conn = journal._connect()
        except psycopg.Error as e:
            raise fail("cannot connect", e) from None
        try:
            try:
                row = conn.execute("SHOW server_encoding").fetchone()
            except psycopg.Error as e:
                raise fail("cannot read the server encoding", e) from None
            encoding = row[0] if row else None
            if encoding != "UTF8":
                raise fail("the database must be UTF8 to store entries byte for byte",
                           f"it is {encoding} (CREATE DATABASE ... ENCODING 'UTF8')")
            try:
                _pg_set_up(conn, name)
            except psycopg.Error as e:
                raise fail("cannot set up the schema", e) from None
        except BaseException:
            conn.close()
            raise
        journal._conn = conn
        return journal

    def _connect(self) -> "psycopg.Connection[Any]":
        return _psycopg().connect(self._conninfo, **self._connect_args)

    def _connection(self) -> "psycopg.Connection[Any]":
        """The connection, made again if the last one was lost."""
        if self._closed:
            raise SqlJournalError("io", f"{self.name} is closed")
        if self._conn is not None and self._conn.closed:
            self._conn = None
        if self._conn is None:
            psycopg = _psycopg()
            try:
                self._conn = self._connect()
            except psycopg.Error as e:
                raise SqlJournalError("io", f"{self.name}: cannot connect: {e}") from None
            self._synchronous = None
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - the connection is being thrown away anyway
                pass

    def _run(self, fn: Callable[["psycopg.Connection[Any]"], _T]) -> _T:
        """Runs ``fn`` on the connection. After a database error the connection is dropped
        (it may be lost, or left inside a failed transaction): the next call reconnects."""
        psycopg = _psycopg()
        conn = self._connection()
        try:
            return fn(conn)
        except psycopg.Error as e:
            lost = conn.closed
            self._drop()
            raise self._error(e, bool(lost)) from None

    def _error(self, e: Exception, lost: bool) -> SqlJournalError:
        sqlstate = getattr(e, "sqlstate", None)
        if lost or not sqlstate:
            return SqlJournalError("io", f"{self.name}: connection lost: {e}; the next call reconnects")
        if sqlstate[:2] in _PG_IO_CLASSES:
            return SqlJournalError("io", f"{self.name}: {e}")
        return SqlJournalError("other", f"{self.name}: {e}")

    def _set_synchronous(self, conn: "psycopg.Connection[Any]", on: bool) -> None:
        if self._synchronous != on:
            conn.execute("SET synchronous_commit = on" if on else "SET synchronous_commit = off")
            self._synchronous = on

    def _append(self, stream: str, expected_len: int, entries: Sequence[str], durable: bool,
                is_open: bool) -> None:
        self._run(lambda conn: self._append_on(conn, stream, expected_len, entries, durable, is_open))
        self.commits += 1
        if durable:
            self.durable_commits += 1

    def _append_on(self, conn: "psycopg.Connection[Any]", stream: str, expected_len: int,
                   entries: Sequence[str], durable: bool, is_open: bool) -> None:
        psycopg = _psycopg()
        self._set_synchronous(conn, durable)
        cur = conn.cursor()
        cur.execute("BEGIN")
        try:
            row = cur.execute(_PG_LOCK_STREAM, (stream,)).fetchone()
            actual = 0 if row is None else int(row[0])
            if actual != expected_len:
                raise Conflict(actual)
            batch = validate_append(entries, stream, expected_len, is_open)
            new_len = _bigint(expected_len + len(batch))
            first = _bigint(expected_len)
            if row is None:
                cur.execute(_PG_CREATE_STREAM, (stream, new_len, is_open))
                if cur.rowcount == 0:
                    # Another writer created the stream first; it holds at least one entry.
                    row = cur.execute(_PG_LOCK_STREAM, (stream,)).fetchone()
                    raise Conflict(int(row[0]) if row else 0)
            else:
                cur.execute(_PG_UPDATE_STREAM, (new_len, is_open, stream))
            try:
                cur.execute(_PG_INSERT_ENTRIES, (stream, first, batch))
            except psycopg.errors.UniqueViolation:
                # Only a writer that skipped the row lock can get here: the key stops it.
                cur.execute("ROLLBACK")
                row = cur.execute(_PG_LENGTH, (stream,)).fetchone()
                raise Conflict(0 if row is None else int(row[0])) from None
        except BaseException as e:
            if not isinstance(e, psycopg.Error):
                self._roll_back(conn)
            raise
        try:
            cur.execute("COMMIT")
        except psycopg.Error as e:
            self._drop()
            raise SqlJournalError(
                "io",
                f"{self.name}: the commit of {len(batch)} entries to stream {stream!r} was not "
                f"acknowledged ({e}); they may or may not be recorded: read the stream again",
            ) from None

    def _roll_back(self, conn: "psycopg.Connection[Any]") -> None:
        """Ends a transaction a refused append began (a conflict, a bad batch)."""
        psycopg = _psycopg()
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            self._drop()  # the next call reconnects; the server ends the transaction

    def _rows(self, stream: str, start: int) -> List[Tuple[Any, Any]]:
        return self._run(lambda c: [(r[0], r[1]) for r in c.execute(_PG_READ, (stream, start)).fetchall()])

    def _length(self, stream: str) -> int:
        row = self._run(lambda c: c.execute(_PG_LENGTH, (stream,)).fetchone())
        return 0 if row is None else int(row[0])

    def _names(self, open_only: bool) -> List[str]:
        sql = OPEN_STREAMS if open_only else _STREAMS
        return self._run(lambda c: [r[0] for r in c.execute(sql).fetchall()])

    def _in_order(self) -> List[str]:
        return self._run(lambda c: [r[0] for r in c.execute(_IN_ORDER).fetchall()])

    @_locked
    def sync(self) -> None:
        """Flushes the WAL up to every commit so far, this worker's and every other's."""

        def flush(conn: "psycopg.Connection[Any]") -> bool:
            cur = conn.cursor()
            cur.execute(_PG_SYNC)
            # The one row says whether a message was written (and so flushed by COMMIT).
            flushed = False
            while True:
                if cur.description is not None:
                    flushed = flushed or any(r[0] is not None for r in cur.fetchall())
                if not cur.nextset():
                    return flushed

        if self._run(flush):
            self.commits += 1
            self.durable_commits += 1

    @_locked
    def close(self) -> None:
        self._closed = True
        self._drop()


def _pg_set_up(conn: "psycopg.Connection[Any]", name: str) -> None:
    """Creates the schema in one transaction under an advisory lock; a newer format is
    refused before anything but the meta table (the same in every version) is created, and
    the transaction is rolled back."""
    statements = schema("postgres")
    with conn.transaction():
        conn.execute(_PG_SCHEMA_LOCK)
        conn.execute(statements[0])
        row = conn.execute(_PG_FORMAT_ROW, (FORMAT_KEY,)).fetchone()
        stamped = None if row is None else row[0]
        _check_format_row(stamped, name)
        for statement in statements[1:]:
            conn.execute(statement)
        if stamped is None:
            conn.execute(_PG_STAMP_FORMAT, (FORMAT_KEY, _Format.call("format-file-text")))


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


# ---------------------------------------------------------------- choosing a backend


def open_url(url: str) -> Union[SqliteJournal, PostgresJournal]:
    """Opens the shared journal at ``url``: ``sqlite:///abs/path.db`` (everything after
    ``sqlite://`` is the absolute path, taken literally), ``postgres://...`` or
    ``postgresql://...`` as libpq reads it, or a libpq ``key=value`` string. Anything else is
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


def open_journal(where: Union[str, "os.PathLike[str]"], lock_wait_ms: Optional[int] = None) -> Journal:
    """The journal ``where`` names: a ``sqlite://`` or ``postgres://`` URL opens a shared
    journal (:func:`open_url`), any other URL is :class:`~interlock.UnsupportedJournal`, and
    a path is a file journal folder (``lock_wait_ms`` as in :meth:`FileJournal.open`)."""
    if is_url(where) is not None:
        return open_url(os.fsdecode(where))
    return FileJournal.open(where, lock_wait_ms)
