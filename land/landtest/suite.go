package landtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
)

var (
	seedFlag   = flag.Uint64("landtest.seed", 0, "seed of the randomized conformance tests (0: from the clock)")
	trialsFlag = flag.Int("landtest.trials", 0, "randomized trials per store (0: the harness's, at least 10000)")
)

// Harness tells the suite how to open a store's lander.
type Harness struct {
	// Open returns a lander in mode over the namespace ns (a fresh,
	// lower-case identifier the suite makes unique per subtest: use it as a
	// key prefix, table name, ...). Two calls with the same ns must share
	// one store, as two processes landing into one table do. The suite
	// closes what Open returns.
	Open func(t testing.TB, mode land.Mode, ns string) land.Lander
	// ExactValue says the store returns the value bytes unchanged; when
	// false (Postgres jsonb), values are compared as JSON.
	ExactValue bool
	// Trials is the number of randomized trials (independent identities,
	// each with its own random delivery) in the property test; default and
	// minimum 10000.
	Trials int
	// Restartable, when set, starts a private store server and returns an
	// Open over it and a function that restarts it, losing its contents
	// (Redis without persistence).
	Restartable func(t *testing.T) (open func(t testing.TB, mode land.Mode, ns string) land.Lander, restart func(t testing.TB))
	// Windows, Revisions and MaxCopies bound the shape of one property
	// trial: windows per group, revisions per window, copies per record
	// (defaults 3, 4 and 3). A slow store may make trials smaller, never
	// fewer.
	Windows, Revisions, MaxCopies int
	// BatchScale multiplies the suite's batch sizes (default 1): a store
	// with a high cost per request (ClickHouse creates a part per insert)
	// lands bigger batches.
	BatchScale int
	// Refusals are the records this store can never hold (its own limits),
	// beside those every lander refuses; RefusesNUL says a value holding
	// \u0000 is one of them (PostgreSQL's jsonb).
	Refusals   []Refusal
	RefusesNUL bool
}

func (h Harness) batch(n int) int { return n * max(1, h.BatchScale) }

// Seed returns the seed of the randomized tests and logs it, so a failure
// can be replayed with -landtest.seed.
func Seed(t testing.TB) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -landtest.seed=%d)", s, s)
	return s
}

var nsCount struct {
	sync.Mutex
	n int
}

// NS returns a namespace unique in this process and across processes.
func NS(prefix string) string {
	nsCount.Lock()
	nsCount.n++
	n := nsCount.n
	nsCount.Unlock()
	return fmt.Sprintf("%s_%x_%d", prefix, time.Now().UnixNano()&0xffffffffff, n)
}

// Run runs the conformance suite against h.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("landtest: Harness.Open is nil")
	}
	modes := []land.Mode{land.Continuous, land.Latest, land.History}
	t.Run("Identity", func(t *testing.T) { testIdentity(t, h) })
	t.Run("EqualAndStale", func(t *testing.T) {
		for _, m := range modes {
			t.Run(m.String(), func(t *testing.T) { testEqualAndStale(t, h, m) })
		}
	})
	t.Run("BadRecords", func(t *testing.T) { testBadRecords(t, h) })
	t.Run("StoreRefusesRecord", func(t *testing.T) { testRefused(t, h) })
	t.Run("DuplicatesAndReorder", func(t *testing.T) { testProperty(t, h) })
	t.Run("RacingWriters", func(t *testing.T) {
		for _, m := range modes {
			t.Run(m.String(), func(t *testing.T) { testRacing(t, h, m) })
		}
	})
	t.Run("CrashBeforeCommit", func(t *testing.T) { testCrash(t, h) })
	t.Run("HavingKeepsLastValue", func(t *testing.T) { testHaving(t, h) })
	if h.Restartable != nil {
		t.Run("StoreRestart", func(t *testing.T) { testRestart(t, h) })
	}
}

