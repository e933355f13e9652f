"""Every vector in tests/conformance/ through the conformance runner (the one interpreter
every host runs; conformance_driver.py is this host's side of it) with the Python file
journal. The runner checks each vector's expectations and its journal pin (the bytes every
host writes). Skip key: ``python``."""

import pytest

import conformance_driver as cd
from conftest import VECTORS

ALL = cd.load_dir(VECTORS)
PINS = (VECTORS / cd.PINS).read_text()


def test_the_vectors_are_there_and_named_by_their_files():
    assert ALL, f"no vectors in {VECTORS}"
    for path, v in ALL:
        assert v["id"] == path.stem, f"{path.name}: id {v['id']} differs from the file name"


@pytest.mark.parametrize("path,vector", ALL, ids=[v["id"] for _, v in ALL])
def test_vector(path, vector, tmp_path):
    report = cd.run(vector, tmp_path, pins=PINS)
    if report.skipped is not None:
        assert report.skipped.strip(), f"{vector['id']} is skipped without a reason"
        pytest.skip(report.skipped)
    assert not report.failures, f"{vector['id']} ({vector['title']}):\n  " + "\n  ".join(report.failures)
