"""Tests of the ubik Python binding (standard library unittest only).

Run from the repository root after building the library (capi/build.sh):

    PYTHONPATH=python python3 -m unittest discover -s python/tests

$UBIK_LIB names the library to test (default: build/libubik.so); $UBIK_BIN
names the ubik CLI for the byte-equality test (default: built with go).
capi/capi_test.go runs this suite with both set (go test ./capi).
"""

import datetime
import decimal
import io
import json
import os
import pathlib
import subprocess
import tempfile
import threading
import unittest

import ubik
from ubik import errors

REPO = pathlib.Path(__file__).resolve().parents[2]
EVENTS = REPO / "examples" / "events.jsonl"

TUMBLE_SQL = """
CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount DOUBLE,
  event_time TIMESTAMP, WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND) WITH (format = 'jsonl');
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
"""

VIEW_SQL = """
CREATE SOURCE ev (k VARCHAR, v BIGINT) WITH (format = 'jsonl');
SELECT k, count(*) AS n, sum(v) AS s FROM ev GROUP BY k
"""

_cli_lock = threading.Lock()
_cli_path = None


def ubik_cli():
    """The ubik CLI: $UBIK_BIN, or built once with go into a temp dir."""
    global _cli_path
    with _cli_lock:
        if _cli_path is None:
            env = os.environ.get("UBIK_BIN")
            if env:
                _cli_path = env
            else:
                d = tempfile.mkdtemp(prefix="ubik-py-test-")
                path = os.path.join(d, "ubik")
                subprocess.run(["go", "build", "-o", path, "./cmd/ubik"], cwd=REPO, check=True)
                _cli_path = path
        return _cli_path


def cli_records(sql, input_path):
    """(key bytes, value bytes) per record, as `ubik run` prints them."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql)
        sql_path = f.name
    try:
        out = subprocess.run(
            [ubik_cli(), "run", sql_path, "--input", str(input_path), "--no-progress", "--quiet"],
            check=True,
            capture_output=True,
        ).stdout
    finally:
        os.unlink(sql_path)
    recs = []
    for line in out.split(b"\n"):
        if line:
            k, _, v = line.partition(b"\t")
            recs.append((k, v))
    return recs


class StreamTest(unittest.TestCase):
    def test_keys_are_the_cli_bytes(self):
        # The in-process key (and value) bytes equal what `ubik run` prints,
        # record for record, from the same encoder.
        want = cli_records(TUMBLE_SQL, EVENTS)
        self.assertGreater(len(want), 10)
        got = [(r.key, r.value) for r in ubik.stream(TUMBLE_SQL, source=EVENTS, meta=True)]
        self.assertEqual(got, want)
        keyed = list(ubik.stream(TUMBLE_SQL, source=EVENTS))
        self.assertEqual([k for k, _ in keyed], [k for k, _ in want])
        for (k, row), (_, v) in zip(keyed, want):
            self.assertIsInstance(k, bytes)
            self.assertEqual(row, json.loads(v))

    def test_keys_false_yields_rows(self):
        rows = list(ubik.stream(TUMBLE_SQL, source=EVENTS, keys=False))
        keyed = list(ubik.stream(TUMBLE_SQL, source=EVENTS, keys=True))
        self.assertEqual(rows, [row for _, row in keyed])
        self.assertIsInstance(rows[0], dict)
        # column order is the SELECT order
        self.assertEqual(list(rows[0]), ["merchant", "window_start", "orders", "total", "biggest"])

    def test_sources_agree(self):
        # A path, a binary file, a text file and an iterable of dicts or
        # strings are the same input.
        want = list(ubik.stream(TUMBLE_SQL, source=str(EVENTS)))
        with open(EVENTS, "rb") as f:
            self.assertEqual(list(ubik.stream(TUMBLE_SQL, source=f)), want)
        with open(EVENTS, "r", encoding="utf-8") as f:
            self.assertEqual(list(ubik.stream(TUMBLE_SQL, source=f)), want)
        lines = EVENTS.read_text().splitlines()
        self.assertEqual(list(ubik.stream(TUMBLE_SQL, source=iter(lines))), want)
        self.assertEqual(list(ubik.stream(TUMBLE_SQL, source=[json.loads(l) for l in lines])), want)
        self.assertEqual(list(ubik.stream(TUMBLE_SQL, source=io.BytesIO(EVENTS.read_bytes()))), want)

    def test_meta(self):
        recs = list(ubik.stream(TUMBLE_SQL, source=EVENTS, meta=True, name="totals"))
        for r in recs:
            self.assertTrue(r.final)
            self.assertEqual(r.revision, 1)
            self.assertTrue(r.windowed)
            self.assertEqual(r.query, "totals")
            self.assertEqual(r.window_positions, (1,))
            self.assertEqual(r.window_end_us - r.window_start_us, 60_000_000)
            self.assertEqual(r.key_cells[1], r.window_start.strftime("%Y-%m-%d %H:%M:%S"))
            self.assertEqual(r.row["window_start"], r.key_cells[1])
            self.assertEqual(r.window_start.tzinfo, datetime.timezone.utc)
            self.assertEqual(r.group_key, r.key.split(b", ")[0] + b"]")

    def test_backpressure_is_handled(self):
        # A tiny output buffer: the stream drains and resumes, losing nothing.
        events = [{"k": "k%d" % i, "v": i} for i in range(5000)]
        got = list(ubik.stream(VIEW_SQL, source=events, max_pending_records=3))
        self.assertEqual(len(got), 5000)
        self.assertEqual(got[4999], (b'["k4999"]', {"k": "k4999", "n": 1, "s": 4999}))

    def test_malformed_are_skipped_and_reported(self):
        rejects = []
        src = ['{"k":"a","v":1}', "nope", '{"k":"a","v":"x"}', '{"k":"a","v":2}']
        got = list(ubik.stream(VIEW_SQL, source=src, on_reject=rejects.append))
        self.assertEqual([row["s"] for _, row in got], [1, 3])
        self.assertEqual(len(rejects), 1)
        self.assertIn("2 lines skipped", rejects[0])
        with self.assertRaises(ubik.MalformedEventError) as cm:
            list(ubik.stream(VIEW_SQL, source=src, strict=True))
        self.assertEqual(cm.exception.code, errors.ERR_MALFORMED_EVENT)
        self.assertEqual(cm.exception.name, "UBIK_ERR_MALFORMED_EVENT")
        self.assertIn("line 2", cm.exception.message)

    def test_non_finite_floats_are_not_lost(self):
        # json.dumps writes NaN, Infinity and -Infinity; the engine reads
        # them, and a key cell holding any of them (or None) is one group.
        sql = """
