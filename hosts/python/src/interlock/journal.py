"""The storage under the journal (``interlock:gate/storage``, wit/storage.wit): this host
stores and reads bytes; every rule of the journal (its format, index, torn tails, repair,
compare-and-append) runs inside the gate component (adapters/journal), which opens it with
``journal-admin.open``.

:class:`FileJournal` is a journal folder on disk: held with ``flock`` on ``journal.lock``
for its life (one writer per folder; the CLI takes the same lock), files created owner-only
(0600) and a created folder owner-only (0700), appends made only at the length the caller
names, ``fdatasync`` shared among threads, whole files written by rename. The SQL storages
are in :mod:`interlock.sql_journal`.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from wasmtime.component import Variant

from .errors import InterlockError

JOURNAL_FILE = "journal.jsonl"
LOCK_FILE = "journal.lock"
DIR_MODE = 0o700
FILE_MODE = 0o600
#: How long opening a folder waits for another writer's lock, and how often it looks (ms).
LOCK_WAIT_MS = 5_000
LOCK_POLL_MS = 20


class JournalFileError(InterlockError):
    """The journal could not be opened or used. ``case`` is the WIT ``journal-error`` case
    (``conflict``, ``io``, ``corrupt``, ``torn-tail``, ``other``); the text is the
    component's (or, for the folder's lock, this host's)."""

    case = "other"


class JournalIOError(JournalFileError):
    case = "io"


class Corrupt(JournalFileError):
    """A complete line of the journal is not a valid entry."""

    case = "corrupt"


class TornTail(JournalFileError):
    """The journal ends with a partial line: :meth:`FileJournal.repair` saves it aside."""

    case = "torn-tail"


class UnknownFormat(JournalFileError):
    """The journal is of a newer (or unreadable) format version: nothing read or written."""


class Conflict(JournalFileError):
    """Compare-and-append lost to another writer."""

    case = "conflict"


class Locked(JournalFileError):
    """Another writer, in this process or another (the CLI included), still holds the
    folder after ``waited_ms``."""

    def __init__(self, directory: Path, waited_ms: int = 0):
        self.dir = directory
        self.waited_ms = waited_ms
        waited = f", still after waiting {waited_ms} ms" if waited_ms else ""
        super().__init__(
            f"journal directory {directory} is locked by another writer ({LOCK_FILE} is held)"
            f"{waited}; a file journal has one writer per directory: to run several workers, "
            "share a SQLite journal on one machine (sqlite:///path/to/journal.db) or a "
            "PostgreSQL journal across machines (postgres://user@host/db)"
        )


_CASES = {"conflict": Conflict, "io": JournalIOError, "corrupt": Corrupt, "torn-tail": TornTail,
          "other": UnknownFormat}


def journal_error(v: Variant) -> JournalFileError:
    """The WIT ``journal-error`` that opening or repairing answered, as this package's
    exception (``other`` is there a format version this host cannot read)."""
    return _CASES.get(v.tag, JournalFileError)(str(v.payload))


class StorageError(Exception):
    """A storage call's WIT ``storage-error`` (``conflict``, ``unexpected-changes``,
    ``io``, ``unsupported``), handed back to the component as it is."""

    def __init__(self, case: str, payload: Any):
        super().__init__(f"{case}: {payload}")
        self.variant = Variant(case, payload)


@dataclass
class RepairReport:
    torn_offset: Optional[int]
    torn_bytes: int
    saved_to: Optional[Path]

    def __str__(self) -> str:
        if self.torn_offset is None:
            return f"{JOURNAL_FILE} ends with a complete line: nothing to repair"
        return (f"saved {self.torn_bytes} torn bytes from offset {self.torn_offset} to "
                f"{self.saved_to} and truncated {JOURNAL_FILE} to {self.torn_offset} bytes")


class Storage:
    """What a gate instance's journal is stored in. ``backend`` is the WIT
    ``journal-admin.backend`` the component opens over it; the calls of the other kind
    answer ``unsupported``."""

    backend = "file"
    name = "journal"
    commits = durable_commits = 0
    #: Its calls wait on a disk or a database (an fsync, a commit): the async APIs make
    #: gate calls over it in a worker thread, never on the event loop.
    blocking = True

    def _no_files(self, *args: Any, **kwargs: Any) -> Any:
        raise StorageError("unsupported", "this journal is a SQL journal: it has no files")

    file_size = file_read = file_append = file_sync = file_truncate = file_replace = file_create = _no_files

    def sql_batch(self, statements: List[Any], write: bool, durable: bool) -> List[Any]:
        raise StorageError("unsupported", "this journal is a file journal: it runs no SQL")

    def close(self) -> None:
        pass

    def _count(self, write: bool, durable: bool) -> None:
        if write:
            self.commits += 1
            self.durable_commits += int(durable)

    def __enter__(self) -> "Storage":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(d: Path) -> None:
    """Creates ``d`` and its missing parents owner-only, whatever the umask."""
    missing = []
    while not d.is_dir():
        missing.append(d)
        d = d.parent
    for m in reversed(missing):
        try:
            m.mkdir(DIR_MODE)
        except FileExistsError:
            continue  # made by another opener: its mode stands
        os.chmod(m, DIR_MODE)
        _sync_dir(m.parent)


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


