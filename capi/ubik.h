/*
 * ubik.h - the C ABI of the ubik streaming SQL engine (libubik.so).
 *
 * This header is maintained by hand; capi/capi_test.go checks it against the
 * exported symbols and the status-code table of the library it documents.
 *
 * A host opens an engine, optionally registers sources, starts a query from
 * SQL, pushes JSON events, and pulls the changelog with ubik_next_keyed: one
 * upsert per (group, window), keyed by the frozen key contract. The key bytes
 * are the ones the Kafka sink puts in the message key and `ubik run` prints,
 * produced by the same encoder (docs/contract.md).
 *
 *     ubik_engine eng; ubik_query q;
 *     if (ubik_engine_open(NULL, &eng) != UBIK_OK) die(ubik_last_error());
 *     if (ubik_query_start(eng, sql, NULL, &q) != UBIK_OK) die(ubik_last_error());
 *     for each event:
 *         rc = ubik_push(q, ev, ev_len);
 *         while (rc == UBIK_ERR_BACKPRESSURE) { drain(q); rc = ubik_push(q, ev, ev_len); }
 *         if (rc == UBIK_ERR_MALFORMED_EVENT || rc == UBIK_ERR_EVAL) log(ubik_last_error());
 *         else if (rc != UBIK_OK) die(ubik_last_error());
 *         drain(q);
 *     ubik_query_close(q);           // end of input: every open window finalizes
 *     drain(q);                      // until ubik_next_keyed returns UBIK_END
 *     ubik_query_free(q);
 *     ubik_engine_close(eng);
 *
 * where drain(q) is
 *
 *     const uint8_t *key, *val; size_t klen, vlen; ubik_meta m;
 *     while ((rc = ubik_next_keyed(q, &key, &klen, &val, &vlen, &m)) == UBIK_OK)
 *         upsert(key, klen, val, vlen, &m);
 *
 * STATUS CODES
 *   Every function that can fail returns an int status: UBIK_OK (0), one of
 *   the two non-error statuses of ubik_next_keyed (UBIK_NONE, UBIK_END), or a
 *   negative UBIK_ERR_* code. The codes come from one table in the library:
 *   ubik_error_name, ubik_error_description and ubik_error_retryable describe
 *   any code. A failing call also records a message for ubik_last_error.
 *   No panic or Go runtime error ever crosses this boundary: an internal
 *   failure becomes UBIK_ERR_INTERNAL.
 *
 * HANDLES
 *   ubik_engine and ubik_query are opaque 64-bit integers, never pointers.
 *   0 is never a valid handle. Handle numbers are never reused within a
 *   process, so a handle used after ubik_engine_close / ubik_query_free (or
 *   an engine handle passed where a query is expected, and vice versa) is
 *   reliably reported as UBIK_ERR_INVALID_HANDLE, never undefined behaviour.
 *
 * OWNERSHIP AND LIFETIME OF RETURNED POINTERS
 *   The library never asks the caller to free anything it returns; there is
 *   no ubik_free.
 *   - ubik_next_keyed: the key, value, meta->query, meta->window_positions
 *     and meta->group_key pointers point into memory owned by the query
 *     handle. They stay valid
 *     until the next ubik_next_keyed call on the same handle (whatever it
 *     returns) or ubik_query_free of the handle, whichever comes first. Other
 *     calls on the handle (push, flush, close, stats) do not invalidate them.
 *     Copy the bytes to keep them longer.
 *   - ubik_query_stats: the JSON text is owned by the query handle, valid
 *     until the next ubik_query_stats call on it or ubik_query_free.
 *   - ubik_query_columns: the JSON text is owned by the query handle, valid
 *     until ubik_query_free.
 *   - ubik_last_error: owned by the calling thread's error slot, valid until
 *     the next failing ubik_* call on the same thread (the slot is freed when
 *     the thread exits).
 *   - ubik_error_name / ubik_error_description: static, valid for the life of
 *     the process.
 *   Memory the caller passes in (SQL text, options, events) is only read
 *   during the call; the library keeps no pointer to it.
 *   The caller must free every query with ubik_query_free and close every
 *   engine with ubik_engine_close; a handle that is never released keeps its
 *   state for the life of the process.
 *
 * THREAD SAFETY
 *   - All functions may be called from any thread.
 *   - An engine handle may be used from several threads at once.
 *   - A query handle may be used from several threads: calls on one query are
 *     serialized by a lock in the library (a second thread blocks until the
 *     first call returns; no call blocks for long). The typical split is one
 *     thread pushing and another calling ubik_next_keyed. The record pointers
 *     of ubik_next_keyed are per handle, not per thread: if two threads call
 *     ubik_next_keyed on the same query, each call invalidates the pointers
 *     the other received, so consume from one thread only.
 *   - ubik_query_free waits for a call in progress on the handle to return;
 *     a call that starts after it gets UBIK_ERR_INVALID_HANDLE.
 *   - ubik_last_error and ubik_last_error_code are per thread (like errno).
 *
 * TEXT
 *   Strings passed in are NUL-terminated UTF-8. Events are passed with an
 *   explicit length and need not be NUL-terminated. Key and value bytes are
 *   UTF-8 JSON and are NOT NUL-terminated: use the returned lengths.
 */
