"""The file journal: the CLI's format, compare-and-append, fsync, the lock, torn tails."""

import json
import os
import stat
import subprocess
import sys
import time

import pytest

from interlock.journal import Conflict, Corrupt, FileJournal, InvalidEntry, Locked, TornTail


def entry(stream, seq, is_open=True, **extra):
    return json.dumps({"stream": stream, "seq": seq, "open": is_open, **extra}, separators=(",", ":"))


def test_append_read_and_reopen(tmp_path):
    j = FileJournal.open(tmp_path)
    j.append("effect:a", 0, [entry("effect:a", 0), entry("effect:a", 1)], True, True)
    j.append("lease:x", 0, [entry("lease:x", 0, False)], False, False)
    j.append("effect:a", 2, [entry("effect:a", 2, False)], False, False)
    assert j.fsyncs == 1
    j.sync()
    assert j.fsyncs == 2  # the non-durable appends made durable by one fdatasync
    assert j.read("effect:a", 1) == [entry("effect:a", 1), entry("effect:a", 2, False)]
    assert j.streams() == ["effect:a", "lease:x"] and j.open_streams() == []
    raw = (tmp_path / "journal.jsonl").read_bytes()
    assert raw == ("\n".join([entry("effect:a", 0), entry("effect:a", 1), entry("lease:x", 0, False),
                              entry("effect:a", 2, False)]) + "\n").encode()
    j.close()
    j = FileJournal.open(tmp_path)
    assert j.length("effect:a") == 3 and j.read("lease:x", 0) == [entry("lease:x", 0, False)]


def test_compare_and_append(tmp_path):
    j = FileJournal.open(tmp_path)
    j.append("s", 0, [entry("s", 0)], False, True)
    with pytest.raises(Conflict) as e:
        j.append("s", 0, [entry("s", 0)], False, True)
    assert e.value.actual == 1
    with pytest.raises(InvalidEntry):
        j.append("s", 1, [entry("s", 2)], False, True)  # seq must be its position
    assert j.length("s") == 1


def test_one_writer_per_directory(tmp_path):
    j = FileJournal.open(tmp_path)
    with pytest.raises(Locked) as e:
        FileJournal.open(tmp_path, lock_wait_ms=50)
    # It waited, then said how to run several writers.
    assert "still after waiting 50 ms" in str(e.value), e.value
    assert "sqlite:///" in str(e.value) and "postgres://" in str(e.value), e.value
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


def test_torn_tail_is_refused_then_repaired(tmp_path):
    j = FileJournal.open(tmp_path)
    j.append("s", 0, [entry("s", 0), entry("s", 1)], True, True)
    j.close()
    path = tmp_path / "journal.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole[:-5])
    with pytest.raises(TornTail) as e:
        FileJournal.open(tmp_path)
    first_line = len(entry("s", 0)) + 1
    assert (e.value.offset, e.value.bytes) == (first_line, len(whole) - 5 - first_line)
    report = FileJournal.repair(tmp_path)
    assert report.torn_offset == first_line
    assert (tmp_path / f"journal.torn-{first_line}").read_bytes() == whole[first_line:-5]
    assert FileJournal.open(tmp_path).length("s") == 1


def test_a_corrupt_line_is_reported_with_its_number(tmp_path):
    (tmp_path / "journal.jsonl").write_text(entry("s", 0) + "\n" + "not json\n")
    with pytest.raises(Corrupt) as e:
        FileJournal.open(tmp_path)
    assert e.value.line == 2


@pytest.fixture
def umask_zero():
    """The loosest umask: nothing the journal creates may rely on it."""
    old = os.umask(0)
    yield
    os.umask(old)


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def test_what_the_journal_creates_is_owner_only(tmp_path, umask_zero):
    d = tmp_path / "deep" / "journal"
    j = FileJournal.open(d)
    j.append("s", 0, [entry("s", 0), entry("s", 1)], True, True)
    j.close()
    assert mode(d) == 0o700
    assert mode(d / "journal.jsonl") == 0o600 and mode(d / "journal.lock") == 0o600
    path = d / "journal.jsonl"
    path.write_bytes(path.read_bytes()[:-3])
    report = FileJournal.repair(d)
    assert mode(report.saved_to) == 0o600
    assert sorted(mode(p) for p in d.iterdir()) == [0o600] * 4  # with journal.format


def test_an_existing_directory_keeps_its_owners_mode(tmp_path, umask_zero):
    d = tmp_path / "shared"
    d.mkdir(0o750)
    FileJournal.open(d).close()
    assert mode(d) == 0o750
    assert mode(d / "journal.jsonl") == 0o600 and mode(d / "journal.lock") == 0o600


def test_an_interlock_and_its_simulated_service_leave_only_owner_only_files(tmp_path, umask_zero):
    from interlock import COMMITTED, Interlock
    from interlock.payments_sim import Payments

    d = tmp_path / ".interlock"
    gate = Interlock(d, standing_lease=True)
    payments = Payments.create(d / "payments.json", "2")
    payments.add_order("order_881", 10_000)

    @gate.effect(lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    assert refund("order_881", 2000).status == COMMITTED
    gate.close()
    assert mode(d) == 0o700
    assert {p.name: mode(p) for p in d.iterdir()} == {
        "journal.jsonl": 0o600, "journal.lock": 0o600, "journal.format": 0o600,
        "payments.json": 0o600}


def test_a_new_journal_records_its_format_version_and_an_old_one_is_version_1(tmp_path):
    d = tmp_path / "new"
    FileJournal.open(d).close()
    assert (d / "journal.format").read_text() == "interlock-journal 1\n"
    old = tmp_path / "old"
    old.mkdir()
    (old / "journal.jsonl").write_text(entry("s", 0) + "\n")
    j = FileJournal.open(old)
    assert j.length("s") == 1
    j.close()
    assert not (old / "journal.format").exists()


@pytest.mark.parametrize("text,want", [
    ("interlock-journal 2\n",
     "journal format version 2 is newer than this reader understands (1); upgrade Interlock"),
    ("interlock-journal one\n", "journal format file journal.format is not valid"),
])
def test_a_newer_or_unknown_format_version_is_refused(tmp_path, text, want):
    from interlock.journal import UnknownFormat

    d = tmp_path / "j"
    d.mkdir()
    (d / "journal.format").write_text(text)
    with pytest.raises(UnknownFormat) as e:
        FileJournal.open(d)
    assert str(e.value).startswith(want)
    assert not (d / "journal.jsonl").exists()
    assert (d / "journal.format").read_text() == text
    # Nor does repair cut a newer journal by this version's rules.
    (d / "journal.jsonl").write_text("not lines")
    with pytest.raises(UnknownFormat):
        FileJournal.repair(d)
    assert (d / "journal.jsonl").read_text() == "not lines"
