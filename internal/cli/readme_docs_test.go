package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/chhttp"
	"github.com/ubiksql/ubik/land/chlander"
	"github.com/ubiksql/ubik/land/pglander"
)

// capiLib builds libubik.so once per test run, as capi/build.sh does, into
// DIR/build, and returns DIR: a host built in DIR with docs/embedding.md's
// line finds the library as the doc says.
func (r *readmeEnv) capiLib(t *testing.T) string {
	t.Helper()
	if r.capiDir == "" {
		dir := filepath.Join(r.scratch, "capi")
		if out, errb, code := r.sh(t, r.root, "UBIK_BUILD_DIR="+filepath.Join(dir, "build")+" bash capi/build.sh"); code != 0 {
			t.Fatalf("capi/build.sh: exit %d\n%s%s", code, out, errb)
		}
		r.capiDir = dir
	}
	return r.capiDir
}

// docLines splits a shell block into its commands, comments dropped.
func docLines(block string) []string {
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if i := strings.Index(l, "  #"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// runCBuild builds a C host with docs/embedding.md's gcc line and runs it
// from another directory: the rpath must find the library in build/.
func runCBuild(t *testing.T, r *readmeEnv, block string) {
	lines := docLines(block)
	if len(lines) != 2 || lines[0] != "bash capi/build.sh" || !strings.HasPrefix(lines[1], "gcc ") {
		t.Fatalf("want the build script and one gcc line, got %q", lines)
	}
	for _, f := range []string{"capi/README.md", "capi/build.sh"} {
		if b, err := os.ReadFile(filepath.Join(r.root, f)); err != nil || !strings.Contains(string(b), strings.Replace(lines[1], "host", "myhost", 2)) && !strings.Contains(string(b), lines[1]) {
			t.Errorf("%s does not give docs/embedding.md's build line %s (%v)", f, lines[1], err)
		}
	}
	dir := r.capiLib(t)
	host := `#include "ubik.h"
#include <stdio.h>
int main(void) {
    ubik_engine eng;
    if (ubik_engine_open(NULL, &eng) != UBIK_OK) return 1;
    ubik_engine_close(eng);
    puts("opened");
    return 0;
}
`
	if err := os.WriteFile(filepath.Join(dir, "host.c"), []byte(host), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errb, code := r.sh(t, dir, lines[1]); code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", lines[1], code, out, errb)
	}
	out, errb, code := r.sh(t, t.TempDir(), filepath.Join(dir, "host"))
	if code != 0 || out != "opened\n" {
		t.Fatalf("the host run from another directory: exit %d\n%s%s", code, out, errb)
	}
}

// runPythonImport runs docs/embedding.md's Python line over the library
// capi/build.sh built.
func runPythonImport(t *testing.T, r *readmeEnv, block string) {
	lines := docLines(block)
	if len(lines) != 2 || lines[0] != "bash capi/build.sh" {
		t.Fatalf("want the build script and one python line, got %q", lines)
	}
	lib := filepath.Join(r.capiLib(t), "build", "libubik.so")
	script := "UBIK_LIB=" + lib + " " + lines[1] + " && UBIK_LIB=" + lib + ` PYTHONPATH=python python3 -c 'import ubik; ubik.Engine().close()'`
	if out, errb, code := r.sh(t, r.root, script); code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", script, code, out, errb)
	}
}

// pgColumnsSQL lists a table's columns and its primary key, in order.
const pgColumnsSQL = `SELECT string_agg(format('%s %s %s %s', column_name, data_type, is_nullable, column_default IS NOT NULL), ', ' ORDER BY ordinal_position)
  || ' | ' || (SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p')
  || ' | ' || coalesce((SELECT array_to_string(reloptions, ',') FROM pg_class WHERE oid = $1::regclass), '')
FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $2`

// checkPGSchema creates docs/landing.md's PostgreSQL table and the table
// pglander creates, and requires the same columns, types, nullability,
// defaults, primary key and fillfactor.
func checkPGSchema(t *testing.T, r *readmeEnv, block string) {
	dsn := testenv.RequirePostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	doc, landed := "doc_schema_"+suffix, "land_schema_"+suffix
	if !strings.Contains(block, "CREATE TABLE IF NOT EXISTS T (") {
		t.Fatalf("the block does not create the table T:\n%s", block)
	}
	if _, err := pool.Exec(ctx, strings.Replace(block, " T (", " "+doc+" (", 1)); err != nil {
		t.Fatalf("the doc's CREATE TABLE: %v", err)
	}
	defer pool.Exec(ctx, "DROP TABLE IF EXISTS "+doc)
	if _, err := pglander.New(ctx, pglander.Options{Pool: pool, Mode: land.Latest, Table: landed}); err != nil {
		t.Fatal(err)
	}
	defer pool.Exec(ctx, "DROP TABLE IF EXISTS "+landed)
	var want, got string
	if err := pool.QueryRow(ctx, pgColumnsSQL, landed, landed).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, pgColumnsSQL, doc, doc).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("docs/landing.md's PostgreSQL table is not the one pglander creates:\ndoc:    %s\nlander: %s", got, want)
	}
}

