"""This host's SQL storages under a shared journal: owner-only files, the database's
encoding, a lost connection, the URLs and the optional extra (the journal's rules over
them are the component's, checked by test_journal_contract.py)."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from interlock import COMMITTED, Interlock, MissingExtra, UnsupportedJournal
from interlock.journal import FileJournal, JournalFileError
from interlock.payments_sim import Payments
from interlock.sql_journal import PostgresJournal, SqliteJournal, open_journal, schema_path


def one_refund(url, tmp_path):
    gate = Interlock(url)
    payments = Payments.create(tmp_path / "payments.json", "2")
    payments.add_order("order_881", 10_000)

    @gate.effect(lookup=lambda order, amount, effect_id: payments.find_by_reference(effect_id))
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    assert refund("order_881", 2000).status == COMMITTED
    return gate


def test_a_sqlite_journal_is_owner_only(tmp_path):
    old = os.umask(0)
    try:
        db = tmp_path / "a" / "b" / "journal.db"
        one_refund(f"sqlite://{db}", tmp_path).close()

        def mode(p):
            return stat.S_IMODE(os.stat(p).st_mode)

        assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
        assert mode(db) == 0o600
    finally:
        os.umask(old)


def test_a_postgres_database_that_is_not_utf8_is_refused(pg_cluster):
    url = pg_cluster.database(encoding="LATIN1")
    with pytest.raises(JournalFileError) as e:
        PostgresJournal.open(url)
    assert "must be UTF8" in str(e.value) and "LATIN1" in str(e.value), str(e.value)


def test_a_lost_postgres_connection_fails_the_call_and_the_next_reconnects(pg_cluster, tmp_path):
    url = pg_cluster.database()
    gate = one_refund(url, tmp_path)
    with pg_cluster.admin() as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                      (url.rsplit("/", 1)[1],))
    # The first call after the loss fails (io, nothing retried here); the next reconnects.
    from interlock import GateError

    with pytest.raises(GateError):
        gate.verify()
    assert gate.verify().ok
    gate.close()


def test_the_schema_file_is_there():
    assert "CREATE TABLE IF NOT EXISTS interlock_meta" in schema_path().read_text()


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


def test_an_interlock_on_a_url_names_the_journal_without_its_password(pg_cluster):
    url = pg_cluster.journal_url().replace("postgres://postgres@", "postgres://postgres:hunter2@")
    gate = Interlock(url)
    assert gate.path is None and "hunter2" not in gate.journal_name, gate.journal_name
    assert gate.journal_name.startswith("PostgreSQL journal journals on /"), gate.journal_name
    gate.close()