#ifndef UBIK_H
#define UBIK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* UBIK_ABI_VERSION changes whenever a function, struct or status code of
 * this header changes incompatibly; compare it with ubik_abi_version(). */
#define UBIK_ABI_VERSION 1

/* ---- status codes (one table; see ubik_error_name and friends) ---------- */

/* Success. From ubik_next_keyed: a record was returned. */
#define UBIK_OK 0
/* ubik_next_keyed: no record is pending yet; push more input (or flush,
 * advance the watermark, close) and call again. */
#define UBIK_NONE 1
/* ubik_next_keyed: end of stream: the input was closed with
 * ubik_query_close and every record has been returned. */
#define UBIK_END 2

/* A required pointer was NULL, or an argument is out of range. */
#define UBIK_ERR_INVALID_ARGUMENT -1
/* The handle is 0, was released, or is of the other kind. */
#define UBIK_ERR_INVALID_HANDLE -2
/* The options JSON is not valid (syntax, unknown field, bad value). */
#define UBIK_ERR_INVALID_OPTIONS -3
/* The SQL does not parse or bind; the message names the position. */
#define UBIK_ERR_SQL -4
/* The script given to ubik_query_start has no query, or several and the
 * options name none of them. */
#define UBIK_ERR_NO_QUERY -5
/* ubik_push / ubik_push_lines: an event could not be decoded (bad JSON,
 * wrong type, missing event time). It was counted and skipped; the query
 * goes on (unless it is strict: then the query has failed). */
#define UBIK_ERR_MALFORMED_EVENT -6
/* An event failed at run time (an overflow, a failed cast). It was counted
 * and skipped; the query goes on (unless it is strict). */
#define UBIK_ERR_EVAL -7
/* The query's output buffer is full, or records of finalized windows wait
 * to be taken (options: max_pending_records); nothing was applied. Drain
 * with ubik_next_keyed and push the same input again. Only a push returns
 * it. Retryable. */
#define UBIK_ERR_BACKPRESSURE -8
/* The engine or the query's input is closed: no more input is accepted. */
#define UBIK_ERR_CLOSED -9
/* The query stopped on an earlier fatal error (a strict query's bad event,
 * an internal error); ubik_last_error names it. Only ubik_next_keyed (for
 * the records produced before the failure), ubik_query_stats and
 * ubik_query_free still work. */
#define UBIK_ERR_QUERY_FAILED -10
/* A bug in ubik (a recovered panic). The message carries the detail; the
 * query involved has failed. */
#define UBIK_ERR_INTERNAL -11
/* A query with a temporal join holds as many events as it may (options:
 * join_buffer) waiting for its versioned table's watermark to pass their
 * time; nothing was applied. Push table rows (ubik_push_input), advance the
 * table's watermark or end the table (ubik_end_table), then push the same
 * event again. Only a push to the stream returns it. Retryable. */
