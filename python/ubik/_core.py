"""Engine, Query, Record and stream over libubik.so (ctypes)."""

import ctypes
import datetime
import decimal
import io
import json
import os
import threading

from . import _lib
from . import errors as _errors

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _micros(t):
    """A datetime (naive = UTC) or an integer as microseconds since the epoch."""
    if isinstance(t, datetime.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=datetime.timezone.utc)
        return (t - _EPOCH) // datetime.timedelta(microseconds=1)
    return int(t)

# Lines are pushed to the library in batches of about this many bytes, so a
# Python-level loop does one C call per batch instead of one per event.
_BATCH_BYTES = 256 << 10
_BATCH_EVENTS = 2048

_lib_lock = threading.Lock()
_lib_handle = None


def library():
    """The loaded libubik.so (loaded on first use; see _lib.candidates)."""
    global _lib_handle
    with _lib_lock:
        if _lib_handle is None:
            _lib_handle = _lib.load()
        return _lib_handle


def _raise(lib, code):
    """Raises the exception for a failed call, with the message the library
    recorded on this thread (ctypes calls run on the calling thread)."""
    msg = (lib.ubik_last_error() or b"").decode("utf-8", "replace")
    name = (lib.ubik_error_name(code) or b"UBIK_UNKNOWN").decode()
    cls = _errors.exception_class(code)
    raise cls(code, name, bool(lib.ubik_error_retryable(code)), msg)


def _check(lib, code):
    if code != _errors.OK:
        _raise(lib, code)


def _options(opts):
    if opts is None:
        return None
    return json.dumps(opts).encode()


class _HasDecimal(Exception):
    """Raised by _json_default on a decimal.Decimal, so that encode_event
    falls back to the encoder that writes it exactly."""


def _json_default(v):
    if isinstance(v, decimal.Decimal):
        raise _HasDecimal()
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.isoformat(sep=" ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    raise TypeError("ubik: cannot encode %r (%s) as a JSON event value" % (v, type(v).__name__))


def _decimal_text(v):
    """A finite decimal.Decimal as a JSON number with its exact digits."""
    if not v.is_finite():
        raise ValueError("ubik: cannot encode %s as a JSON event value (JSON has no such number)" % v)
    return format(v, "f")


def _encode_exact(v):
    """JSON text of v as json.dumps writes it, except that decimal.Decimal
    values are written with their exact digits, never through a float."""
    if isinstance(v, decimal.Decimal):
        return _decimal_text(v)
    if isinstance(v, dict):
        # json.dumps's own spelling of each key (it turns numbers, booleans
        # and None into strings, and refuses other types).
        return "{" + ",".join(
            json.dumps({k: None}, separators=(",", ":"))[1:-6] + ":" + _encode_exact(x) for k, x in v.items()
        ) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_encode_exact(x) for x in v) + "]"
    return json.dumps(v, default=_json_default, separators=(",", ":"))


def encode_event(event):
    """One event as JSON bytes: a dict is serialized (datetimes as
    'YYYY-MM-DD HH:MM:SS[.ffffff]' UTC, decimal.Decimal as a JSON number
    with its exact digits), str is encoded as UTF-8, bytes are passed as
    they are."""
    if isinstance(event, (bytes, bytearray, memoryview)):
        return bytes(event)
    if isinstance(event, str):
        return event.encode("utf-8")
    if isinstance(event, dict):
        try:
            return json.dumps(event, default=_json_default, separators=(",", ":")).encode("utf-8")
        except _HasDecimal:
            return _encode_exact(event).encode("utf-8")
    raise TypeError("ubik: an event must be a dict, str or bytes, got %s" % type(event).__name__)


