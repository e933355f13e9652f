"""The journal contract (wit/journal.wit, ARCHITECTURE.md "The journal contract") on this
host's SQLite and PostgreSQL journals: the cases of the Rust backends' contract tests
(adapters/sql-journal/tests/contract.rs), each on both, with this host's file journal as the
reference where there is one answer to compare. PostgreSQL runs in a throwaway cluster
(scripts/postgres.sh); its cases are skipped, saying why, only when it is not installed."""

import json
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from typing import Any, List

import pytest

from interlock import Interlock, MissingExtra, UnsupportedJournal
from interlock.journal import Conflict, FileJournal, InvalidEntry, JournalFileError, UnknownFormat
from interlock.sql_journal import (
    OPEN_STREAMS,
    PostgresJournal,
    SqliteJournal,
    SqlJournalError,
    open_journal,
    open_url,
    schema,
)


def entry(stream: str, seq: int, is_open: bool = True) -> str:
    """A canonical-looking entry (sorted keys, no spaces), as the Rust tests write them."""
    o = "true" if is_open else "false"
    return f'{{"data":"payload {stream} {seq}","open":{o},"seq":{seq},"stream":"{stream}"}}'


def entries(stream: str, start: int, n: int, is_open: bool = True) -> List[str]:
    return [entry(stream, i, is_open) for i in range(start, start + n)]


def snapshot(j: Any) -> Any:
    streams = j.streams()
    return streams, j.open_streams(), [(j.length(s), j.read(s, 0)) for s in streams]


def test_append_read_length_round_trip(backend):
    j = open_url(backend.fresh())
    j.append("a", 0, entries("a", 0, 2), False, True)
    j.append("b", 0, entries("b", 0, 1), True, True)
    j.append("a", 2, entries("a", 2, 1, False), False, False)
    assert (j.length("a"), j.length("b"), j.length("nope")) == (3, 1, 0)
    all_a = entries("a", 0, 2) + [entry("a", 2, False)]
    assert j.read("a", 0) == all_a
    assert j.read("a", 1) == all_a[1:]
    assert j.read("a", 3) == [] and j.read("a", 99) == [] and j.read("a", 2**64 - 1) == []
    assert j.read("b", 0) == entries("b", 0, 1)
    assert j.read("nope", 0) == []
    j.sync()
    j.close()


def test_first_append_order(backend):
    j = open_url(backend.fresh())
    assert j.streams() == [] and j.open_streams() == []
    for s in ["zeta", "alpha", "mid"]:
        j.append(s, 0, entries(s, 0, 1), False, True)
    assert j.streams() == ["zeta", "alpha", "mid"]
    assert j.open_streams() == ["zeta", "alpha", "mid"]
    j.append("alpha", 1, entries("alpha", 1, 1, False), False, False)
    assert j.open_streams() == ["zeta", "mid"]
    j.append("zeta", 1, entries("zeta", 1, 2, False), True, False)
    assert j.open_streams() == ["mid"]
    # Closed, then open again: back at its first-append place.
    j.append("alpha", 2, entries("alpha", 2, 1), False, True)
    assert j.open_streams() == ["alpha", "mid"]
    # Created closed: listed in streams only.
    j.append("closed", 0, entries("closed", 0, 1, False), False, False)
    assert j.streams() == ["zeta", "alpha", "mid", "closed"]
    assert j.open_streams() == ["alpha", "mid"]
    j.close()


def test_conflict_writes_nothing(backend):
    url = backend.fresh()
    j = open_url(url)
    with pytest.raises(Conflict) as e:
        j.append("a", 1, entries("a", 1, 1), True, True)
    assert e.value.actual == 0 and e.value.case == "conflict"
    assert j.streams() == [], "a lost append creates no stream"
    j.append("a", 0, entries("a", 0, 2), True, True)
    for expected in [0, 1, 3, 2**64 - 1]:
        batch = [entry("a", 0)] if expected == 2**64 - 1 else entries("a", expected, 1, False)
        with pytest.raises(Conflict) as e:
            j.append("a", expected, batch, True, False)
        assert e.value.actual == 2, expected
    assert j.read("a", 0) == entries("a", 0, 2)
    assert j.open_streams() == ["a"], "a lost append changes no open flag"
    assert backend.query(url, "SELECT count(*) FROM interlock_entries") == [2]
    j.close()


