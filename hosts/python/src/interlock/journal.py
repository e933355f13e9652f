"""The file backend of ``interlock:gate/journal`` (wit/journal.wit), byte for byte the
format of adapters/file-journal (the Rust crate), so a journal written by one host is
read by any other.

A journal is a directory holding:

* ``journal.jsonl``: every stream interleaved, one entry per line: the entry text exactly
  as the gate produced it, then ``"\\n"``.
* ``journal.lock``: held with ``flock(LOCK_EX | LOCK_NB)`` for the life of a
  :class:`FileJournal`, so there is one writer per directory. The Rust side uses flock
  too, so the CLI and Python exclude each other.

A journal records what agents did and why: a directory this module creates is owner-only
(0700), and every file it creates is 0600, whatever the umask. A directory that already
exists keeps the mode its owner gave it.

Within a process, a :class:`FileJournal` may be used from several threads (several gate
instances on one journal): each call holds the journal's lock, so a compare-and-append
is one atomic step.

* ``journal.format``: the format version (``interlock-journal 1\\n``), written when the
  journal is created. A newer version is refused (:class:`UnknownFormat`), never guessed at.

Every rule about these bytes (entry heads, append validation, the scan with its torn-tail
and corruption checks, repair naming, the version and the error texts) is the
journal-format component's (adapters/journal-format, ``journal_format.wasm``), shared with
the Rust and Node hosts. This file does the I/O and keeps the index (byte offset and length
of each entry, per stream) the scan returns. Hash chains and verification are the gate's.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, TypeVar, Union, cast

from .errors import InterlockError

JOURNAL_FILE = "journal.jsonl"
LOCK_FILE = "journal.lock"
TORN_PREFIX = "journal.torn-"
FORMAT_FILE = "journal.format"
FORMAT_WASM = "journal_format.wasm"
FORMAT_INTERFACE = "interlock:journal-format/format@0.1.0"
DIR_MODE = 0o700
FILE_MODE = 0o600


class Journal(Protocol):
    """A backend of ``interlock:gate/journal`` (wit/journal.wit, ARCHITECTURE.md "The
    journal contract"): :class:`FileJournal`, and the shared ones in
    :mod:`interlock.sql_journal`. Every failure is a :class:`JournalFileError`, whose
    ``case`` is the WIT ``journal-error`` case the gate sees."""

    def append(self, stream: str, expected_len: int, entries: Sequence[str], durable: bool,
               is_open: bool) -> None: ...

    def read(self, stream: str, start: int) -> List[str]: ...

    def length(self, stream: str) -> int: ...

    def open_streams(self) -> List[str]: ...

    def streams(self) -> List[str]: ...

    def sync(self) -> None: ...

    def close(self) -> None: ...


class JournalFileError(InterlockError):
    """A journal file operation failed. ``case`` is the WIT ``journal-error`` case it maps
    to when the gate sees it (``conflict``, ``io``, ``corrupt``, ``torn-tail``, ``other``).
    An :class:`interlock.InterlockError`, like every error this package raises on purpose."""

    case = "other"


class Locked(JournalFileError):
    """Another writer, in this process or another (the CLI included), still holds the
    directory after ``waited_ms``. The text (the journal format's) names the shared
    backends, the way to run several writers."""

    def __init__(self, directory: Path, waited_ms: int = 0):
        self.dir = directory
        self.waited_ms = waited_ms
        super().__init__(_Format.call("locked-message", str(directory), waited_ms))


class JournalIOError(JournalFileError):
    case = "io"

    def __init__(self, detail: str):
        super().__init__(f"journal I/O error: {detail}")


# The texts of the format's errors are the journal-format component's (the same in every
# host): these classes carry its message and its fields.


class Corrupt(JournalFileError):
    """A complete line is not a valid entry; ``line`` is 1-based."""

    case = "corrupt"

    def __init__(self, line: int, detail: str, message: str):
        self.line = line
        self.detail = detail
        super().__init__(message)


class TornTail(JournalFileError):
    """The file ends with a partial line of ``bytes`` bytes at byte ``offset``."""

    case = "torn-tail"

    def __init__(self, offset: int, nbytes: int, message: str):
        self.offset = offset
        self.bytes = nbytes
        super().__init__(message)


class UnknownFormat(JournalFileError):
    """``journal.format`` names a newer format version (``version``), or is not a format
    file at all (``version`` None): nothing is read or written."""

    def __init__(self, version: Optional[int], message: str):
        self.version = version
        super().__init__(message)


class Conflict(JournalFileError):
    """Compare-and-append lost: the stream holds ``actual`` entries."""

    case = "conflict"

    def __init__(self, actual: int):
        self.actual = actual
        super().__init__(
            "compare-and-append conflict: the stream holds "
            f"{actual} entries, not the expected length"
        )


class InvalidEntry(JournalFileError):
    def __init__(self, message: str):
        super().__init__(message)


@dataclass
class RepairReport:
    torn_offset: Optional[int]
    torn_bytes: int
    saved_to: Optional[Path]

    def __str__(self) -> str:
        if self.torn_offset is None:
            return f"{JOURNAL_FILE} ends with a complete line: nothing to repair"
        return (
            f"saved {self.torn_bytes} torn bytes from offset {self.torn_offset} to "
            f"{self.saved_to} and truncated {JOURNAL_FILE} to {self.torn_offset} bytes"
        )


class _Format:
    """The journal-format component: one instance per process, one call at a time."""

    _instance: Optional["_Format"] = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        # Imported here: the gate module imports this one.
        from wasmtime import Store, WasmtimeError
        from wasmtime.component import Linker

        from .errors import GateTrap
        from .gate import engine, load_component, wasm_path

        path = wasm_path(FORMAT_WASM)
        self.store = Store(engine())
        try:
            instance = Linker(engine()).instantiate(self.store, load_component(path))
        except WasmtimeError as e:
            raise GateTrap(f"{FORMAT_WASM} does not instantiate: {e}") from e
        iface = instance.get_export_index(self.store, FORMAT_INTERFACE)
        self.funcs: Dict[str, Any] = {}
        for name in ("scan", "validate-append", "check-format-file", "format-file-text",
                     "torn-file-name", "complete-prefix", "lock-wait", "locked-message"):
            idx = instance.get_export_index(self.store, name, iface) if iface else None
            func = instance.get_func(self.store, idx) if idx is not None else None
            if func is None:
                raise GateTrap(f"{FORMAT_WASM} lacks the export {name!r}")
            self.funcs[name] = func

    @classmethod
    def call(cls, name: str, *args: Any) -> Any:
        """Calls an export; a WIT ``format-error`` is raised as this host's error."""
        from wasmtime.component import Variant

        with cls._lock:
            if cls._instance is None:
                cls._instance = _Format()
            r = cls._instance.funcs[name](cls._instance.store, *args)
        # A result whose two sides have the same Python type comes tagged.
        if isinstance(r, Variant) and r.tag in ("ok", "err"):
            if r.tag == "ok":
                return r.payload
            r = r.payload
        if hasattr(r, "kind") and hasattr(r, "message"):
            raise _format_error(r)
        return r


def _format_error(e: Any) -> JournalFileError:
    kind, message = e.kind, e.message
    if kind.tag == "corrupt":
        return Corrupt(kind.payload[0], kind.payload[1], message)
    if kind.tag == "torn-tail":
        return TornTail(kind.payload[0], kind.payload[1], message)
    if kind.tag == "invalid-entry":
        return InvalidEntry(message)
    return UnknownFormat(kind.payload if kind.tag == "newer-version" else None, message)


class _Index:
    def __init__(self) -> None:
        # stream -> [(offset, length)]; dicts keep first-append order.
        self.offsets: Dict[str, List[Tuple[int, int]]] = {}
        self.open: Dict[str, bool] = {}
        self.entries = 0

    def length(self, stream: str) -> int:
        return len(self.offsets.get(stream, ()))

    def push(self, stream: str, offset: int, length: int, is_open: bool) -> None:
        self.offsets.setdefault(stream, []).append((offset, length))
        self.open[stream] = is_open
        self.entries += 1


def _sync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create(path: Path, flags: int, exclusive: bool = False) -> Tuple[int, bool]:
    """Opens ``path``, creating it owner-only (an existing file keeps its mode): the file
    and whether this call created it. ``exclusive``: an existing file is an error."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        if exclusive:
            raise
        return os.open(path, flags), False
    try:
        os.fchmod(fd, FILE_MODE)  # the umask may have taken bits the owner needs
    except OSError:
        os.close(fd)
        raise
    return fd, True


def _make_dir(d: Path) -> None:
    """Creates the journal directory owner-only (its parents as the umask says)."""
    d.parent.mkdir(parents=True, exist_ok=True)
    try:
        d.mkdir(DIR_MODE)
    except FileExistsError:
        return  # someone else made it: their mode stands
    os.chmod(d, DIR_MODE)
    _sync_dir(d.parent if str(d.parent) else Path("."))


def _check_format(d: Path) -> None:
    """Checks ``journal.format`` under the lock, or writes it for a new journal (no
    journal.jsonl yet). A journal made before versions (journal.jsonl and no format file)
    is version 1 and is left as it is."""
    path = d / FORMAT_FILE
    if _check_existing_format(d) or (d / JOURNAL_FILE).exists():
        return
    # Written whole under a temporary name, then renamed: a crash never leaves a partial
    # format file. The directory sync after journal.jsonl's creation makes both durable.
    tmp = d / (FORMAT_FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        _write_all(fd, _Format.call("format-file-text").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _check_existing_format(d: Path) -> bool:
    """Checks ``journal.format`` if there is one (:class:`UnknownFormat` for a newer or
    unknown version); returns whether there was one."""
    try:
        text = (d / FORMAT_FILE).read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return False
    _Format.call("check-format-file", text)
    return True


def lock_wait() -> Tuple[int, int]:
    """How long opening a file journal waits by default for another writer's lock, and
    how often it tries again (ms): the journal format's."""
    wait, poll = _Format.call("lock-wait")
    return int(wait), int(poll)


def _lock(d: Path, wait_ms: int) -> int:
    """Takes ``d``'s lock, trying again for up to ``wait_ms`` while another writer holds it."""
    fd, _ = _create(d / LOCK_FILE, os.O_RDWR)
    _, poll_ms = lock_wait()
    deadline = time.monotonic() + wait_ms / 1000
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as e:
            held = e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
            if held and time.monotonic() < deadline:
                time.sleep(poll_ms / 1000)
                continue
            os.close(fd)
            if held:
                raise Locked(d, wait_ms) from None
            raise JournalIOError(str(e)) from None


def validate_append(entries: Sequence[str], stream: str, expected_len: int, is_open: bool) -> List[str]:
    """The journal format's check of an append batch (every backend runs it): entry i is one
    line whose ``stream``, ``seq`` and ``open`` are ``stream``, ``expected_len + i`` and
    ``is_open``; else :class:`InvalidEntry` with the format's text."""
    for i, entry in enumerate(entries):
        if not isinstance(entry, str):
            # The component's list<string> cannot carry it; its wording for the rest.
            raise InvalidEntry(
                f"invalid journal entry: entry {i} of the batch (seq {expected_len + i}): "
                "is not a string"
            )
    batch = list(entries)
    _Format.call("validate-append", batch, stream, expected_len, is_open)
    return batch


_Method = TypeVar("_Method", bound=Callable[..., object])


def _locked(method: _Method) -> _Method:
    @functools.wraps(method)
    def locked(self: Any, *args: object) -> object:
        with self._mutex:
            return method(self, *args)

    return cast(_Method, locked)  # the same signature: it only takes the lock


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class FileJournal:
    """An open, locked journal directory (see the module documentation)."""

    def __init__(self, directory: Path, fd: int, lock_fd: int, length: int, index: _Index):
        # Reentrant: an empty durable append syncs under the same lock.
        self._mutex = threading.RLock()
        self.dir = directory
        self._fd: Optional[int] = fd
        self._lock_fd: Optional[int] = lock_fd
        self._len = length
        self._index = index
        self._pending = False
        self.fsyncs = 0
        self._poisoned: Optional[str] = None

    @classmethod
    def open(cls, directory: Union[str, "os.PathLike[str]"],
             lock_wait_ms: Optional[int] = None) -> "FileJournal":
        """Opens (creating if needed) the journal in ``directory`` and takes its lock,
        waiting up to ``lock_wait_ms`` while another writer holds it (default: the journal
        format's, 5 s; 0: not at all). Raises :class:`Locked`, :class:`TornTail` or
        :class:`Corrupt`."""
        d = Path(directory)
        wait_ms = lock_wait()[0] if lock_wait_ms is None else lock_wait_ms
        try:
            if not d.is_dir():
                _make_dir(d)
            lock_fd = _lock(d, wait_ms)
        except OSError as e:
            raise JournalIOError(str(e)) from None
        try:
            _check_format(d)
            path = d / JOURNAL_FILE
            fd, created = _create(path, os.O_RDWR | os.O_APPEND)
            try:
                if created:
                    _sync_dir(d)  # a new file: make its existence durable once
                index, length = _scan(fd)
            except BaseException:
                os.close(fd)
                raise
        except OSError as e:
            os.close(lock_fd)
            raise JournalIOError(str(e)) from None
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(d, fd, lock_fd, length, index)

    @_locked
    def close(self) -> None:
        """Closes the file and releases the lock (as a process exit would)."""
        for attr in ("_fd", "_lock_fd"):
            fd = getattr(self, attr)
            if fd is not None:
                setattr(self, attr, None)
                os.close(fd)

    @property
    def closed(self) -> bool:
        return self._fd is None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer must not raise; close() is best effort here
            pass

    def _file(self) -> int:
        if self._fd is None:
            raise JournalIOError(f"journal {self.dir} is closed")
        return self._fd

    def _check_poisoned(self) -> None:
        if self._poisoned is not None:
            raise JournalIOError(
                f"journal {self.dir} refuses writes after an earlier failure "
                f"({self._poisoned}); reopen it"
            )

    @_locked
    def append(
        self, stream: str, expected_len: int, entries: Sequence[str], durable: bool, is_open: bool
    ) -> None:
        """Compare-and-append; one write, then one fdatasync when ``durable`` (which also
        makes every earlier append durable). On failure nothing of the append stays."""
        self._check_poisoned()
        fd = self._file()
        actual = self._index.length(stream)
        if actual != expected_len:
            raise Conflict(actual)
        if not entries:
            if durable:
                self.sync()
            return
        entries = validate_append(entries, stream, expected_len, is_open)
        parts = [entry.encode("utf-8") for entry in entries]
        batch = b"\n".join(parts) + b"\n"
        start = self._len
        try:
            _write_all(fd, batch)
        except OSError as e:
            self._roll_back(start)
            raise JournalIOError(str(e)) from None
        if durable:
            self.fsyncs += 1
            try:
                os.fdatasync(fd)
            except OSError as e:
                # After a failed fdatasync the kernel may have dropped dirty pages.
                self._roll_back(start)
                self._poisoned = self._poisoned or f"fdatasync failed: {e}"
                raise JournalIOError(str(e)) from None
            self._pending = False
        else:
            self._pending = True
        offset = start
        for raw in parts:
            self._index.push(stream, offset, len(raw), is_open)
            offset += len(raw) + 1
        self._len = offset

    @_locked
    def read(self, stream: str, start: int) -> List[str]:
        offsets = self._index.offsets.get(stream)
        if not offsets:
            return []
        fd = self._file()
        out = []
        for offset, length in offsets[start:]:
            try:
                raw = os.pread(fd, length, offset)
            except OSError as e:
                raise JournalIOError(str(e)) from None
            if len(raw) != length:
                raise JournalIOError(f"{JOURNAL_FILE} shrank under the journal at byte {offset}")
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                raise JournalIOError(
                    f"{JOURNAL_FILE} changed under the journal: entry at byte offset "
                    f"{offset} is no longer UTF-8: {e}"
                ) from None
        return out

    @_locked
    def length(self, stream: str) -> int:
        return self._index.length(stream)

    @_locked
    def open_streams(self) -> List[str]:
        return [s for s, is_open in self._index.open.items() if is_open]

    @_locked
    def streams(self) -> List[str]:
        return list(self._index.offsets)

    @_locked
    def sync(self) -> None:
        self._check_poisoned()
        if not self._pending:
            return
        self.fsyncs += 1
        try:
            os.fdatasync(self._file())
        except OSError as e:
            self._poisoned = self._poisoned or f"fdatasync failed: {e}"
            raise JournalIOError(str(e)) from None
        self._pending = False

    def _roll_back(self, length: int) -> None:
        try:
            os.ftruncate(self._file(), length)
        except OSError as e:
            self._poisoned = self._poisoned or (
                f"could not truncate {JOURNAL_FILE} back to {length} bytes after a failed "
                f"append: {e}"
            )

    @staticmethod
    def repair(directory: Union[str, "os.PathLike[str]"]) -> RepairReport:
        """Saves a torn tail to ``journal.torn-<offset>`` (never overwriting) and truncates
        the journal to its last complete line. Takes the lock (:class:`Locked` if held)."""
        d = Path(directory)
        lock_fd = _lock(d, 0)
        try:
            # A journal of a newer format may not even be lines: never cut it by these rules.
            _check_existing_format(d)
            path = d / JOURNAL_FILE
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return RepairReport(None, 0, None)
            keep = _Format.call("complete-prefix", data.decode("latin-1"))
            if keep == len(data):
                return RepairReport(None, 0, None)
            torn = data[keep:]
            attempt = 0
            while True:
                side = d / _Format.call("torn-file-name", keep, attempt)
                try:
                    sfd, _ = _create(side, os.O_WRONLY, exclusive=True)
                    break
                except FileExistsError:
                    attempt += 1
            try:
                _write_all(sfd, torn)
                os.fsync(sfd)
            finally:
                os.close(sfd)
            _sync_dir(d)
            fd = os.open(path, os.O_RDWR)
            try:
                os.ftruncate(fd, keep)
                os.fsync(fd)
            finally:
                os.close(fd)
            return RepairReport(keep, len(torn), side)
        finally:
            os.close(lock_fd)


def _scan(fd: int) -> Tuple[_Index, int]:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0) if size else b""
    index = _Index()
    if data:
        # One char per byte: the component's transport for bytes that need not be UTF-8.
        found = _Format.call("scan", data.decode("latin-1"))
        streams, p = found.streams, found.places
        for i in range(0, len(p), 4):
            index.push(streams[p[i + 2]], p[i], p[i + 1], p[i + 3] == 1)
    return index, len(data)