#define UBIK_ERR_JOIN_BUFFER -12

/* ---- handles and record metadata ---------------------------------------- */

typedef uint64_t ubik_engine;
typedef uint64_t ubik_query;

/* Metadata of one record, filled by ubik_next_keyed. */
typedef struct ubik_meta {
	/* Name of the query that produced the record (not NUL-terminated). */
	const char *query;
	size_t query_len;
	/* 1 when no further record for this key will follow (the window
	 * closed); always 0 for a continuous view. */
	int32_t final;
	/* 1 when the query has a window; window_start_us and window_end_us are
	 * meaningful only then. */
	int32_t windowed;
	/* Counts the emissions of this (group, window), from 1. */
	uint64_t revision;
	/* Window bounds, microseconds since the Unix epoch (end exclusive). */
	int64_t window_start_us;
	int64_t window_end_us;
	/* Indexes, in the key array, of the cells that hold the window; empty
	 * (NULL, 0) for a continuous view. */
	const int32_t *window_positions;
	size_t window_positions_len;
	/* The key without its window cells, in the key's own spelling (["acme"]
	 * for ["acme", "2026-07-18 10:00:00"]): the identity a windowed query's
	 * latest-per-group landing upserts by. For a continuous view it is the
	 * key itself (the same pointer). Not NUL-terminated. */
	const uint8_t *group_key;
	size_t group_key_len;
} ubik_meta;

/* Functions are declared unless UBIK_NO_PROTOTYPES is defined (the library
 * itself defines it: cgo declares its exports without const). */
#ifndef UBIK_NO_PROTOTYPES

/* ---- library ------------------------------------------------------------ */

/* The ABI version of the loaded library (UBIK_ABI_VERSION it was built
 * with). */
int ubik_abi_version(void);

/* The message of the last failing ubik_* call on this thread ("" if none).
 * Owned by the thread; valid until the next failing call on this thread. */
const char *ubik_last_error(void);

/* The status code of the last failing ubik_* call on this thread (0 if
 * none). */
int ubik_last_error_code(void);

/* The name of a status code ("UBIK_ERR_SQL"), "UBIK_UNKNOWN" for a code not
 * in the table. Static. */
const char *ubik_error_name(int code);

/* One-line description of a status code. Static. */
const char *ubik_error_description(int code);

/* 1 if the same call may succeed when repeated later (after draining), else
 * 0. Only UBIK_ERR_BACKPRESSURE and UBIK_ERR_JOIN_BUFFER are retryable. */
int ubik_error_retryable(int code);

/* ---- engine ------------------------------------------------------------- */

/* Opens an engine. options_json may be NULL or "" for the defaults, or a
 * JSON object with these optional fields (unknown fields are an error):
 *   "max_pending_records": integer >= 1, default 65536 - the most records
 *      a query holds for ubik_next_keyed at any time. A window that
 *      finalizes waits as work, not records, and ubik_next_keyed renders
 *      its records as it takes them; pushes report backpressure while the
 *      buffer is full or such work waits.
 * On success stores the handle in *out. */
int ubik_engine_open(const char *options_json, ubik_engine *out);

/* Registers sources: sql is a script of CREATE SOURCE statements (a query in
 * it is an error). Queries started later may read these sources without
 * declaring them. Re-registering a name replaces the earlier source. */
int ubik_engine_register_source(ubik_engine eng, const char *sql);

/* Releases the engine handle. Queries already started keep running and must
 * still be freed. */
int ubik_engine_close(ubik_engine eng);

/* ---- query -------------------------------------------------------------- */

