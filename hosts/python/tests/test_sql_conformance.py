"""Every vector in tests/conformance/ through the one conformance runner, as
test_conformance.py plays them, but over this host's SQLite and PostgreSQL journals (a new
journal per vector). The runner checks each vector's expectations and its journal pin: a
SQL journal's entries in append order, each followed by a newline, must be the bytes every
host's file journal holds. Vectors that act on a journal file (tear, reopen, repair) are
skipped by the runner, saying so."""

import pytest

import conformance_driver as cd
from conftest import VECTORS

ALL = cd.load_dir(VECTORS)
PINS = (VECTORS / cd.PINS).read_text()


@pytest.mark.parametrize("path,vector", ALL, ids=[v["id"] for _, v in ALL])
def test_vector(path, vector, tmp_path, backend):
    report = cd.run(vector, tmp_path, pins=PINS, journal_url=backend.fresh())
    if report.skipped is not None:
        assert report.skipped.strip(), f"{vector['id']} is skipped without a reason"
        pytest.skip(report.skipped)
    assert not report.failures, f"{vector['id']} ({vector['title']}) on {backend.name}:\n  " + "\n  ".join(
        report.failures)
    assert not (tmp_path / "journal.jsonl").exists(), "the run went to the SQL journal, not a file"
