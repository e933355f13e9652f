import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VECTORS = REPO / "tests" / "conformance"

sys.path.insert(0, str(HERE))  # conformance_driver, sql_backends
# The framework tests' shared modules (rows: the world of the original's four rows, the
# workers). One conftest for the whole tree: a second would shadow this one's names.
sys.path.insert(0, str(HERE / "frameworks"))
# The built-in targets' shared modules (worlds: the real services; hosts: the two hosts).
sys.path.insert(0, str(HERE / "targets"))

from sql_backends import Cluster, PostgresBackend, SqliteBackend  # noqa: E402 - needs the path above


def find_cli():
    """The CLI binary: $INTERLOCK_CLI, else the cargo build output (debug, then release)."""
    env = os.environ.get("INTERLOCK_CLI")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    for profile in ("debug", "release"):
        p = target / profile / "interlock"
        if p.is_file():
            return p
    found = shutil.which("interlock")
    return Path(found) if found else None


@pytest.fixture
def cli():
    path = find_cli()
    if path is None or not path.is_file():
        if os.environ.get("INTERLOCK_REQUIRE_CLI"):
            pytest.fail("INTERLOCK_REQUIRE_CLI is set but the CLI was not found "
                        "(cargo build -p interlock-cli, or set INTERLOCK_CLI)")
        pytest.skip("the CLI binary was not found (cargo build -p interlock-cli, or set INTERLOCK_CLI)")
    return path


def pytest_sessionstart(session):
    # test.sh runs the tests against the installed wheel, never the source tree.
    if os.environ.get("INTERLOCK_EXPECT_INSTALLED"):
        import interlock

        assert "site-packages" in interlock.__file__, f"testing {interlock.__file__}, not the wheel"


@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL cluster for the session (scripts/postgres.sh), stopped at
    the end; the PostgreSQL tests are skipped, saying why, only when PostgreSQL is not
    installed."""
    why = Cluster.installed()
    if why is not None:
        pytest.skip(f"PostgreSQL tests skipped: {why}")
    cluster = Cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path):
    """Each shared backend in turn: ``backend.fresh()`` is the URL of a new journal."""
    if request.param == "sqlite":
        return SqliteBackend(tmp_path)
    return PostgresBackend(request.getfixturevalue("pg_cluster"))


@pytest.fixture
def world(tmp_path):
    """A new refund case for the framework tests, at tier "1+lookup" (order_881 paid $100,
    nothing refunded): tests/frameworks/rows.py."""
    from rows import World

    return World.create(tmp_path / "world")


# -- the built-in targets' tests (tests/targets): a real service and a host (Python or the CLI)


@pytest.fixture(params=["python", "cli"])
def host_kind(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def make_world(request: Any, tmp_path: Path) -> Iterator[Any]:
    made: List[Any] = []

    def make(kind: str) -> Any:
        from worlds import GitWorld, PgWorld, SmtpWorld

        if kind == "postgres":
            w: Any = PgWorld(request.getfixturevalue("pg_cluster"))
        elif kind == "git":
            w = GitWorld(tmp_path)
        else:
            w = SmtpWorld(tmp_path)
        made.append(w)
        return w

    yield make
    for w in made:
        if hasattr(w, "stop"):
            w.stop()


@pytest.fixture
def make_host(request: Any, tmp_path: Path, host_kind: str) -> Iterator[Any]:
    made: List[Any] = []

    def make(world: Any, definition: Dict[str, Any], lease: bool = True) -> Any:
        from hosts import LEASE, CliHost, PythonHost

        journal = tmp_path / f"journal-{len(made)}"
        if host_kind == "python":
            h: Any = PythonHost(journal, world, definition)
        else:
            h = CliHost(request.getfixturevalue("cli"), journal, world, definition)
        made.append(h)
        if lease:
            h.lease(LEASE)
        return h

    yield make
    for h in made:
        h.close()
