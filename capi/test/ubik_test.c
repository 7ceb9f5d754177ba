/*
 * ubik_test.c - the C test program of libubik.so, driven by capi_test.go.
 *
 *   ubik_test selftest            behaviour of every function (keys, values,
 *                                 metadata, errors, ownership, threads)
 *   ubik_test volume N            N records through ubik_push_lines and
 *                                 ubik_next_keyed, each checked (run under
 *                                 valgrind and AddressSanitizer/LeakSanitizer)
 *   ubik_test misuse WHAT         breaks an ownership rule on purpose, so the
 *                                 test can show the sanitizer catches it:
 *                                 stale-pointer (reads a key after the next
 *                                 ubik_next_keyed) or leak (never frees a query)
 *   ubik_test cat SQL INPUT NAME  runs query NAME of the script in file SQL
 *                                 over the JSON lines in file INPUT and prints
 *                                 key<TAB>value per record, as `ubik run` does
 *
 * Exit status 0 on success; on failure it names the check, file and line.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ubik.h"

static void die(const char *file, int line, const char *fmt, ...) {
	va_list ap;
	fprintf(stderr, "%s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

#define CHECK(cond, ...)                                                        \
	do {                                                                        \
		if (!(cond)) die(__FILE__, __LINE__, "check failed: " #cond ": " __VA_ARGS__); \
	} while (0)

/* EXPECT_RC checks a call's status and prints the library's message if not. */
#define EXPECT_RC(want, call)                                                   \
	do {                                                                        \
		int rc_ = (call);                                                       \
		if (rc_ != (want))                                                      \
			die(__FILE__, __LINE__, "%s returned %s (%d), want %s: %s", #call,  \
			    ubik_error_name(rc_), rc_, ubik_error_name(want), ubik_last_error()); \
	} while (0)

#define OK(call) EXPECT_RC(UBIK_OK, call)

static int contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static int bytes_eq(const uint8_t *p, size_t n, const char *want) {
	return n == strlen(want) && memcmp(p, want, n) == 0;
}

static int push_str(ubik_query q, const char *ev) { return ubik_push(q, ev, strlen(ev)); }

/* A record copied out of the library's buffers. */
typedef struct {
	char *key, *value, *group;
	ubik_meta meta;
	int32_t pos[4];
	char query[64];
} rec;

static void rec_free(rec *r) {
	free(r->key);
	free(r->value);
	free(r->group);
}

