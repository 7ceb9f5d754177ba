/*
 * capi_host.c - the metamorphic harness's C host of libubik.so.
 *
 *   capi_host SQL INPUT NAME MAX_PENDING BATCH [SECOND SECOND_INPUT]
 *
 * Runs query NAME of the script in file SQL over the JSON lines in file
 * INPUT through the C ABI: BATCH lines at a time with ubik_push_lines
 * (BATCH 1: each line with ubik_push), resuming after backpressure, a
 * flush and a drain after each batch, then ubik_query_close and a drain to
 * UBIK_END. With SECOND (a join's second input: its versioned table or
 * right stream), SECOND_INPUT's lines are AT<TAB>ROW: each ROW is pushed
 * with ubik_push_input before the batch holding event AT (0-based; at
 * the end for AT past the last). Prints one record per line as
 *   final<TAB>revision<TAB>key<TAB>value
 * (key and value are contract JSON: no raw tab or newline), and last
 *   #stats<TAB>{the ubik_query_stats JSON}
 * Exit status 0 on success; otherwise the failing call and its message.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ubik.h"

static void fail(const char *what, int rc) {
	fprintf(stderr, "capi_host: %s: %s (%d): %s\n", what, ubik_error_name(rc), rc, ubik_last_error());
	exit(1);
}

static char *slurp(const char *path, size_t *len) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	size_t r;
	while ((r = fread(b + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap + 1);
		}
	}
	fclose(f);
	b[n] = 0;
	*len = n;
	return b;
}

/* drain takes every pending record; returns how many, or -1 at UBIK_END. */
static long drain(ubik_query q) {
	long n = 0;
	for (;;) {
		const uint8_t *k, *v;
		size_t kl, vl;
		ubik_meta m;
		int rc = ubik_next_keyed(q, &k, &kl, &v, &vl, &m);
		if (rc == UBIK_NONE) return n;
		if (rc == UBIK_END) return -1;
		if (rc != UBIK_OK) fail("ubik_next_keyed", rc);
		printf("%d\t%" PRIu64 "\t", m.final, m.revision);
		fwrite(k, 1, kl, stdout);
		putchar('\t');
		fwrite(v, 1, vl, stdout);
		putchar('\n');
		n++;
	}
}

/* The second input's rows not pushed yet: AT<TAB>ROW lines from *pos. */
static void push_second(ubik_query q, const char *name, char *sec, size_t sec_len, size_t *pos, long event) {
	while (*pos < sec_len) {
		char *line = sec + *pos;
		char *nl = memchr(line, '\n', sec_len - *pos);
		size_t len = nl ? (size_t)(nl - line) : sec_len - *pos;
		char *end;
		long at = strtol(line, &end, 10);
		if (*end != '\t') {
			fprintf(stderr, "capi_host: second input line without AT<TAB>: %.*s\n", (int)len, line);
			exit(1);
		}
		if (at > event) return;
		const char *row = end + 1;
		size_t rl = len - (size_t)(row - line);
		int rc;
		for (;;) {
			rc = ubik_push_input(q, name, row, rl);
			if (rc != UBIK_ERR_BACKPRESSURE) break;
			drain(q);
		}
		if (rc != UBIK_OK && rc != UBIK_ERR_MALFORMED_EVENT && rc != UBIK_ERR_EVAL) fail("ubik_push_input", rc);
		*pos += len + (nl ? 1 : 0);
	}
}

int main(int argc, char **argv) {
	if (argc != 6 && argc != 8) {
		fprintf(stderr, "usage: capi_host SQL INPUT NAME MAX_PENDING BATCH [SECOND SECOND_INPUT]\n");
		return 2;
	}
	size_t sec_len = 0, sec_pos = 0;
	char *sec = argc == 8 ? slurp(argv[7], &sec_len) : NULL;
	long event = 0;
	size_t sql_len, in_len;
	char *sql = slurp(argv[1], &sql_len);
	char *in = slurp(argv[2], &in_len);
	long batch = atol(argv[5]);
	char opts[128], qopts[256];
	snprintf(opts, sizeof opts, "{\"max_pending_records\": %s}", argv[4]);
	snprintf(qopts, sizeof qopts, "{\"name\": \"%s\"}", argv[3]);
	ubik_engine eng;
	ubik_query q;
	int rc;
	if ((rc = ubik_engine_open(opts, &eng)) != UBIK_OK) fail("ubik_engine_open", rc);
	if ((rc = ubik_query_start(eng, sql, qopts, &q)) != UBIK_OK) fail("ubik_query_start", rc);
	size_t off = 0;
	while (off < in_len) {
		if (sec) push_second(q, argv[6], sec, sec_len, &sec_pos, event);
		/* The next BATCH whole lines. */
		size_t end = off;
		for (long i = 0; i < batch && end < in_len; i++) {
			char *nl = memchr(in + end, '\n', in_len - end);
			end = nl ? (size_t)(nl - in) + 1 : in_len;
			event++;
		}
		if (batch == 1) {
			size_t len = end - off;
			if (len > 0 && in[off + len - 1] == '\n') len--;
			for (;;) {
				rc = ubik_push(q, in + off, len);
				if (rc != UBIK_ERR_BACKPRESSURE) break;
				drain(q);
			}
			if (rc != UBIK_OK && rc != UBIK_ERR_MALFORMED_EVENT && rc != UBIK_ERR_EVAL) fail("ubik_push", rc);
		} else {
			while (off < end) {
				size_t consumed = 0, rejected = 0;
				rc = ubik_push_lines(q, in + off, end - off, &consumed, &rejected);
				if (rc != UBIK_OK && rc != UBIK_ERR_BACKPRESSURE && rc != UBIK_ERR_MALFORMED_EVENT && rc != UBIK_ERR_EVAL)
					fail("ubik_push_lines", rc);
				off += consumed;
				if (rc == UBIK_ERR_BACKPRESSURE) drain(q);
			}
		}
		off = end;
		if ((rc = ubik_flush(q)) != UBIK_OK) fail("ubik_flush", rc);
		drain(q);
	}
	if (sec) push_second(q, argv[6], sec, sec_len, &sec_pos, 1L << 62);
	if ((rc = ubik_query_close(q)) != UBIK_OK) fail("ubik_query_close", rc);
	while (drain(q) >= 0) {
	}
	const char *stats;
	size_t sl;
	if ((rc = ubik_query_stats(q, &stats, &sl)) != UBIK_OK) fail("ubik_query_stats", rc);
	printf("#stats\t%.*s\n", (int)sl, stats);
	if ((rc = ubik_query_free(q)) != UBIK_OK) fail("ubik_query_free", rc);
	if ((rc = ubik_engine_close(eng)) != UBIK_OK) fail("ubik_engine_close", rc);
	free(sql);
	free(in);
	free(sec);
	return fflush(stdout) == 0 ? 0 : 1;
}