CREATE SOURCE ev (g VARCHAR, x DOUBLE) WITH (format = 'jsonl');
SELECT g, x, count(*) AS n FROM ev GROUP BY g, x
"""
        values = [float("inf"), float("-inf"), float("nan"), None, 1.5, -0.0, 0.0]
        events = [{"g": "x", "x": values[i % len(values)]} for i in range(4000)]
        rejects = []
        got = list(ubik.stream(sql, source=events, on_reject=rejects.append))
        self.assertEqual(rejects, [])
        self.assertEqual(len(got), 4000)
        latest = {}
        for key, row in got:
            latest[key] = row
        self.assertEqual(sorted(latest), [b'["x", 0.0]', b'["x", 1.5]', b'["x", null]'])
        self.assertEqual(latest[b'["x", null]']["n"], sum(1 for e in events if e["x"] is None or e["x"] != e["x"] or abs(e["x"]) == float("inf")))
        self.assertEqual(sum(row["n"] for row in latest.values()), 4000)

    def test_decimal_is_exact(self):
        # DECIMAL cells come back as decimal.Decimal with the engine's exact
        # text, and a decimal.Decimal in a dict event goes in exactly; a
        # DOUBLE column next to it stays a float.
        sql = """
CREATE SOURCE ev (g VARCHAR, d DECIMAL(38,9), x DOUBLE) WITH (format = 'jsonl');
SELECT g, sum(d) AS total, max(d) AS biggest, sum(x) AS fx, count(*) AS n FROM ev GROUP BY g
"""
        big = decimal.Decimal("12345678901234567890123456789.123456789")  # 38 digits
        events = [
            {"g": "a", "d": big, "x": 0.1},
            {"g": "a", "d": decimal.Decimal("0.000000001"), "x": 0.2},
            {"g": "a", "d": decimal.Decimal("-1E-9"), "x": 0.0},
            {"g": "a", "d": decimal.Decimal("1"), "x": 0.0},
        ]
        rows = list(ubik.stream(sql, source=events, keys=False))
        last = rows[-1]
        self.assertIsInstance(last["total"], decimal.Decimal)
        self.assertEqual(str(last["total"]), "12345678901234567890123456790.123456789")
        self.assertEqual(last["biggest"], big)
        self.assertIsInstance(last["fx"], float)
        self.assertAlmostEqual(last["fx"], 0.3)
        self.assertEqual(last["n"], 4)
        self.assertEqual(ubik.encode_event({"d": big}), b'{"d":12345678901234567890123456789.123456789}')
        for bad in (decimal.Decimal("NaN"), decimal.Decimal("Infinity")):
            with self.assertRaises(ValueError):
                ubik.encode_event({"d": bad})

    def test_early_exit_releases_the_query(self):
        gen = ubik.stream(VIEW_SQL, source=({"k": "k%d" % i, "v": i} for i in range(100)))
        self.assertEqual(next(gen)[0], b'["k0"]')
        gen.close()  # runs the generator's cleanup: the query is freed

    def test_sql_error(self):
        with self.assertRaises(ubik.SQLError) as cm:
            list(ubik.stream("SELECT x, count(*) FROM nowhere GROUP BY x", source=[]))
        e = cm.exception
        self.assertEqual(e.code, errors.ERR_SQL)
        self.assertFalse(e.retryable)
        self.assertIn("nowhere", e.message)
        self.assertIn("UBIK_ERR_SQL", str(e))

    def test_bad_source(self):
        with self.assertRaises(TypeError):
            list(ubik.stream(VIEW_SQL, source=b'{"k":"a"}'))
        with self.assertRaises(TypeError):
            list(ubik.stream(VIEW_SQL, source=[{"k": object()}]))


class QueryTest(unittest.TestCase):
    def test_push_iterate_close(self):
        with ubik.Engine() as eng, eng.start(TUMBLE_SQL, name="m") as q:
            q.push({"event_id": "e1", "merchant": "acme", "amount": 10.5, "event_time": "2026-07-18 10:00:00"})
            q.push('{"event_id":"e2","merchant":"acme","amount":0.1,"event_time":"2026-07-18 10:00:20.5"}')
            q.push(b'{"event_id":"e3","merchant":"zeta","amount":3,"event_time":"2026-07-18T10:00:30Z"}')
            # a datetime is sent as DuckDB text (UTC)
            q.push(
                {
                    "event_id": "e4",
                    "merchant": "acme",
                    "amount": 0.2,
                    "event_time": datetime.datetime(2026, 7, 18, 10, 0, 59, 999999),
                }
            )
            self.assertIsNone(q.next())
            self.assertFalse(q.done)
            q.advance_watermark(datetime.datetime(2026, 7, 18, 10, 1, tzinfo=datetime.timezone.utc))
            recs = list(q.records())
            self.assertEqual([r.key for r in recs], [b'["acme", "2026-07-18 10:00:00"]', b'["zeta", "2026-07-18 10:00:00"]'])
            self.assertEqual(
                recs[0].value,
                b'{"merchant": "acme", "window_start": "2026-07-18 10:00:00", "orders": 3, "total": 10.8, "biggest": 10.5}',
            )
            self.assertEqual(recs[0].query, "m")
            st = q.stats()
            self.assertEqual(st["events_in"], 4)
            self.assertEqual(st["records_out"], 2)
            self.assertEqual(st["watermark_us"], 1784368860000000)
            q.close()
            q.close()
            self.assertEqual(list(q.records()), [])
            self.assertTrue(q.done)
            with self.assertRaises(ubik.ClosedError):
                q.push({"merchant": "acme"})
        # released on leaving the block
        self.assertIsNone(q.handle)
        with self.assertRaises(ubik.InvalidHandleError):
            q.next()

    def test_flush_and_revisions(self):
        sql = (
            "CREATE SOURCE e (m VARCHAR, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');"
            "SELECT m, count(*) AS n FROM e GROUP BY m, TUMBLE(t, INTERVAL '1' HOUR)"
            " EMIT EARLY EVERY INTERVAL '1' HOUR"
        )
        with ubik.Engine() as eng, eng.start(sql) as q:
            q.push({"m": "a", "t": "2026-07-18 09:10:00"})
            q.flush()
            r1 = q.next()
            q.push({"m": "a", "t": "2026-07-18 09:20:00"})
            q.tick()  # not due yet: nothing
            self.assertIsNone(q.next())
            q.flush()
            r2 = q.next()
            q.close()
            r3 = q.next()
            self.assertEqual([r.key for r in (r1, r2, r3)], [b'["a", "2026-07-18 09:00:00"]'] * 3)
            self.assertEqual([(r.final, r.revision, r.row["n"]) for r in (r1, r2, r3)], [(False, 1, 1), (False, 2, 2), (True, 3, 2)])

    def test_backpressure_error(self):
        with ubik.Engine(max_pending_records=1) as eng, eng.start(VIEW_SQL) as q:
            q.push({"k": "a", "v": 1})
            with self.assertRaises(ubik.BackpressureError) as cm:
                q.push({"k": "b", "v": 1})
            self.assertTrue(cm.exception.retryable)
            self.assertEqual(cm.exception.code, errors.ERR_BACKPRESSURE)
            self.assertEqual(q.next().key, b'["a"]')
            q.push({"k": "b", "v": 1})
            self.assertEqual(q.next().key, b'["b"]')

    def test_backpressure_bound(self):
        # One push finalizes a window of 50 groups: it is applied, at most
        # max_pending_records records are held, the next push is refused
        # until they are taken, and close() queues without refusing.
        sql = (
            "CREATE SOURCE e (k VARCHAR, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');"
            "SELECT k, count(*) AS n FROM e GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE)"
        )
        with ubik.Engine(max_pending_records=3) as eng, eng.start(sql) as q:
            for i in range(50):
                q.push({"k": "k%02d" % i, "t": "2026-07-18 10:00:%02d" % i})
            self.assertEqual(q.stats()["pending"], 0)
            q.push({"k": "x", "t": "2026-07-18 10:03:00"})
            self.assertEqual(q.stats()["pending"], 3)
            with self.assertRaises(ubik.BackpressureError):
                q.push({"k": "y", "t": "2026-07-18 10:03:01"})
            q.close()
            keys = []
            while True:
                r = q.next()
                self.assertLessEqual(q.stats()["pending"], 3)
                if r is None:
                    break
                keys.append(r.key)
            self.assertTrue(q.done)
            self.assertEqual(keys, [b'["k%02d", "2026-07-18 10:00:00"]' % i for i in range(50)] + [b'["x", "2026-07-18 10:03:00"]'])

    def test_stream_drains_a_big_window(self):
        events = [{"k": "k%d" % i, "t": "2026-07-18 10:00:00"} for i in range(3000)]
        sql = (
            "CREATE SOURCE e (k VARCHAR, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');"
            "SELECT k, count(*) AS n FROM e GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE)"
        )
        got = list(ubik.stream(sql, source=events, max_pending_records=2))
        self.assertEqual(len(got), 3000)
        self.assertEqual(got[-1], (b'["k2999", "2026-07-18 10:00:00"]', {"k": "k2999", "n": 1}))

    def test_push_lines(self):
        with ubik.Engine(max_pending_records=2) as eng, eng.start(VIEW_SQL) as q:
            data = b'{"k":"a","v":1}\r\n\n{"k":"b","v":oops}\n{"k":"c","v":3}\n{"k":"d","v":4}\n'
            res = q.push_lines(data)
            # a and c applied, b rejected, d waits: the buffer holds two
            self.assertEqual(res.rejected, 1)
            self.assertLess(res.consumed, len(data))
            self.assertEqual([r.key for r in q.records()], [b'["a"]', b'["c"]'])
            res2 = q.push_lines(data, res.consumed)
            self.assertEqual(res.consumed + res2.consumed, len(data))
            self.assertEqual(res2.rejected, 0)
            self.assertEqual([r.key for r in q.records()], [b'["d"]'])
            with self.assertRaises(ValueError):
                q.push_lines(data, len(data) + 1)

    def test_malformed_event_error(self):
        with ubik.Engine() as eng, eng.start(VIEW_SQL) as q:
            with self.assertRaises(ubik.MalformedEventError) as cm:
                q.push("{")
            self.assertIn("event 1", cm.exception.message)
            q.push({"k": "a", "v": 1})  # the query goes on
            self.assertEqual(q.stats()["malformed"], 1)

    def test_stats_count_unchanged_and_duplicates(self):
        sql = """