static char *dup_bytes(const uint8_t *p, size_t n) {
	char *s = malloc(n + 1);
	CHECK(s != NULL, "out of memory");
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

/* next_rec takes one record; returns the status. */
static int next_rec(ubik_query q, rec *r) {
	const uint8_t *k, *v;
	size_t kl, vl;
	ubik_meta m;
	int rc = ubik_next_keyed(q, &k, &kl, &v, &vl, &m);
	if (rc != UBIK_OK) return rc;
	r->key = dup_bytes(k, kl);
	r->value = dup_bytes(v, vl);
	r->group = dup_bytes(m.group_key, m.group_key_len);
	r->meta = m;
	r->meta.group_key = NULL;
	CHECK(m.window_positions_len <= 4, "%zu window positions", m.window_positions_len);
	for (size_t i = 0; i < m.window_positions_len; i++) r->pos[i] = m.window_positions[i];
	r->meta.window_positions = NULL;
	CHECK(m.query_len < sizeof r->query, "query name too long");
	memcpy(r->query, m.query, m.query_len);
	r->query[m.query_len] = '\0';
	CHECK(m.query[m.query_len] == '\0', "query name not NUL-terminated");
	r->meta.query = NULL;
	return rc;
}

static void expect_rec(const char *file, int line, ubik_query q, const char *key, const char *value,
                       int final, uint64_t revision) {
	rec r;
	int rc = next_rec(q, &r);
	if (rc != UBIK_OK)
		die(file, line, "ubik_next_keyed returned %s, want a record %s: %s", ubik_error_name(rc), key,
		    ubik_last_error());
	if (strcmp(r.key, key) != 0) die(file, line, "key %s, want %s", r.key, key);
	if (strcmp(r.value, value) != 0) die(file, line, "value %s, want %s", r.value, value);
	if (r.meta.final != final) die(file, line, "final %d, want %d for %s", r.meta.final, final, key);
	if (r.meta.revision != revision)
		die(file, line, "revision %" PRIu64 ", want %" PRIu64 " for %s", r.meta.revision, revision, key);
	rec_free(&r);
}
#define EXPECT_REC(q, k, v, f, rev) expect_rec(__FILE__, __LINE__, q, k, v, f, rev)

/* ---- selftest ------------------------------------------------------------ */

static const char *orders_sql =
    "CREATE SOURCE events (event_id VARCHAR, merchant VARCHAR, amount DOUBLE, event_time TIMESTAMP,\n"
    "  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND) WITH (format = 'jsonl');\n"
    "CREATE VIEW merchant_totals AS\n"
    "SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,\n"
    "       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest\n"
    "FROM events\n"
    "GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)";

static void test_error_table(void) {
	CHECK(ubik_abi_version() == UBIK_ABI_VERSION, "abi %d", ubik_abi_version());
	static const struct {
		int code;
		const char *name;
		int retryable;
	} want[] = {
	    {UBIK_OK, "UBIK_OK", 0},
	    {UBIK_NONE, "UBIK_NONE", 0},
	    {UBIK_END, "UBIK_END", 0},
	    {UBIK_ERR_INVALID_ARGUMENT, "UBIK_ERR_INVALID_ARGUMENT", 0},
	    {UBIK_ERR_INVALID_HANDLE, "UBIK_ERR_INVALID_HANDLE", 0},
	    {UBIK_ERR_INVALID_OPTIONS, "UBIK_ERR_INVALID_OPTIONS", 0},
	    {UBIK_ERR_SQL, "UBIK_ERR_SQL", 0},
	    {UBIK_ERR_NO_QUERY, "UBIK_ERR_NO_QUERY", 0},
	    {UBIK_ERR_MALFORMED_EVENT, "UBIK_ERR_MALFORMED_EVENT", 0},
	    {UBIK_ERR_EVAL, "UBIK_ERR_EVAL", 0},
	    {UBIK_ERR_BACKPRESSURE, "UBIK_ERR_BACKPRESSURE", 1},
	    {UBIK_ERR_CLOSED, "UBIK_ERR_CLOSED", 0},
	    {UBIK_ERR_QUERY_FAILED, "UBIK_ERR_QUERY_FAILED", 0},
	    {UBIK_ERR_INTERNAL, "UBIK_ERR_INTERNAL", 0},
	    {UBIK_ERR_JOIN_BUFFER, "UBIK_ERR_JOIN_BUFFER", 1},
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		CHECK(strcmp(ubik_error_name(want[i].code), want[i].name) == 0, "name of %d is %s", want[i].code,
		      ubik_error_name(want[i].code));
		CHECK(ubik_error_retryable(want[i].code) == want[i].retryable, "%s retryable", want[i].name);
		CHECK(strlen(ubik_error_description(want[i].code)) > 10, "%s has no description", want[i].name);
		/* static: the same pointer every time */
		CHECK(ubik_error_name(want[i].code) == ubik_error_name(want[i].code), "%s not static", want[i].name);
	}
	CHECK(strcmp(ubik_error_name(12345), "UBIK_UNKNOWN") == 0, "unknown code name");
	CHECK(ubik_error_retryable(12345) == 0, "unknown code retryable");
}

static void test_open_errors(void) {
	ubik_engine eng = 0;
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_engine_open(NULL, NULL));
	CHECK(ubik_last_error_code() == UBIK_ERR_INVALID_ARGUMENT, "last code %d", ubik_last_error_code());
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_engine_open("{\"max_pending_records\": 0}", &eng));
	CHECK(contains(ubik_last_error(), "max_pending_records"), "message: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_engine_open("{\"max_pending\": 5}", &eng));
	CHECK(contains(ubik_last_error(), "max_pending"), "message: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_engine_open("[1]", &eng));
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_engine_open("{} {}", &eng));
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_engine_open("{\"max_pending_records\": \"x\"}", &eng));
	CHECK(eng == 0, "handle stored on failure");

	OK(ubik_engine_open("", &eng));
	CHECK(eng != 0, "zero handle");
	ubik_query q = 0;
	EXPECT_RC(UBIK_ERR_SQL, ubik_query_start(eng, "SELECT nope FROM", NULL, &q));
	CHECK(strlen(ubik_last_error()) > 0, "no SQL error message");
	EXPECT_RC(UBIK_ERR_SQL, ubik_query_start(eng, "SELECT x, count(*) FROM missing GROUP BY x", NULL, &q));
	CHECK(contains(ubik_last_error(), "missing"), "message: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_NO_QUERY,
	          ubik_query_start(eng, "CREATE SOURCE s (a BIGINT) WITH (format = 'jsonl');", NULL, &q));
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_query_start(eng, orders_sql, "{\"strict\": 1}", &q));
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_query_start(eng, NULL, NULL, &q));
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_query_start(eng, orders_sql, NULL, NULL));
	EXPECT_RC(UBIK_ERR_SQL, ubik_engine_register_source(eng, "CREATE SOURCE ("));
	CHECK(q == 0, "handle stored on failure");
	OK(ubik_engine_close(eng));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_engine_close(eng));
	CHECK(contains(ubik_last_error(), "released"), "message: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_query_start(eng, orders_sql, NULL, &q));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_engine_close(0));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_query_free(0));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_engine_close(UINT64_MAX));
	CHECK(contains(ubik_last_error(), "never issued"), "message: %s", ubik_last_error());
}

/* The standard windowed query: keys, values and metadata of final records,
 * the watermark, and the end of stream. */
