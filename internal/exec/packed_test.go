package exec

import (
	"bytes"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// packedCases: every call newKernel packs, over the aggCases row shape
// (x DOUBLE, k VARCHAR, b BOOLEAN, ts TIMESTAMP, d DECIMAL(10,2), i BIGINT),
// plus count(*) and a boxed call for the box path.
func packedCases() []plan.AggCall {
	x, k, b, ts := col(0, types.Double), col(1, types.Varchar), col(2, types.Boolean), col(3, types.Timestamp)
	d, i := col(4, types.Decimal(10, 2)), col(5, types.BigInt)
	return []plan.AggCall{
		{Func: "count_star", Type: types.BigInt},
		{Func: "count", Args: []plan.Expr{k}, Type: types.BigInt},
		{Func: "sum", Args: []plan.Expr{x}, Type: types.Double},
		{Func: "sum", Args: []plan.Expr{i}, Type: types.HugeInt},
		{Func: "sum", Args: []plan.Expr{d}, Type: types.Decimal(38, 2)},
		{Func: "avg", Args: []plan.Expr{x}, Type: types.Double},
		{Func: "avg", Args: []plan.Expr{i}, Type: types.Double},
		{Func: "avg", Args: []plan.Expr{d}, Type: types.Double},
		{Func: "min", Args: []plan.Expr{x}, Type: types.Double},
		{Func: "max", Args: []plan.Expr{x}, Type: types.Double},
		{Func: "min", Args: []plan.Expr{i}, Type: types.BigInt},
		{Func: "max", Args: []plan.Expr{ts}, Type: types.Timestamp},
		{Func: "max", Args: []plan.Expr{b}, Type: types.Boolean},
		{Func: "min", Args: []plan.Expr{k}, Type: types.Varchar},
		{Func: "count", Args: []plan.Expr{k}, Distinct: true, Type: types.BigInt},
	}
}

// TestPackedMatchesAggState: an aggregate kept in words gives the result,
// the checkpoint bytes and the merge of the aggState it packs, over random
// inputs with NULLs, signed zeros, NaN, infinities and large magnitudes;
// and its box and overflow slots are all returned on release.
func TestPackedMatchesAggState(t *testing.T) {
	r := rand.New(rand.NewPCG(aggSeed(t), 11))
	for round := 0; round < 40; round++ {
		rows := genAggRows(r, r.IntN(200), round%2 == 0)
		for _, c := range packedCases() {
			c := c
			var arena aggArena
			k, _, err := newKernel(&c, &arena)
			if err != nil {
				t.Fatalf("%s: %v", c.Func, err)
			}
			ref := feed(t, &c, rows)
			// Two halves in two groups' words, then merged as sessions do.
			w1, w2 := make([]uint64, k.nwords()), make([]uint64, k.nwords())
			cut := len(rows) / 2
			for j, row := range rows {
				w := w1
				if j >= cut {
					w = w2
				}
				if err := k.update(w, argsOf(&c, row)); err != nil {
					t.Fatal(err)
				}
			}
			whole := make([]uint64, k.nwords())
			for _, row := range rows {
				if err := k.update(whole, argsOf(&c, row)); err != nil {
					t.Fatal(err)
				}
			}
			want := resultText(ref.result())
			if got := resultText(k.result(whole)); got != want {
				t.Fatalf("%s(%v): packed result %s, aggState %s", c.Func, c.Args, got, want)
			}
			if got := k.unpack(whole).appendState(nil); !bytes.Equal(got, ref.appendState(nil)) {
				t.Fatalf("%s(%v): packed checkpoint bytes differ", c.Func, c.Args)
			}
			a := k.unpack(w1)
			if err := a.merge(k.unpack(w2)); err != nil {
				t.Fatal(err)
			}
			k.pack(w1, a)
			if got := resultText(k.result(w1)); got != want {
				t.Fatalf("%s(%v): merged packed result %s, want %s", c.Func, c.Args, got, want)
			}
			// A checkpoint read back into fresh words.
			back := make([]uint64, k.nwords())
			s := k.fresh()
			if err := s.readState(&reader{b: ref.appendState(nil)}); err != nil {
				t.Fatal(err)
			}
			k.pack(back, s)
			if got := resultText(k.result(back)); got != want {
				t.Fatalf("%s(%v): restored packed result %s, want %s", c.Func, c.Args, got, want)
			}
			for _, w := range [][]uint64{w1, w2, whole, back} {
				k.release(w)
			}
			if n := arena.boxes.live(); n != 0 {
				t.Fatalf("%s: %d boxes not released", c.Func, n)
			}
			if n := arena.exts.live(); n != 0 {
				t.Fatalf("%s: %d sum overflows not released", c.Func, n)
			}
		}
	}
}

// TestBucketIndex: the bucket's own hash index finds every key it holds
// and none it does not, across growth, with keys that share prefixes and
// the empty key; and with the index reserved for fewer, as many or more
// groups than it gets (bucket.reserve): reserved for as many, it ends as
// large as growing made it and never grows.
func TestBucketIndex(t *testing.T) {
	grown, n := testBucketIndex(t, -1)
	if size, _ := testBucketIndex(t, n); size != grown {
		t.Errorf("reserved for its %d groups: index of %d slots, growing gave %d", n, size, grown)
	}
	for _, hint := range []int{1, 7, 100, n - 1, n + 1, 4 * n} {
		testBucketIndex(t, hint)
	}
}

// testBucketIndex fills a bucket (its index first reserved for hint
// groups unless hint < 0) and returns its index size and group count.
func testBucketIndex(t *testing.T, hint int) (int, int) {
	t.Helper()
	b := newBucket(0, 0, maphash.MakeSeed(), 2)
	reserved := 0
	if hint >= 0 {
		b.reserve(hint)
		reserved = b.slots()
		if hint > 6 && reserved*3 < hint*4 {
			t.Fatalf("reserved %d slots for %d groups: more than 3/4 full", reserved, hint)
		}
		b.reserve(hint * 2) // an empty bucket may be reserved again
		b.reserve(hint)
		if b.slots() != reserved {
			t.Fatalf("reserving again changed the index from %d to %d slots", reserved, b.slots())
		}
	}
	keys := []string{""}
	for i := 0; i < 5000; i++ {
		keys = append(keys, string(appendKeyBytes(nil, types.Str(string(rune('a'+i%26))+string(make([]byte, i%40))))), string(appendKeyBytes(nil, types.Big(int64(i)))))
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if b.lookup([]byte(k), maphash.String(b.seed, k)) != nil {
			t.Fatalf("key %q found before it was added", k)
		}
		g := b.add([]byte(k), maphash.String(b.seed, k))
		g.words(2)[1] = uint64(len(seen))
	}
	for k := range seen {
		g := b.lookup([]byte(k), maphash.String(b.seed, k))
		if g == nil || g.mapKey != k {
			t.Fatalf("key %q not found after %d adds", k, b.n)
		}
	}
	for _, k := range []string{"zz", "\x00", string(appendKeyBytes(nil, types.Big(-1)))} {
		if b.lookup([]byte(k), maphash.String(b.seed, k)) != nil {
			t.Fatalf("key %q found, never added", k)
		}
	}
	if b.n != len(seen) {
		t.Fatalf("%d groups, want %d", b.n, len(seen))
	}
	for j := 0; j < b.n; j++ {
		if got := b.at(j).words(2)[1]; got != uint64(j+1) {
			t.Fatalf("group %d holds word %d: words are not per group", j, got)
		}
	}
	if hint >= b.n && b.slots() != reserved {
		t.Fatalf("reserved for %d, %d groups grew the index from %d to %d slots", hint, b.n, reserved, b.slots())
	}
	size := b.slots()
	b.reserve(hint + 100000) // a bucket with groups is never resized
	if b.slots() != size {
		t.Fatalf("reserve on a bucket of %d groups resized its index", b.n)
	}
	return size, b.n
}

// TestKeySet: the DISTINCT set agrees with a Go map over random keys of
// random lengths (the empty key included), across growth; its byte count
// is its slices' real size.
func TestKeySet(t *testing.T) {
	r := rand.New(rand.NewPCG(aggSeed(t), 13))
	var s keySet
	ref := map[string]bool{}
	for i := 0; i < 20000; i++ {
		k := make([]byte, r.IntN(12))
		for j := range k {
			k[j] = byte(r.IntN(3))
		}
		if got, want := s.has(k), ref[string(k)]; got != want {
			t.Fatalf("has(%q) = %v, want %v", k, got, want)
		}
		if added := s.add(k); added == ref[string(k)] {
			t.Fatalf("add(%q) = %v with the key present = %v", k, added, ref[string(k)])
		}
		ref[string(k)] = true
	}
	if s.len() != len(ref) {
		t.Fatalf("%d members, want %d", s.len(), len(ref))
	}
	sorted := s.sorted()
	for i, k := range sorted {
		if !ref[k] || (i > 0 && sorted[i-1] >= k) {
			t.Fatalf("sorted members wrong at %d: %q", i, k)
		}
	}
	if want := cap(s.keys) + 4*cap(s.ends) + 5*len(s.index); s.bytes() != want {
		t.Fatalf("bytes %d, want %d", s.bytes(), want)
	}
}

// TestIndexLineSize: an index line is one 64-byte cache line.
func TestIndexLineSize(t *testing.T) {
	if n := unsafe.Sizeof(idxLine{}); n != 64 {
		t.Fatalf("idxLine is %d bytes, want 64", n)
	}
}
