"""The one journal contract suite (dist/journal_contract.wasm, adapters/journal/contract),
run over this host's storage: every case, each on a fresh folder or a new database, over
the file storage, memory, SQLite and PostgreSQL (a throwaway cluster, scripts/postgres.sh;
skipped, saying why, only when it is not installed). The suite imports only
``interlock:gate/storage``: the same storage calls the gate makes."""

import os
from pathlib import Path
from typing import Any, List

import pytest
from wasmtime import Store
from wasmtime.component import Linker

from interlock.gate import STORAGE_INTERFACE, JournalRef, engine, load_component, storage_imports
from interlock.journal import FileJournal, MemoryJournal
from interlock.sql_journal import open_url

SUITE = "interlock:journal-contract/suite@0.1.0"
REPO = Path(__file__).resolve().parents[3]
# A test-only component (not in the wheel): scripts/build-wasm.sh builds it.
CONTRACT_WASM = Path(os.environ.get("INTERLOCK_JOURNAL_CONTRACT_WASM") or REPO / "dist" / "journal_contract.wasm")


class Suite:
    """The contract component over one storage at a time (``storage.journal``)."""

    def __init__(self) -> None:
        self.storage = JournalRef(None)
        linker = Linker(engine())
        with linker.root() as root:
            with root.add_instance(STORAGE_INTERFACE) as st:
                for name, func in storage_imports(self.storage).items():  # a gate's, exactly
                    st.add_func(name, func)
        self.store = Store(engine())
        instance = linker.instantiate(self.store, load_component(CONTRACT_WASM))
        iface = instance.get_export_index(self.store, SUITE)
        self.funcs: Any = {}
        for n in ("cases", "run"):
            idx = instance.get_export_index(self.store, n, iface)
            assert idx is not None, f"the suite lacks {n}"
            self.funcs[n] = instance.get_func(self.store, idx)

    def cases(self, kind: str) -> List[str]:
        return list(self.funcs["cases"](self.store, kind))

    def run(self, name: str, kind: str, storage: Any) -> None:
        self.storage.replace(storage)
        try:
            failure = self.funcs["run"](self.store, name, kind)
        finally:
            self.storage.close()
        assert failure is None, f"{kind} {name}: {failure}"


@pytest.fixture(scope="module")
def suite():
    return Suite()


def test_every_case_over_a_folder(suite, tmp_path):
    cases = suite.cases("file")
    assert cases, "the suite has no file cases"
    for i, name in enumerate(cases):
        suite.run(name, "file", FileJournal.open(tmp_path / str(i)))


def test_every_case_in_memory(suite):
    for name in suite.cases("file"):
        suite.run(name, "file", MemoryJournal())


def test_every_case_over_sqlite(suite, tmp_path):
    cases = suite.cases("sqlite")
    assert cases
    for i, name in enumerate(cases):
        suite.run(name, "sqlite", open_url(f"sqlite://{tmp_path}/{i}/journal.db"))


def test_every_case_over_postgres(suite, pg_cluster):
    cases = suite.cases("postgres")
    assert cases
    for name in cases:
        suite.run(name, "postgres", open_url(pg_cluster.journal_url()))


def test_the_suite_fails_a_storage_that_breaks_its_word(suite, tmp_path):
    """A storage whose append ignores ``at`` (a lost compare-and-append) fails the suite."""

    class Careless(FileJournal):
        def file_append(self, name: str, at: int, data: bytes) -> None:
            size = self.file_size(name) or 0
            super().file_append(name, size, data)

    failures = []
    for i, name in enumerate(suite.cases("file")):
        d = Path(tmp_path / str(i))
        store = FileJournal.open(d)
        assert store._lock_fd is not None
        careless = Careless(d, os.dup(store._lock_fd))
        store.close()
        try:
            suite.run(name, "file", careless)
        except AssertionError as e:
            failures.append(str(e))
    assert failures, "a storage that appends anywhere passed every case"