func open(t testing.TB, h Harness, mode land.Mode, ns string) land.Lander {
	t.Helper()
	l := h.Open(t, mode, ns)
	t.Cleanup(func() { l.Close() })
	return l
}

func landAll(t testing.TB, l land.Lander, batches [][]changelog.Record) land.Result {
	t.Helper()
	var total land.Result
	for i, b := range batches {
		r, err := l.Land(context.Background(), b)
		if err != nil {
			t.Fatalf("Land of batch %d (%d records): %v", i, len(b), err)
		}
		if r.Total() != len(b) {
			t.Fatalf("Land of batch %d counted %d records (%+v), want %d", i, r.Total(), r, len(b))
		}
		total = total.Add(r)
	}
	return total
}

// Check compares every identity of oracle with l's stored state.
func Check(t testing.TB, h Harness, l land.Lander, oracle *Memory) {
	t.Helper()
	if s, ok := l.(land.Scanner); ok {
		checkScan(t, h, s, oracle)
		return
	}
	refs := oracle.Refs()
	type miss struct {
		ref  land.Ref
		want land.Stored
		got  land.Stored
		err  error
	}
	var (
		mu   sync.Mutex
		bad  []miss
		wg   sync.WaitGroup
		work = make(chan land.Ref)
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ref := range work {
				want, _ := oracle.Get(context.Background(), ref)
				got, err := l.Get(context.Background(), ref)
				if err != nil || !sameStored(h, want, got) {
					mu.Lock()
					bad = append(bad, miss{ref, want, got, err})
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range refs {
		work <- r
	}
	close(work)
	wg.Wait()
	for i, m := range bad {
		if i == 5 {
			t.Errorf("... and %d more", len(bad)-5)
			break
		}
		if m.err != nil {
			t.Errorf("Get(%v): %v", m.ref, m.err)
			continue
		}
		t.Errorf("Get(%v):\n got  %s %+v final=%v\n want %s %+v final=%v",
			m.ref, m.got.Value, m.got.Version, m.got.Final, m.want.Value, m.want.Version, m.want.Final)
	}
	if len(bad) > 0 {
		t.FailNow()
	}
}

func sameStored(h Harness, want, got land.Stored) bool {
	if want.Version != got.Version || want.Final != got.Final || want.WindowEnd != got.WindowEnd ||
		!bytes.Equal(want.Key, got.Key) {
		return false
	}
	if h.ExactValue {
		return bytes.Equal(want.Value, got.Value)
	}
	var a, b any
	da, db := json.NewDecoder(bytes.NewReader(want.Value)), json.NewDecoder(bytes.NewReader(got.Value))
	da.UseNumber()
	db.UseNumber()
	return da.Decode(&a) == nil && db.Decode(&b) == nil && reflect.DeepEqual(a, b)
}

func oracleOf(t testing.TB, mode land.Mode, recs []changelog.Record) *Memory {
	t.Helper()
	m := NewMemory(mode, "")
	if _, err := m.Land(context.Background(), recs); err != nil {
		t.Fatalf("oracle: %v", err)
	}
	return m
}

// testIdentity checks each mode's identity on a hand-made changelog:
// the hour-after-hour case of the seed, and two queries on one group.
func testIdentity(t *testing.T, h Harness) {
	ctx := context.Background()
	nine := base.Add(-time.Hour)
	ten := base
	recs := []changelog.Record{
		Record(land.Latest, "hourly", "42", nine, 1, false),
		Record(land.Latest, "hourly", "42", nine, 2, false),
		Record(land.Latest, "hourly", "42", nine, 3, true),
		Record(land.Latest, "hourly", "42", ten, 1, false),
		Record(land.Latest, "daily", "42", nine, 1, false),
	}
	byQuery := func(q, g string, ws time.Time) land.Ref {
		ref := land.Ref{Query: q, Group: fmt.Appendf(nil, "[%q]", g)}
		if !ws.IsZero() {
			ref.WindowStart = ws.UnixMicro()
		}
		return ref
	}

	// Latest: one row per (query, group), the latest window wins.
	l := open(t, h, land.Latest, NS("idl"))
	landAll(t, l, [][]changelog.Record{recs})
	got, err := l.Get(ctx, byQuery("hourly", "42", time.Time{}))
	if err != nil || got.Version != (land.Version{WindowStart: ten.UnixMicro(), Revision: 1}) || !bytes.Equal(got.Key, recs[3].Key) {
		t.Fatalf("latest hourly 42 = %+v %s, %v; want the 10:00 window's revision 1", got.Version, got.Key, err)
	}
	got, err = l.Get(ctx, byQuery("daily", "42", time.Time{}))
	if err != nil || got.Version.Revision != 1 || got.Version.WindowStart != nine.UnixMicro() {
		t.Fatalf("latest daily 42 = %+v, %v: queries must not collide", got.Version, err)
	}

	// History: the 09:00 hour keeps its final value after 10:00 arrived.
	hl := open(t, h, land.History, NS("idh"))
	landAll(t, hl, [][]changelog.Record{recs})
	got, err = hl.Get(ctx, byQuery("hourly", "42", nine))
	if err != nil || got.Version.Revision != 3 || !got.Final || !sameStored(h, land.Stored{
		Key: recs[2].Key, Value: recs[2].Value, Version: got.Version, WindowEnd: recs[2].Meta.WindowEnd, Final: true}, got) {
		t.Fatalf("history hourly 42 @09:00 = %+v %s, %v; want revision 3, final", got.Version, got.Value, err)
	}
	if _, err := hl.Get(ctx, byQuery("hourly", "42", ten.Add(time.Hour))); !errors.Is(err, land.ErrNotFound) {
		t.Fatalf("history Get of a window never landed: %v, want ErrNotFound", err)
	}

	// Continuous: the key is the identity.
	cl := open(t, h, land.Continuous, NS("idc"))
	c1 := Record(land.Continuous, "totals", "acme", time.Time{}, 1, false)
	c2 := Record(land.Continuous, "totals", "acme", time.Time{}, 2, false)
	landAll(t, cl, [][]changelog.Record{{c2}, {c1}})
	got, err = cl.Get(ctx, land.Ref{Query: "totals", Group: c1.Key})
	if err != nil || got.Version.Revision != 2 || got.Version.WindowStart != 0 {
		t.Fatalf("continuous acme = %+v, %v; want revision 2", got.Version, err)
	}
	if _, err := cl.Get(ctx, land.Ref{Query: "other", Group: c1.Key}); !errors.Is(err, land.ErrNotFound) {
		t.Fatalf("Get under another query: %v, want ErrNotFound", err)
	}
}

// testEqualAndStale: an equal record is a counted no-op, a stale one is
// counted as superseded, neither is an error.
func testEqualAndStale(t *testing.T, h Harness, mode land.Mode) {
	l := open(t, h, mode, NS("eq"))
	r1 := Record(mode, "q", "g", base, 1, false)
	r2 := Record(mode, "q", "g", base, 2, true)
	if r := landAll(t, l, [][]changelog.Record{{r2}}); r != (land.Result{Landed: 1}) {
		t.Fatalf("first landing: %+v", r)
	}
	if r := landAll(t, l, [][]changelog.Record{{r2}}); r != (land.Result{Duplicate: 1}) {
		t.Fatalf("equal record: %+v, want one duplicate", r)
	}
	if r := landAll(t, l, [][]changelog.Record{{r1}}); r != (land.Result{Superseded: 1}) {
		t.Fatalf("stale record: %+v, want one superseded", r)
	}
	// In one batch: the batch's own duplicates and stale copies count too.
	if r := landAll(t, l, [][]changelog.Record{{r1, r2, r2, r1}}); r != (land.Result{Duplicate: 2, Superseded: 2}) {
		t.Fatalf("mixed batch: %+v, want 2 duplicates and 2 superseded", r)
	}
	Check(t, h, l, oracleOf(t, mode, []changelog.Record{r1, r2}))
}

// testBadRecords: a record that breaks the contract fails the batch with
// an error naming it; nothing of the batch is written.
func testBadRecords(t *testing.T, h Harness) {
	ctx := context.Background()
	l := open(t, h, land.Latest, NS("bad"))
	good := Record(land.Latest, "q", "g", base, 1, false)
	mk := func(f func(*changelog.Record)) changelog.Record {
		r := good.Clone()
		f(&r)
		return r
	}
	cases := map[string]changelog.Record{
		"null value":       mk(func(r *changelog.Record) { r.Value = nil }),
		"no query":         mk(func(r *changelog.Record) { r.Meta.Query = "" }),
		"revision 0":       mk(func(r *changelog.Record) { r.Meta.Revision = 0 }),
		"unwindowed":       mk(func(r *changelog.Record) { r.Meta.Windowed = false }),
		"no positions":     mk(func(r *changelog.Record) { r.Meta.WindowPositions = nil }),
		"position out":     mk(func(r *changelog.Record) { r.Meta.WindowPositions = []int{2} }),
		"key not array":    mk(func(r *changelog.Record) { r.Key = []byte(`{"g":1}`) }),
		"key unterminated": mk(func(r *changelog.Record) { r.Key = []byte(`["g", "x`) }),
	}
	for name, bad := range cases {
		_, err := l.Land(ctx, []changelog.Record{good, bad})
		var re *land.RecordError
		if !errors.As(err, &re) || re.Index != 1 || !land.Permanent(err) {
			t.Errorf("%s: Land = %v, want a permanent *land.RecordError at index 1", name, err)
		}
	}
	if _, err := l.Get(ctx, land.Ref{Query: "q", Group: []byte(`["g"]`)}); !errors.Is(err, land.ErrNotFound) {
		t.Errorf("a failed batch wrote its good record: %v", err)
	}
}

// testProperty: at-least-once (1-3 copies), shuffled delivery in random
// batches ends in the oracle's state: per identity, the record with the
// lexicographically greatest (window_start, revision).
func testProperty(t *testing.T, h Harness) {
	trials := max(h.Trials, *trialsFlag, 10000)
	if *trialsFlag > 0 {
		trials = *trialsFlag
	}
	seed := Seed(t)
	modes := []land.Mode{land.Continuous, land.Latest, land.History}
	per := (trials + len(modes) - 1) / len(modes)
	for mi, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, uint64(mi)))
			gen := Gen{Mode: mode, Queries: []string{"qa", "qb"}, Groups: 1,
				Windows: cmp.Or(h.Windows, 3), Revisions: cmp.Or(h.Revisions, 4)}
			var all []changelog.Record
			for trial := range per {
				all = append(all, gen.Changelog(r, trial)...)
			}
			delivered := Deliver(r, all, cmp.Or(h.MaxCopies, 3))
			l := open(t, h, mode, NS("prop"))
			res := landAll(t, l, Batches(r, delivered, h.batch(64)))
			oracle := oracleOf(t, mode, all)
			if want := len(oracle.Refs()); res.Landed < want {
				t.Fatalf("landed %d writes for %d identities", res.Landed, want)
			}
			t.Logf("%d trials, %d identities, %d records delivered as %d: %+v", per, len(oracle.Refs()), len(all), len(delivered), res)
			Check(t, h, l, oracle)
		})
	}
}

