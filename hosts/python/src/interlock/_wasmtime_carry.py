"""Patches this host carries on wasmtime-py until they are fixed upstream.

**Bytes in one copy** (:func:`install_bytes_fast_path`). wasmtime-py 50.0.1 converts a
``list<u8>`` one byte per Python call, both ways (``ListType.convert_from_c`` and
``convert_to_c`` call ``U8.convert_from_c`` / ``convert_to_c`` per element): every byte
the gate appends to its journal through the ``storage`` import, and every byte it reads
back, cost a Python call, about 1,750 per submit. Its C API holds a list as an array of
``wasmtime_component_val_t`` (a one-byte ``kind`` and a union, 32 bytes each), so here a
``list<u8>`` is converted with slices of that array at the ``kind`` and ``u8`` offsets:
one copy and two strided slices, done in C. Other lists keep wasmtime-py's own code.

It is pinned: it is installed only for a wasmtime-py version in :data:`PINNED` whose
layout is the one checked here (the struct's size and offsets, the ``U8`` kind's value,
the methods it replaces), and otherwise wasmtime-py's own conversion runs, unchanged and
slower. tests/test_wasmtime_carry.py fails when the pinned version is installed and the
fast path is not taken, or when it gives other bytes than wasmtime-py's own code. Moving
to a new wasmtime-py: check whether it still converts byte by byte (``ListType`` in
``wasmtime/component/_types.py``), and add its version here after the test passes.

**Types read once** (:func:`install_types_once`). wasmtime-py 50.0.1 reads a function's
type through the C API on every call (``Func.__call__`` asks ``Func.type``; a host
function's callback builds a ``FuncType``), and every nested type again each time a value
is converted (``ListType.element``, ``RecordType.fields``, ``VariantType.cases``, an
option's or result's cases, ``_tagged``): about 260 type objects per submit. A type never
changes, so here each of those is read once per type object and kept on it; an export's
``Func`` keeps its parameter and result types; and a host function added with
:func:`add_func` keeps the ones of its first call (it must be linked into one component,
as the gate host's linker is). Same pinning as above: the same versions, the same refusal.

**An error variant for ``result<option<T>, E>``** (:func:`install_variant_errors`): a
fix of behaviour, not of speed, so it is installed whatever the version.
"""

from __future__ import annotations

import ctypes
from importlib import metadata
from typing import Any, Callable, Dict, List, Optional

from wasmtime import _ffi as ffi
from wasmtime.component import Func, Variant, _linker
from wasmtime.component._enter import catch_exceptions, enter_wasm
from wasmtime.component._types import (
    FuncType,
    ListType,
    OptionType,
    RecordType,
    ResultType,
    TupleType,
    VariantLikeType,
    VariantType,
)

#: The wasmtime-py versions whose ``list<u8>`` conversion is replaced (read and checked).
PINNED = ("50.0.1",)

_VAL: Any = ffi.wasmtime_component_val_t
_UNION: Any = ffi.wasmtime_component_valunion_t
_ORIGINAL: Dict[str, Callable[..., Any]] = {
    "convert_from_c": ListType.convert_from_c,
    "convert_to_c": ListType.convert_to_c,
}
# What install_types_once replaces: (owner, attribute) -> the original.
_TYPE_ORIGINALS: Dict[Any, Any] = {}
#: Why the fast path is not installed (None while it is, or before install is called).
refused: Optional[str] = None


def _version() -> Optional[str]:
    try:
        return metadata.version("wasmtime")
    except metadata.PackageNotFoundError:
        return None


def _layout_refusal() -> Optional[str]:
    """Why this wasmtime-py's layout is not the one the fast path was written for."""
    version = _version()
    if version not in PINNED:
        return f"wasmtime-py {version} is not one of the versions read for it ({', '.join(PINNED)})"
    if (ctypes.sizeof(_VAL), _VAL.kind.offset, _VAL.of.offset, _UNION.u8.offset) != (
        32, 0, 8, 0
    ) or ffi.WASMTIME_COMPONENT_U8.value != 2 or ffi.WASMTIME_COMPONENT_LIST.value != 13:
        return "wasmtime_component_val_t's layout is not the one read"
    if not hasattr(ListType, "_is_bytes"):
        return "ListType has no _is_bytes"
    if not callable(getattr(_linker, "func_impl", None)) or not hasattr(_linker, "FUNCTIONS"):
        return "wasmtime.component._linker has no func_impl or FUNCTIONS"
    for cls, name in _MEMOIZED:
        if name not in cls.__dict__:
            return f"{cls.__name__}.{name} is not where it was read"
    return None


