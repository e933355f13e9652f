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

The index (byte offset and length of each entry, per stream) is rebuilt on open from each
line's ``stream``, ``seq`` and ``open`` members. A final line without ``"\\n"`` is a torn
write: open refuses (:class:`TornTail`) and :meth:`FileJournal.repair` saves the torn bytes
to ``journal.torn-<offset>`` before truncating.

This file stores; it never interprets. Hash chains and verification are the gate's.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar, Union, cast

from .errors import InterlockError

JOURNAL_FILE = "journal.jsonl"
LOCK_FILE = "journal.lock"
TORN_PREFIX = "journal.torn-"
DIR_MODE = 0o700
FILE_MODE = 0o600


class JournalFileError(InterlockError):
    """A journal file operation failed. ``case`` is the WIT ``journal-error`` case it maps
    to when the gate sees it (``conflict``, ``io``, ``corrupt``, ``torn-tail``, ``other``).
    An :class:`interlock.InterlockError`, like every error this package raises on purpose."""

    case = "other"


class Locked(JournalFileError):
    """Another writer, in this process or another (the CLI included), holds the directory."""

    def __init__(self, directory: Path):
        self.dir = directory
        super().__init__(
            f"journal directory {directory} is locked by another writer ({LOCK_FILE} is held)"
        )


class JournalIOError(JournalFileError):
    case = "io"

    def __init__(self, detail: str):
        super().__init__(f"journal I/O error: {detail}")


class Corrupt(JournalFileError):
    """A complete line is not a valid entry; ``line`` is 1-based."""

    case = "corrupt"

    def __init__(self, line: int, detail: str):
        self.line = line
        self.detail = detail
        super().__init__(
            f"corrupt journal: {JOURNAL_FILE} line {line} is not a valid entry: {detail}"
        )


class TornTail(JournalFileError):
    """The file ends with a partial line of ``bytes`` bytes at byte ``offset``."""

    case = "torn-tail"

    def __init__(self, offset: int, nbytes: int):
        self.offset = offset
        self.bytes = nbytes
        super().__init__(
            f"torn journal: {JOURNAL_FILE} ends with a partial last line at byte offset "
            f"{offset} ({nbytes} bytes, no final newline); torn data is never trusted nor "
            f"dropped silently: run `repair` to save it to {TORN_PREFIX}{offset} and "
            f"truncate the journal to its last complete line"
        )


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
    def __init__(self, detail: str):
        super().__init__(f"invalid journal entry: {detail}")


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


def _parse_head(body: bytes) -> Tuple[str, int, bool]:
    """The ``stream``, ``seq`` and ``open`` of one entry (without its newline)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8: {e}") from None
    if not text.lstrip().startswith("{"):
        raise ValueError("not a JSON object")
    try:
        v = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not a journal entry: {e}") from None
    stream, seq, is_open = v.get("stream"), v.get("seq"), v.get("open")
    if not isinstance(stream, str):
        raise ValueError("not a journal entry: `stream` is missing or not a string")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise ValueError("not a journal entry: `seq` is missing or not an unsigned integer")
    if not isinstance(is_open, bool):
        raise ValueError("not a journal entry: `open` is missing or not a bool")
    return stream, seq, is_open


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


def _lock(d: Path) -> int:
    fd, _ = _create(d / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise Locked(d) from None
        raise JournalIOError(str(e)) from None
    return fd


_Method = TypeVar("_Method", bound=Callable[..., object])


def _locked(method: _Method) -> _Method:
    @functools.wraps(method)
    def locked(self: "FileJournal", *args: object) -> object:
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
    def open(cls, directory: Union[str, "os.PathLike[str]"]) -> "FileJournal":
        """Opens (creating if needed) the journal in ``directory`` and takes its lock.
        Raises :class:`Locked`, :class:`TornTail` or :class:`Corrupt`."""
        d = Path(directory)
        try:
            if not d.is_dir():
                _make_dir(d)
            lock_fd = _lock(d)
        except OSError as e:
            raise JournalIOError(str(e)) from None
        try:
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
        parts = []
        for i, entry in enumerate(entries):
            seq = expected_len + i
            problem = _validate(entry, stream, seq, is_open)
            if problem:
                raise InvalidEntry(f"entry {i} of the batch (seq {seq}): {problem}")
            parts.append(entry.encode("utf-8"))
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
        lock_fd = _lock(d)
        try:
            path = d / JOURNAL_FILE
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return RepairReport(None, 0, None)
            keep = data.rfind(b"\n") + 1
            if keep == len(data):
                return RepairReport(None, 0, None)
            torn = data[keep:]
            attempt = 0
            while True:
                name = f"{TORN_PREFIX}{keep}" + (f".{attempt}" if attempt else "")
                side = d / name
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


def _validate(entry: str, stream: str, seq: int, is_open: bool) -> Optional[str]:
    if "\n" in entry:
        return "contains a newline; an entry must be a single line"
    try:
        h_stream, h_seq, h_open = _parse_head(entry.encode("utf-8"))
    except ValueError as e:
        return str(e)
    if h_stream != stream:
        return f"its stream member is {h_stream!r} but the append is to stream {stream!r}"
    if h_seq != seq:
        return f"its seq member is {h_seq} but should be {seq}"
    if h_open != is_open:
        return f"its open member is {h_open} but the append says open={is_open}"
    return None


def _scan(fd: int) -> Tuple[_Index, int]:
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0) if size else b""
    index = _Index()
    offset = 0
    line = 0
    while offset < len(data):
        nl = data.find(b"\n", offset)
        if nl < 0:
            raise TornTail(offset, len(data) - offset)
        line += 1
        body = data[offset:nl]
        try:
            stream, seq, is_open = _parse_head(body)
        except ValueError as e:
            raise Corrupt(line, str(e)) from None
        position = index.length(stream)
        if seq != position:
            raise Corrupt(
                line,
                f"seq is {seq} but stream {stream!r} has {position} entries before this line",
            )
        index.push(stream, offset, len(body), is_open)
        offset = nl + 1
    return index, offset