def test_empty_batch_is_a_no_op_or_a_sync(backend):
    j = open_url(backend.fresh())
    j.append("a", 0, [], True, True)
    assert j.streams() == [], "an empty append creates no stream"
    j.append("a", 0, entries("a", 0, 1), False, True)
    j.append("a", 1, [], False, False)
    assert j.open_streams() == ["a"], "an empty append does not change open"
    j.append("a", 1, [], True, False)
    with pytest.raises(Conflict) as e:
        j.append("a", 0, [], True, True)
    assert e.value.actual == 1
    assert j.length("a") == 1
    j.close()


def test_bad_appends_are_refused_like_the_file_journal(backend, tmp_path):
    """Every bad batch is refused with the file journal's own error, word for word (both
    ask the journal-format component), and leaves nothing behind."""
    file = FileJournal.open(tmp_path / "file")
    j = open_url(backend.fresh())
    for journal in (file, j):
        journal.append("a", 0, entries("a", 0, 1), True, True)
    with_newline = entry("a", 1) + "\n" + '{"open":true,"seq":2,"stream":"a"}'
    bad_batches: List[Any] = [
        ("newline", [with_newline]),
        ("stream", [entry("b", 1)]),
        ("seq", [entry("a", 1), entry("a", 3)]),
        ("open", [entry("a", 1), entry("a", 2, False)]),
        ("JSON object", ["[1,2]"]),
        ("not a journal entry", ['{"open":true}']),
        ("JSON object", [""]),
        ("not a journal entry", ['{"open":true,"seq":"1","stream":"a"}']),
        ("not a string", [b'{"open":true,"seq":1,"stream":"a"}']),
    ]
    for why, batch in bad_batches:
        with pytest.raises(InvalidEntry) as want:
            file.append("a", 1, batch, True, True)
        with pytest.raises(InvalidEntry) as got:
            j.append("a", 1, batch, True, True)
        assert why in str(got.value), (why, str(got.value))
        assert str(got.value) == str(want.value), why
        assert got.value.case == "other"
        assert j.length("a") == 1 and j.read("a", 0) == entries("a", 0, 1), why
        assert j.streams() == ["a"]
    # The handle is still usable.
    j.append("a", 1, entries("a", 1, 1), True, True)
    assert j.length("a") == 2
    j.close()
    file.close()


def test_same_answers_and_bytes_as_the_file_journal(backend, tmp_path):
    """A mixed run of appends gives the file journal's answers, and the entries in append
    order are byte for byte the file journal's journal.jsonl."""
    ref = FileJournal.open(tmp_path / "ref")
    j = open_url(backend.fresh())
    names = ["effect:x", "lease:l", "cap:c", "effect:y", "approval:a"]
    step = 0

    def outcome(journal: Any, *args: Any) -> Any:
        try:
            journal.append(*args)
            return "ok"
        except Conflict as e:
            return ("conflict", e.actual)

    for rnd in range(6):
        for i, s in enumerate(names):
            step += 1
            if (rnd + i) % 3 == 2:
                continue
            n_len = ref.length(s)
            is_open = step % 4 != 0
            batch = entries(s, n_len, 1 + step % 3, is_open)
            args = (s, n_len, batch, step % 2 == 0, is_open)
            assert outcome(j, *args) == outcome(ref, *args)
            if n_len > 0:  # a stale writer loses the same way
                stale = (s, n_len - 1, entries(s, n_len - 1, 1, is_open), True, is_open)
                assert outcome(j, *stale) == outcome(ref, *stale) == ("conflict", ref.length(s))
        assert snapshot(j) == snapshot(ref), rnd
    assert j.journal_bytes() == (tmp_path / "ref" / "journal.jsonl").read_bytes()
    j.close()
    ref.close()


def test_reopen_and_other_handles_see_everything(backend):
    url = backend.fresh()
    j, other = open_url(url), open_url(url)
    j.append("s2", 0, entries("s2", 0, 3), False, True)
    # A second handle (another worker) sees it at once and appends after it.
    assert other.length("s2") == 3
    other.append("s1", 0, entries("s1", 0, 1), False, True)
    j.append("s2", 3, entries("s2", 3, 1, False), False, False)
    other.append("s3", 0, entries("s3", 0, 2), True, True)
    j.append("s1", 1, entries("s1", 1, 1), False, True)  # closed with this one pending
    before = snapshot(j)
    assert snapshot(other) == before
    j.close()
    other.close()
    again = open_url(url)
    assert snapshot(again) == before
    assert again.streams() == ["s2", "s1", "s3"]
    assert again.open_streams() == ["s1", "s3"]
    again.close()