static void test_tumble(void) {
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open(NULL, &eng));
	OK(ubik_query_start(eng, orders_sql, NULL, &q));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_query_free(eng)); /* an engine is not a query */
	CHECK(contains(ubik_last_error(), "engine handle"), "message: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_engine_close(q));

	OK(push_str(q, "{\"event_id\":\"e1\",\"merchant\":\"acme\",\"amount\":10.5,\"event_time\":\"2026-07-18 10:00:00\"}"));
	OK(push_str(q, "{\"event_id\":\"e2\",\"merchant\":\"acme\",\"amount\":0.1,\"event_time\":\"2026-07-18 10:00:20.5\"}"));
	OK(push_str(q, "{\"event_id\":\"e3\",\"merchant\":\"zeta\",\"amount\":3,\"event_time\":\"2026-07-18T10:00:30Z\"}"));
	OK(push_str(q, "{\"event_id\":\"e4\",\"merchant\":\"acme\",\"amount\":0.2,\"event_time\":\"2026-07-18 10:00:59.999999\"}"));

	const uint8_t *k, *v;
	size_t kl, vl;
	EXPECT_RC(UBIK_NONE, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_next_keyed(q, NULL, &kl, &v, &vl, NULL));

	/* 10:01:05 moves the watermark to 10:01:00: the 10:00 window closes. */
	OK(push_str(q, "{\"event_id\":\"e5\",\"merchant\":\"acme\",\"amount\":1,\"event_time\":\"2026-07-18 10:01:05\"}"));
	rec r;
	OK(next_rec(q, &r));
	CHECK(strcmp(r.key, "[\"acme\", \"2026-07-18 10:00:00\"]") == 0, "key %s", r.key);
	CHECK(strcmp(r.value, "{\"merchant\": \"acme\", \"window_start\": \"2026-07-18 10:00:00\", \"orders\": 3, "
	                      "\"total\": 10.8, \"biggest\": 10.5}") == 0,
	      "value %s", r.value);
	CHECK(r.meta.final == 1 && r.meta.windowed == 1 && r.meta.revision == 1, "meta %d %d %" PRIu64, r.meta.final,
	      r.meta.windowed, r.meta.revision);
	CHECK(r.meta.window_start_us == 1784368800000000LL, "window start %" PRId64, r.meta.window_start_us);
	CHECK(r.meta.window_end_us == 1784368860000000LL, "window end %" PRId64, r.meta.window_end_us);
	CHECK(r.meta.window_positions_len == 1 && r.pos[0] == 1, "window positions");
	CHECK(strcmp(r.query, "merchant_totals") == 0, "query name %s", r.query);
	CHECK(strcmp(r.group, "[\"acme\"]") == 0, "group key %s", r.group);
	rec_free(&r);
	EXPECT_REC(q, "[\"zeta\", \"2026-07-18 10:00:00\"]",
	           "{\"merchant\": \"zeta\", \"window_start\": \"2026-07-18 10:00:00\", \"orders\": 1, \"total\": 3.0, "
	           "\"biggest\": 3.0}",
	           1, 1);
	EXPECT_RC(UBIK_NONE, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));

	/* A late event (window already final) is counted, not applied. */
	OK(push_str(q, "{\"event_id\":\"e6\",\"merchant\":\"acme\",\"amount\":7,\"event_time\":\"2026-07-18 10:00:10\"}"));
	EXPECT_RC(UBIK_NONE, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));

	/* The host advances the watermark past 10:02: the 10:01 window closes. */
	OK(ubik_advance_watermark(q, 1784368920000000LL));
	EXPECT_REC(q, "[\"acme\", \"2026-07-18 10:01:00\"]",
	           "{\"merchant\": \"acme\", \"window_start\": \"2026-07-18 10:01:00\", \"orders\": 1, \"total\": 1.0, "
	           "\"biggest\": 1.0}",
	           1, 1);
	OK(ubik_tick(q));
	OK(ubik_flush(q));
	EXPECT_RC(UBIK_NONE, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));

	const char *js;
	size_t jl;
	OK(ubik_query_stats(q, &js, &jl));
	CHECK(strlen(js) == jl, "stats length");
	CHECK(contains(js, "\"events_in\":6"), "stats %s", js);
	CHECK(contains(js, "\"late\":1"), "stats %s", js);
	CHECK(contains(js, "\"records_out\":3"), "stats %s", js);
	CHECK(contains(js, "\"watermark_us\":1784368920000000"), "stats %s", js);
	OK(ubik_query_columns(q, &js, &jl));
	CHECK(strlen(js) == jl, "columns length");
	CHECK(contains(js, "{\"name\":\"merchant\",\"type\":\"VARCHAR\"}"), "columns %s", js);
	CHECK(contains(js, "{\"name\":\"orders\",\"type\":\"BIGINT\"}"), "columns %s", js);
	CHECK(contains(js, "{\"name\":\"total\",\"type\":\"DOUBLE\"}"), "columns %s", js);

	OK(ubik_query_close(q));
	OK(ubik_query_close(q)); /* twice is a no-op */
	EXPECT_RC(UBIK_END, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	EXPECT_RC(UBIK_END, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	EXPECT_RC(UBIK_ERR_CLOSED, push_str(q, "{\"merchant\":\"acme\"}"));
	OK(ubik_query_free(q));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, push_str(q, "{}"));
	EXPECT_RC(UBIK_ERR_INVALID_HANDLE, ubik_query_free(q));
	OK(ubik_engine_close(eng));
}

/* EMIT EARLY: ubik_flush publishes provisional values (final 0) whose
 * revisions count up; the closing record is final. */
