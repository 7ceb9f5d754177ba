"""The exceptions of the ubik binding: one class per status code of the C
ABI's table (capi/errors.go), all subclasses of UbikError."""

# Status codes, as in capi/ubik.h.
OK = 0
NONE = 1
END = 2
ERR_INVALID_ARGUMENT = -1
ERR_INVALID_HANDLE = -2
ERR_INVALID_OPTIONS = -3
ERR_SQL = -4
ERR_NO_QUERY = -5
ERR_MALFORMED_EVENT = -6
ERR_EVAL = -7
ERR_BACKPRESSURE = -8
ERR_CLOSED = -9
ERR_QUERY_FAILED = -10
ERR_INTERNAL = -11
ERR_JOIN_BUFFER = -12


class UbikError(Exception):
    """An error from libubik.

    Attributes:
        code: the numeric status code (negative), as in ubik.h.
        name: its name in the library's table, e.g. "UBIK_ERR_SQL".
        retryable: whether repeating the call later may succeed (only
            backpressure and a full join buffer are).
        message: the library's message (ubik_last_error).
    """

    def __init__(self, code, name, retryable, message):
        super().__init__("%s: %s" % (name, message))
        self.code = code
        self.name = name
        self.retryable = retryable
        self.message = message


class InvalidArgumentError(UbikError, ValueError):
    """A required argument was missing or out of range."""


class InvalidHandleError(UbikError):
    """The engine or query was already released."""


class InvalidOptionsError(UbikError, ValueError):
    """The engine or query options are not valid."""


class SQLError(UbikError):
    """The SQL does not parse or bind; the message names the position."""


class NoQueryError(UbikError):
    """The script has no query, or several and none was named."""


class MalformedEventError(UbikError):
    """An event could not be decoded; it was counted and skipped."""


class EvalError(UbikError):
    """An event failed at run time; it was counted and skipped."""


class BackpressureError(UbikError):
    """The query's output buffer is full; drain records and push again."""


class ClosedError(UbikError):
    """The engine or the query's input is closed."""


class QueryFailedError(UbikError):
    """The query stopped on an earlier fatal error."""


class InternalError(UbikError):
    """A bug in ubik (a recovered panic)."""


class JoinBufferError(UbikError):
    """A temporal join holds as many events as it may waiting for its
    table's watermark; nothing was applied. Push table rows, advance the
    table's watermark or end the table, then push the event again."""


_BY_CODE = {
    ERR_INVALID_ARGUMENT: InvalidArgumentError,
    ERR_INVALID_HANDLE: InvalidHandleError,
    ERR_INVALID_OPTIONS: InvalidOptionsError,
    ERR_SQL: SQLError,
    ERR_NO_QUERY: NoQueryError,
    ERR_MALFORMED_EVENT: MalformedEventError,
    ERR_EVAL: EvalError,
    ERR_BACKPRESSURE: BackpressureError,
    ERR_CLOSED: ClosedError,
    ERR_QUERY_FAILED: QueryFailedError,
    ERR_INTERNAL: InternalError,
    ERR_JOIN_BUFFER: JoinBufferError,
}


def exception_class(code):
    """The exception class for a status code (UbikError for an unknown one)."""
    return _BY_CODE.get(code, UbikError)
