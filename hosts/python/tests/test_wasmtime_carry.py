"""The patches this host carries on wasmtime-py (interlock._wasmtime_carry): taken on the
pinned version, the same bytes and values as wasmtime-py's own conversion, refused on any
other version."""

import ctypes
import random
from typing import Any, Callable

import pytest
from wasmtime import Store
from wasmtime import _ffi as ffi
from wasmtime.component._types import U8, ComponentInstanceType, FuncType, ListType

from interlock import _wasmtime_carry as carry
from interlock.clock import FakeClock
from interlock.gate import (
    GATE_WASM,
    STORAGE_INTERFACE,
    GateHost,
    JournalRef,
    allowed,
    applied,
    captured,
    engine,
    found,
    load_component,
    wasm_path,
)
from interlock.journal import MemoryJournal

PINNED = carry._version() in carry.PINNED
LEASE = "case-4471"
T0 = 1_800_000_000_000


def proposal(n: int) -> str:
    return (
        '{"agent":"refund-agent","target":{"name":"payments","dedupes":true,"dedupe_window_ms":86400000,'
        f'"lookup":true,"timeout_ms":1000}},"key":"refund:order_{n}","effect":{{"order":"order_{n}","amount_cents":2000}},'
        f'"authority":{{"lease":"{LEASE}"}},"premises":{{"eligible":true,"refunded_by_others_cents":0}}}}'
    )


class Target:
    def capture(self, _req):
        return captured({"eligible": True, "refunded_by_others_cents": 0})

    def authorize(self, _req):
        return allowed(True)

    def apply(self, _req):
        return applied('{"refund_id":"re_1"}')

    def query(self, _req):
        return found('{"refund_id":"re_1"}')


def submit_some(n: int) -> bytes:
    """The journal's bytes after granting a lease and submitting n effects."""
    storage = MemoryJournal()
    host = GateHost(JournalRef(storage), FakeClock(T0))
    host.grant_lease(LEASE, T0 + 10**9)
    for i in range(n):
        assert host.submit(proposal(i), Target()).state == "COMMITTED"
    host.release()
    return bytes(storage.files["journal.jsonl"])


@pytest.fixture
def unpatched():
    """wasmtime-py's own conversions for the test's duration, the carried ones after."""
    carry.uninstall_bytes_fast_path()
    carry.uninstall_types_once()
    try:
        yield
    finally:
        assert carry.install_bytes_fast_path() == PINNED
        assert carry.install_types_once() == PINNED


def bytes_type() -> ListType:
    """storage.file-append's `bytes: list<u8>`, as the gate component declares it."""
    eng = engine()
    storage = load_component(wasm_path(GATE_WASM)).type.imports(eng)[STORAGE_INTERFACE].ty
    assert isinstance(storage, ComponentInstanceType)
    fty = storage.exports(eng)["file-append"].ty
    assert isinstance(fty, FuncType)
    name, ty = fty.params[2]
    assert name == "bytes" and isinstance(ty, ListType) and isinstance(ty.element, U8)
    return ty


def lower(ty: ListType, value: Any, convert: Callable[..., None]) -> Any:
    raw = ffi.wasmtime_component_val_t()
    convert(ty, Store(engine()), value, ctypes.pointer(raw))
    return raw


SAMPLES = [b"", b"\x00", bytes(range(256)), bytes(random.Random(7).randrange(256) for _ in range(5000))]


@pytest.mark.skipif(not PINNED, reason=f"wasmtime-py {carry._version()} is not pinned: nothing is patched")
def test_the_pinned_version_takes_every_fast_path():
    assert carry.refused is None
    assert carry.bytes_fast_path_installed() and carry.types_once_installed()


@pytest.mark.skipif(not PINNED, reason=f"wasmtime-py {carry._version()} is not pinned: nothing is patched")
def test_a_submit_converts_no_byte_and_reads_no_type_one_at_a_time(monkeypatch):
    storage = MemoryJournal()
    host = GateHost(JournalRef(storage), FakeClock(T0))
    host.grant_lease(LEASE, T0 + 10**9)
    host.submit(proposal(0), Target())  # every function called once: its types read

    def per_byte(*_args):
        raise AssertionError("a list<u8> was converted one byte at a time")

    def per_call(*_args):
        raise AssertionError("a function's type was read again")

    monkeypatch.setattr(U8, "convert_from_c", per_byte)
    monkeypatch.setattr(U8, "convert_to_c", per_byte)
    monkeypatch.setattr(FuncType, "params", property(per_call))
    before = len(storage.files["journal.jsonl"])
    assert host.submit(proposal(1), Target()).state == "COMMITTED"
    assert len(storage.files["journal.jsonl"]) > before + 1000  # the entries did cross
    host.release()


@pytest.mark.skipif(not PINNED, reason=f"wasmtime-py {carry._version()} is not pinned: nothing is patched")
@pytest.mark.parametrize("value", SAMPLES, ids=lambda v: f"{len(v)}B")
def test_bytes_cross_as_wasmtime_py_converts_them(value):
    ty = bytes_type()
    fast_to, fast_from = carry._bytes_to_c, carry._bytes_from_c
    own_to, own_from = carry._ORIGINAL["convert_to_c"], carry._ORIGINAL["convert_from_c"]
    # Lowered by one, lifted by the other, both ways; and the raw values identical.
    assert own_from(ty, lower(ty, value, fast_to)) == value
    assert fast_from(ty, lower(ty, value, own_to)) == value
    a, b = lower(ty, value, fast_to), lower(ty, value, own_to)
    assert a.of.list.size == b.of.list.size == len(value)
    for i in range(len(value)):
        assert (a.of.list.data[i].kind, a.of.list.data[i].of.u8) == (b.of.list.data[i].kind, b.of.list.data[i].of.u8)
    ffi.wasmtime_component_val_delete(ctypes.byref(a))
    ffi.wasmtime_component_val_delete(ctypes.byref(b))
    with pytest.raises(TypeError):
        lower(ty, bytearray(value), fast_to)  # as wasmtime-py: bytes only


@pytest.mark.skipif(not PINNED, reason=f"wasmtime-py {carry._version()} is not pinned: nothing is patched")
def test_the_journal_is_the_same_with_and_without_the_patches(unpatched):
    own = submit_some(5)
    assert carry.install_bytes_fast_path() and carry.install_types_once()
    assert submit_some(5) == own


def test_an_unknown_version_is_refused_and_left_alone(unpatched, monkeypatch):
    monkeypatch.setattr(carry, "_version", lambda: "0.0.0")
    assert carry.install_bytes_fast_path() is False
    assert carry.install_types_once() is False
    assert "0.0.0" in (carry.refused or "")
    assert not carry.bytes_fast_path_installed() and not carry.types_once_installed()
    # wasmtime-py's own conversions still run a gate (submit_some checks each outcome).
    assert b"refund:order_0" in submit_some(1)