/* Compiles sql (optional CREATE SOURCE statements plus queries: a SELECT or
 * CREATE VIEW ... AS SELECT) against the engine's sources and starts one
 * query. options_json may be NULL or "" for the defaults, or a JSON object
 * with these optional fields:
 *   "name":   string - which query of the script to start (required when it
 *             has several); names a bare SELECT. Default: the only query,
 *             named "query".
 *   "strict": boolean, default false - the first malformed or failing event
 *             fails the query instead of being skipped.
 *   "join_buffer": integer >= 0, default 0 = the engine's default
 *             (1,000,000) - for a temporal join, the most events held
 *             waiting for the table's watermark (UBIK_ERR_JOIN_BUFFER
 *             beyond it).
 * On success stores the handle in *out. */
int ubik_query_start(ubik_engine eng, const char *sql, const char *options_json, ubik_query *out);

/* Pushes one JSON event (an object) of len bytes. Returns UBIK_OK when it
 * was applied, UBIK_ERR_MALFORMED_EVENT / UBIK_ERR_EVAL when it was counted
 * and skipped (the message says why and which event), UBIK_ERR_BACKPRESSURE
 * when nothing was applied (drain, then push it again). */
int ubik_push(ubik_query q, const char *event, size_t len);

/* Pushes a buffer of JSON lines (one event per line; "\r\n" endings and
 * blank lines are accepted; the last line need not end with a newline, so
 * pass whole lines only). Stores in *consumed (may be NULL) the number of
 * bytes fully handled - applied or skipped - and in *rejected (may be NULL)
 * the number of lines skipped as malformed or failing.
 *   UBIK_OK: every line applied; *consumed == len.
 *   UBIK_ERR_MALFORMED_EVENT or UBIK_ERR_EVAL: every line handled
 *     (*consumed == len), *rejected > 0 lines skipped; the message describes
 *     the first (its line number within this buffer).
 *   UBIK_ERR_BACKPRESSURE: stopped before a line, which was not applied;
 *     drain and call again with data + *consumed.
 *   any other error: stopped at the line after *consumed. */
int ubik_push_lines(ubik_query q, const char *data, size_t len, size_t *consumed, size_t *rejected);

/* Takes the next record. Returns:
 *   UBIK_OK   - *key, *key_len, *value and *value_len hold the record (see
 *               OWNERSHIP: valid until the next ubik_next_keyed on q), and
 *               *meta (meta may be NULL) its metadata;
 *   UBIK_NONE - nothing pending yet;
 *   UBIK_END  - the input was closed and every record taken (repeats);
 *   < 0       - an error (UBIK_ERR_QUERY_FAILED once a failed query's
 *               buffered records are drained).
 * key, key_len, value and value_len must not be NULL. The key is the
 * frozen-contract JSON array of the GROUP BY cells, byte-identical to the
 * Kafka message key; the value is the projected row as one JSON object. */
int ubik_next_keyed(ubik_query q, const uint8_t **key, size_t *key_len,
                    const uint8_t **value, size_t *value_len, ubik_meta *meta);

/* Moves the event-time watermark to micros (microseconds since the Unix
 * epoch) if that is later than it is: windows it passes finalize, and their
 * records wait for ubik_next_keyed (never UBIK_ERR_BACKPRESSURE). For an
 * idle source, or a host that knows no earlier event will come. */
int ubik_advance_watermark(ubik_query q, int64_t micros);

/* Pushes one record (n bytes of one JSON object, or one CSV line, as the
 * input's format) to the query's input named input (NUL-terminated, case
 * insensitive): its stream, as ubik_push, or, for a query with a temporal
 * join (FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ...), its versioned table t.
 * A table row is the version of its primary key valid from its time; a row
 * behind the table's watermark is late (counted in the stats' table.late,
 * not applied); a row that does not decode, or with a NULL primary key cell,
 * returns UBIK_ERR_MALFORMED_EVENT (counted in table.malformed). An event
 * waits until the table's watermark passes its time, then joins the version
 * valid then, so the result does not depend on how the two inputs
 * interleave. For an interval join of two streams (FROM l JOIN r ON ...
 * AND r.ts BETWEEN l.ts ... AND l.ts ...) input names either stream; a row
 * is matched with the other stream's rows when it arrives. A query over a
 * view whose body is such a join (or a temporal join) takes the view's two
 * inputs the same way, by their names. Returns the
 * codes of ubik_push, UBIK_ERR_JOIN_BUFFER, and
 * UBIK_ERR_INVALID_ARGUMENT for a name that is none of the query's inputs
 * (the message lists them; the query goes on). */