static void test_early(void) {
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open(NULL, &eng));
	/* The source is registered on the engine; the query only references it. */
	OK(ubik_engine_register_source(eng,
	                               "CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,"
	                               " WATERMARK FOR event_time AS event_time) WITH (format = 'jsonl');"));
	OK(ubik_query_start(eng,
	                    "SELECT merchant, count(*) AS n, sum(amount) AS total FROM events"
	                    " GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' HOUR) EMIT EARLY EVERY INTERVAL '1' HOUR",
	                    "{\"name\": \"hourly\"}", &q));
	/* The engine handle can go; the query keeps running. */
	OK(ubik_engine_close(eng));
	OK(push_str(q, "{\"merchant\":\"acme\",\"amount\":5,\"event_time\":\"2026-07-18 09:10:00\"}"));
	OK(ubik_flush(q));
	EXPECT_REC(q, "[\"acme\", \"2026-07-18 09:00:00\"]", "{\"merchant\": \"acme\", \"n\": 1, \"total\": 5}", 0, 1);
	OK(push_str(q, "{\"merchant\":\"acme\",\"amount\":7,\"event_time\":\"2026-07-18 09:20:00\"}"));
	OK(ubik_flush(q));
	EXPECT_REC(q, "[\"acme\", \"2026-07-18 09:00:00\"]", "{\"merchant\": \"acme\", \"n\": 2, \"total\": 12}", 0, 2);
	OK(ubik_flush(q)); /* nothing changed: nothing published */
	const uint8_t *k, *v;
	size_t kl, vl;
	EXPECT_RC(UBIK_NONE, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	OK(ubik_query_close(q));
	EXPECT_REC(q, "[\"acme\", \"2026-07-18 09:00:00\"]", "{\"merchant\": \"acme\", \"n\": 2, \"total\": 12}", 1, 3);
	EXPECT_RC(UBIK_END, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	OK(ubik_query_free(q));
}

static const char *view_sql = "CREATE SOURCE ev (k VARCHAR, v BIGINT) WITH (format = 'jsonl');\n"
                              "SELECT k, count(*) AS n, sum(v) AS s FROM ev GROUP BY k";

/* Malformed events are reported and skipped; ubik_push_lines handles CRLF,
 * blank lines and a last line without a newline. */
static void test_malformed_and_lines(void) {
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open(NULL, &eng));
	OK(ubik_query_start(eng, view_sql, NULL, &q));
	EXPECT_RC(UBIK_ERR_MALFORMED_EVENT, push_str(q, "not json"));
	CHECK(contains(ubik_last_error(), "event 1"), "message: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_MALFORMED_EVENT, push_str(q, "{\"k\":\"a\",\"v\":\"seven\"}"));
	CHECK(contains(ubik_last_error(), "\"v\""), "message names the column: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_push(q, NULL, 3));
	OK(push_str(q, "{\"k\":\"a\",\"v\":1}"));
	EXPECT_REC(q, "[\"a\"]", "{\"k\": \"a\", \"n\": 1, \"s\": 1}", 0, 1);

	const char *buf = "{\"k\":\"b\",\"v\":2}\r\n\n   \n{\"k\":\"b\",\"v\":oops}\n{\"k\":\"a\",\"v\":3}\n{\"k\":\"c\"}";
	size_t consumed = 99, rejected = 99;
	EXPECT_RC(UBIK_ERR_MALFORMED_EVENT, ubik_push_lines(q, buf, strlen(buf), &consumed, &rejected));
	CHECK(consumed == strlen(buf), "consumed %zu of %zu", consumed, strlen(buf));
	CHECK(rejected == 1, "rejected %zu", rejected);
	CHECK(contains(ubik_last_error(), "line 4"), "message: %s", ubik_last_error());
	EXPECT_REC(q, "[\"b\"]", "{\"k\": \"b\", \"n\": 1, \"s\": 2}", 0, 1);
	EXPECT_REC(q, "[\"a\"]", "{\"k\": \"a\", \"n\": 2, \"s\": 4}", 0, 2);
	EXPECT_REC(q, "[\"c\"]", "{\"k\": \"c\", \"n\": 1, \"s\": null}", 0, 1);
	OK(ubik_push_lines(q, "", 0, &consumed, NULL));
	CHECK(consumed == 0, "consumed %zu", consumed);

	const char *js;
	OK(ubik_query_stats(q, &js, NULL));
	CHECK(contains(js, "\"malformed\":3"), "stats %s", js);
	CHECK(contains(js, "\"watermark_us\":null"), "stats %s", js);
	OK(ubik_query_free(q));

	/* A strict query fails on its first bad event; records produced before
	 * the failure can still be taken. */
	OK(ubik_query_start(eng, view_sql, "{\"strict\": true}", &q));
	OK(push_str(q, "{\"k\":\"a\",\"v\":1}"));
	EXPECT_RC(UBIK_ERR_MALFORMED_EVENT, push_str(q, "{\"k\":"));
	EXPECT_RC(UBIK_ERR_QUERY_FAILED, push_str(q, "{\"k\":\"a\",\"v\":1}"));
	CHECK(contains(ubik_last_error(), "event 2"), "message: %s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_QUERY_FAILED, ubik_query_close(q));
	EXPECT_REC(q, "[\"a\"]", "{\"k\": \"a\", \"n\": 1, \"s\": 1}", 0, 1);
	const uint8_t *k, *v;
	size_t kl, vl;
	EXPECT_RC(UBIK_ERR_QUERY_FAILED, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	OK(ubik_query_stats(q, &js, NULL));
	OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
}

/* Backpressure: nothing is applied while the buffer is full; ubik_push_lines
 * reports where it stopped. */
static void test_backpressure(void) {
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open("{\"max_pending_records\": 2}", &eng));
	OK(ubik_query_start(eng, view_sql, NULL, &q));
	OK(push_str(q, "{\"k\":\"a\",\"v\":1}"));
	OK(push_str(q, "{\"k\":\"b\",\"v\":1}"));
	EXPECT_RC(UBIK_ERR_BACKPRESSURE, push_str(q, "{\"k\":\"c\",\"v\":1}"));
	CHECK(ubik_error_retryable(ubik_last_error_code()), "backpressure not retryable");
	EXPECT_REC(q, "[\"a\"]", "{\"k\": \"a\", \"n\": 1, \"s\": 1}", 0, 1);
	OK(push_str(q, "{\"k\":\"c\",\"v\":1}"));
	EXPECT_REC(q, "[\"b\"]", "{\"k\": \"b\", \"n\": 1, \"s\": 1}", 0, 1);
	EXPECT_REC(q, "[\"c\"]", "{\"k\": \"c\", \"n\": 1, \"s\": 1}", 0, 1);

	const char *buf = "{\"k\":\"d\",\"v\":1}\n{\"k\":\"e\",\"v\":1}\n{\"k\":\"f\",\"v\":1}\n";
	size_t n = strlen(buf), off = 0, consumed, rejected;
	EXPECT_RC(UBIK_ERR_BACKPRESSURE, ubik_push_lines(q, buf, n, &consumed, &rejected));
	CHECK(consumed == 2 * strlen("{\"k\":\"d\",\"v\":1}\n"), "consumed %zu", consumed);
	CHECK(rejected == 0, "rejected %zu", rejected);
	off += consumed;
	EXPECT_REC(q, "[\"d\"]", "{\"k\": \"d\", \"n\": 1, \"s\": 1}", 0, 1);
	OK(ubik_push_lines(q, buf + off, n - off, &consumed, &rejected));
	CHECK(off + consumed == n, "consumed %zu", consumed);
	EXPECT_REC(q, "[\"e\"]", "{\"k\": \"e\", \"n\": 1, \"s\": 1}", 0, 1);
	EXPECT_REC(q, "[\"f\"]", "{\"k\": \"f\", \"n\": 1, \"s\": 1}", 0, 1);
	OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
}

/* pending_of reads "pending" from the query's stats. */
static long pending_of(ubik_query q) {
	const char *js;
	OK(ubik_query_stats(q, &js, NULL));
	const char *p = strstr(js, "\"pending\":");
	CHECK(p != NULL, "no pending in %s", js);
	return atol(p + strlen("\"pending\":"));
}

/* The bound holds when one push finalizes a window bigger than the buffer:
 * the push is applied, the window's records wait for ubik_next_keyed, the
 * next push is refused until they are taken, and ubik_advance_watermark and
 * ubik_query_close queue without refusing. */
static void test_backpressure_bound(void) {
	const char *sql = "CREATE SOURCE e (k VARCHAR, t TIMESTAMP, WATERMARK FOR t AS t) WITH (format = 'jsonl');\n"
	                  "SELECT k, count(*) AS n FROM e GROUP BY k, TUMBLE(t, INTERVAL '1' MINUTE)";
	enum { BOUND = 3, KEYS = 50 };
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open("{\"max_pending_records\": 3}", &eng));
	OK(ubik_query_start(eng, sql, NULL, &q));
	char ev[128];
	for (int i = 0; i < KEYS; i++) {
		snprintf(ev, sizeof ev, "{\"k\":\"k%02d\",\"t\":\"2026-07-18 10:00:%02d\"}", i, i);
		OK(push_str(q, ev));
	}
	CHECK(pending_of(q) == 0, "%ld pending before a window closed", pending_of(q));
	OK(push_str(q, "{\"k\":\"x\",\"t\":\"2026-07-18 10:03:00\"}")); /* finalizes 50 groups */
	CHECK(pending_of(q) == BOUND, "%ld pending, bound %d", pending_of(q), BOUND);
	EXPECT_RC(UBIK_ERR_BACKPRESSURE, push_str(q, "{\"k\":\"y\",\"t\":\"2026-07-18 10:03:01\"}"));
	OK(ubik_advance_watermark(q, INT64_C(1784368980000000) + 120000000)); /* 10:05 */
	OK(ubik_query_close(q));
	CHECK(pending_of(q) <= BOUND, "%ld pending, bound %d", pending_of(q), BOUND);
	int n = 0, rc;
	rec r;
	char want[64];
	while ((rc = next_rec(q, &r)) == UBIK_OK) {
		CHECK(pending_of(q) <= BOUND, "%ld pending, bound %d", pending_of(q), BOUND);
		if (n < KEYS) {
			snprintf(want, sizeof want, "[\"k%02d\", \"2026-07-18 10:00:00\"]", n);
			CHECK(strcmp(r.key, want) == 0, "record %d: key %s, want %s", n, r.key, want);
		} else {
			CHECK(strcmp(r.key, "[\"x\", \"2026-07-18 10:03:00\"]") == 0, "record %d: key %s", n, r.key);
		}
		CHECK(r.meta.final && r.meta.revision == 1, "record %d: final %d revision %" PRIu64, n, r.meta.final, r.meta.revision);
		rec_free(&r);
		n++;
	}
	EXPECT_RC(UBIK_END, rc);
	CHECK(n == KEYS + 1, "%d records, want %d", n, KEYS + 1);
	OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
}

/* The pointers ubik_next_keyed returns stay valid across other calls on the
 * handle until the next ubik_next_keyed (checked byte for byte; under
 * AddressSanitizer or valgrind a read of released memory would also fail). */
static void test_pointer_lifetime(void) {
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open(NULL, &eng));
	OK(ubik_query_start(eng, view_sql, NULL, &q));
	OK(push_str(q, "{\"k\":\"first\",\"v\":1}"));
	const uint8_t *k, *v;
	size_t kl, vl;
	ubik_meta m;
	OK(ubik_next_keyed(q, &k, &kl, &v, &vl, &m));
	CHECK(m.windowed == 0 && m.window_positions == NULL && m.window_positions_len == 0, "continuous meta");
	CHECK(m.window_start_us == 0 && m.window_end_us == 0 && m.final == 0, "continuous meta");
	CHECK(m.group_key == k && m.group_key_len == kl, "a continuous view's group key is its key");
	/* A much longer record, pushed and stats taken, does not move them. */
	char big[9000];
	snprintf(big, sizeof big, "{\"k\":\"%08000d\",\"v\":2}", 7);
	OK(push_str(q, big));
	const char *js;
	OK(ubik_query_stats(q, &js, NULL));
	OK(ubik_flush(q));
	CHECK(bytes_eq(k, kl, "[\"first\"]"), "key moved");
	CHECK(bytes_eq(v, vl, "{\"k\": \"first\", \"n\": 1, \"s\": 1}"), "value moved");
	CHECK(m.query_len == 5 && memcmp(m.query, "query", 5) == 0, "query name");
	/* The next call reuses (and here grows) the buffer. */
	OK(ubik_next_keyed(q, &k, &kl, &v, &vl, &m));
	CHECK(kl == 8000 + 4 && k[0] == '[' && k[kl - 1] == ']', "long key (%zu bytes)", kl);
	OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
}