// checkCHSchema does the same for ClickHouse: the doc's table and the
// lander's have the same SHOW CREATE TABLE.
func checkCHSchema(t *testing.T, r *readmeEnv, block string) {
	url := testenv.RequireClickHouse(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := chhttp.New(chhttp.Options{URL: url, Database: "default"})
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	doc, landed := "doc_schema_"+suffix, "land_schema_"+suffix
	if !strings.Contains(block, "CREATE TABLE IF NOT EXISTS T (") {
		t.Fatalf("the block does not create the table T:\n%s", block)
	}
	if _, err := c.Exec(ctx, strings.Replace(block, " T (", " "+doc+" (", 1), nil); err != nil {
		t.Fatalf("the doc's CREATE TABLE: %v", err)
	}
	defer c.Exec(ctx, "DROP TABLE IF EXISTS "+doc, nil)
	if _, err := chlander.New(ctx, chlander.Options{URL: url, Database: "default", Table: landed, Mode: land.Latest}); err != nil {
		t.Fatal(err)
	}
	defer c.Exec(ctx, "DROP VIEW IF EXISTS "+landed+"_current", nil)
	defer c.Exec(ctx, "DROP TABLE IF EXISTS "+landed, nil)
	describe := func(table string) string {
		out, err := c.Exec(ctx, "SHOW CREATE TABLE default."+table+" FORMAT TSVRaw", nil)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Replace(string(out), table, "T", 1)
	}
	if got, want := describe(doc), describe(landed); got != want {
		t.Errorf("docs/landing.md's ClickHouse table is not the one chlander creates:\ndoc:    %s\nlander: %s", got, want)
	}
}

// checkGoGet checks docs/embedding.md's go get names the root module (the
// proxy itself is not reachable from CI).
func checkGoGet(t *testing.T, r *readmeEnv, block string) {
	b, err := os.ReadFile(filepath.Join(r.root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "module ")
	if block != "go get "+mod {
		t.Errorf("the block %q does not get the root module %s", block, mod)
	}
}

// The blocks of docs/embedding.md and docs/landing.md that readmeRuns runs.
const (
	docGoGet  = `go get github.com/ubiksql/ubik`
	docCBuild = `bash capi/build.sh          # build/libubik.so, build/ubik.h, build/ubik_test
gcc -Ibuild host.c -Lbuild -lubik -Wl,-rpath,"$PWD/build" -o host`
	docPythonImport = `bash capi/build.sh                          # build/libubik.so
PYTHONPATH=python python3 -c 'import ubik'`
	docPGTable = `CREATE TABLE IF NOT EXISTS T (
  query        text        NOT NULL,
  group_key    text        NOT NULL,
  window_start bigint      NOT NULL,
  revision     bigint      NOT NULL,
  final        boolean     NOT NULL,
  window_end   bigint      NOT NULL,
  key          text        NOT NULL,
  value        jsonb       NOT NULL,
  landed_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (query, group_key)
) WITH (fillfactor = 70)`
	docCHTable = `CREATE TABLE IF NOT EXISTS T (
  query String, group_key String, window_start Int64, revision UInt64,
  final UInt8, window_end Int64, key String, value String
) ENGINE = ReplacingMergeTree(revision) ORDER BY (query, group_key, window_start)`
)