int ubik_push_input(ubik_query q, const char *input, const char *record, size_t n);

/* Moves the versioned table's watermark (an interval join's: its second,
 * right stream's) to micros (microseconds since the Unix epoch) if that is
 * later: for an idle input, or a host that knows no earlier row will come.
 * Waiting events it passes are joined. UBIK_ERR_INVALID_ARGUMENT for a
 * query without a join. */
int ubik_advance_table_watermark(ubik_query q, int64_t micros);

/* Ends the versioned table's input (an interval join's right stream):
 * every waiting event, and every later one, joins the versions there are;
 * further rows of it return UBIK_ERR_CLOSED. ubik_query_close ends both
 * inputs. UBIK_ERR_INVALID_ARGUMENT for a query without a join. */
int ubik_end_table(ubik_query q);

/* Publishes now every (group, window) changed since its last emission (EMIT
 * EARLY queries; a no-op otherwise). */
int ubik_flush(ubik_query q);

/* Performs the early emission that is due by the processing clock (EMIT
 * EARLY ... EVERY). Pushing does this itself; call it on a timer when the
 * input goes idle. */
int ubik_tick(ubik_query q);

/* Ends the input: every open window finalizes and its record becomes
 * pending (taken with ubik_next_keyed, which renders them as it goes; never
 * UBIK_ERR_BACKPRESSURE). Further pushes return UBIK_ERR_CLOSED; once
 * drained, ubik_next_keyed returns UBIK_END. Closing twice is a no-op. */
int ubik_query_close(ubik_query q);

/* Stores in *json and *len (len may be NULL; the text is also
 * NUL-terminated) the query's counters as a JSON object: events_in, malformed, pending, rows, filtered, eval_errors, late,
 * records_out, having_suppressed, unchanged_suppressed (records not
 * emitted because their value equals the last one emitted for the key),
 * duplicates, dedup_late (events dropped by the source's dedup_key),
 * windows_finalized, live_groups,
 * state_bytes, watermark_us (null before the first event); for a query with
 * a temporal join also "table" (rows_in, malformed, late) and "join" (the
 * join's counters: events, late_events, joined, unmatched, null_keys,
 * table_rows, late_table_rows, bad_table_rows, buffered, buffered_peak,
 * versions, versions_peak, keys, dropped, table_watermark_us); for an
 * interval join "interval" (left_rows, right_rows, late_left, late_right,
 * null_keys, matches, left_held, right_held, left_peak, right_peak, dropped,
 * left_watermark_us, right_watermark_us). Owned by q; valid
 * until the next ubik_query_stats on q or ubik_query_free. */
int ubik_query_stats(ubik_query q, const char **json, size_t *len);

/* Stores in *json and *len (len may be NULL; the text is also
 * NUL-terminated) the columns of the query's value rows, in order, as a JSON
 * array of {"name": ..., "type": ...}; type is the SQL type as explain
 * prints it (BIGINT, DOUBLE, DECIMAL(38,9), TIMESTAMP, ...). A host uses it
 * to read a DECIMAL cell's JSON number exactly rather than as a binary
 * float. Owned by q; valid until ubik_query_free. */
int ubik_query_columns(ubik_query q, const char **json, size_t *len);

/* Releases the query handle and all memory it owns (pending records, the
 * pointers ubik_next_keyed, ubik_query_stats and ubik_query_columns returned). Does not
 * finalize anything: call ubik_query_close and drain first to get the final
 * records. */
int ubik_query_free(ubik_query q);

#endif /* UBIK_NO_PROTOTYPES */

#ifdef __cplusplus
}
#endif

#endif /* UBIK_H */
