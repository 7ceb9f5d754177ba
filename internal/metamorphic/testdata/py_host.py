"""py_host.py - the metamorphic harness's Python host (python/ubik over the C ABI).

    python3 py_host.py SQL INPUT NAME MAX_PENDING MODE [SECOND SECOND_INPUT]

MODE "bytes" pushes each line as it is; "dict" parses each line with the
standard json module and pushes the dict (json.dumps spells NaN and
Infinity its own way, and re-escapes every string; x = -0 is passed as
the float -0.0, which json would make the integer 0), falling back to the
bytes for a line json cannot read (invalid UTF-8). Records are printed as
    final<TAB>revision<TAB>key<TAB>value
and last "#stats<TAB>{stats JSON}", as capi_host.c does. With SECOND (a
join's second input), SECOND_INPUT's lines are AT<TAB>ROW: ROW is pushed
with push_input (as bytes, or as a dict in dict mode) before event AT.
"""

import json
import sys

import ubik


class _NegZero(int):
    """The integer -0 as json reads it (0), remembered: json.dumps writes
    it 0, as a JSON column's canonical text has it."""


def _parse_int(s):
    return _NegZero(0) if s == "-0" else int(s)


def _event(line):
    # json reads the number -0 as the integer 0, which would lose the sign
    # the DOUBLE column x keeps (-0.0): a host that knows x is a DOUBLE
    # passes a float. That is the host's conversion, not the engine's.
    event = json.loads(line, parse_int=_parse_int)
    if isinstance(event.get("x"), _NegZero):
        event["x"] = -0.0
    return event


def main():
    sql_path, input_path, name, max_pending, mode = sys.argv[1:6]
    second, rows = None, []
    if len(sys.argv) == 8:
        second = sys.argv[6]
        with open(sys.argv[7], "rb") as f:
            for line in f.read().split(b"\n"):
                if line:
                    at, row = line.split(b"\t", 1)
                    rows.append((int(at), row))
    with open(sql_path, encoding="utf-8") as f:
        sql = f.read()
    with open(input_path, "rb") as f:
        lines = f.read().split(b"\n")
    out = sys.stdout.buffer

    def emit(r):
        out.write(b"%d\t%d\t%s\t%s\n" % (int(r.final), r.revision, r.key, r.value))

    eng = ubik.Engine(max_pending_records=int(max_pending))
    q = eng.start(sql, name=name)
    fallbacks = 0
    pos = 0

    def push(fn, line):
        nonlocal fallbacks
        event = line
        if mode == "dict":
            try:
                event = _event(line)
            except ValueError:
                fallbacks += 1
        while True:
            try:
                fn(event)
                break
            except ubik.BackpressureError:
                for r in q.records():
                    emit(r)
            except (ubik.MalformedEventError, ubik.EvalError):
                break

    def push_second(upto):
        nonlocal pos
        while pos < len(rows) and rows[pos][0] <= upto:
            push(lambda e: q.push_input(second, e), rows[pos][1])
            pos += 1

    for i, line in enumerate(l for l in lines if l):
        push_second(i)
        event = line
        if mode == "dict":
            try:
                event = _event(line)
            except ValueError:
                fallbacks += 1
        while True:
            try:
                q.push(event)
                break
            except ubik.BackpressureError:
                for r in q.records():
                    emit(r)
            except (ubik.MalformedEventError, ubik.EvalError):
                break
        q.flush()
        for r in q.records():
            emit(r)
    push_second(1 << 62)
    q.close()
    while not q.done:
        r = q.next()
        if r is not None:
            emit(r)
        elif not q.done:
            sys.exit("py_host: after close, next() gave nothing but the stream has not ended")
    st = q.stats()
    st["dict_fallbacks"] = fallbacks
    out.write(b"#stats\t" + json.dumps(st).encode() + b"\n")
    q.release()
    eng.close()


if __name__ == "__main__":
    main()