CREATE SOURCE ev (id VARCHAR, k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)
  WITH (format = 'jsonl', dedup_key = 'id', dedup_within = '1 hour');
SELECT k, max(v) AS top FROM ev GROUP BY k
"""
        with ubik.Engine() as eng, eng.start(sql) as q:
            for i, (ev_id, v) in enumerate([("a", 5), ("b", 3), ("a", 5), ("c", 7)]):
                q.push({"id": ev_id, "k": "x", "v": v, "ts": "2026-07-18 10:00:%02d" % i})
            # b leaves the maximum at 5: no record; the second a is a copy
            self.assertEqual([(r.value, r.revision) for r in q.records()], [(b'{"k": "x", "top": 5}', 1), (b'{"k": "x", "top": 7}', 2)])
            st = q.stats()
            self.assertEqual((st["records_out"], st["unchanged_suppressed"], st["duplicates"], st["dedup_late"]), (2, 1, 1, 0))

    def test_strict_query_fails(self):
        with ubik.Engine() as eng, eng.start(VIEW_SQL, strict=True) as q:
            q.push({"k": "a", "v": 1})
            with self.assertRaises(ubik.MalformedEventError):
                q.push('{"k": 1}x')
            with self.assertRaises(ubik.QueryFailedError):
                q.push({"k": "a", "v": 1})
            self.assertEqual(q.next().key, b'["a"]')
            with self.assertRaises(ubik.QueryFailedError):
                q.next()

    def test_engine_errors(self):
        with self.assertRaises(ubik.InvalidOptionsError) as cm:
            ubik.Engine(max_pending_records=0)
        self.assertIn("max_pending_records", cm.exception.message)
        with ubik.Engine() as eng:
            with self.assertRaises(ubik.NoQueryError):
                eng.start("CREATE SOURCE s (a BIGINT) WITH (format = 'jsonl');")
            with self.assertRaises(ubik.SQLError):
                eng.register_source("CREATE SOURCE (")
            eng.register_source("CREATE SOURCE s (a VARCHAR) WITH (format = 'jsonl');")
            with eng.start("SELECT a, count(*) AS n FROM s GROUP BY a") as q:
                q.push({"a": "x"})
                self.assertEqual(q.next().value, b'{"a": "x", "n": 1}')
        with self.assertRaises(ubik.ClosedError):
            eng.start(VIEW_SQL)

    def test_error_table(self):
        lib = ubik.library()
        for code, cls in errors._BY_CODE.items():
            name = lib.ubik_error_name(code).decode()
            self.assertTrue(name.startswith("UBIK_ERR_"), name)
            # the Python constant of that name has that number
            self.assertEqual(getattr(errors, name[len("UBIK_"):]), code)
            self.assertEqual(
                bool(lib.ubik_error_retryable(code)), cls in (ubik.BackpressureError, ubik.JoinBufferError)
            )
        self.assertEqual(lib.ubik_error_name(999), b"UBIK_UNKNOWN")

    def test_temporal_join(self):
        # Each usage event joins the price valid at its time; an event waits
        # for the table's watermark, so the inputs may come in any order.
        sql = """