class _Open:
    def __init__(self, fd: int, length: int):
        self.fd = fd
        self.len = length
        self.synced = length


class FileJournal(Storage):
    """One journal folder, locked for as long as it is open. The gate instances of a
    process share one: each call holds its lock, and an append at a stale length is
    ``conflict``."""

    def __init__(self, directory: Path, lock_fd: int):
        self.dir = directory
        self.name = str(directory)
        self._lock_fd: Optional[int] = lock_fd
        self._mutex = threading.Lock()
        self._files: Dict[str, _Open] = {}
        self._poisoned: Optional[str] = None
        self.fsyncs = 0

    @classmethod
    def open(cls, directory: Union[str, "os.PathLike[str]"],
             lock_wait_ms: Optional[int] = None) -> "FileJournal":
        """The folder (created owner-only, with missing parents), locked: waits up to
        ``lock_wait_ms`` (default 5 s; 0: not at all) for another writer's lock, then
        raises :class:`Locked`."""
        d = Path(directory)
        wait_ms = LOCK_WAIT_MS if lock_wait_ms is None else lock_wait_ms
        try:
            _make_dirs(d)
            fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as e:
            raise JournalIOError(f"journal I/O error: {e}") from None
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return cls(d, fd)
            except OSError as e:
                held = e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
                if held and time.monotonic() < deadline:
                    time.sleep(LOCK_POLL_MS / 1000)
                    continue
                os.close(fd)
                if held:
                    raise Locked(d, wait_ms) from None
                raise JournalIOError(f"journal I/O error: {e}") from None

    @staticmethod
    def repair(directory: Union[str, "os.PathLike[str]"]) -> RepairReport:
        """Saves a torn tail to ``journal.torn-<offset>`` (never overwriting) and cuts the
        journal to its last whole line (the component's ``journal-admin.repair``). Takes the
        folder's lock (:class:`Locked` if held)."""
        from .gate import repair

        with FileJournal.open(directory, 0) as files:
            report = repair(files)
        saved = getattr(report, "saved-to")
        return RepairReport(getattr(report, "torn-offset"), getattr(report, "torn-bytes"),
                            None if saved is None else Path(directory) / saved)

    def close(self) -> None:
        """Closes the files and lets the lock go (as a process exit would)."""
        with self._mutex:
            for o in self._files.values():
                os.close(o.fd)
            self._files.clear()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    @property
    def closed(self) -> bool:
        return self._lock_fd is None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer must not raise
            pass

    # -- the storage calls

    def _io(self, what: str, name: str, e: object) -> StorageError:
        return StorageError("io", f"cannot {what} {name} in {self.dir}: {e}")

    def _path(self, name: str) -> Path:
        if self._lock_fd is None:
            raise StorageError("io", f"journal {self.dir} is closed")
        if not name or "/" in name or name in (".", ".."):
            raise StorageError("io", f"{name!r} is not a file name of a journal folder")
        return self.dir / name

    def _opened(self, name: str, create: bool = False) -> Optional[_Open]:
        o = self._files.get(name)
        if o is None:
            path = self._path(name)
            try:
                fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), FILE_MODE)
            except FileNotFoundError:
                return None
            except OSError as e:
                raise self._io("open", name, e) from None
            try:
                if create:
                    _sync_dir(self.dir)
                o = self._files[name] = _Open(fd, os.fstat(fd).st_size)
            except OSError as e:
                os.close(fd)
                raise self._io("open", name, e) from None
        return o

    def _refuse_if_poisoned(self) -> None:
        if self._poisoned is not None:
            raise StorageError("io", f"journal {self.dir} refuses writes after an earlier failure "
                                     f"({self._poisoned}); reopen it")

    def file_size(self, name: str) -> Optional[int]:
        with self._mutex:
            o = self._opened(name)
            return None if o is None else o.len

    def file_read(self, name: str, offset: int, length: int) -> bytes:
        with self._mutex:
            o = self._opened(name)
            if o is None:
                raise StorageError("io", f"cannot read {name} in {self.dir}: no such file")
            fd, n = o.fd, max(0, min(o.len, offset + length) - offset)
            try:
                return os.pread(fd, n, offset) if n else b""
            except OSError as e:
                raise self._io("read", name, e) from None

    def file_append(self, name: str, at: int, data: bytes) -> None:
        with self._mutex:
            self._refuse_if_poisoned()
            o = self._opened(name, create=True)
            assert o is not None
            if o.len != at:
                raise StorageError("conflict", o.len)
            try:
                _write_all(o.fd, data, at)
            except OSError as e:
                try:  # nothing of a failed append may stay visible
                    os.ftruncate(o.fd, at)
                except OSError as cut:
                    self._poisoned = f"could not cut {name} back to {at} bytes: {cut}"
                raise self._io("append to", name, e) from None
            o.len = at + len(data)

    def file_sync(self, name: str) -> None:
        with self._mutex:
            self._refuse_if_poisoned()
            o = self._opened(name)
            if o is None or o.synced >= o.len:
                return
            fd, end = o.fd, o.len
        # Outside the lock: other threads append meanwhile; the next sync covers them.
        try:
            os.fdatasync(fd)
        except OSError as e:
            with self._mutex:
                # The kernel may have dropped dirty pages: cut back to the last good sync.
                self._poisoned = self._poisoned or f"fdatasync failed: {e}"
                try:
                    os.ftruncate(fd, o.synced)
                    o.len = o.synced
                except OSError:
                    pass
            raise self._io("sync", name, e) from None
        with self._mutex:
            self.fsyncs += 1
            o.synced = max(o.synced, end)

    def file_truncate(self, name: str, length: int) -> None:
        with self._mutex:
            o = self._opened(name)
            if o is None:
                raise StorageError("io", f"cannot truncate {name} in {self.dir}: no such file")
            try:
                os.ftruncate(o.fd, length)
                os.fsync(o.fd)
            except OSError as e:
                raise self._io("truncate", name, e) from None
            o.len = length
            o.synced = min(o.synced, length)

    def file_replace(self, name: str, data: bytes) -> None:
        with self._mutex:
            path, tmp = self._path(name), self._path(name + ".tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
                try:
                    os.fchmod(fd, FILE_MODE)
                    _write_all(fd, data, 0)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, path)
                _sync_dir(self.dir)
            except OSError as e:
                raise self._io("write", name, e) from None
            old = self._files.pop(name, None)  # the open handle is the old file's
            if old is not None:
                os.close(old.fd)

    def file_create(self, name: str, data: bytes) -> bool:
        with self._mutex:
            path = self._path(name)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, FILE_MODE)
            except FileExistsError:
                return False
            except OSError as e:
                raise self._io("create", name, e) from None
            try:
                os.fchmod(fd, FILE_MODE)  # the umask may have taken bits the owner needs
                _write_all(fd, data, 0)
                os.fsync(fd)
                _sync_dir(self.dir)
            except OSError as e:
                os.close(fd)
                raise self._io("create", name, e) from None
            self._files[name] = _Open(fd, len(data))
            return True