/* ---- threads -------------------------------------------------------------- */

static void *other_thread_error(void *arg) {
	(void)arg;
	/* A fresh thread has no error, whatever the main thread did. */
	int *res = malloc(2 * sizeof(int));
	res[0] = ubik_last_error_code();
	ubik_engine e;
	res[1] = ubik_engine_open("{", &e);
	return res;
}

enum { THREAD_EVENTS = 20000, THREAD_KEYS = 97 };

typedef struct {
	ubik_query q;
	int failed;
	char msg[512];
} producer_arg;

static void *producer(void *p) {
	producer_arg *a = p;
	char ev[128];
	for (int i = 0; i < THREAD_EVENTS; i++) {
		int n = snprintf(ev, sizeof ev, "{\"k\":\"t%d\",\"v\":%d}", i % THREAD_KEYS, i);
		int rc;
		while ((rc = ubik_push(a->q, ev, (size_t)n)) == UBIK_ERR_BACKPRESSURE) sched_yield();
		if (rc != UBIK_OK) {
			a->failed = 1;
			snprintf(a->msg, sizeof a->msg, "push %d: %s: %s", i, ubik_error_name(rc), ubik_last_error());
			return NULL;
		}
	}
	int rc = ubik_query_close(a->q);
	if (rc != UBIK_OK) {
		a->failed = 1;
		snprintf(a->msg, sizeof a->msg, "close: %s", ubik_last_error());
	}
	return NULL;
}

typedef struct {
	ubik_engine eng;
	int id;
	long records;
	char msg[512];
} own_query_arg;

