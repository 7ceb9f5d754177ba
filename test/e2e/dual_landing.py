"""Helpers of dual_landing_broker.sh (Python standard library only).

  gen OUT
      writes the windowed case's input: 50 events, 5 merchants, about 4
      minutes of event time with bounded disorder, and 2 late events.
  inprocess SQL INPUT MODE ADDR DB RECORDS_OUT COUNTS_OUT
      (malformed events are skipped and counted, as on the Kafka path)
      runs the query in SQL over INPUT in process (the ubik Python binding
      over libubik.so), one event at a time: push the event, then publish
      what is due (Query.flush: the early emission), then take every record.
      At the end it closes the input (every window finalizes). Each record
      is landed into Redis db DB by calling the Redis lander's own function
      (FCALL ubik_land_v2, loaded by `e2etool redis-function`, the code
      `ubik land` runs), with the lander's identity: query ":" group_key
      (MODE latest) or query ":" key (MODE continuous). It writes one line
      per record to RECORDS_OUT (key, value, final, revision, window start)
      and the number of records after each event (then after the close) to
      COUNTS_OUT, which the script uses to run the Kafka path in lockstep.
  dump ADDR DB OUT
      writes every key of db DB with all its hash fields, sorted, as hex, so
      two stores can be byte-compared with cmp.
  flush ADDR DB
      empties db DB (after a PING, so an unreachable Redis is named).
"""

import datetime
import socket
import sys

import ubik


class Redis:
    """A minimal RESP2 client: bytes in, bytes out."""

    def __init__(self, addr, db):
        host, port = addr.rsplit(":", 1)
        try:
            self.s = socket.create_connection((host, int(port)), timeout=30)
        except OSError as e:
            sys.exit("dual_landing.py: Redis at %s is unreachable: %s" % (addr, e))
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


def gen(out_path):
    base = datetime.datetime(2026, 7, 18, 10, 0, 0)
    merchants = ["acme", "globex", "hooli", "initech", "umbrella"]
    lines = []
    for i in range(50):
        m = merchants[(i * 7 + i // 3) % 5]
        t = base + datetime.timedelta(seconds=i * 5 + ((i * 37) % 7) - 3, milliseconds=(i * 131) % 1000)
        amount = "%d.%02d" % ((i * 7919) % 500, (i * 31) % 100)
        lines.append('{"event_id":"e%02d","merchant":"%s","customer":"c%d","amount":%s,"event_time":"%s"}'
                     % (i, m, i % 7, amount, t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]))
        if i in (20, 41):  # two events far behind the watermark: late on both paths
            lines.append('{"event_id":"late%02d","merchant":"acme","customer":"c0","amount":1.00,'
                         '"event_time":"2026-07-18 09:59:30.000"}' % i)
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")


def inprocess(sql_path, input_path, mode, addr, db, records_out, counts_out):
    sql = open(sql_path).read()
    r = Redis(addr, db)
    if not r.call(b"FUNCTION", b"LIST", b"LIBRARYNAME", b"ubik_land_v2"):
        sys.exit("dual_landing.py: the lander's Redis function ubik_land_v2 is not loaded (run e2etool redis-function)")
    stats = {"records": 0, "early": 0, "corrections": 0, "finals": 0, "landed": 0, "duplicate": 0, "superseded": 0}
    identities = set()

    def land(rec):
        group = rec.group_key if mode == "latest" else rec.key
        ws = rec.window_start_us if rec.windowed else 0
        we = rec.window_end_us if rec.windowed else 0
        hkey = rec.query.encode() + b":" + group
        # The reply is three counts over the call's keys (one here):
        # landed, duplicate, superseded.
        counts = r.call(b"FCALL", b"ubik_land_v2", b"1", hkey, str(ws).encode(), str(rec.revision).encode(),
                        rec.value, b"1" if rec.final else b"0", str(we).encode(), rec.key)
        if len(counts) != 3 or sum(counts) != 1 or min(counts) < 0:
            sys.exit("dual_landing.py: FCALL ubik_land_v2 replied %r for one key" % (counts,))
        for name, n in zip(("landed", "duplicate", "superseded"), counts):
            stats[name] += n
        identities.add(hkey)

    with ubik.Engine() as eng, eng.start(sql) as q, open(records_out, "wb") as out, open(counts_out, "w") as counts:
        # Flush after every event: the Kafka path is driven to publish at
        # the same points (see the script).

        def drain():
            n = 0
            for rec in q.records():
                out.write(b"%s\t%s\t%d\t%d\t%d\n" % (rec.key, rec.value, 1 if rec.final else 0, rec.revision,
                                                    rec.window_start_us if rec.windowed else 0))
                land(rec)
                stats["records"] += 1
                stats["finals" if rec.final else "early"] += 1
                if rec.revision > 1:
                    stats["corrections"] += 1
                n += 1
            return n

        with open(input_path, "rb") as f:
            for line in f:
                res = q.push_lines(line)
                if res.consumed != len(line):
                    sys.exit("dual_landing.py: in process: event %r not taken (backpressure)" % line)
                if res.error:  # skipped and counted, as the Kafka path does
                    print("in process: not applied: %s" % res.error, file=sys.stderr)
                q.flush()
                counts.write("%d\n" % drain())
        q.close()
        counts.write("%d\n" % drain())
        st = q.stats()
        late, malformed = st["late"], st["malformed"]

    print("in process: %(records)d records (%(early)d early, %(finals)d final, %(corrections)d corrections); "
          "FCALL: %(landed)d landed, %(duplicate)d duplicate, %(superseded)d superseded" % stats, file=sys.stderr)
    # Machine-readable, for the script's assertions. A superseded record is
    # one a landing without the guard would have written over a newer
    # version (the previous minute over the next one).
    print("records=%d early=%d corrections=%d superseded=%d identities=%d late=%d malformed=%d"
          % (stats["records"], stats["early"], stats["corrections"], stats["superseded"], len(identities), late,
             malformed))


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
        f.write("".join(line + "\n" for line in lines))
    print("%d keys, %d fields" % (len(set(keys)), len(lines)))


def flush(addr, db):
    r = Redis(addr, db)
    if r.call(b"PING") != b"PONG":
        sys.exit("dual_landing.py: Redis at %s did not answer PING" % addr)
    r.call(b"FLUSHDB")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"gen": gen, "inprocess": inprocess, "dump": dump, "flush": flush}[cmd](*args)
