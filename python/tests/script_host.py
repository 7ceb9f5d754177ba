"""script_host.py - runs the commands of a behaviour script (testdata/script,
translated by capi/script_test.go) through the Python binding.

    python3 script_host.py PROGRAM

PROGRAM and the output are capi/test/script_host.c's: one command a line
(sql NAME JOIN_BUFFER FILE, push EVENT, input NAME ROW, watermark MICROS,
table-watermark MICROS, end-table, early, close, stats, expect), and one
output line per record (R FINAL REVISION QUERY KEY VALUE), failed call
(E MESSAGE, backslash and newline escaped), stats (S JSON) and expect (X).
Events are pushed as the bytes of their line.
"""

import json
import sys

import ubik


def main():
    with open(sys.argv[1], "rb") as f:
        program = f.read().split(b"\n")
    out = sys.stdout.buffer
    eng = ubik.Engine()
    q = None

    def error(e):
        msg = e.message.replace("\\", "\\\\").replace("\n", "\\n")
        out.write(b"E\t" + msg.encode("utf-8", "surrogateescape") + b"\n")

    def drain():
        try:
            for r in q.records():
                out.write(b"R\t%d\t%d\t%s\t%s\t%s\n" % (int(r.final), r.revision, r.query.encode(), r.key, r.value))
        except ubik.QueryFailedError:
            pass  # a failed query's records end here: the call that failed it says why

    def push(fn, row):
        while True:
            try:
                return fn(row)
            except ubik.BackpressureError:
                drain()

    def run(cmd, arg):
        if cmd == b"push":
            push(q.push, arg)
        elif cmd == b"input":
            name, row = arg.split(b"\t", 1)
            push(lambda r: q.push_input(name.decode(), r), row)
        elif cmd == b"watermark":
            q.advance_watermark(int(arg))
        elif cmd == b"table-watermark":
            q.advance_table_watermark(int(arg))
        elif cmd == b"end-table":
            q.end_table()
        elif cmd == b"early":
            q.flush()
        elif cmd == b"close":
            q.close()
        elif cmd == b"stats":
            out.write(b"S\t" + json.dumps(q.stats()).encode() + b"\n")
        else:
            sys.exit("script_host: unknown command %r" % cmd)

    for line in program:
        if not line:
            continue
        cmd, _, arg = line.partition(b"\t")
        if cmd == b"expect":
            out.write(b"X\n")
        elif cmd == b"sql":
            name, buffer, path = arg.decode().split("\t")
            if q is not None:
                q.release()
                q = None
            with open(path, encoding="utf-8") as f:
                sql = f.read()
            try:
                q = eng.start(sql, name=name or None, join_buffer=int(buffer))
            except ubik.UbikError as e:
                error(e)
        elif q is None:
            out.write(b"E\tno query running\n")
        else:
            err = None
            try:
                run(cmd, arg)
            except ubik.UbikError as e:
                err = e
            drain()
            if err is not None:
                error(err)
    if q is not None:
        q.release()
    eng.close()


if __name__ == "__main__":
    main()
