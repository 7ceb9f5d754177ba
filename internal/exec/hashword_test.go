package exec

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
	"unsafe"

	"github.com/ubiksql/ubik/internal/types"
)

// TestGroupSize: a group is at most 64 bytes, and a chunk of them with its
// allocation header fits an 8 KiB span. An 8-byte field more made it 72
// and every windowed query slower (groups.go).
func TestGroupSize(t *testing.T) {
	n := int(unsafe.Sizeof(group{}))
	if n > 64 {
		t.Fatalf("a group is %d bytes, over 64: move a field read only at emission after the aggregate words", n)
	}
	if c := chunkSize*n + 8; c > 8192 {
		t.Fatalf("a chunk of %d groups takes %d bytes with its header, over 8 KiB", chunkSize, c)
	}
}

// TestValueHashWord: the value hash takes a word after the aggregate
// words exactly for the queries that can publish a record that is not
// final, and no query keeps a hash beside its groups while it runs.
func TestValueHashWord(t *testing.T) {
	cases := []struct {
		sql  string
		word bool
	}{
		{`SELECT merchant, count(*) AS n FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND`, true},
		{`SELECT merchant, count(*) AS n FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT CHANGES`, true},
		{`SELECT merchant, count(*) AS n FROM events GROUP BY merchant`, true},
		{`SELECT merchant FROM events GROUP BY merchant`, true},
		{`SELECT merchant, count(*) AS n FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, false},
		{`SELECT merchant, count(*) AS n FROM events GROUP BY merchant, HOP(event_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) EMIT FINAL`, false},
		{`SELECT merchant, count(*) AS n FROM events GROUP BY merchant, SESSION(event_time, INTERVAL '10' SECOND)`, false},
	}
	for _, c := range cases {
		q := compileOne(t, c.sql)
		var got []emitted
		op := collectingOp(t, q, &got)
		if op.hashWord != c.word {
			t.Fatalf("%s: hash word %v, want %v", c.sql, op.hashWord, c.word)
		}
		for i := range 400 {
			row := []types.Value{types.Str("e"), types.Str(fmt.Sprintf("m%d", i%7)), types.Str("c"), types.Float(1), types.TS(36000000000 + int64(i)*500_000)}
			if err := op.Process(row); err != nil {
				t.Fatal(err)
			}
			if i%50 == 49 {
				if err := op.EmitEarly(); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, b := range op.buckets {
			if b.stride != op.layout.stride || b.hashWords != c.word {
				t.Fatalf("%s: a bucket's groups have %d aggregate words and hash words %v, want %d and %v", c.sql, b.stride, b.hashWords, op.layout.stride, c.word)
			}
		}
		if op.sideHashes != nil {
			t.Fatalf("%s: %d hashes kept beside the groups", c.sql, len(op.sideHashes))
		}
		if err := op.Finish(); err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("%s: nothing published", c.sql)
		}
	}
}

// TestRestoreHashIntoFinalQuery: a query that publishes only finals keeps
// no hash word, yet restored from a checkpoint that carries hashes (the
// same query under EMIT EARLY wrote it) it writes every entry back as it
// read it, a changed group's included, and forgets each hash when its
// group closes or the entry is refused.
func TestRestoreHashIntoFinalQuery(t *testing.T) {
	const sel = `SELECT merchant, count(*) AS n FROM events GROUP BY merchant, `
	early := compileOne(t, sel+`TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND`)
	row := func(m string, sec int64) []types.Value {
		return []types.Value{types.Str("e"), types.Str(m), types.Str("c"), types.Float(1), types.TS(36000000000 + sec*1_000_000)}
	}
	var got []emitted
	op := collectingOp(t, early, &got)
	for i := range 30 {
		if err := op.Process(row(fmt.Sprintf("m%d", i%3), int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.EmitEarly(); err != nil {
		t.Fatal(err)
	}
	if err := op.Process(row("m9", 31)); err != nil { // dirty, never published: no hash
		t.Fatal(err)
	}
	store := map[string][]byte{}
	put := func(k, v []byte) error {
		if v == nil {
			delete(store, string(k))
		} else {
			store[string(k)] = bytes.Clone(v)
		}
		return nil
	}
	if err := op.Checkpoint(true, []byte("pos"), put); err != nil {
		t.Fatal(err)
	}
	for _, window := range []string{
		`TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT FINAL`,
		`SESSION(event_time, INTERVAL '1' MINUTE)`,
	} {
		final := compileOne(t, sel+window)
		var out []emitted
		op2 := collectingOp(t, final, &out)
		restoreStore(t, op2, store)
		if op2.hashWord || len(op2.sideHashes) != 3 {
			t.Fatalf("%s: hash word %v, %d hashes beside the groups; want none and 3", window, op2.hashWord, len(op2.sideHashes))
		}
		again := map[string][]byte{}
		if err := op2.Checkpoint(true, []byte("pos"), func(k, v []byte) error { again[string(k)] = bytes.Clone(v); return nil }); err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(store, again, bytes.Equal) {
			t.Fatalf("%s: the restored state is written back otherwise:\n%q\nwant\n%q", window, again, store)
		}
		// m0 changes: its entry is written again, with the hash it had.
		if err := op2.Process(row("m0", 40)); err != nil {
			t.Fatal(err)
		}
		changed := map[string][]byte{}
		if err := op2.Checkpoint(false, []byte("pos"), func(k, v []byte) error { changed[string(k)] = bytes.Clone(v); return nil }); err != nil {
			t.Fatal(err)
		}
		var m0 *group
		for _, g := range op2.liveGroups() {
			if decodeKeyBytes(g.mapKey, op2.keyTypes, nil)[0].S == "m0" {
				m0 = g
			}
		}
		k, _ := op2.groupEntry(nil, nil, m0)
		_, v := op.groupEntry(nil, nil, groupOf(t, op, "m0"))
		if len(changed) != 2 || !hashesEqual(t, changed[string(k)], v) {
			t.Fatalf("%s: after a change the checkpoint wrote %q; want m0's entry with its hash and the meta entry", window, changed)
		}
		if err := op2.Finish(); err != nil {
			t.Fatal(err)
		}
		if len(op2.sideHashes) != 0 {
			t.Fatalf("%s: %d hashes kept after every group closed", window, len(op2.sideHashes))
		}
		// An entry refused leaves no hash behind.
		op3 := collectingOp(t, final, &out)
		gk, gv := op.groupEntry(nil, nil, groupOf(t, op, "m1"))
		if _, err := op3.Restore(gk, append(bytes.Clone(gv), 0)); err == nil {
			t.Fatalf("%s: an entry with a trailing byte was restored", window)
		}
		if len(op3.sideHashes) != 0 {
			t.Fatalf("%s: a refused entry left its hash", window)
		}
	}
}

// groupOf returns op's live group of merchant m.
func groupOf(t *testing.T, op *Operator, m string) *group {
	t.Helper()
	for _, g := range op.liveGroups() {
		if decodeKeyBytes(g.mapKey, op.keyTypes, nil)[0].S == m {
			return g
		}
	}
	t.Fatalf("no group for %s", m)
	return nil
}

// hashesEqual reports whether two group entries carry the same published
// value hash (both carry one).
func hashesEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	hash := func(v []byte) []byte {
		r := &reader{b: v[1:]}
		r.varint()
		r.varint()
		r.uvarint()
		r.uvarint()
		r.byte1()
		if r.err != nil || len(r.b) < 9 || r.b[0] != 1 {
			return nil
		}
		return r.b[1:9]
	}
	ha, hb := hash(a), hash(b)
	return ha != nil && bytes.Equal(ha, hb)
}
