"""ubik: the Python binding of the ubik streaming SQL engine.

A pure-Python package over libubik.so (ctypes, no third-party modules).
The library is found through $UBIK_LIB, next to this package, or in the
repository's build/ directory (capi/build.sh puts it there).

    import ubik
    for key, row in ubik.stream(sql, source="events.jsonl"):
        store.upsert(key, row)          # key: the contract bytes, row: dict

    with ubik.Engine() as eng, eng.start(sql) as q:
        q.push({"merchant": "acme", "amount": 3, "event_time": "2026-07-18 10:00:00"})
        q.close()                       # end of input: windows finalize
        for rec in q.records():         # Record: key, value, row, final, ...
            print(rec.key, rec.row, rec.final)

Errors are UbikError subclasses carrying the C ABI's code, name and message.
"""

from ._core import Engine, PushResult, Query, Record, encode_event, library, stream
from .errors import (
    BackpressureError,
    ClosedError,
    EvalError,
    InternalError,
    InvalidArgumentError,
    InvalidHandleError,
    InvalidOptionsError,
    JoinBufferError,
    MalformedEventError,
    NoQueryError,
    QueryFailedError,
    SQLError,
    UbikError,
)

__all__ = [
    "BackpressureError",
    "ClosedError",
    "Engine",
    "EvalError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidHandleError",
    "InvalidOptionsError",
    "JoinBufferError",
    "MalformedEventError",
    "NoQueryError",
    "PushResult",
    "Query",
    "QueryFailedError",
    "Record",
    "SQLError",
    "UbikError",
    "encode_event",
    "library",
    "stream",
]