/* One of several threads that each run their own query on a shared engine. */
static void *own_query(void *p) {
	own_query_arg *a = p;
	ubik_query q;
	int rc = ubik_query_start(a->eng, view_sql, NULL, &q);
	if (rc != UBIK_OK) {
		snprintf(a->msg, sizeof a->msg, "start: %s", ubik_last_error());
		return NULL;
	}
	char ev[64];
	for (int i = 0; i < 1000; i++) {
		int n = snprintf(ev, sizeof ev, "{\"k\":\"q%d\",\"v\":%d}", a->id, i);
		if ((rc = ubik_push(q, ev, (size_t)n)) != UBIK_OK) {
			snprintf(a->msg, sizeof a->msg, "push: %s", ubik_last_error());
			return NULL;
		}
		const uint8_t *k, *v;
		size_t kl, vl;
		while ((rc = ubik_next_keyed(q, &k, &kl, &v, &vl, NULL)) == UBIK_OK) a->records++;
	}
	ubik_query_close(q);
	ubik_query_free(q);
	return NULL;
}

static void test_threads(void) {
	ubik_engine e;
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_engine_open("{", &e));
	pthread_t t;
	CHECK(pthread_create(&t, NULL, other_thread_error, NULL) == 0, "pthread_create");
	int *res;
	CHECK(pthread_join(t, (void **)&res) == 0, "pthread_join");
	CHECK(res[0] == 0, "a new thread sees error %d", res[0]);
	CHECK(res[1] == UBIK_ERR_INVALID_OPTIONS, "thread's own error %d", res[1]);
	free(res);
	/* The main thread's error is still its own. */
	CHECK(ubik_last_error_code() == UBIK_ERR_INVALID_OPTIONS, "main thread error %d", ubik_last_error_code());

	/* One thread pushes, this one consumes, on the same query handle. */
	ubik_engine eng;
	OK(ubik_engine_open("{\"max_pending_records\": 64}", &eng));
	producer_arg a = {0};
	OK(ubik_query_start(eng, view_sql, NULL, &a.q));
	CHECK(pthread_create(&t, NULL, producer, &a) == 0, "pthread_create");
	long count[THREAD_KEYS] = {0};
	long sum[THREAD_KEYS] = {0};
	long records = 0;
	for (;;) {
		const uint8_t *k, *v;
		size_t kl, vl;
		int rc = ubik_next_keyed(a.q, &k, &kl, &v, &vl, NULL);
		if (rc == UBIK_END) break;
		if (rc == UBIK_NONE) {
			sched_yield();
			continue;
		}
		CHECK(rc == UBIK_OK, "next: %s: %s", ubik_error_name(rc), ubik_last_error());
		int key;
		long n, s;
		char *val = dup_bytes(v, vl);
		CHECK(kl > 5 && sscanf((const char *)k, "[\"t%d\"]", &key) == 1 && key >= 0 && key < THREAD_KEYS,
		      "key %.*s", (int)kl, (const char *)k);
		char want[64];
		int wl = snprintf(want, sizeof want, "[\"t%d\"]", key);
		CHECK((size_t)wl == kl && memcmp(k, want, kl) == 0, "key %.*s", (int)kl, (const char *)k);
		CHECK(sscanf(val, "{\"k\": \"t%*d\", \"n\": %ld, \"s\": %ld}", &n, &s) == 2, "value %s", val);
		/* Each key's count rises by one per record: nothing lost or reordered. */
		CHECK(n == count[key] + 1, "key %d count %ld after %ld", key, n, count[key]);
		count[key] = n;
		sum[key] = s;
		records++;
		free(val);
	}
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	CHECK(!a.failed, "producer: %s", a.msg);
	CHECK(records == THREAD_EVENTS, "%ld records", records);
	for (int key = 0; key < THREAD_KEYS; key++) {
		long want = 0, n = 0;
		for (int i = key; i < THREAD_EVENTS; i += THREAD_KEYS) want += i, n++;
		CHECK(count[key] == n && sum[key] == want, "key %d: n %ld s %ld, want %ld %ld", key, count[key], sum[key], n,
		      want);
	}
	OK(ubik_query_free(a.q));

	/* Several threads start and run their own queries on one engine. */
	enum { NT = 4 };
	pthread_t ts[NT];
	own_query_arg qa[NT];
	for (int i = 0; i < NT; i++) {
		qa[i] = (own_query_arg){.eng = eng, .id = i};
		CHECK(pthread_create(&ts[i], NULL, own_query, &qa[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < NT; i++) {
		CHECK(pthread_join(ts[i], NULL) == 0, "pthread_join");
		CHECK(qa[i].msg[0] == 0, "thread %d: %s", i, qa[i].msg);
		CHECK(qa[i].records == 1000, "thread %d: %ld records", i, qa[i].records);
	}
	OK(ubik_engine_close(eng));
}

/* A temporal join through the C ABI: table rows by ubik_push_input, an event
 * waits for the table's watermark, the join buffer's bound, the table's own
 * watermark and end, and its counters in the stats. */
static const char *join_sql =
    "CREATE SOURCE s (k VARCHAR, n BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');\n"
    "CREATE TABLE t (k VARCHAR, x BIGINT, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED,\n"
    "  WATERMARK FOR vt AS vt) WITH (format = 'jsonl');\n"
    "SELECT s.k, sum(s.n * t.x) AS total, count(*) AS n FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k\n"
    "GROUP BY s.k";

static int push_in(ubik_query q, const char *input, const char *rec) {
	return ubik_push_input(q, input, rec, strlen(rec));
}

static void test_temporal_join(void) {
	ubik_engine eng;
	ubik_query q;
	const uint8_t *k, *v;
	size_t kl, vl;
	OK(ubik_engine_open(NULL, &eng));
	EXPECT_RC(UBIK_ERR_INVALID_OPTIONS, ubik_query_start(eng, join_sql, "{\"join_buffer\": -1}", &q));
	CHECK(contains(ubik_last_error(), "join_buffer"), "%s", ubik_last_error());
	OK(ubik_query_start(eng, join_sql, "{\"join_buffer\": 2}", &q));
	/* Versions of a: x=10 from 10:00:00, x=100 from 10:00:10. */
	OK(push_in(q, "T", "{\"k\":\"a\",\"x\":10,\"vt\":\"2026-07-18 10:00:00\"}"));
	/* Two events wait for the table's watermark (now 10:00:00) to pass 10:00:05. */
	OK(push_in(q, "s", "{\"k\":\"a\",\"n\":1,\"ts\":\"2026-07-18 10:00:05\"}"));
	OK(push_str(q, "{\"k\":\"a\",\"n\":2,\"ts\":\"2026-07-18 10:00:06\"}"));
	/* The third is beyond join_buffer: nothing applied, the query goes on. */
	EXPECT_RC(UBIK_ERR_JOIN_BUFFER, push_in(q, "s", "{\"k\":\"a\",\"n\":4,\"ts\":\"2026-07-18 10:00:12\"}"));
	CHECK(ubik_error_retryable(UBIK_ERR_JOIN_BUFFER), "join buffer not retryable");
	/* An unknown input and a bad table row: errors, not the query's failure. */
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, push_in(q, "prices", "{}"));
	CHECK(contains(ubik_last_error(), "its inputs: s, t"), "%s", ubik_last_error());
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_push_input(q, NULL, "{}", 2));
	EXPECT_RC(UBIK_ERR_MALFORMED_EVENT, push_in(q, "t", "{\"k\":null,\"x\":1,\"vt\":\"2026-07-18 10:00:01\"}"));
	/* The second version moves the table's watermark to 10:00:10: both
	 * waiting events join x=10, and the third fits again. */
	OK(push_in(q, "t", "{\"k\":\"a\",\"x\":100,\"vt\":\"2026-07-18 10:00:10\"}"));
	OK(push_in(q, "s", "{\"k\":\"a\",\"n\":4,\"ts\":\"2026-07-18 10:00:12\"}"));
	/* A row behind the table's watermark is late: counted, not applied. */
	OK(push_in(q, "t", "{\"k\":\"a\",\"x\":7,\"vt\":\"2026-07-18 10:00:02\"}"));
	const char *js;
	OK(ubik_query_stats(q, &js, NULL));
	CHECK(contains(js, "\"table\":{\"rows_in\":4,\"malformed\":1,\"late\":1}"), "%s", js);
	CHECK(contains(js, "\"joined\":2") && contains(js, "\"buffered\":1"), "%s", js);
	/* The table's own watermark releases the event at 10:00:12 (x=100). */
	OK(ubik_advance_table_watermark(q, INT64_C(1784368813000000)));
	OK(ubik_query_stats(q, &js, NULL));
	CHECK(contains(js, "\"joined\":3") && contains(js, "\"buffered\":0"), "%s", js);
	CHECK(contains(js, "\"table_watermark_us\":1784368813000000"), "%s", js);
	OK(ubik_end_table(q));
	EXPECT_RC(UBIK_ERR_CLOSED, push_in(q, "t", "{\"k\":\"a\",\"x\":1,\"vt\":\"2026-07-18 11:00:00\"}"));
	/* After the end every event joins at once. */
	OK(push_in(q, "s", "{\"k\":\"a\",\"n\":1,\"ts\":\"2026-07-18 11:00:00\"}"));
	OK(ubik_query_close(q));
	/* The continuous view's records; the last carries 1*10 + 2*10 + 4*100 + 1*100. */
	rec r, last = {0};
	int have = 0, rc;
	while ((rc = next_rec(q, &r)) == UBIK_OK) {
		if (have) rec_free(&last);
		last = r;
		have = 1;
	}
	EXPECT_RC(UBIK_END, rc);
	CHECK(have && strcmp(last.value, "{\"k\": \"a\", \"total\": 530, \"n\": 4}") == 0, "last %s",
	      have ? last.value : "(none)");
	rec_free(&last);
	EXPECT_RC(UBIK_END, ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	OK(ubik_query_free(q));
	/* A query without a join has no table input. */
	OK(ubik_query_start(eng, view_sql, NULL, &q));
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_end_table(q));
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, ubik_advance_table_watermark(q, 0));
	EXPECT_RC(UBIK_ERR_INVALID_ARGUMENT, push_in(q, "t", "{}"));
	OK(push_in(q, "ev", "{\"k\":\"x\",\"v\":1}"));
	OK(ubik_query_stats(q, &js, NULL));
	CHECK(!contains(js, "\"table\"") && contains(js, "\"events_in\":1"), "%s", js);
	OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
}