_STRIDE = ctypes.sizeof(_VAL)
_KIND_AT = _VAL.kind.offset
_U8_AT = _VAL.of.offset + _UNION.u8.offset
_U8_KIND = bytes([ffi.WASMTIME_COMPONENT_U8.value])
_LIST_KIND = ffi.WASMTIME_COMPONENT_LIST.value


def _view(data: Any, n: int) -> memoryview:
    """The ``n`` values at ``data`` as one byte buffer (no copy)."""
    return memoryview((ctypes.c_ubyte * (n * _STRIDE)).from_address(ctypes.addressof(data.contents))).cast("B")


def _bytes_from_c(self: ListType, c: Any) -> Any:
    if not self._is_bytes():
        return _ORIGINAL["convert_from_c"](self, c)
    assert c.kind == _LIST_KIND
    try:
        n = c.of.list.size
        if n == 0:
            return b""
        values = _view(c.of.list.data, n)
        if values[_KIND_AT::_STRIDE] != _U8_KIND * n:
            raise TypeError("a list<u8> holds a value that is not a u8")
        return values[_U8_AT::_STRIDE].tobytes()
    finally:
        ffi.wasmtime_component_vallist_delete(ctypes.byref(c.of.list))


def _bytes_to_c(self: ListType, store: Any, val: Any, ptr: Any) -> None:
    if not self._is_bytes():
        return _ORIGINAL["convert_to_c"](self, store, val, ptr)
    if not isinstance(val, bytes):
        raise TypeError("expected bytes value")
    raw = ffi.wasmtime_component_vallist_t()
    ffi.wasmtime_component_vallist_new_uninit(raw, len(val))
    if val:
        values = _view(raw.data, len(val))
        values[_KIND_AT::_STRIDE] = _U8_KIND * len(val)
        values[_U8_AT::_STRIDE] = val
    ptr.contents.kind = ffi.WASMTIME_COMPONENT_LIST
    ptr.contents.of.list = raw
    return None


def install_bytes_fast_path() -> bool:
    """Converts ``list<u8>`` in one copy if this wasmtime-py is one read for it; answers
    whether it does (when not, :data:`refused` says why)."""
    global refused
    refused = _layout_refusal()
    if refused is not None:
        return False
    ListType.convert_from_c = _bytes_from_c  # type: ignore[method-assign]
    ListType.convert_to_c = _bytes_to_c  # type: ignore[method-assign]
    return True


def uninstall_bytes_fast_path() -> None:
    """wasmtime-py's own conversion again (for the test that compares the two)."""
    ListType.convert_from_c = _ORIGINAL["convert_from_c"]  # type: ignore[method-assign]
    ListType.convert_to_c = _ORIGINAL["convert_to_c"]  # type: ignore[method-assign]


def bytes_fast_path_installed() -> bool:
    return ListType.convert_from_c is _bytes_from_c and ListType.convert_to_c is _bytes_to_c


# The type reads kept once per type object: properties, and the methods after them.
_MEMOIZED = (
    (ListType, "element"),
    (RecordType, "fields"),
    (TupleType, "elements"),
    (VariantType, "cases"),
    (OptionType, "payload"),
    (ResultType, "ok"),
    (ResultType, "err"),
    (OptionType, "_cases"),
    (ResultType, "_cases"),
    (VariantLikeType, "_tagged"),
)


def _memo(cls: type, name: str) -> Any:
    original = cls.__dict__[name]
    read: Any = original.fget if isinstance(original, property) else original
    key = "_carry_" + name

    def get(self: Any) -> Any:
        d = self.__dict__
        try:
            return d[key]
        except KeyError:
            value = d[key] = read(self)
            return value

    get.__doc__ = read.__doc__
    return property(get) if isinstance(original, property) else get


def _call(self: Func, store: Any, *params: Any) -> Any:
    """``Func.__call__`` of wasmtime-py 50.0.1, its types read once per ``Func``."""
    types = self.__dict__.get("_carry_types")
    if types is None:
        fty = self.type(store)
        types = self.__dict__["_carry_types"] = ([ty for _, ty in fty.params], fty.result)
    param_tys: List[Any] = types[0]
    result_ty: Any = types[1]
    if len(params) != len(param_tys):
        raise TypeError("wrong number of parameters provided: given %s, expected %s" % (len(params), len(param_tys)))
    param_capi = (ffi.wasmtime_component_val_t * len(params))()
    n = 0
    try:
        for ty, val in zip(param_tys, params):
            ty.convert_to_c(store, val, ctypes.pointer(param_capi[n]))
            n += 1
        result_space = None
        result_capi = None
        result_len = 0
        if result_ty is not None:
            result_space = ffi.wasmtime_component_val_t()
            result_capi = ctypes.byref(result_space)
            result_len = 1

        def run() -> Any:
            return ffi.wasmtime_component_func_call(ctypes.byref(self._func), store._context(), param_capi, n,
                                                    result_capi, result_len)
        enter_wasm(run)
        if result_space is None:
            return None
        return result_ty.convert_from_c(result_space)
    finally:
        for i in range(n):
            ffi.wasmtime_component_val_delete(ctypes.byref(param_capi[i]))