def test_entries_are_stored_byte_for_byte(backend):
    url = backend.fresh()
    j = open_url(url)
    odd = 'b "q" é ☃ 𝄞 \\ \u2028'
    sj = json.dumps(odd, ensure_ascii=False)
    big = "x" * 300_000
    batch = [
        f'{{"nested":{{"k":[1,2.5e-7,"é\\u00e9\\t"]}},"open":false,"seq":0,"stream":{sj}}}',
        f'{{"big":"{big}","open":false,"seq":1,"stream":{sj}}}',
        # Not canonical (spaces, key order): a backend stores what it is given.
        f'{{ "stream" : {sj}, "seq" : 2, "open" : false }}',
    ]
    j.append(odd, 0, batch, True, False)
    assert j.read(odd, 0) == batch
    assert j.streams() == [odd]
    assert backend.query(url, "SELECT entry FROM interlock_entries ORDER BY seq") == batch
    if backend.name == "sqlite":
        assert backend.query(url, "SELECT DISTINCT typeof(entry) FROM interlock_entries") == ["text"]
    j.close()
    again = open_url(url)
    assert again.read(odd, 1) == batch[1:]
    again.close()


@pytest.mark.parametrize("text,want", [
    ("interlock-journal 2\n",
     "journal format version 2 is newer than this reader understands (1); upgrade Interlock"),
    ("interlock-journal one\n", "is not a format version: its version is not a decimal number"),
])
def test_format_version_recorded_and_newer_refused(backend, text, want):
    url = backend.fresh()
    open_url(url).close()
    assert backend.query(url, "SELECT value FROM interlock_meta WHERE key = 'format'") == ["interlock-journal 1\n"]
    open_url(url).close()  # and an existing one opens as it is

    url = backend.fresh()
    literal = text.replace("\n", "' || chr(10) || '")
    if backend.name == "sqlite":
        literal = literal.replace("chr(10)", "char(10)")
    backend.execute(url, "CREATE TABLE interlock_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                         f"INSERT INTO interlock_meta VALUES ('format', '{literal}');")
    with pytest.raises(UnknownFormat) as e:
        open_url(url)
    assert want in str(e.value), str(e.value)
    assert e.value.version == (2 if "2" in text else None)
    # Nothing was created beside the meta table, nor changed in it.
    tables = ("SELECT name FROM sqlite_master WHERE name LIKE 'interlock%'" if backend.name == "sqlite"
              else "SELECT tablename FROM pg_tables "
                   "WHERE tablename LIKE 'interlock%' AND schemaname = current_schema()")
    assert backend.query(url, tables) == ["interlock_meta"]
    assert backend.query(url, "SELECT value FROM interlock_meta") == [text]
    if backend.name == "sqlite":
        assert backend.query(url, "PRAGMA journal_mode") == ["delete"], "not even switched to WAL"


def test_open_streams_is_an_index_query(backend):
    """``open_streams`` is answered from the partial index of open streams, not by a scan."""
    url = backend.fresh()
    j = open_url(url)
    for i in range(1500):
        s = f"effect:{i}"
        is_open = i % 500 == 7
        j.append(s, 0, entries(s, 0, 1, is_open), False, is_open)
    assert j.open_streams() == ["effect:7", "effect:507", "effect:1007"]
    j.close()
    backend.execute(url, "ANALYZE")
    if backend.name == "sqlite":
        # EXPLAIN QUERY PLAN rows: (id, parent, notused, detail).
        conn = sqlite3.connect(backend.path(url))
        plan = [r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {OPEN_STREAMS}").fetchall()]
        conn.close()
    else:
        plan = backend.query(url, f"EXPLAIN {OPEN_STREAMS}")
    # SQLite: "SCAN interlock_streams USING INDEX interlock_open_streams" walks the index (of
    # open streams only); a scan of the table would name no index.
    assert len(plan) == 1 and "interlock_open_streams" in plan[0] and "Seq Scan" not in plan[0], plan


def test_commits_are_counted(backend):
    """A durable append is one commit that waits for the disk; a non-durable one does not."""
    url = backend.fresh()
    j = open_url(url)
    j.append("a", 0, entries("a", 0, 3), True, True)
    assert (j.commits, j.durable_commits) == (1, 1)
    j.append("a", 3, entries("a", 3, 1), False, True)
    j.append("b", 0, entries("b", 0, 1), False, True)
    assert j.durable_commits == 1, "non-durable appends do not wait"
    assert j.commits == 3
    with pytest.raises(Conflict):
        j.append("a", 0, entries("a", 0, 1), True, True)
    assert (j.commits, j.durable_commits) == (3, 1), "a conflict commits nothing"
    j.sync()
    if backend.name == "sqlite":
        assert j.durable_commits == 2  # one fsync of the log, whatever is pending
    else:
        assert j.durable_commits in (1, 2)  # a flush only when the WAL is not flushed already
        # The sync's promise, read off the server: everything so far is flushed.
        j.append("b", 1, entries("b", 1, 1), False, True)
        insert = backend.query(url, "SELECT pg_current_wal_insert_lsn()::text")[0]
        j.sync()
        assert backend.query(url, f"SELECT pg_current_wal_flush_lsn() >= '{insert}'::pg_lsn") == [True]
    j.close()


def test_many_workers_open_a_new_journal_at_once(backend):
    url = backend.fresh()
    errors: List[str] = []

    def worker(t: int) -> None:
        try:
            j = open_url(url)
            j.append(f"t{t}", 0, entries(f"t{t}", 0, 1), True, True)
            j.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    j = open_url(url)
    assert len(j.streams()) == 6
    assert backend.query(url, "SELECT value FROM interlock_meta") == ["interlock-journal 1\n"]
    j.close()


def race(j: Any, me: str, rounds: int, start: Any) -> int:
    """Appends one entry at every length 0..rounds, calling ``start`` before each; returns
    the rounds won. A lost race must be a conflict at a longer length."""
    wins = 0
    for r in range(rounds):
        start()
        e = f'{{"by":"{me}","open":true,"seq":{r},"stream":"effect:race"}}'
        try:
            j.append("effect:race", r, [e], r % 2 == 0, True)
            wins += 1
        except Conflict as c:
            assert c.actual > r, (me, r, c.actual)
    return wins


def check_race(url: str, rounds: int, wins: int) -> None:
    assert wins == rounds, "exactly one winner per round"
    j = open_url(url)
    stored = j.read("effect:race", 0)
    assert len(stored) == rounds
    assert all(f'"seq":{i},' in e for i, e in enumerate(stored))
    j.close()


def test_threads_race_one_stream(backend):
    """Four threads, each with its own connection, every round started in all at once."""
    url = backend.fresh()
    open_url(url).close()
    rounds, barrier, wins, errors = 60, threading.Barrier(4), [], []

    def racer(t: int) -> None:
        j = open_url(url)
        try:
            wins.append(race(j, f"thread {t}", rounds, barrier.wait))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
            barrier.abort()
        finally:
            j.close()

    threads = [threading.Thread(target=racer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    check_race(url, rounds, sum(wins))


def test_one_handle_shared_by_threads(backend):
    """One journal object used by many threads at once (an Interlock shared by threads,
    gate instances over one journal): every call is one atomic step."""
    url = backend.fresh()
    j = open_url(url)
    rounds, barrier, wins, errors = 40, threading.Barrier(4), [], []

    def racer(t: int) -> None:
        try:
            wins.append(race(j, f"thread {t}", rounds, barrier.wait))
            own = f"own:{t}"
            for i in range(20):
                j.append(own, i, [entry(own, i)], i % 5 == 0, True)
                assert j.read(own, i) == [entry(own, i)]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
            barrier.abort()

    threads = [threading.Thread(target=racer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    j.close()
    check_race(url, rounds, sum(wins))
    again = open_url(url)
    assert [again.length(f"own:{t}") for t in range(4)] == [20] * 4
    again.close()


RACER = textwrap.dedent("""
    import os, sys, time
    from interlock.journal import Conflict
    from interlock.sql_journal import open_url

    url, go, me, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    j = open_url(url)
    while not os.path.exists(go):
        time.sleep(0.001)
    wins = 0
    for r in range(rounds):
        e = '{"by":"%s","open":true,"seq":%d,"stream":"effect:race"}' % (me, r)
        try:
            j.append("effect:race", r, [e], r % 2 == 0, True)
            wins += 1
        except Conflict as c:
            assert c.actual > r, (me, r, c.actual)
    print(wins)
""")


def test_processes_race_one_stream(backend, tmp_path):
    """The same race between four processes of this host."""
    url = backend.fresh()
    open_url(url).close()
    rounds, go = 60, tmp_path / "go"
    children = [subprocess.Popen([sys.executable, "-c", RACER, url, str(go), f"process {p}", str(rounds)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in range(4)]
    go.write_text("")
    wins = 0
    for c in children:
        out, err = c.communicate(timeout=120)
        assert c.returncode == 0, err
        wins += int(out.strip())
    check_race(url, rounds, wins)


def test_a_sqlite_journal_is_owner_only(tmp_path):
    old = os.umask(0)
    try:
        db = tmp_path / "a" / "b" / "journal.db"
        j = open_url(f"sqlite://{db}")
        j.append("a", 0, entries("a", 0, 1), True, True)

        def mode(p: Any) -> int:
            return stat.S_IMODE(os.stat(p).st_mode)

        assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
        for f in ["journal.db", "journal.db-wal", "journal.db-shm"]:
            assert mode(db.parent / f) == 0o600, f
        j.close()
    finally:
        os.umask(old)


def test_a_postgres_database_that_is_not_utf8_is_refused(pg_cluster):
    url = pg_cluster.database(encoding="LATIN1")
    with pytest.raises(SqlJournalError) as e:
        PostgresJournal.open(url)
    assert "must be UTF8" in str(e.value) and "LATIN1" in str(e.value), str(e.value)


def test_a_lost_postgres_connection_fails_the_call_and_the_next_reconnects(pg_cluster):
    url = pg_cluster.database()
    j = PostgresJournal.open(url)
    j.append("a", 0, entries("a", 0, 1), True, True)
    with pg_cluster.admin() as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                      (url.rsplit("/", 1)[1],))
    with pytest.raises(SqlJournalError) as e:
        j.append("a", 1, entries("a", 1, 1), True, True)
    assert e.value.case == "io" and "the next call reconnects" in str(e.value), str(e.value)
    assert j.read("a", 0) == entries("a", 0, 1), "the failed append left nothing"
    j.append("a", 1, entries("a", 1, 1), True, True)
    assert j.length("a") == 2
    j.close()


def test_the_schema_is_the_rust_crates_file_split_as_it_says():
    statements = schema("sqlite")
    assert len(statements) == len(schema("postgres")) == 4
    assert "CREATE TABLE IF NOT EXISTS interlock_meta" in statements[0]
    assert all("{" not in s for s in statements + schema("postgres"))
    assert "GENERATED ALWAYS AS IDENTITY" in schema("postgres")[1]


def test_urls_choose_the_backend_and_others_are_refused_with_nothing_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    j = open_journal(f"sqlite://{tmp_path}/x.db")
    assert isinstance(j, SqliteJournal)
    j.close()
    f = open_journal(str(tmp_path / "folder"))
    assert isinstance(f, FileJournal)
    f.close()
    before = sorted(os.listdir(tmp_path))
    for url, why in [("sqlite://relative/x.db", "absolute path"), ("sqlite:///", "absolute path"),
                     ("mysql://u:secret@h/db", "mysql://"), ("file://./journal", "file://")]:
        with pytest.raises(UnsupportedJournal) as e:
            open_journal(url)
        assert why in str(e.value) and "secret" not in str(e.value), str(e.value)
        assert isinstance(e.value, ValueError)
    assert sorted(os.listdir(tmp_path)) == before


def test_a_postgres_url_without_psycopg_names_the_extra(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules["psycopg"] = None  # as if it were not installed
        from interlock import Interlock, MissingExtra
        try:
            Interlock("postgres://u:secret@localhost/db")
        except MissingExtra as e:
            assert "secret" not in str(e)
            print(e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "pip install 'interlock[postgres]'" in out.stdout, out.stdout
    assert os.listdir(tmp_path) == []
    assert issubclass(MissingExtra, ImportError)


def test_journal_errors_are_journal_file_errors():
    assert issubclass(SqlJournalError, JournalFileError)
    assert SqlJournalError("io", "x").case == "io"


def test_an_interlock_on_a_url_names_the_journal_without_its_password(pg_cluster):
    url = pg_cluster.journal_url().replace("postgres://postgres@", "postgres://postgres:hunter2@")
    gate = Interlock(url)
    assert gate.path is None and "hunter2" not in gate.journal_name, gate.journal_name
    assert gate.journal_name.startswith("PostgreSQL journal journals on /"), gate.journal_name
    gate.close()