static int selftest(void) {
	test_error_table();
	test_open_errors();
	test_tumble();
	test_early();
	test_malformed_and_lines();
	test_backpressure();
	test_backpressure_bound();
	test_pointer_lifetime();
	test_threads();
	test_temporal_join();
	printf("selftest ok\n");
	return 0;
}

/* ---- volume ------------------------------------------------------------- */

static int volume(long n) {
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open("{\"max_pending_records\": 4096}", &eng));
	OK(ubik_query_start(eng, view_sql, "{\"name\": \"volume\"}", &q));
	enum { BATCH = 1000 };
	char *buf = malloc(BATCH * 64);
	CHECK(buf != NULL, "out of memory");
	long next = 0, seen = 0;
	char want[128];
	while (next < n || seen < n) {
		size_t len = 0;
		long first = next;
		for (; next < n && next - first < BATCH; next++)
			len += (size_t)snprintf(buf + len, 64, "{\"k\":\"k%ld\",\"v\":%ld}\n", next, next);
		size_t off = 0;
		for (;;) {
			size_t consumed, rejected;
			int rc = ubik_push_lines(q, buf + off, len - off, &consumed, &rejected);
			off += consumed;
			CHECK(rejected == 0, "rejected %zu", rejected);
			if (rc == UBIK_OK) break;
			CHECK(rc == UBIK_ERR_BACKPRESSURE, "push_lines: %s: %s", ubik_error_name(rc), ubik_last_error());
			/* drain below, then resume where it stopped */
			const uint8_t *k, *v;
			size_t kl, vl;
			ubik_meta m;
			while (ubik_next_keyed(q, &k, &kl, &v, &vl, &m) == UBIK_OK) {
				int wl = snprintf(want, sizeof want, "[\"k%ld\"]", seen);
				CHECK((size_t)wl == kl && memcmp(k, want, kl) == 0, "record %ld key %.*s", seen, (int)kl, k);
				wl = snprintf(want, sizeof want, "{\"k\": \"k%ld\", \"n\": 1, \"s\": %ld}", seen, seen);
				CHECK((size_t)wl == vl && memcmp(v, want, vl) == 0, "record %ld value %.*s", seen, (int)vl, v);
				seen++;
			}
		}
		if (next == n) OK(ubik_query_close(q));
		int rc;
		const uint8_t *k, *v;
		size_t kl, vl;
		ubik_meta m;
		while ((rc = ubik_next_keyed(q, &k, &kl, &v, &vl, &m)) == UBIK_OK) {
			int wl = snprintf(want, sizeof want, "[\"k%ld\"]", seen);
			CHECK((size_t)wl == kl && memcmp(k, want, kl) == 0, "record %ld key %.*s", seen, (int)kl, k);
			wl = snprintf(want, sizeof want, "{\"k\": \"k%ld\", \"n\": 1, \"s\": %ld}", seen, seen);
			CHECK((size_t)wl == vl && memcmp(v, want, vl) == 0, "record %ld value %.*s", seen, (int)vl, v);
			CHECK(m.query_len == 6 && memcmp(m.query, "volume", 6) == 0 && m.revision == 1, "meta");
			seen++;
		}
		CHECK(rc == (next == n ? UBIK_END : UBIK_NONE), "next: %s: %s", ubik_error_name(rc), ubik_last_error());
	}
	CHECK(seen == n, "%ld records, want %ld", seen, n);
	const char *js;
	OK(ubik_query_stats(q, &js, NULL));
	char want_in[64];
	snprintf(want_in, sizeof want_in, "\"events_in\":%ld,", n);
	CHECK(contains(js, want_in), "stats %s", js);
	OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
	free(buf);
	printf("volume ok: %ld records\n", seen);
	return 0;
}

