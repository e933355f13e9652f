"""Every vector in tests/conformance/, through the same gate component as the CLI, ending
with the same outcomes, money and journal bytes (journal-pins.json)."""

import json

import pytest

import conformance_runner as cr
from conftest import VECTORS

ALL = cr.load_dir(VECTORS)
PINS = json.loads((VECTORS / cr.PINS).read_text())


def test_every_vector_is_run_or_skipped_with_a_reason():
    assert ALL, f"no vectors in {VECTORS}"
    for path, v in ALL:
        skip = (v.get("skip") or {}).get(cr.HOST)
        assert skip is None or (isinstance(skip, str) and skip.strip()), (
            f"{path.name}: a skip for {cr.HOST} must say why"
        )
        assert v["id"] == path.stem, f"{path.name}: id {v['id']} differs from the file name"
        assert skip is not None or v["id"] in PINS, f"{v['id']} has no journal pin"


@pytest.mark.parametrize("path,vector", ALL, ids=[v["id"] for _, v in ALL])
def test_vector(path, vector, tmp_path):
    reason = (vector.get("skip") or {}).get(cr.HOST)
    if reason:
        pytest.skip(reason)
    report = cr.run(vector, tmp_path)
    problems = list(report.failures)
    if report.journal_sha256 != PINS.get(vector["id"]):
        problems.append(
            f"journal sha256 {report.journal_sha256} differs from the pin "
            f"{PINS.get(vector['id'])} (the CLI's bytes)"
        )
    assert not problems, f"{vector['id']} ({vector['title']}):\n  " + "\n  ".join(problems)
