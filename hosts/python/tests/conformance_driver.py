"""This host's driver of the conformance runner (tests/conformance/runner, the one
interpreter of the vectors, a component every host runs). What is here is this host's own:
gate instances on wasmtime-py over the Python file journal (or a SQLite or PostgreSQL one,
given its URL), a fake clock, and the file operations ``tear_journal``, ``reopen`` and
``repair`` act on. The step language, the world, the crash points, the expectations and the
pins are the runner's. A SQL journal's bytes, for the pins, are its entries in append order
(``ordinal``), each followed by a newline; the runner skips the vectors that act on a file.

The runner imports the gate's own interfaces (``gate``, and ``tools`` for the tool-gating
vectors); each call is forwarded to the current worker's instance as it is (wasmtime-py
gives a result as the runner's import takes it back). Crash points and claim waits are the
gate's (``crash-at``, ``recover-waiting``), forwarded like every other call.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from wasmtime import Store
from wasmtime.component import Linker, Record, Variant

from interlock.clock import FakeClock
from interlock.gate import GateHost, JournalRef, engine, load_component
from interlock.journal import JOURNAL_FILE, FileJournal, JournalFileError, Storage
from interlock.sql_journal import open_url

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
RUNNER_WASM = Path(os.environ.get("INTERLOCK_CONFORMANCE_WASM") or REPO / "dist" / "conformance_runner.wasm")
PINS = "journal-pins.json"
HOST = "python"

# The gate's functions (wit/gate.wit), forwarded to the current worker as they are.
GATE_CALLS = ("effect-id-of", "submit", "resume", "cancel", "recover-waiting", "crash-at", "open-effects",
              "recover", "set-routes", "defaults", "send-timeout-ms", "standing-lease-name",
              "grant-standing-lease", "set-strict-authority", "standing-notice", "grant-lease", "revoke-lease",
              "approve", "revoke-approval", "confirm", "receipt", "check-receipt", "verify",
              "set-approval-rules", "inbox", "decide")
# The tool-gating session (wit/tools.wit), which the tool-gating vectors drive.
TOOLS_CALLS = ("start", "check-tools", "call", "recover", "resume", "cancel")


def load_dir(d: Path) -> List[Tuple[Path, Dict[str, Any]]]:
    """Every vector in ``d`` (sorted by file name), except the pins file."""
    return [(p, json.loads(p.read_text())) for p in sorted(d.glob("*.json")) if p.name != PINS]


@dataclass
class Report:
    id: str
    skipped: Optional[str]
    failures: List[str]
    journal_sha256: str
    refunded_cents: int
    refund_records: int
    tasks: Dict[str, Dict[str, Any]]


class Driver:
    """One run's world as this host keeps it: the journal (a directory, or a SQL journal's
    URL), the fake clock, and the worker processes (gate instances), the current one
    answering the runner's gate."""

    def __init__(self, workdir: Path, note: Optional[Callable[[Dict[str, Any]], None]] = None,
                 journal_url: Optional[str] = None):
        self.dir = workdir
        self.sql: Optional[Storage] = None
        if journal_url is not None:
            self.sql = open_url(journal_url)
        self.journal = JournalRef(self.sql if self.sql is not None else FileJournal.open(workdir))
        self.clock = FakeClock(0)
        self.workers: List[GateHost] = []
        self.current: Optional[int] = None
        self.note = note

    def _worker(self) -> GateHost:
        if self.current is None:
            raise RuntimeError("the runner called the gate with no worker alive")
        return self.workers[self.current]

    def forward(self, name: str) -> Callable[..., Any]:
        def call(_store: Store, *args: Any) -> Any:
            return self._worker().raw(name, *args)
        return call

    def admin(self) -> GateHost:
        """An instance over the run's storage, its journal not opened (repair, the pins)."""
        return GateHost(self.journal, self.clock, open=False)

    # -- driver

    def new_worker(self, _s: Store) -> int:
        self.workers.append(GateHost(self.journal, self.clock))
        self.current = len(self.workers) - 1
        return len(self.workers)

    def use_worker(self, _s: Store, worker: int) -> None:
        if not 1 <= worker <= len(self.workers):
            raise RuntimeError(f"no worker {worker}")
        self.current = worker - 1

    def end_workers(self, _s: Store) -> None:
        self.current = None

    def now_ms(self, _s: Store) -> int:
        return self.clock.now_ms()

    def advance_ms(self, _s: Store, ms: int) -> None:
        self.clock.advance(ms)

    def journal_bytes(self, _s: Store) -> bytes:
        if self.sql is not None:
            # The entries in append order, each followed by a newline: a file's bytes.
            admin = self.admin()
            admin.open_journal()
            return "".join(e + "\n" for e in admin.entries_in_order()).encode()
        path = self.dir / JOURNAL_FILE
        return path.read_bytes() if path.exists() else b""

    def tear_journal(self, _s: Store, n: int) -> Any:
        path = self.dir / JOURNAL_FILE
        try:
            os.truncate(path, max(0, path.stat().st_size - n))
        except OSError as e:
            return f"cannot tear {path}: {e}"
        return None

    def reopen_journal(self, _s: Store) -> Any:
        # Closed under every instance (the folder's lock let go), then opened as a new
        # process would: the journal opened over it says whether it is whole.
        self.journal.close()
        try:
            self.journal.replace(FileJournal.open(self.dir))
            self.admin().open_journal()
        except JournalFileError as e:
            return Variant(e.case, str(e))
        return None

    def repair_journal(self, _s: Store) -> Any:
        try:
            self.admin().repair_journal()
        except JournalFileError as e:
            return str(e)
        return None

    def note_event(self, _s: Store, event: str) -> None:
        if self.note is not None:
            self.note(json.loads(event))


