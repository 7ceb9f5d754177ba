/*
 * script_host.c - runs the commands of a behaviour script (testdata/script,
 * translated by capi/script_test.go) through the C ABI.
 *
 *   script_host PROGRAM
 *
 * PROGRAM has one command a line, its fields separated by tabs:
 *   sql NAME JOIN_BUFFER FILE   start query NAME ("" for the only one) of
 *                               the script in FILE, replacing the last
 *   push EVENT                  ubik_push
 *   input NAME ROW              ubik_push_input
 *   watermark MICROS            ubik_advance_watermark
 *   table-watermark MICROS      ubik_advance_table_watermark
 *   end-table                   ubik_end_table
 *   early                       ubik_flush
 *   close                       ubik_query_close
 *   stats                       ubik_query_stats
 *   expect                      an expect of the script
 * After each command every pending record is taken. Prints, one a line:
 *   R FINAL REVISION QUERY KEY VALUE   a record (key and value are contract
 *                                      JSON: no raw tab or newline)
 *   E MESSAGE                          a call that failed: ubik_last_error,
 *                                      backslash and newline escaped
 *   S JSON                             the stats of a stats command
 *   X                                  an expect
 * A push that reports backpressure is repeated after taking the records.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ubik.h"

static char *slurp(const char *path, size_t *len) {
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	size_t cap = 1 << 16, n = 0, r;
	char *b = malloc(cap + 1);
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

/* error prints message m (of a failed call) on one line. */
static void error(const char *m) {
	fputs("E\t", stdout);
	for (; m && *m; m++) {
		if (*m == '\\') {
			fputs("\\\\", stdout);
		} else if (*m == '\n') {
			fputs("\\n", stdout);
		} else {
			putchar(*m);
		}
	}
	putchar('\n');
}

/* drain takes every pending record. */
static void drain(ubik_query q) {
	for (;;) {
		const uint8_t *k, *v;
		size_t kl, vl;
		ubik_meta m;
		int rc = ubik_next_keyed(q, &k, &kl, &v, &vl, &m);
		/* A failed query's records end with UBIK_ERR_QUERY_FAILED: the
		 * call that failed it printed why. */
		if (rc == UBIK_NONE || rc == UBIK_END || rc == UBIK_ERR_QUERY_FAILED) return;
		if (rc != UBIK_OK) {
			error(ubik_last_error());
			return;
		}
		printf("R\t%d\t%" PRIu64 "\t%.*s\t", m.final, m.revision, (int)m.query_len, m.query);
		fwrite(k, 1, kl, stdout);
		putchar('\t');
		fwrite(v, 1, vl, stdout);
		putchar('\n');
	}
}

/* start replaces *q with query name of the script in file. */
static void start(ubik_engine eng, ubik_query *q, const char *name, const char *buffer, const char *file) {
	if (*q) {
		ubik_query_free(*q);
		*q = 0;
	}
	size_t len;
	char *sql = slurp(file, &len);
	char opts[512];
	snprintf(opts, sizeof opts, "{\"name\": \"%s\", \"join_buffer\": %s}", name, buffer);
	if (ubik_query_start(eng, sql, opts, q) != UBIK_OK) {
		*q = 0;
		error(ubik_last_error());
	}
	free(sql);
}

/* push runs one push or push_input (input NULL: push), repeating it after
 * backpressure. */
static int push(ubik_query q, const char *input, const char *row) {
	for (;;) {
		int rc = input ? ubik_push_input(q, input, row, strlen(row)) : ubik_push(q, row, strlen(row));
		if (rc != UBIK_ERR_BACKPRESSURE) return rc;
		drain(q);
	}
}

/* run runs one command on query q (not 0). */
static int run(ubik_query q, const char *cmd, char *arg) {
	if (!strcmp(cmd, "push")) return push(q, NULL, arg);
	if (!strcmp(cmd, "input")) {
		char *tab = strchr(arg, '\t');
		*tab = 0;
		return push(q, arg, tab + 1);
	}
	if (!strcmp(cmd, "watermark")) return ubik_advance_watermark(q, strtoll(arg, NULL, 10));
	if (!strcmp(cmd, "table-watermark")) return ubik_advance_table_watermark(q, strtoll(arg, NULL, 10));
	if (!strcmp(cmd, "end-table")) return ubik_end_table(q);
	if (!strcmp(cmd, "early")) return ubik_flush(q);
	if (!strcmp(cmd, "close")) return ubik_query_close(q);
	if (!strcmp(cmd, "stats")) {
		const char *js;
		size_t n;
		int rc = ubik_query_stats(q, &js, &n);
		if (rc == UBIK_OK) printf("S\t%.*s\n", (int)n, js);
		return rc;
	}
	fprintf(stderr, "script_host: unknown command %s\n", cmd);
	exit(2);
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: script_host PROGRAM\n");
		return 2;
	}
	size_t len;
	char *prog = slurp(argv[1], &len);
	ubik_engine eng;
	ubik_query q = 0;
	if (ubik_engine_open(NULL, &eng) != UBIK_OK) {
		error(ubik_last_error());
		return 1;
	}
	for (char *line = prog; line < prog + len;) {
		char *nl = strchr(line, '\n');
		if (nl) *nl = 0;
		char *arg = strchr(line, '\t');
		if (arg) *arg++ = 0;
		if (!strcmp(line, "expect")) {
			puts("X");
		} else if (!strcmp(line, "sql")) {
			char *name = arg, *buffer = strchr(name, '\t');
			*buffer++ = 0;
			char *file = strchr(buffer, '\t');
			*file++ = 0;
			start(eng, &q, name, buffer, file);
		} else if (!q) {
			puts("E\tno query running");
		} else {
			int rc = run(q, line, arg);
			/* The message before the records are taken: taking them
			 * may fail too, which replaces it. */
			char *msg = rc != UBIK_OK ? strdup(ubik_last_error()) : NULL;
			drain(q);
			if (msg) {
				error(msg);
				free(msg);
			}
		}
		line = nl ? nl + 1 : prog + len;
	}
	if (q) ubik_query_free(q);
	ubik_engine_close(eng);
	free(prog);
	return 0;
}