class MemoryJournal(Storage):
    """A file journal in memory (tests; checks that keep nothing): the same calls over
    buffers, shared by every gate instance given it."""

    blocking = False

    def __init__(self) -> None:
        self.name = "memory"
        self.files: Dict[str, bytearray] = {}
        self._mutex = threading.Lock()

    def file_size(self, name: str) -> Optional[int]:
        with self._mutex:
            f = self.files.get(name)
            return None if f is None else len(f)

    def file_read(self, name: str, offset: int, length: int) -> bytes:
        with self._mutex:
            if name not in self.files:
                raise StorageError("io", f"cannot read {name}: no such file")
            return bytes(self.files[name][offset:offset + length])

    def file_append(self, name: str, at: int, data: bytes) -> None:
        with self._mutex:
            f = self.files.setdefault(name, bytearray())
            if len(f) != at:
                raise StorageError("conflict", len(f))
            f += data

    def file_sync(self, name: str) -> None:
        pass

    def file_truncate(self, name: str, length: int) -> None:
        with self._mutex:
            if name not in self.files:
                raise StorageError("io", f"cannot truncate {name}: no such file")
            del self.files[name][length:]

    def file_replace(self, name: str, data: bytes) -> None:
        with self._mutex:
            self.files[name] = bytearray(data)

    def file_create(self, name: str, data: bytes) -> bool:
        with self._mutex:
            if name in self.files:
                return False
            self.files[name] = bytearray(data)
            return True
