package exec

import (
	"strings"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// An operator never runs a source's input dedup: given a query whose
// source declares one it refuses it, naming NoDedup, rather than run
// without deduplicating; NoDedup's copy runs.
func TestNewRefusesDedup(t *testing.T) {
	prog, err := plan.Compile(restoreDedupSource+restoreQueries[0], plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[0]
	cfg := Config{Emit: func(*changelog.Record) error { return nil }, Nanotime: func() int64 { return 1 }}
	if _, err := New(q, cfg); err == nil || !strings.Contains(err.Error(), "NoDedup") {
		t.Fatalf("New of a query with a dedup_key: %v", err)
	}
	if _, err := New(NoDedup(q), cfg); err != nil {
		t.Fatal(err)
	}
	if q.Source.Dedup == nil {
		t.Fatal("NoDedup changed the query it copied")
	}
}