@ffi.wasmtime_component_func_callback_t
def _func_impl(idx, context, ty_raw, args, nargs, results, nresults):
    """wasmtime-py 50.0.1's host function callback (``_linker.func_impl``); a function
    added with :func:`add_func` keeps the types of its first call."""
    def run(store: Any) -> None:
        func = _linker.FUNCTIONS.get(idx or 0)
        kept = getattr(func, "_carry_types", None)
        if kept:
            param_tys, result_ty = kept[0]
        else:
            with FuncType._from_ptr(ty_raw, owner=store) as fty:
                param_tys, result_ty = [ty for _, ty in fty.params], fty.result
            if kept is not None:
                kept.append((param_tys, result_ty))
        assert len(param_tys) == nargs
        assert nresults == (0 if result_ty is None else 1)
        pyargs = [ty.convert_from_c(args[i]) for ty, i in zip(param_tys, range(nargs))]
        result = func(store, *pyargs)
        if result_ty is None:
            assert result is None
        else:
            result_ty.convert_to_c(store, result, results)
    return catch_exceptions(context, run)


def add_func(instance: Any, name: str, fn: Callable[..., Any]) -> None:
    """``instance.add_func(name, fn)``, whose types are read at its first call only (with
    :func:`install_types_once`): the linker must instantiate one component (a second one
    importing ``name`` with another type would be given the first's)."""
    def call(store: Any, *args: Any) -> Any:
        return fn(store, *args)

    call._carry_types = []  # type: ignore[attr-defined]
    instance.add_func(name, call)


def install_types_once() -> bool:
    """Reads each type once (see the module's note) if this wasmtime-py is one read for it;
    answers whether it does."""
    global refused
    refused = _layout_refusal()
    if refused is not None:
        return False
    for cls, name in _MEMOIZED:
        _TYPE_ORIGINALS.setdefault((cls, name), cls.__dict__[name])
        setattr(cls, name, _memo(cls, name))
    _TYPE_ORIGINALS.setdefault((Func, "__call__"), Func.__dict__["__call__"])
    Func.__call__ = _call  # type: ignore[method-assign]
    _TYPE_ORIGINALS.setdefault((_linker, "func_impl"), _linker.func_impl)
    _linker.func_impl = _func_impl
    return True


def uninstall_types_once() -> None:
    """wasmtime-py's own type reads again (for the test that compares the two)."""
    for (owner, name), original in _TYPE_ORIGINALS.items():
        setattr(owner, name, original)


def types_once_installed() -> bool:
    return Func.__call__ is _call and _linker.func_impl is _func_impl


def install_variant_errors() -> None:
    """Lets a host function return the ``err`` of ``result<option<T>, E>`` (storage's
    ``file-size``). wasmtime-py 50 lowers an untagged result by trying its ``ok`` case
    first, and an option's ``none`` case matches every object, so an error ``Variant`` is
    taken for ``ok`` and fails. Here a ``Variant`` given for an untagged result whose
    ``err`` is a variant and whose ``ok`` cannot be one is lowered as that ``err``."""
    original = ResultType._lower

    def _lower(self: Any, store: Any, val: Any) -> Any:
        if isinstance(val, Variant) and not self._tagged() and isinstance(self.err, VariantType):
            ok_classes: set = set()
            if self.ok is not None:
                self.ok.add_classes(ok_classes)
            if Variant not in ok_classes:
                raw = ffi.wasmtime_component_val_t()
                self.err.convert_to_c(store, val, ctypes.pointer(raw))
                return ("err", ffi.wasmtime_component_val_new(ctypes.byref(raw)))
        return original(self, store, val)

    ResultType._lower = _lower  # type: ignore[method-assign]


__all__ = [
    "PINNED",
    "add_func",
    "bytes_fast_path_installed",
    "install_bytes_fast_path",
    "install_types_once",
    "install_variant_errors",
    "types_once_installed",
    "uninstall_bytes_fast_path",
    "uninstall_types_once",
]