class Record:
    """One changelog record: an upsert of the whole current value of one
    (group, window).

    Attributes:
        key: the frozen-contract key bytes (a JSON array of the GROUP BY
            cells), byte-identical to the Kafka message key.
        value: the projected row as JSON bytes.
        query: the name of the query that produced it.
        final: True when no further record for this key will follow.
        revision: counts the emissions of this (group, window), from 1.
        windowed: whether the query has a window.
        window_start_us, window_end_us: the window bounds in microseconds
            since the Unix epoch (None for a continuous view).
        window_positions: indexes, in the key array, of the window cells.
        group_key: the key without its window cells, in the key's spelling
            (the identity of a latest-per-group landing; the key itself for
            a continuous view).
    """

    __slots__ = (
        "key",
        "value",
        "query",
        "final",
        "revision",
        "windowed",
        "window_start_us",
        "window_end_us",
        "window_positions",
        "group_key",
        "_decimals",
        "_row",
    )

    def __init__(
        self,
        key,
        value,
        query,
        final,
        revision,
        windowed,
        window_start_us,
        window_end_us,
        window_positions,
        group_key,
        decimals=None,
    ):
        self.key = key
        self.value = value
        self.query = query
        self.final = final
        self.revision = revision
        self.windowed = windowed
        self.window_start_us = window_start_us
        self.window_end_us = window_end_us
        self.window_positions = window_positions
        self.group_key = group_key
        self._decimals = decimals
        self._row = None

    @property
    def row(self):
        """The value parsed as a dict, in column order. DECIMAL cells are
        decimal.Decimal with the engine's exact digits; other numbers are
        int or float."""
        if self._row is None:
            self._row = _parse_row(self.value, self._decimals)
        return self._row

    @property
    def key_cells(self):
        """The key parsed as a list of cells."""
        return json.loads(self.key)

    @property
    def window_start(self):
        """The window start as an aware UTC datetime (None if not windowed)."""
        if self.window_start_us is None:
            return None
        return _EPOCH + datetime.timedelta(microseconds=self.window_start_us)

    @property
    def window_end(self):
        """The window end (exclusive) as an aware UTC datetime."""
        if self.window_end_us is None:
            return None
        return _EPOCH + datetime.timedelta(microseconds=self.window_end_us)

    def __repr__(self):
        return "Record(key=%r, value=%r, final=%r, revision=%r)" % (self.key, self.value, self.final, self.revision)

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__ if s not in ("_row", "_decimals"))

    __hash__ = None


def _parse_row(value, decimals):
    """Parses a value row. decimals is the set of its DECIMAL columns (None
    or empty when it has none): their JSON numbers are read from their text
    as decimal.Decimal; every other number is read as json.loads reads it."""
    if not decimals:
        return json.loads(value)
    row = json.loads(value, parse_float=decimal.Decimal)
    for name, v in row.items():
        if name in decimals:
            if isinstance(v, int) and not isinstance(v, bool):
                row[name] = decimal.Decimal(v)
        else:
            row[name] = _floats(v)
    return row


def _floats(v):
    """v with every decimal.Decimal turned back into the float json.loads
    would have read (float of the exact decimal rounds as float of its
    text does)."""
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, dict):
        return {k: _floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_floats(x) for x in v]
    return v


class PushResult:
    """What Query.push_lines did: consumed bytes (fewer than given means the
    output buffer filled: drain and push the rest), rejected lines (skipped
    as malformed or failing), and the library's message about the first."""

    __slots__ = ("consumed", "rejected", "error")

    def __init__(self, consumed, rejected, error):
        self.consumed = consumed
        self.rejected = rejected
        self.error = error

    def __repr__(self):
        return "PushResult(consumed=%d, rejected=%d, error=%r)" % (self.consumed, self.rejected, self.error)


