"""Loading libubik.so and declaring its C signatures (see capi/ubik.h)."""

import ctypes
import os
import pathlib

#: The ABI version this binding is written against (UBIK_ABI_VERSION).
ABI_VERSION = 1

_c_int = ctypes.c_int
_c_u64 = ctypes.c_uint64
_c_size = ctypes.c_size_t
_c_void_p = ctypes.c_void_p
_c_char_p = ctypes.c_char_p


class Meta(ctypes.Structure):
    """struct ubik_meta."""

    _fields_ = [
        ("query", _c_void_p),
        ("query_len", _c_size),
        ("final", ctypes.c_int32),
        ("windowed", ctypes.c_int32),
        ("revision", ctypes.c_uint64),
        ("window_start_us", ctypes.c_int64),
        ("window_end_us", ctypes.c_int64),
        ("window_positions", ctypes.POINTER(ctypes.c_int32)),
        ("window_positions_len", _c_size),
        ("group_key", _c_void_p),
        ("group_key_len", _c_size),
    ]


_SIGNATURES = {
    "ubik_abi_version": (_c_int, []),
    "ubik_last_error": (_c_char_p, []),
    "ubik_last_error_code": (_c_int, []),
    "ubik_error_name": (_c_char_p, [_c_int]),
    "ubik_error_description": (_c_char_p, [_c_int]),
    "ubik_error_retryable": (_c_int, [_c_int]),
    "ubik_engine_open": (_c_int, [_c_char_p, ctypes.POINTER(_c_u64)]),
    "ubik_engine_register_source": (_c_int, [_c_u64, _c_char_p]),
    "ubik_engine_close": (_c_int, [_c_u64]),
    "ubik_query_start": (_c_int, [_c_u64, _c_char_p, _c_char_p, ctypes.POINTER(_c_u64)]),
    "ubik_push": (_c_int, [_c_u64, _c_void_p, _c_size]),
    "ubik_push_lines": (
        _c_int,
        [_c_u64, _c_void_p, _c_size, ctypes.POINTER(_c_size), ctypes.POINTER(_c_size)],
    ),
    "ubik_next_keyed": (
        _c_int,
        [
            _c_u64,
            ctypes.POINTER(_c_void_p),
            ctypes.POINTER(_c_size),
            ctypes.POINTER(_c_void_p),
            ctypes.POINTER(_c_size),
            ctypes.POINTER(Meta),
        ],
    ),
    "ubik_advance_watermark": (_c_int, [_c_u64, ctypes.c_int64]),
    "ubik_push_input": (_c_int, [_c_u64, _c_char_p, _c_void_p, _c_size]),
    "ubik_advance_table_watermark": (_c_int, [_c_u64, ctypes.c_int64]),
    "ubik_end_table": (_c_int, [_c_u64]),
    "ubik_flush": (_c_int, [_c_u64]),
    "ubik_tick": (_c_int, [_c_u64]),
    "ubik_query_close": (_c_int, [_c_u64]),
    "ubik_query_stats": (_c_int, [_c_u64, ctypes.POINTER(_c_void_p), ctypes.POINTER(_c_size)]),
    "ubik_query_columns": (_c_int, [_c_u64, ctypes.POINTER(_c_void_p), ctypes.POINTER(_c_size)]),
    "ubik_query_free": (_c_int, [_c_u64]),
}


def candidates():
    """The paths tried, in order: $UBIK_LIB, next to the package, the
    repository's build/ directory."""
    here = pathlib.Path(__file__).resolve().parent
    out = []
    env = os.environ.get("UBIK_LIB")
    if env:
        out.append(pathlib.Path(env))
    out.append(here / "libubik.so")
    out.append(here.parent.parent / "build" / "libubik.so")
    return out


def load():
    """Loads libubik.so, declares every function, and checks the ABI."""
    tried = candidates()
    if os.environ.get("UBIK_LIB"):
        # An explicit path is the only one tried: silently falling back to
        # another build would test the wrong library.
        tried = tried[:1]
    for path in tried:
        if path.is_file():
            lib = ctypes.CDLL(str(path))
            break
    else:
        raise ImportError(
            "ubik: libubik.so not found (tried %s); build it with capi/build.sh or set UBIK_LIB"
            % ", ".join(str(p) for p in tried)
        )
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    got = lib.ubik_abi_version()
    if got != ABI_VERSION:
        raise ImportError(
            "ubik: %s has ABI version %d, this binding needs %d" % (path, got, ABI_VERSION)
        )
    lib.path = str(path)
    return lib