CREATE SOURCE usage (customer VARCHAR, plan VARCHAR, qty DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE TABLE prices (plan VARCHAR, price DECIMAL(12,6), valid_from TIMESTAMP,
  PRIMARY KEY (plan) NOT ENFORCED, WATERMARK FOR valid_from AS valid_from);
SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '1' HOUR) AS hour, sum(u.qty * p.price) AS charge, count(*) AS events
FROM usage u JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.plan = p.plan
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '1' HOUR)
"""
        with ubik.Engine() as eng, eng.start(sql, join_buffer=2) as q:
            q.push_input("usage", {"customer": "c1", "plan": "pro", "qty": decimal.Decimal("3.00"), "ts": "2026-07-18 10:10:00"})
            q.push_input("USAGE", '{"customer":"c1","plan":"pro","qty":"1.50","ts":"2026-07-18 10:40:00"}')
            with self.assertRaises(ubik.JoinBufferError) as cm:
                q.push_input("usage", {"customer": "c2", "plan": "pro", "qty": "1", "ts": "2026-07-18 10:50:00"})
            self.assertTrue(cm.exception.retryable)
            with self.assertRaises(ubik.InvalidArgumentError) as cm:
                q.push_input("price", {"plan": "pro"})
            self.assertIn("its inputs: usage, prices", cm.exception.message)
            q.push_input("prices", {"plan": "pro", "price": decimal.Decimal("0.100000"), "valid_from": "2026-07-18 10:00:00"})
            q.push_input("prices", b'{"plan":"pro","price":"0.300000","valid_from":"2026-07-18 10:30:00"}')
            q.advance_table_watermark(datetime.datetime(2026, 7, 18, 11, 0))
            st = q.stats()
            self.assertEqual(st["join"]["joined"], 2)
            self.assertEqual(st["join"]["buffered"], 0)
            self.assertEqual(st["table"], {"rows_in": 2, "malformed": 0, "late": 0})
            self.assertEqual(st["join"]["table_watermark_us"], 1784372400000000)
            q.push_input("usage", {"customer": "c2", "plan": "pro", "qty": "1", "ts": "2026-07-18 10:50:00"})
            q.end_table()
            with self.assertRaises(ubik.ClosedError):
                q.push_input("prices", {"plan": "pro", "price": "9", "valid_from": "2026-07-18 12:00:00"})
            q.close()
            finals = {r.key: r.row for r in q.records() if r.final}
            # c1: 3.00 * 0.10 + 1.50 * 0.30, exactly; c2: 1 * 0.30
            self.assertEqual(finals[b'["c1", "2026-07-18 10:00:00"]']["charge"], decimal.Decimal("0.75000000"))
            self.assertEqual(finals[b'["c2", "2026-07-18 10:00:00"]']["charge"], decimal.Decimal("0.30000000"))
        with ubik.Engine() as eng, eng.start(VIEW_SQL) as q:
            with self.assertRaises(ubik.InvalidArgumentError):
                q.end_table()
            with self.assertRaises(ubik.InvalidArgumentError):
                q.advance_table_watermark(0)
            q.push_input("ev", {"k": "x", "v": 1})
            self.assertNotIn("table", q.stats())

    def test_interval_join(self):
        # Clicks within 5 minutes after their impression; the right input by
        # name, its own watermark and end.
        sql = """