// testRacing: two landers over one store land the same identities
// concurrently, one oldest-first and one newest-first; the maximum wins
// and every record is counted once.
func testRacing(t *testing.T, h Harness, mode land.Mode) {
	seed := Seed(t)
	r := rand.New(rand.NewPCG(seed, 7))
	ns := NS("race")
	a, b := open(t, h, mode, ns), open(t, h, mode, ns)
	gen := Gen{Mode: mode, Groups: 3, Windows: 3, Revisions: 6}
	var all []changelog.Record
	for trial := range 40 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	rev := make([]changelog.Record, len(all))
	for i := range all {
		rev[len(all)-1-i] = all[i]
	}
	var wg sync.WaitGroup
	var ra, rb land.Result
	var ea, eb error
	run := func(l land.Lander, recs []changelog.Record, res *land.Result, errp *error) {
		defer wg.Done()
		for _, batch := range Batches(rand.New(rand.NewPCG(seed, uint64(len(recs)))), recs, h.batch(8)) {
			x, err := l.Land(context.Background(), batch)
			if err != nil {
				*errp = err
				return
			}
			*res = res.Add(x)
		}
	}
	wg.Add(2)
	go run(a, all, &ra, &ea)
	go run(b, rev, &rb, &eb)
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatalf("racing landers failed: %v / %v", ea, eb)
	}
	sum := ra.Add(rb)
	if sum.Total() != 2*len(all) {
		t.Fatalf("counted %d records of %d: %+v + %+v", sum.Total(), 2*len(all), ra, rb)
	}
	if sum.Superseded == 0 {
		t.Fatalf("no record counted as superseded: %+v + %+v", ra, rb)
	}
	Check(t, h, a, oracleOf(t, mode, all))
}

