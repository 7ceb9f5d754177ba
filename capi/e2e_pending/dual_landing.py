"""Helpers of dual_landing_broker.sh (standard library only).

  inprocess SQL INPUT NAME MODE ADDR DB RECORDS_OUT
      runs query NAME over INPUT in process (the ubik Python binding over
      libubik.so), without closing the input (so exactly the windows the
      watermark finalized are emitted, as on the broker path), lands every
      record into Redis db DB with the redislander's layout and guard, and
      writes key<TAB>value per record to RECORDS_OUT.
  dump ADDR DB OUT
      writes every key of db DB with all its hash fields, sorted, as hex, so
      two stores can be byte-compared with cmp.

The layout is the one land/redislander documents: a hash {value,
window_start, revision, final, window_end, key} under query + ":" + group
(MODE latest: the key without its window cells; continuous: the key),
written only when the record's (window_start, revision) is at or past the
stored pair.
"""

import socket
import sys

import ubik


class Redis:
    """A minimal RESP2 client: bytes in, bytes out."""

    def __init__(self, addr, db):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=30)
        self.f = self.s.makefile("rb")
        self.call(b"SELECT", str(db).encode())

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self._read()

    def _read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            raise RuntimeError("redis: " + rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise RuntimeError("redis: bad reply %r" % line)


def newer(ws, rev, cur_ws, cur_rev):
    return (ws, rev) > (cur_ws, cur_rev)


def inprocess(sql_path, input_path, name, mode, addr, db, records_out):
    sql = open(sql_path).read()
    r = Redis(addr, db)
    n = 0
    with ubik.Engine() as eng, eng.start(sql, name=name) as q, open(records_out, "wb") as out:

        def land(rec):
            group = rec.group_key if mode == "latest" else rec.key
            ws = rec.window_start_us if rec.windowed else 0
            we = rec.window_end_us if rec.windowed else 0
            hkey = rec.query.encode() + b":" + group
            cur = r.call(b"HMGET", hkey, b"window_start", b"revision")
            if cur[0] is not None and not newer(ws, rec.revision, int(cur[0]), int(cur[1])):
                return
            r.call(
                b"HSET", hkey,
                b"value", rec.value,
                b"window_start", str(ws).encode(),
                b"revision", str(rec.revision).encode(),
                b"final", b"1" if rec.final else b"0",
                b"window_end", str(we).encode(),
                b"key", rec.key,
            )

        with open(input_path, "rb") as f:
            data = f.read()
        off = 0
        while off < len(data):
            res = q.push_lines(data, off)
            off += res.consumed
            if res.error:
                print("in process: skipped: %s" % res.error, file=sys.stderr)
            for rec in q.records():
                out.write(rec.key + b"\t" + rec.value + b"\n")
                land(rec)
                n += 1
    print("in process: %d records landed into db %s" % (n, db), file=sys.stderr)


def dump(addr, db, out_path):
    r = Redis(addr, db)
    keys, cursor = [], b"0"
    while True:
        cursor, batch = r.call(b"SCAN", cursor, b"COUNT", b"1000")
        keys.extend(batch)
        if cursor == b"0":
            break
    lines = []
    for k in sorted(set(keys)):
        h = r.call(b"HGETALL", k)
        for i in range(0, len(h), 2):
            lines.append(k.hex() + " " + h[i].hex() + " " + h[i + 1].hex())
    lines.sort()
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("db %s: %d keys" % (db, len(set(keys))), file=sys.stderr)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "inprocess":
        inprocess(*args)
    elif cmd == "dump":
        dump(*args)
    else:
        sys.exit("usage: dual_landing.py inprocess|dump ...")