class Engine:
    """An engine: registered sources plus the options queries run with.

    Options (all optional): max_pending_records (int >= 1, default 65536),
    the most records a query holds at any time; a push reports backpressure
    while they are held or records of finalized windows wait for next().
    Use as a context manager, or call close(). Queries started from it keep
    running after it is closed.
    """

    def __init__(self, max_pending_records=None):
        self._lib = library()
        opts = {}
        if max_pending_records is not None:
            opts["max_pending_records"] = max_pending_records
        h = ctypes.c_uint64()
        _check(self._lib, self._lib.ubik_engine_open(_options(opts) if opts else None, ctypes.byref(h)))
        self._h = h.value

    def register_source(self, sql):
        """Registers the sources of a script of CREATE SOURCE statements."""
        _check(self._lib, self._lib.ubik_engine_register_source(self._handle(), sql.encode("utf-8")))

    def start(self, sql, name=None, strict=False, join_buffer=None):
        """Starts a query (a script of optional CREATE SOURCE / CREATE TABLE
        statements and queries); name picks one when the script has several.
        join_buffer bounds the events a temporal join holds waiting for its
        table's watermark (default 1,000,000)."""
        opts = {}
        if name is not None:
            opts["name"] = name
        if strict:
            opts["strict"] = True
        if join_buffer is not None:
            opts["join_buffer"] = join_buffer
        h = ctypes.c_uint64()
        _check(
            self._lib,
            self._lib.ubik_query_start(
                self._handle(), sql.encode("utf-8"), _options(opts) if opts else None, ctypes.byref(h)
            ),
        )
        return Query(self._lib, h.value)

    def _handle(self):
        if self._h is None:
            raise _errors.ClosedError(_errors.ERR_CLOSED, "UBIK_ERR_CLOSED", False, "the engine is closed")
        return self._h

    def close(self):
        """Releases the engine (idempotent)."""
        if self._h is not None:
            h, self._h = self._h, None
            _check(self._lib, self._lib.ubik_engine_close(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Query:
    """A running query. Push events, take records, close the input.

    close() ends the input (every open window finalizes; the records that
    produces can still be taken); release() frees the query. As a context
    manager, leaving the block releases it. One thread may push while
    another takes records; records should be taken by one thread only.
    """

    def __init__(self, lib, handle):
        self._lib = lib
        self._h = handle
        self._meta = _lib.Meta()
        self._k = ctypes.c_void_p()
        self._kl = ctypes.c_size_t()
        self._v = ctypes.c_void_p()
        self._vl = ctypes.c_size_t()
        self._consumed = ctypes.c_size_t()
        self._rejected = ctypes.c_size_t()
        self._decimals = None  # set of DECIMAL column names, read on the first record
        self.done = False  #: True once the input is closed and every record was taken

    @property
    def handle(self):
        """The C handle (an integer), or None once released."""
        return self._h

    def _handle(self):
        if self._h is None:
            raise _errors.InvalidHandleError(
                _errors.ERR_INVALID_HANDLE, "UBIK_ERR_INVALID_HANDLE", False, "the query was released"
            )
        return self._h

    def push(self, event):
        """Pushes one event (dict, str or bytes of one JSON object).

        Raises MalformedEventError or EvalError when the event was skipped
        (the query goes on unless strict), BackpressureError when nothing was
        applied (take records, then push it again).
        """
        b = encode_event(event)
        _check(self._lib, self._lib.ubik_push(self._handle(), b, len(b)))

    def push_lines(self, data, offset=0):
        """Pushes the whole JSON lines in data[offset:] (bytes). Returns a
        PushResult; result.consumed < len(data) - offset means the output
        buffer filled: take records and push data[offset + consumed:]."""
        if not isinstance(data, bytes):
            data = bytes(data)
        n = len(data) - offset
        if n < 0:
            raise ValueError("ubik: offset %d past the end of %d bytes" % (offset, len(data)))
        # Address arithmetic instead of slicing: no copy of the buffer.
        base = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
        rc = self._lib.ubik_push_lines(
            self._handle(), base + offset, n, ctypes.byref(self._consumed), ctypes.byref(self._rejected)
        )
        consumed, rejected = self._consumed.value, self._rejected.value
        if rc == _errors.OK or rc == _errors.ERR_BACKPRESSURE:
            return PushResult(consumed, rejected, None)
        if rc in (_errors.ERR_MALFORMED_EVENT, _errors.ERR_EVAL) and consumed == n:
            msg = (self._lib.ubik_last_error() or b"").decode("utf-8", "replace")
            return PushResult(consumed, rejected, msg)
        _raise(self._lib, rc)

    def columns(self):
        """The columns of the value rows, in order: a list of
        {"name": ..., "type": ...} dicts (type as explain prints it, e.g.
        "DECIMAL(38,9)")."""
        p = ctypes.c_void_p()
        n = ctypes.c_size_t()
        _check(self._lib, self._lib.ubik_query_columns(self._handle(), ctypes.byref(p), ctypes.byref(n)))
        return json.loads(ctypes.string_at(p.value, n.value))

    def next(self):
        """The next record, or None when none is pending (check .done to tell
        the end of the stream from "not yet")."""
        lib = self._lib
        if self._decimals is None:
            self._decimals = frozenset(c["name"] for c in self.columns() if c["type"].startswith("DECIMAL"))
        m = self._meta
        rc = lib.ubik_next_keyed(
            self._handle(),
            ctypes.byref(self._k),
            ctypes.byref(self._kl),
            ctypes.byref(self._v),
            ctypes.byref(self._vl),
            ctypes.byref(m),
        )
        if rc == _errors.OK:
            windowed = bool(m.windowed)
            key = ctypes.string_at(self._k.value, self._kl.value)
            return Record(
                key,
                ctypes.string_at(self._v.value, self._vl.value),
                ctypes.string_at(m.query, m.query_len).decode("utf-8"),
                bool(m.final),
                m.revision,
                windowed,
                m.window_start_us if windowed else None,
                m.window_end_us if windowed else None,
                tuple(m.window_positions[i] for i in range(m.window_positions_len)),
                ctypes.string_at(m.group_key, m.group_key_len) if windowed else key,
                self._decimals,
            )
        if rc == _errors.NONE:
            return None
        if rc == _errors.END:
            self.done = True
            return None
        _raise(lib, rc)

    def records(self):
        """Yields the records pending now (stops when none is)."""
        while True:
            r = self.next()
            if r is None:
                return
            yield r

    def advance_watermark(self, t):
        """Moves the event-time watermark to t (a datetime, naive = UTC, or
        microseconds since the epoch): windows it passes finalize."""
        _check(self._lib, self._lib.ubik_advance_watermark(self._handle(), _micros(t)))

    def push_input(self, input, record):
        """Pushes one record (dict, str or bytes, as push) to the input
        named input: the query's stream, or, for a query with a temporal join
        (FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ...), its versioned table
        t, whose rows are versions of their key valid from their time. An
        event waits until the table's watermark passes its time. Raises
        InvalidArgumentError for a name that is none of the query's inputs,
        JoinBufferError when the join holds as many waiting events as it may
        (push table rows, then the event again), and push's errors."""
        b = encode_event(record)
        _check(self._lib, self._lib.ubik_push_input(self._handle(), input.encode("utf-8"), b, len(b)))

    def advance_table_watermark(self, t):
        """Moves the versioned table's watermark to t (a datetime, naive =
        UTC, or microseconds since the epoch): waiting events it passes are
        joined. For an idle table, or a host that knows no earlier row will
        come."""
        _check(self._lib, self._lib.ubik_advance_table_watermark(self._handle(), _micros(t)))

    def end_table(self):
        """Ends the versioned table's input: waiting and later events join
        the versions there are; later table rows raise ClosedError."""
        _check(self._lib, self._lib.ubik_end_table(self._handle()))

    def flush(self):
        """Publishes now every (group, window) changed since its last
        emission (EMIT EARLY queries)."""
        _check(self._lib, self._lib.ubik_flush(self._handle()))

    def tick(self):
        """Performs the early emission due by the processing clock."""
        _check(self._lib, self._lib.ubik_tick(self._handle()))

    def close(self):
        """Ends the input: every open window finalizes. Idempotent."""
        _check(self._lib, self._lib.ubik_query_close(self._handle()))

    def stats(self):
        """The query's counters as a dict (see ubik_query_stats)."""
        p = ctypes.c_void_p()
        n = ctypes.c_size_t()
        _check(self._lib, self._lib.ubik_query_stats(self._handle(), ctypes.byref(p), ctypes.byref(n)))
        return json.loads(ctypes.string_at(p.value, n.value))

    def release(self):
        """Frees the query and everything it holds (idempotent)."""
        if self._h is not None:
            h, self._h = self._h, None
            _check(self._lib, self._lib.ubik_query_free(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


def _line_batches(source):
    """Yields bytes buffers of whole JSON lines from a source: an iterable of
    events, a file object, or a path."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield from _file_batches(f)
        return
    if hasattr(source, "read"):
        yield from _file_batches(source)
        return
    if isinstance(source, (bytes, bytearray, dict)):
        raise TypeError("ubik: source must be an iterable of events, a file or a path, got %s" % type(source).__name__)
    batch, size = [], 0
    for ev in source:
        b = encode_event(ev)
        if b"\n" in b:
            # A pretty-printed event: one line per event is the wire format.
            b = json.dumps(json.loads(b), separators=(",", ":")).encode("utf-8")
        batch.append(b)
        size += len(b) + 1
        if size >= _BATCH_BYTES or len(batch) >= _BATCH_EVENTS:
            yield b"\n".join(batch) + b"\n"
            batch, size = [], 0
    if batch:
        yield b"\n".join(batch) + b"\n"


def _file_batches(f):
    rest = b""
    while True:
        chunk = f.read(_BATCH_BYTES)
        if not chunk:
            break
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        chunk = rest + chunk
        cut = chunk.rfind(b"\n")
        if cut < 0:
            rest = chunk
            continue
        yield chunk[: cut + 1]
        rest = chunk[cut + 1 :]
    if rest:
        yield rest


def stream(sql, source, keys=True, meta=False, name=None, strict=False, max_pending_records=None, on_reject=None):
    """Runs one query over a finite source and yields its changelog.

    source: an iterable of events (dicts, JSON str or bytes), a file object
    of JSON lines (text or binary), or a path to one. It is read lazily;
    records are yielded as they are produced, and once the source is
    exhausted the input is closed, so every window finalizes.

    Yields (key, row) by default: key is the frozen-contract key bytes
    (byte-identical to the Kafka message key and to `ubik run`), row the
    value as a dict in column order. keys=False yields the row alone;
    meta=True yields Record objects (key, value, row, final, revision,
    window bounds, ...).

    Malformed events are skipped and counted (strict=True raises instead);
    on_reject, if given, is called with the library's message for each
    batch that had skipped lines. Leaving the loop early releases the query.
    """
    with Engine(max_pending_records=max_pending_records) as eng:
        q = eng.start(sql, name=name, strict=strict)
    with q:

        def out(r):
            if meta:
                return r
            if keys:
                return (r.key, r.row)
            return r.row

        for data in _line_batches(source):
            off = 0
            while True:
                res = q.push_lines(data, off)
                off += res.consumed
                if res.error is not None and on_reject is not None:
                    on_reject(res.error)
                for r in q.records():
                    yield out(r)
                if off >= len(data):
                    break
        q.close()
        for r in q.records():
            yield out(r)
        if not q.done:
            raise _errors.InternalError(
                _errors.ERR_INTERNAL, "UBIK_ERR_INTERNAL", False, "records pending after the end of the stream"
            )