CREATE SOURCE impressions (id BIGINT, campaign VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE clicks (impression_id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT i.campaign, TUMBLE_START(c.ts, INTERVAL '10' MINUTE) AS w, count(*) AS clicks_after_view
FROM impressions i JOIN clicks c ON c.impression_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '5' MINUTE
GROUP BY i.campaign, TUMBLE(c.ts, INTERVAL '10' MINUTE)
"""
        with ubik.Engine() as eng, eng.start(sql) as q:
            q.push_input("clicks", {"impression_id": 1, "ts": "2026-07-18 10:02:00"})
            q.push_input("impressions", {"id": 1, "campaign": "a", "ts": "2026-07-18 10:00:00"})
            q.push_input("impressions", {"id": 2, "campaign": "b", "ts": "2026-07-18 10:01:00"})
            q.push_input("Clicks", {"impression_id": 1, "ts": "2026-07-18 10:04:59"})
            q.push_input("clicks", {"impression_id": 2, "ts": "2026-07-18 10:07:00"})  # 6 minutes: no match
            # behind the clicks' watermark (10:07): late, not joined
            q.push_input("clicks", {"impression_id": 1, "ts": "2026-07-18 10:03:00"})
            q.advance_table_watermark(datetime.datetime(2026, 7, 18, 10, 8))
            st = q.stats()
            self.assertEqual(st["interval"]["matches"], 2)
            self.assertEqual(st["interval"]["right_rows"], 4)
            self.assertEqual(st["interval"]["late_right"], 1)
            self.assertEqual(st["interval"]["right_watermark_us"], 1784369280000000)
            self.assertNotIn("join", st)
            q.end_table()
            with self.assertRaises(ubik.ClosedError):
                q.push_input("clicks", {"impression_id": 1, "ts": "2026-07-18 10:09:00"})
            q.close()
            finals = {r.key: r.row["clicks_after_view"] for r in q.records() if r.final}
            self.assertEqual(finals, {b'["a", "2026-07-18 10:00:00"]': 2})

    def test_threads(self):
        # One thread pushes while this one takes records from the same query.
        n = 20000
        with ubik.Engine(max_pending_records=50) as eng, eng.start(VIEW_SQL) as q:
            failure = []

            def produce():
                try:
                    for i in range(n):
                        ev = {"k": "t%d" % (i % 13), "v": i}
                        while True:
                            try:
                                q.push(ev)
                                break
                            except ubik.BackpressureError:
                                pass
                    q.close()
                except Exception as e:  # reported by the main thread
                    failure.append(e)

            t = threading.Thread(target=produce)
            t.start()
            counts = {}
            got = 0
            while not q.done:
                r = q.next()
                if r is None:
                    if failure:
                        break
                    continue
                got += 1
                k = r.key_cells[0]
                counts[k] = counts.get(k, 0) + 1
                self.assertEqual(r.row["n"], counts[k])
            t.join()
            self.assertEqual(failure, [])
            self.assertEqual(got, n)


if __name__ == "__main__":
    unittest.main()