// crashSource is a land.Source over batches whose committed position
// survives a "crash": Commit fails once at batch crashAt, after the
// store acknowledged it.
type crashSource struct {
	mu        sync.Mutex
	batches   [][]changelog.Record
	next      int
	committed *int
	crashAt   int
	crash     context.CancelFunc
}

func (s *crashSource) Next(ctx context.Context) (*land.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.batches) {
		return nil, errEOF
	}
	i := s.next
	s.next++
	return &land.Batch{Records: s.batches[i], Lag: -1, Token: i}, nil
}

func (s *crashSource) Commit(ctx context.Context, b *land.Batch) error {
	i := b.Token.(int)
	if i == s.crashAt {
		s.crash() // the process dies: nothing after this point happens
		return errCrash
	}
	*s.committed = i + 1
	return nil
}

// testCrash: Run dies after a batch landed but before its commit; a new Run
// replays from the committed position and the state equals the oracle.
func testCrash(t *testing.T, h Harness) {
	seed := Seed(t)
	r := rand.New(rand.NewPCG(seed, 11))
	mode := land.Latest
	gen := Gen{Mode: mode, Groups: 4, Windows: 3, Revisions: 4}
	var all []changelog.Record
	for trial := range 50 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	batches := Batches(r, Deliver(r, all, 2), h.batch(16))
	l := open(t, h, mode, NS("crash"))
	committed := 0
	crashAt := len(batches) / 2
	ctx, crash := context.WithCancel(context.Background())
	defer crash()
	src := &crashSource{batches: batches, committed: &committed, crashAt: crashAt, crash: crash}
	err := land.Run(ctx, src, l, land.RunOptions{MaxInFlight: 3})
	if err == nil || committed != crashAt {
		t.Fatalf("first run: %v, committed %d; want a crash with %d batches committed", err, committed, crashAt)
	}
	// The restarted host resumes from the committed position.
	var c land.Counters
	src2 := &crashSource{batches: batches, next: committed, committed: &committed, crashAt: -1}
	if err := land.Run(context.Background(), src2, l, land.RunOptions{MaxInFlight: 2, Counters: &c}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if committed != len(batches) {
		t.Fatalf("replay committed %d of %d batches", committed, len(batches))
	}
	if c.Duplicate.Load()+c.Superseded.Load() == 0 {
		t.Fatal("the replayed batch counted no duplicate: was it replayed?")
	}
	Check(t, h, l, oracleOf(t, mode, all))
}

// testHaving: a continuous view with HAVING stops publishing a group that
// falls below the threshold; with no tombstone, the store keeps the last
// value published (land/README.md lists the host-side options).
func testHaving(t *testing.T, h Harness) {
	ctx := context.Background()
	l := open(t, h, land.Continuous, NS("having"))
	above := Record(land.Continuous, "big_merchants", "acme", time.Time{}, 2, false)
	other := Record(land.Continuous, "big_merchants", "zeta", time.Time{}, 5, false)
	landAll(t, l, [][]changelog.Record{{above, other}})
	// acme dropped below the threshold: the engine emits nothing for it,
	// while zeta goes on.
	landAll(t, l, [][]changelog.Record{{Record(land.Continuous, "big_merchants", "zeta", time.Time{}, 6, false)}})
	got, err := l.Get(ctx, land.Ref{Query: "big_merchants", Group: above.Key})
	if err != nil || got.Version.Revision != 2 {
		t.Fatalf("acme = %+v, %v; want its last published value (revision 2) kept", got.Version, err)
	}
}

// testRestart: the store restarts, losing everything, in the middle of a
// Run; Run pauses and retries, and a replay from the start restores the
// final state.
func testRestart(t *testing.T, h Harness) {
	openP, restart := h.Restartable(t)
	seed := Seed(t)
	r := rand.New(rand.NewPCG(seed, 13))
	mode := land.History
	gen := Gen{Mode: mode, Groups: 3, Windows: 2, Revisions: 3}
	var all []changelog.Record
	for trial := range 60 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	batches := Batches(r, Deliver(r, all, 2), 20)
	l := openP(t, mode, NS("restart"))
	defer l.Close()

	src := land.NewSliceSource(batches...)
	var c land.Counters
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	half := int64(len(batches) / 2)
	restarted := make(chan struct{})
	opts := land.RunOptions{Counters: &c, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		OnBatch: func(land.BatchStats) {
			if c.Batches.Load() == half-1 {
				restart(t)
				close(restarted)
			}
		}}
	if err := land.Run(ctx, src, l, opts); err != nil {
		t.Fatalf("Run across a store restart: %v", err)
	}
	<-restarted
	if src.Committed() != len(batches) {
		t.Fatalf("committed %d of %d batches", src.Committed(), len(batches))
	}
	// Without persistence the store lost what landed before the restart:
	// a replay from the start (a new consumer group on the compacted topic)
	// restores the final state.
	if err := land.Run(ctx, land.NewSliceSource(batches...), l, land.RunOptions{}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	Check(t, h, l, oracleOf(t, mode, all))
}

// checkScan compares a full listing of the store with the oracle: every
// identity equal, and nothing else stored.
func checkScan(t testing.TB, h Harness, s land.Scanner, oracle *Memory) {
	t.Helper()
	got := map[memKey]land.Stored{}
	err := s.Scan(context.Background(), func(ref land.Ref, st land.Stored) error {
		got[memKey{ref.Query, string(ref.Group), ref.WindowStart}] = land.Stored{
			Key: bytes.Clone(st.Key), Value: bytes.Clone(st.Value), Version: st.Version, WindowEnd: st.WindowEnd, Final: st.Final}
		return nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	bad := 0
	for _, ref := range oracle.Refs() {
		want, _ := oracle.Get(context.Background(), ref)
		k := oracle.refKey(ref)
		g, ok := got[k]
		delete(got, k)
		if ok && sameStored(h, want, g) {
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("%v: got %s %+v (present %v), want %s %+v", ref, g.Value, g.Version, ok, want.Value, want.Version)
		}
	}
	for k := range got {
		if bad++; bad <= 5 {
			t.Errorf("stray identity stored: %+v", k)
		}
	}
	if bad > 0 {
		t.Fatalf("%d identities differ from the oracle", bad)
	}
}