def _linker(driver: Driver) -> Linker:
    linker = Linker(engine())
    with linker.root() as root:
        with root.add_instance("interlock:gate/gate@0.1.0") as g:
            for name in GATE_CALLS:
                g.add_func(name, driver.forward("gate." + name))
        with root.add_instance("interlock:gate/tools@0.1.0") as t:
            for name in TOOLS_CALLS:
                t.add_func(name, driver.forward("tools." + name))
        with root.add_instance("interlock:conformance/driver@0.1.0") as d:
            d.add_func("new-worker", driver.new_worker)
            d.add_func("use-worker", driver.use_worker)
            d.add_func("end-workers", driver.end_workers)
            d.add_func("now-ms", driver.now_ms)
            d.add_func("advance-ms", driver.advance_ms)
            d.add_func("journal-bytes", driver.journal_bytes)
            d.add_func("tear-journal", driver.tear_journal)
            d.add_func("reopen-journal", driver.reopen_journal)
            d.add_func("repair-journal", driver.repair_journal)
            d.add_func("note", driver.note_event)
    return linker


def _export(instance: Any, store: Store, name: str) -> Any:
    iface = instance.get_export_index(store, "interlock:conformance/runner@0.1.0")
    idx = instance.get_export_index(store, name, iface)
    func = instance.get_func(store, idx) if idx is not None else None
    if func is None:
        raise RuntimeError(f"the conformance runner lacks {name!r}")
    return func


def run(vector: Dict[str, Any], workdir: Path, pins: Optional[str] = None,
        note: Optional[Callable[[Dict[str, Any]], None]] = None,
        journal_url: Optional[str] = None) -> Report:
    """Plays ``vector`` in ``workdir`` (an empty folder: the journal goes there, unless
    ``journal_url`` names a new SQLite or PostgreSQL journal). With ``pins``
    (journal-pins.json as text) the runner compares the journal with its pin."""
    driver = Driver(workdir, note, journal_url)
    store = Store(engine())
    instance = _linker(driver).instantiate(store, load_component(RUNNER_WASM))
    driver.clock.advance(_export(instance, store, "start-ms")(store))
    options = _Options(HOST, file_journal=driver.sql is None, check_pin=pins is not None)
    result = _export(instance, store, "run")(store, json.dumps(vector), pins or "{}", options)
    if isinstance(result, str):  # the runner's err: it could not play the vector
        raise RuntimeError(result)
    driver.journal.close()
    return Report(
        id=result.id,
        skipped=result.skipped,
        failures=list(result.failures),
        journal_sha256=getattr(result, "journal-sha256"),
        refunded_cents=getattr(result, "refunded-cents"),
        refund_records=getattr(result, "refund-records"),
        tasks=json.loads(result.tasks),
    )


class _Options(Record):
    """The runner's ``options`` record."""

    def __init__(self, host: str, file_journal: bool, check_pin: bool):
        # wasmtime-py names a record's fields as WIT spells them.
        self.host = host
        setattr(self, "file-journal", file_journal)
        setattr(self, "check-pin", check_pin)
