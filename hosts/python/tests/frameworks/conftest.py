"""The framework tests (issue 15): ``rows`` (the shared world of the four rows) importable
from every test here, and a ``world`` fixture (a new refund case in tmp_path)."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rows import World  # noqa: E402 - needs the path above


@pytest.fixture
def world(tmp_path):
    """A new refund case at tier "1+lookup" (order_881 paid $100, nothing refunded)."""
    return World.create(tmp_path / "world")
