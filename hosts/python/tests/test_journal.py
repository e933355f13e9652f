"""This host's file storage under the journal: the folder's lock, owner-only files, and
what opening, tearing and repairing a journal look like through the public API (the
journal's rules themselves are the component's, checked by test_journal_contract.py)."""

import os
import stat
import subprocess
import sys
import time

import pytest

from interlock import COMMITTED, Interlock
from interlock.journal import FileJournal, Locked, TornTail, UnknownFormat
from interlock.payments_sim import Payments


def test_one_writer_per_directory(tmp_path):
    j = FileJournal.open(tmp_path)
    with pytest.raises(Locked) as e:
        FileJournal.open(tmp_path, lock_wait_ms=50)
    # It waited, then said how to run several writers.
    assert "still after waiting 50 ms" in str(e.value), e.value
    assert "sqlite:///" in str(e.value) and "postgres://" in str(e.value), e.value
    with pytest.raises(Locked):
        Interlock(tmp_path, lock_wait_ms=0)
    j.close()
    FileJournal.open(tmp_path).close()


def test_a_second_writer_waits_for_the_lock_and_gets_it_when_the_first_lets_go(tmp_path):
    FileJournal.open(tmp_path).close()
    # Another process holds the directory for 400 ms.
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time\n"
            "from interlock.journal import FileJournal\n"
            f"j = FileJournal.open({str(tmp_path)!r})\n"
            "print('held', flush=True)\n"
            "time.sleep(0.4)\n"
            "j.close()\n")],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    FileJournal.open(tmp_path, lock_wait_ms=10_000).close()
    assert time.monotonic() - start >= 0.1, "it did not wait for the holder"
    assert holder.wait(timeout=10) == 0


def refund_gate(d):
    gate = Interlock(d)
    payments = Payments.create(d / "payments.json", "2")
    payments.add_order("order_881", 10_000)

    @gate.effect(lookup=lambda order, amount, effect_id: payments.find_by_reference(effect_id))
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    return gate, refund


def test_a_torn_tail_is_refused_then_repaired(tmp_path):
    d = tmp_path / "j"
    gate, refund = refund_gate(d)
    assert refund("order_881", 2000).status == COMMITTED
    gate.close()
    path = d / "journal.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"torn')
    with pytest.raises(TornTail):
        Interlock(d)
    report = FileJournal.repair(d)
    assert report.torn_offset == len(whole) and report.torn_bytes == 6
    assert report.saved_to == d / f"journal.torn-{len(whole)}"
    assert report.saved_to is not None and report.saved_to.read_bytes() == b'{"torn'
    assert path.read_bytes() == whole
    with Interlock(d) as again:
        assert again.verify().ok
    assert FileJournal.repair(d).torn_offset is None  # nothing left to repair


@pytest.fixture
def umask_zero():
    """The loosest umask: nothing the journal creates may rely on it."""
    old = os.umask(0)
    yield
    os.umask(old)


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_what_the_journal_creates_is_owner_only(tmp_path, umask_zero):
    d = tmp_path / "deep" / ".interlock"
    gate, refund = refund_gate(d)
    assert refund("order_881", 2000).status == COMMITTED
    gate.close()
    assert mode(tmp_path / "deep") == 0o700 and mode(d) == 0o700
    (d / "journal.jsonl").write_bytes((d / "journal.jsonl").read_bytes() + b"{")
    saved = FileJournal.repair(d).saved_to
    assert saved is not None
    assert {p.name: mode(p) for p in d.iterdir()} == {
        "journal.jsonl": 0o600, "journal.lock": 0o600, "journal.format": 0o600,
        "payments.json": 0o600, saved.name: 0o600}


def test_an_existing_directory_keeps_its_owners_mode(tmp_path, umask_zero):
    d = tmp_path / "shared"
    d.mkdir(0o750)
    Interlock(d).close()
    assert mode(d) == 0o750
    assert mode(d / "journal.format") == 0o600 and mode(d / "journal.lock") == 0o600


def test_a_new_journal_records_its_format_version(tmp_path):
    Interlock(tmp_path / "new").close()
    assert (tmp_path / "new" / "journal.format").read_text() == "interlock-journal 1\n"


@pytest.mark.parametrize("text", ["interlock-journal 2\n", "interlock-journal one\n"])
def test_a_newer_or_unknown_format_version_is_refused(tmp_path, text):
    d = tmp_path / "j"
    d.mkdir()
    (d / "journal.format").write_text(text)
    with pytest.raises(UnknownFormat):
        Interlock(d)
    assert not (d / "journal.jsonl").exists() and (d / "journal.format").read_text() == text
    # Nor does repair cut a newer journal by this version's rules.
    (d / "journal.jsonl").write_text("not lines")
    with pytest.raises(UnknownFormat):
        FileJournal.repair(d)
    assert (d / "journal.jsonl").read_text() == "not lines"


def test_durable_appends_are_synced_and_a_closed_folder_refuses(tmp_path):
    j = FileJournal.open(tmp_path)
    j.file_append("journal.jsonl", 0, b"a\n")
    j.file_append("journal.jsonl", 2, b"b\n")
    j.file_sync("journal.jsonl")
    j.file_sync("journal.jsonl")  # nothing new: no second fdatasync
    assert j.fsyncs == 1
    j.close()
    from interlock.journal import StorageError

    with pytest.raises(StorageError, match="closed"):
        j.file_size("journal.jsonl")