/* ---- misuse ------------------------------------------------------------ */

static int misuse(const char *what) {
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open(NULL, &eng));
	OK(ubik_query_start(eng, view_sql, NULL, &q));
	OK(push_str(q, "{\"k\":\"a\",\"v\":1}"));
	char big[20000];
	snprintf(big, sizeof big, "{\"k\":\"%019000d\",\"v\":2}", 7);
	OK(push_str(q, big));
	const uint8_t *k, *v, *k2, *v2;
	size_t kl, vl;
	OK(ubik_next_keyed(q, &k, &kl, &v, &vl, NULL));
	if (strcmp(what, "stale-pointer") == 0) {
		/* The second record does not fit the buffer: it moves, and the first
		 * record's pointers dangle. */
		OK(ubik_next_keyed(q, &k2, &kl, &v2, &vl, NULL));
		volatile uint8_t c = k[0];
		(void)c;
	} else if (strcmp(what, "leak") != 0) {
		fprintf(stderr, "unknown misuse %s\n", what);
		return 2;
	}
	/* leak: the query is never freed */
	if (strcmp(what, "leak") != 0) OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
	printf("misuse %s done\n", what);
	return 0;
}

/* ---- cat ---------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
	FILE *f = fopen(path, "rb");
	CHECK(f != NULL, "open %s", path);
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	size_t r;
	while ((r = fread(b + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap + 1);
			CHECK(b != NULL, "out of memory");
		}
	}
	fclose(f);
	b[n] = '\0';
	*len = n;
	return b;
}

static void drain_print(ubik_query q) {
	const uint8_t *k, *v;
	size_t kl, vl;
	int rc;
	while ((rc = ubik_next_keyed(q, &k, &kl, &v, &vl, NULL)) == UBIK_OK) {
		fwrite(k, 1, kl, stdout);
		fputc('\t', stdout);
		fwrite(v, 1, vl, stdout);
		fputc('\n', stdout);
	}
	CHECK(rc == UBIK_NONE || rc == UBIK_END, "next: %s: %s", ubik_error_name(rc), ubik_last_error());
}

static int cat(const char *sql_path, const char *input_path, const char *name) {
	size_t sql_len, in_len;
	char *sql = read_file(sql_path, &sql_len);
	char *in = read_file(input_path, &in_len);
	char opts[256];
	snprintf(opts, sizeof opts, "{\"name\": \"%s\"}", name);
	ubik_engine eng;
	ubik_query q;
	OK(ubik_engine_open("{\"max_pending_records\": 100}", &eng));
	OK(ubik_query_start(eng, sql, opts, &q));
	size_t off = 0;
	while (off < in_len) {
		size_t consumed, rejected;
		int rc = ubik_push_lines(q, in + off, in_len - off, &consumed, &rejected);
		off += consumed;
		if (rc == UBIK_ERR_MALFORMED_EVENT || rc == UBIK_ERR_EVAL)
			fprintf(stderr, "skipped %zu: %s\n", rejected, ubik_last_error());
		else if (rc != UBIK_OK && rc != UBIK_ERR_BACKPRESSURE)
			die(__FILE__, __LINE__, "push_lines: %s: %s", ubik_error_name(rc), ubik_last_error());
		drain_print(q);
	}
	OK(ubik_query_close(q));
	drain_print(q);
	OK(ubik_query_free(q));
	OK(ubik_engine_close(eng));
	free(sql);
	free(in);
	return 0;
}

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "selftest") == 0) return selftest();
	if (argc == 3 && strcmp(argv[1], "volume") == 0) return volume(atol(argv[2]));
	if (argc == 3 && strcmp(argv[1], "misuse") == 0) return misuse(argv[2]);
	if (argc == 5 && strcmp(argv[1], "cat") == 0) return cat(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: ubik_test selftest | volume N | misuse stale-pointer|leak | cat SQL INPUT NAME\n");
	return 2;
}
