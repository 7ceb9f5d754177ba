// Package usagetest is the conformance suite every usage.Log backend runs
// against a live server:
//
//	func TestConformance(t *testing.T) { usagetest.Run(t, newLog) }
//
// newLog must return a Log on a fresh, empty table each time it is called.
// The suite checks the contract in package usage's documentation: instant
// exactness, idempotent replays, first-copy-wins, half-open windows that
// tile, typed filters, paging that never skips or repeats under concurrent
// writers, and a randomized comparison against an in-memory model (seeded;
// the seed is printed on failure, and -usagetest.seed replays it).
//
// RunTwoProcesses adds the two-process writer race; it needs the backend's
// test binary to call MaybeChild from TestMain.
package usagetest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ubiksql/ubik/usage"
)

var seedFlag = flag.Int64("usagetest.seed", 0, "seed for the randomized usagetest model check (0 = time-based)")

// Base is the event-time origin the suite writes around.
var Base = time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)

func ms(n int64) time.Time { return Base.Add(time.Duration(n) * time.Millisecond) }

// ev builds an event whose quantity is the shortest decimal of q; dims
// alternate name, value.
func ev(key string, t time.Time, meter string, q float64, dims ...any) usage.Event {
	return evq(key, t, meter, usage.Decimal(strconv.FormatFloat(q, 'f', -1, 64)), dims...)
}

// evq builds an event with an exact decimal quantity.
func evq(key string, t time.Time, meter string, q usage.Decimal, dims ...any) usage.Event {
	e := usage.Event{Key: key, Time: t, Meter: meter, Quantity: q}
	if len(dims) > 0 {
		e.Dims = map[string]usage.Value{}
		for i := 0; i+1 < len(dims); i += 2 {
			e.Dims[dims[i].(string)] = dims[i+1].(usage.Value)
		}
	}
	return e
}

// Run runs the conformance suite.
func Run(t *testing.T, newLog func(t *testing.T) usage.Log) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l usage.Log)
	}{
		{"AggregateInstantlyAfterWrite", testInstant},
		{"ReplayDoesNotMoveTotal", testReplay},
		{"InBatchRepeatFirstWins", testInBatch},
		{"ValidationReportsIndexAndKeepsGoodEvents", testValidation},
		{"ThousandCopiesCountedOnceWithFirstFacts", testThousandCopies},
		{"HalfOpenMillisecondWindowsTile", testHalfOpen},
		{"TypedDimensionFilters", testTypedFilters},
		{"GroupByAndWindow", testGroupWindow},
		{"PagingNeverSkipsOrRepeatsUnderConcurrentInserts", testPagingConcurrent},
		{"CursorBoundToQuery", testCursor},
		{"CursorBoundToTable", func(t *testing.T, l usage.Log) { testCursorTable(t, l, newLog(t)) }},
		{"RoundTripOfAwkwardValues", testRoundTrip},
		{"RandomizedAgainstModel", testModel},
		{"ExactDecimalsTo38Digits", testExactDecimals},
		{"NumberDimensionsExact", testExactNumbers},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := newLog(t)
			tc.fn(t, l)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustWrite(t *testing.T, l usage.Log, evs ...usage.Event) usage.WriteResult {
	t.Helper()
	r, err := l.Write(ctxT(t), evs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return r
}

func agg(t *testing.T, l usage.Log, q usage.AggregateQuery) usage.Totals {
	t.Helper()
	tot, err := l.Aggregate(ctxT(t), q)
	if err != nil {
		t.Fatalf("Aggregate(%+v): %v", q, err)
	}
	return tot
}

func total(t *testing.T, l usage.Log, meter string, from, to time.Time, filters ...usage.Filter) usage.Totals {
	t.Helper()
	return agg(t, l, usage.AggregateQuery{Meter: meter, From: from, To: to, Filters: filters})
}

func wantTotals(t *testing.T, what string, got usage.Totals, sum string, count int64) {
	t.Helper()
	if got.Sum != usage.Decimal(sum) || got.Count != count {
		t.Fatalf("%s: got sum %s count %d, want sum %s count %d", what, got.Sum, got.Count, sum, count)
	}
}

func testInstant(t *testing.T, l usage.Log) {
	for i := 0; i < 5; i++ {
		r := mustWrite(t, l, ev("inst-"+strconv.Itoa(i), ms(int64(i)), "calls", 1.5))
		if r.Inserted != 1 || r.Duplicates != 0 {
			t.Fatalf("write %d: %+v", i, r)
		}
		// No sleep, no retry: the write must be visible the instant it returns.
		got := total(t, l, "calls", Base, Base.Add(time.Hour))
		wantTotals(t, fmt.Sprintf("after write %d", i), got, strconv.FormatFloat(1.5*float64(i+1), 'f', -1, 64), int64(i+1))
		s, ok, err := l.Get(ctxT(t), "inst-"+strconv.Itoa(i))
		if err != nil || !ok || s.Quantity != "1.5" {
			t.Fatalf("Get after write %d: %+v %v %v", i, s, ok, err)
		}
	}
	if _, ok, err := l.Get(ctxT(t), "no-such-key"); ok || err != nil {
		t.Fatalf("Get(missing) = %v, %v", ok, err)
	}
}

func testReplay(t *testing.T, l usage.Log) {
	var batch []usage.Event
	for i := 0; i < 200; i++ {
		batch = append(batch, ev("rep-"+strconv.Itoa(i), ms(int64(i*1000)), "bytes", float64(i), "region", usage.String("eu")))
	}
	r := mustWrite(t, l, batch...)
	if r.Inserted != 200 || r.Duplicates != 0 {
		t.Fatalf("first write: %+v", r)
	}
	before := total(t, l, "bytes", Base, Base.Add(24*time.Hour))
	wantTotals(t, "first write", before, "19900", 200)
	for round := 0; round < 3; round++ {
		r := mustWrite(t, l, batch...)
		if r.Inserted != 0 || r.Duplicates != 200 {
			t.Fatalf("replay %d: %+v, want 0 inserted 200 duplicates", round, r)
		}
		wantTotals(t, fmt.Sprintf("after replay %d", round), total(t, l, "bytes", Base, Base.Add(24*time.Hour)), "19900", 200)
	}
	// A replay mixed with new events only adds the new ones.
	mixed := append([]usage.Event{ev("rep-new", ms(5), "bytes", 100)}, batch[:50]...)
	r = mustWrite(t, l, mixed...)
	if r.Inserted != 1 || r.Duplicates != 50 {
		t.Fatalf("mixed replay: %+v", r)
	}
	wantTotals(t, "after mixed replay", total(t, l, "bytes", Base, Base.Add(24*time.Hour)), "20000", 201)
	keys := listAll(t, l, usage.ListQuery{Meter: "bytes", Limit: 37}, 201, listWait)
	if len(keys) != 201 {
		t.Fatalf("listing after replays: %d keys, want 201", len(keys))
	}
}

func testInBatch(t *testing.T, l usage.Log) {
	r := mustWrite(t, l,
		ev("dup", ms(0), "m", 1, "v", usage.Number(1)),
		ev("other", ms(1), "m", 10),
		ev("dup", ms(2), "m", 2, "v", usage.Number(2)),
	)
	if r.Inserted != 2 || r.Duplicates != 1 {
		t.Fatalf("got %+v, want 2 inserted 1 duplicate", r)
	}
	wantTotals(t, "in-batch repeat", total(t, l, "m", Base, Base.Add(time.Second)), "11", 2)
	s, ok, err := l.Get(ctxT(t), "dup")
	if err != nil || !ok || s.Quantity != "1" || !s.Time.Equal(ms(0)) || !s.Dims["v"].Equal(usage.Number(1)) {
		t.Fatalf("Get(dup) = %+v %v %v, want the first copy", s, ok, err)
	}
}

func testValidation(t *testing.T, l usage.Log) {
	bad := []struct {
		ev   usage.Event
		want error
	}{
		{ev("", ms(0), "m", 1), usage.ErrMissingKey},
		{usage.Event{Key: "no-time", Meter: "m", Quantity: "1"}, usage.ErrBadTime},
		{ev("pre-epoch", time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), "m", 1), usage.ErrBadTime},
		{ev("nan", ms(0), "m", math.NaN()), usage.ErrBadQuantity},
		{ev("inf", ms(0), "m", math.Inf(1)), usage.ErrBadQuantity},
		{ev("huge", ms(0), "m", 1e300), usage.ErrBadQuantity},
		{evq("too-fine", ms(0), "m", "0.0000000001"), usage.ErrBadQuantity},
		{evq("too-wide", ms(0), "m", "123456789012345678901234567890"), usage.ErrBadQuantity},
		{ev("no-meter", ms(0), "", 1), usage.ErrBadMeter},
		{ev("bad-dim", ms(0), "m", 1, "x", usage.Number(math.Inf(-1))), usage.ErrBadDimension},
		{ev("zero-dim", ms(0), "m", 1, "x", usage.Value{}), usage.ErrBadDimension},
		{ev("nul-name", ms(0), "m", 1, "a\x00b", usage.Bool(true)), usage.ErrBadDimension},
		{ev("bad\xffutf8", ms(0), "m", 1), usage.ErrBadKey},
	}
	var batch []usage.Event
	wantIdx := map[int]error{}
	for i, b := range bad {
		batch = append(batch, ev("good-"+strconv.Itoa(i), ms(int64(i)), "m", 1))
		wantIdx[len(batch)] = b.want
		batch = append(batch, b.ev)
	}
	r, err := l.Write(ctxT(t), batch)
	var be *usage.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Write with bad events: err = %v, want *usage.BatchError", err)
	}
	if !errors.Is(err, usage.ErrInvalidEvent) {
		t.Fatalf("BatchError does not wrap ErrInvalidEvent: %v", err)
	}
	if r.Inserted != len(bad) || r.Rejected != len(bad) {
		t.Fatalf("result %+v, want %d inserted and %d rejected", r, len(bad), len(bad))
	}
	if len(be.Errors) != len(bad) {
		t.Fatalf("%d event errors, want %d: %v", len(be.Errors), len(bad), err)
	}
	for _, ee := range be.Errors {
		want, ok := wantIdx[ee.Index]
		if !ok {
			t.Fatalf("error reported for index %d, which was valid: %v", ee.Index, ee)
		}
		if !errors.Is(ee, want) {
			t.Errorf("index %d: %v, want %v", ee.Index, ee, want)
		}
	}
	wantTotals(t, "good events of a bad batch", total(t, l, "m", Base, Base.Add(time.Hour)), strconv.Itoa(len(bad)), int64(len(bad)))
}

func testThousandCopies(t *testing.T, l usage.Log) {
	const copies = 1000
	first := ev("the-key", ms(12_345), "tokens", 7.25, "model", usage.String("first"), "n", usage.Number(0))
	var batches [][]usage.Event
	cur := []usage.Event{first}
	for i := 1; i < copies; i++ {
		cur = append(cur, ev("the-key", ms(int64(i)*60_000), "tokens", float64(i)+0.5, "model", usage.String("copy"), "n", usage.Number(float64(i))))
		if len(cur) == 50 {
			batches = append(batches, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	ins, dups := 0, 0
	for _, b := range batches {
		r := mustWrite(t, l, b...)
		ins += r.Inserted
		dups += r.Duplicates
	}
	if ins != 1 || dups != copies-1 {
		t.Fatalf("inserted %d duplicates %d, want 1 and %d", ins, dups, copies-1)
	}
	wantTotals(t, "all time", total(t, l, "tokens", Base, Base.Add(48*time.Hour)), "7.25", 1)
	// The later copies' times hold nothing.
	wantTotals(t, "later copies' period", total(t, l, "tokens", ms(60_000), Base.Add(48*time.Hour)), "0", 0)
	wantTotals(t, "filter on a later copy's dimension", total(t, l, "tokens", Base, Base.Add(48*time.Hour), usage.Eq("model", usage.String("copy"))), "0", 0)
	s, ok, err := l.Get(ctxT(t), "the-key")
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	if s.Quantity != "7.25" || !s.Time.Equal(first.Time) || !s.Dims["model"].Equal(usage.String("first")) {
		t.Fatalf("Get = %+v, want the first copy's facts", s)
	}
	keys := listAll(t, l, usage.ListQuery{Limit: 10}, 1, listWait)
	if len(keys) != 1 {
		t.Fatalf("listing has %d rows, want 1", len(keys))
	}
}

func testHalfOpen(t *testing.T, l usage.Log) {
	from, to := ms(10_000), ms(20_000)
	mustWrite(t, l,
		ev("before", from.Add(-time.Millisecond), "h", 1),
		ev("at-from", from, "h", 10),
		ev("last", to.Add(-time.Millisecond), "h", 100),
		ev("at-to", to, "h", 1000),
	)
	wantTotals(t, "[from, to)", total(t, l, "h", from, to), "110", 2)
	wantTotals(t, "[from-1ms, from)", total(t, l, "h", from.Add(-time.Millisecond), from), "1", 1)
	wantTotals(t, "[to, to+1ms)", total(t, l, "h", to, to.Add(time.Millisecond)), "1000", 1)
	wantTotals(t, "empty [from, from)", total(t, l, "h", from, from), "0", 0)
	// A bound with a sub-millisecond part still splits at the event's
	// millisecond: an event at `to` lies before to+0.5ms.
	wantTotals(t, "[from, to+0.5ms)", total(t, l, "h", from, to.Add(500*time.Microsecond)), "1110", 3)
	wantTotals(t, "[from+0.5ms, to)", total(t, l, "h", from.Add(500*time.Microsecond), to), "100", 1)
	// Consecutive periods tile: every split point, including ones that fall
	// exactly on an event and sub-millisecond ones, gives the same total.
	lo, hi := from.Add(-time.Second), to.Add(time.Second)
	whole := total(t, l, "h", lo, hi)
	wantTotals(t, "whole", whole, "1111", 4)
	splits := []time.Time{from.Add(-time.Millisecond), from, from.Add(time.Millisecond), to.Add(-time.Millisecond), to, to.Add(250 * time.Microsecond), ms(15_000)}
	for _, s := range splits {
		a, b := total(t, l, "h", lo, s), total(t, l, "h", s, hi)
		sum, _ := usage.SumDecimals(a.Sum, b.Sum)
		if sum != whole.Sum || a.Count+b.Count != whole.Count {
			t.Fatalf("split at %s: %s/%d + %s/%d != %s/%d", usage.FormatTime(s), a.Sum, a.Count, b.Sum, b.Count, whole.Sum, whole.Count)
		}
	}
	// Windows tile the same way: a 10s window starting at `from` holds
	// exactly at-from and last.
	w := agg(t, l, usage.AggregateQuery{Meter: "h", From: lo, To: hi, Window: 10 * time.Second})
	var got []string
	for _, g := range w.Groups {
		got = append(got, fmt.Sprintf("%s=%s/%d", usage.FormatTime(g.WindowStart), g.Sum, g.Count))
	}
	want := []string{
		usage.FormatTime(ms(0)) + "=1/1",
		usage.FormatTime(from) + "=110/2",
		usage.FormatTime(to) + "=1000/1",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("windows %v, want %v", got, want)
	}
}

func testTypedFilters(t *testing.T, l usage.Log) {
	mustWrite(t, l,
		ev("num", ms(0), "f", 1, "d", usage.Number(5)),
		ev("str", ms(1), "f", 2, "d", usage.String("5")),
		ev("null", ms(2), "f", 4, "d", usage.Null()),
		ev("missing", ms(3), "f", 8, "other", usage.String("x")),
		ev("bool", ms(4), "f", 16, "d", usage.Bool(true)),
		ev("float", ms(5), "f", 32, "d", usage.Number(5.5)),
		ev("strtrue", ms(6), "f", 64, "d", usage.String("true")),
		ev("emptystr", ms(7), "f", 128, "d", usage.String("")),
	)
	from, to := Base, Base.Add(time.Minute)
	cases := []struct {
		name string
		f    []usage.Filter
		sum  string
		n    int64
		keys []string
	}{
		{"number 5", []usage.Filter{usage.Eq("d", usage.Number(5))}, "1", 1, []string{"num"}},
		{"number 5.0 is 5", []usage.Filter{usage.Eq("d", usage.Number(5.0))}, "1", 1, []string{"num"}},
		{"string 5", []usage.Filter{usage.Eq("d", usage.String("5"))}, "2", 1, []string{"str"}},
		{"null", []usage.Filter{usage.Eq("d", usage.Null())}, "4", 1, []string{"null"}},
		{"missing", []usage.Filter{usage.Absent("d")}, "8", 1, []string{"missing"}},
		{"bool true", []usage.Filter{usage.Eq("d", usage.Bool(true))}, "16", 1, []string{"bool"}},
		{"string true", []usage.Filter{usage.Eq("d", usage.String("true"))}, "64", 1, []string{"strtrue"}},
		{"empty string is not missing", []usage.Filter{usage.Eq("d", usage.String(""))}, "128", 1, []string{"emptystr"}},
		{"bool false matches nothing", []usage.Filter{usage.Eq("d", usage.Bool(false))}, "0", 0, nil},
		{"two filters AND", []usage.Filter{usage.Absent("d"), usage.Eq("other", usage.String("x"))}, "8", 1, []string{"missing"}},
		{"contradiction", []usage.Filter{usage.Eq("d", usage.Number(5)), usage.Eq("d", usage.String("5"))}, "0", 0, nil},
		{"absent on a never-seen dimension", []usage.Filter{usage.Absent("zzz")}, "255", 8, nil},
	}
	for _, c := range cases {
		wantTotals(t, c.name, total(t, l, "f", from, to, c.f...), c.sum, c.n)
		if c.keys != nil {
			got := listAll(t, l, usage.ListQuery{Meter: "f", Filters: c.f, Limit: 3}, len(c.keys), listWait)
			if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(c.keys) {
				t.Fatalf("%s: listing %v, want %v", c.name, sortedKeys(got), c.keys)
			}
		}
	}
	// Group by d: missing < null < bool < number < string, each its own group.
	g := agg(t, l, usage.AggregateQuery{Meter: "f", From: from, To: to, GroupBy: []string{"d"}})
	var got []string
	for _, x := range g.Groups {
		v := "<missing>"
		if x.Dims[0].Present {
			v = x.Dims[0].Value.Kind().String() + ":" + x.Dims[0].Value.String()
		}
		got = append(got, v+"="+x.Sum.String())
	}
	want := []string{"<missing>=8", "null:null=4", "bool:true=16", "number:5=1", "number:5.5=32", `string:""=128`, `string:"5"=2`, `string:"true"=64`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("group by d:\n got %v\nwant %v", got, want)
	}
	wantTotals(t, "grouped totals", g, "255", 8)
}

func testGroupWindow(t *testing.T, l usage.Log) {
	var evs []usage.Event
	for i := 0; i < 60; i++ {
		region := []string{"eu", "us", "ap"}[i%3]
		evs = append(evs, ev(fmt.Sprintf("gw-%d", i), ms(int64(i)*1000), "g", float64(i), "region", usage.String(region), "tier", usage.Number(float64(i%2))))
	}
	mustWrite(t, l, evs...)
	g := agg(t, l, usage.AggregateQuery{Meter: "g", From: Base, To: ms(60_000), GroupBy: []string{"region", "tier"}, Window: 30 * time.Second})
	if len(g.Groups) != 12 {
		t.Fatalf("%d groups, want 12 (2 windows x 3 regions x 2 tiers)", len(g.Groups))
	}
	model := map[string][]usage.Decimal{}
	for _, e := range evs {
		k := fmt.Sprintf("%d|%s|%s", e.Time.Sub(Base).Milliseconds()/30000*30000, e.Dims["region"].Str(), e.Dims["tier"].String())
		model[k] = append(model[k], e.Quantity)
	}
	for _, x := range g.Groups {
		k := fmt.Sprintf("%d|%s|%s", x.WindowStart.Sub(Base).Milliseconds(), x.Dims[0].Value.Str(), x.Dims[1].Value.String())
		if want, _ := usage.SumDecimals(model[k]...); want != x.Sum {
			t.Fatalf("group %s: sum %s, want %v", k, x.Sum, want)
		}
	}
	wantTotals(t, "grouped", g, "1770", 60)
}

// listWait bounds how long listAll polls. A PostgreSQL listing shows only
// rows below its snapshot's xmin, so any transaction that holds an xid on
// the server (another package's test, run beside this one) holds it back
// for as long as that transaction runs: the documented price of exact
// paging, not a fault of the log. listAll returns as soon as it has seen
// what it waits for, so the bound costs nothing when nothing is held.
const listWait = 90 * time.Second

// listAll pages until it has seen want keys (or the deadline passes), and
// fails on any repeat. Stores may hold back rows behind a visibility
// watermark for a moment, so it polls.
func listAll(t *testing.T, l usage.Log, q usage.ListQuery, want int, wait time.Duration) map[string]usage.Stored {
	t.Helper()
	seen := map[string]usage.Stored{}
	deadline := time.Now().Add(wait)
	for {
		p, err := l.ListEvents(ctxT(t), q)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		for _, e := range p.Events {
			if _, dup := seen[e.Key]; dup {
				t.Fatalf("ListEvents repeated key %q", e.Key)
			}
			seen[e.Key] = e
		}
		if p.Next == "" {
			t.Fatalf("ListEvents returned an empty Next cursor")
		}
		q.Cursor = p.Next
		if len(p.Events) == q.Limit || (q.Limit == 0 && len(p.Events) == usage.DefaultPageSize) {
			continue
		}
		if len(seen) >= want || time.Now().After(deadline) {
			return seen
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sortedKeys(m map[string]usage.Stored) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func testPagingConcurrent(t *testing.T, l usage.Log) {
	const writers, batches, perBatch = 2, 25, 4
	ctx := ctxT(t)
	var mu sync.Mutex
	written := map[string]bool{}
	var wg sync.WaitGroup
	errc := make(chan error, writers+1)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for b := 0; b < batches; b++ {
				var evs []usage.Event
				for i := 0; i < perBatch; i++ {
					// Random event times: later rows often sort below rows
					// already returned.
					// Random key prefixes: a later row often sorts below the
					// keys already returned from the same ingestion instant.
					evs = append(evs, ev(fmt.Sprintf("%08x-p%d-%d-%d", rng.Uint32(), w, b, i), ms(rng.Int63n(3_600_000)), "pg", 1))
				}
				if _, err := l.Write(ctx, evs); err != nil {
					errc <- err
					return
				}
				mu.Lock()
				for _, e := range evs {
					written[e.Key] = true
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.Intn(15)) * time.Millisecond)
			}
		}(w)
	}
	seen := map[string]bool{}
	var minReturned time.Time
	q := usage.ListQuery{Meter: "pg", Limit: 7}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	writersDone := false
	lowWritten := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := l.ListEvents(ctx, q)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		for _, e := range p.Events {
			if seen[e.Key] {
				t.Fatalf("key %q returned twice", e.Key)
			}
			seen[e.Key] = true
			if minReturned.IsZero() || e.Time.Before(minReturned) {
				minReturned = e.Time
			}
		}
		q.Cursor = p.Next
		if !lowWritten && len(seen) > 0 {
			// A row whose event time is below everything returned so far.
			low := ev("low-after-return", minReturned.Add(-time.Millisecond), "pg", 1)
			if low.Time.Before(Base) {
				low.Time = Base
			}
			if _, err := l.Write(ctx, []usage.Event{low}); err != nil {
				t.Fatalf("Write: %v", err)
			}
			mu.Lock()
			written[low.Key] = true
			mu.Unlock()
			lowWritten = true
		}
		if !writersDone {
			select {
			case <-done:
				writersDone = true
			default:
			}
		}
		if writersDone && len(p.Events) < q.Limit {
			mu.Lock()
			all := len(seen) == len(written)
			mu.Unlock()
			if all {
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	select {
	case err := <-errc:
		t.Fatalf("writer: %v", err)
	default:
	}
	var missing []string
	for k := range written {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 || len(seen) != len(written) {
		sort.Strings(missing)
		t.Fatalf("paging saw %d of %d rows; missing %v", len(seen), len(written), missing)
	}
}

func testCursor(t *testing.T, l usage.Log) {
	for i := 0; i < 5; i++ {
		mustWrite(t, l, ev("c"+strconv.Itoa(i), ms(int64(i)), "cur", 1))
	}
	listAll(t, l, usage.ListQuery{Meter: "cur"}, 5, listWait)
	p, err := l.ListEvents(ctxT(t), usage.ListQuery{Meter: "cur", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.ListEvents(ctxT(t), usage.ListQuery{Meter: "other", Limit: 2, Cursor: p.Next})
	if !errors.Is(err, usage.ErrCursorMismatch) {
		t.Fatalf("cursor reused on another query: %v, want ErrCursorMismatch", err)
	}
	_, err = l.ListEvents(ctxT(t), usage.ListQuery{Meter: "cur", Cursor: "not a cursor!"})
	if !errors.Is(err, usage.ErrInvalidCursor) {
		t.Fatalf("garbage cursor: %v, want ErrInvalidCursor", err)
	}
	_, err = l.ListEvents(ctxT(t), usage.ListQuery{Meter: "cur", Limit: usage.MaxPageSize + 1})
	if !errors.Is(err, usage.ErrInvalidQuery) {
		t.Fatalf("oversized limit: %v, want ErrInvalidQuery", err)
	}
	_, err = l.Aggregate(ctxT(t), usage.AggregateQuery{Meter: "cur", From: ms(10), To: ms(0)})
	if !errors.Is(err, usage.ErrInvalidQuery) {
		t.Fatalf("to before from: %v, want ErrInvalidQuery", err)
	}
}

// testCursorTable: a cursor issued on one table is refused on another of
// the same store, even for the same query, instead of resuming at a
// position that skips the other table's rows.
func testCursorTable(t *testing.T, a, b usage.Log) {
	for i := 0; i < 10; i++ {
		mustWrite(t, a, ev("ta"+strconv.Itoa(i), ms(int64(i)), "tab", 1))
	}
	listAll(t, a, usage.ListQuery{Meter: "tab"}, 10, listWait)
	for i := 0; i < 10; i++ {
		mustWrite(t, b, ev("tb"+strconv.Itoa(i), ms(int64(i)), "tab", 1))
	}
	listAll(t, b, usage.ListQuery{Meter: "tab"}, 10, listWait)
	p, err := b.ListEvents(ctxT(t), usage.ListQuery{Meter: "tab", Limit: usage.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.ListEvents(ctxT(t), usage.ListQuery{Meter: "tab", Limit: usage.MaxPageSize, Cursor: p.Next})
	if !errors.Is(err, usage.ErrCursorMismatch) {
		t.Fatalf("a cursor of table b on table a: %d events, %v; want ErrCursorMismatch", len(got.Events), err)
	}
	// The same cursor still works on its own table.
	if _, err := b.ListEvents(ctxT(t), usage.ListQuery{Meter: "tab", Limit: usage.MaxPageSize, Cursor: p.Next}); err != nil {
		t.Fatalf("the cursor on its own table: %v", err)
	}
}

// awkward strings cross the wire and SQL text: quotes, backslashes,
// newlines, control bytes, non-ASCII and JSON-significant characters.
var awkward = []string{
	`it's`, `back\slash`, `\'`, `'; DROP TABLE x; --`, "line\nbreak\r\ttab", "\x01\x1f\x7f",
	"ümlaut ✓ 😀", `{"json":[1,2]}`, `%_like_`, "\u2028\u2029", "", " ", `\\x00`, `\N`, "a\\",
}

func testRoundTrip(t *testing.T, l usage.Log) {
	var evs []usage.Event
	for i, s := range awkward {
		evs = append(evs, ev("rt-"+strconv.Itoa(i)+s, ms(int64(i)), "rt"+s, 0.1, "s"+s, usage.String(s), "n", usage.Number(-1e-7*float64(i)), "big", usage.Number(1e21)))
	}
	mustWrite(t, l, evs...)
	for _, e := range evs {
		s, ok, err := l.Get(ctxT(t), e.Key)
		if err != nil || !ok {
			t.Fatalf("Get(%q): %v %v", e.Key, ok, err)
		}
		if s.Meter != e.Meter || s.Quantity != "0.1" || !s.Time.Equal(e.Time) || len(s.Dims) != len(e.Dims) {
			t.Fatalf("Get(%q) = %+v, want %+v", e.Key, s, e)
		}
		for k, v := range e.Dims {
			if !s.Dims[k].Equal(v) {
				t.Fatalf("Get(%q) dim %q = %v, want %v", e.Key, k, s.Dims[k], v)
			}
		}
		wantTotals(t, "meter "+strconv.Quote(e.Meter), total(t, l, e.Meter, Base, Base.Add(time.Hour), usage.Eq("s"+e.Meter[2:], usage.String(e.Meter[2:]))), "0.1", 1)
	}
}

// testModel writes random events (with retries and repeated keys) in random
// batches and compares every answer with an in-memory first-write-wins
// model.
func testModel(t *testing.T, l usage.Log) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -usagetest.seed=%d)", seed, seed)
	defer func() {
		if t.Failed() {
			t.Logf("failed with seed %d", seed)
		}
	}()
	rng := rand.New(rand.NewSource(seed))
	type fact struct{ e usage.Event }
	model := map[string]usage.Event{}
	var order []string
	dimVals := []usage.Value{usage.String("a"), usage.String("b"), usage.Number(1), usage.Number(2.5), usage.Bool(true), usage.Null(), usage.String("1")}
	meters := []string{"m1", "m2"}
	var history []usage.Event
	for b := 0; b < 12; b++ {
		var batch []usage.Event
		for i := rng.Intn(60); i >= 0; i-- {
			var e usage.Event
			if len(history) > 0 && rng.Intn(4) == 0 {
				e = history[rng.Intn(len(history))] // a retry of an earlier event
				if rng.Intn(2) == 0 {
					e.Quantity, _ = usage.SumDecimals(e.Quantity, "1") // same key, different facts: the first must still win
				}
			} else {
				e = ev(fmt.Sprintf("k%d", rng.Intn(400)), ms(rng.Int63n(120_000)), meters[rng.Intn(2)], float64(rng.Intn(2000))/8)
				e.Dims = map[string]usage.Value{}
				for _, d := range []string{"x", "y"} {
					if rng.Intn(3) > 0 {
						e.Dims[d] = dimVals[rng.Intn(len(dimVals))]
					}
				}
			}
			batch = append(batch, e)
		}
		wantIns := 0
		for _, e := range batch {
			if _, ok := model[e.Key]; !ok {
				model[e.Key] = e
				order = append(order, e.Key)
				wantIns++
			}
		}
		r := mustWrite(t, l, batch...)
		if r.Inserted != wantIns || r.Inserted+r.Duplicates != len(batch) {
			t.Fatalf("batch %d: %+v, want %d inserted of %d", b, r, wantIns, len(batch))
		}
		history = append(history, batch...)
	}
	for qn := 0; qn < 25; qn++ {
		q := usage.AggregateQuery{Meter: meters[rng.Intn(2)]}
		a, c := rng.Int63n(130_000), rng.Int63n(130_000)
		if a > c {
			a, c = c, a
		}
		q.From, q.To = ms(a), ms(c)
		var filters []usage.Filter
		for i := rng.Intn(3); i > 0; i-- {
			d := []string{"x", "y"}[rng.Intn(2)]
			if rng.Intn(4) == 0 {
				filters = append(filters, usage.Absent(d))
			} else {
				filters = append(filters, usage.Eq(d, dimVals[rng.Intn(len(dimVals))]))
			}
		}
		q.Filters = filters
		if rng.Intn(2) == 0 {
			q.GroupBy = []string{"x"}
		}
		if rng.Intn(2) == 0 {
			q.Window = time.Duration(1+rng.Intn(30_000)) * time.Millisecond
		}
		got := agg(t, l, q)
		want := modelAggregate(model, q)
		if gs, ws := describe(got), describe(want); gs != ws {
			t.Fatalf("query %+v:\n got %s\nwant %s", q, gs, ws)
		}
	}
	// The listing holds exactly the model's keys, once each, with the
	// first copy's facts.
	got := listAll(t, l, usage.ListQuery{Limit: 29}, len(model), listWait)
	if len(got) != len(model) {
		t.Fatalf("listing has %d keys, model %d", len(got), len(model))
	}
	for k, e := range model {
		s := got[k]
		if s.Quantity != mustDecimal(e.Quantity) || !s.Time.Equal(e.Time) || s.Meter != e.Meter {
			t.Fatalf("listed %q = %+v, model %+v", k, s, e)
		}
	}
}

func mustDecimal(q usage.Decimal) usage.Decimal {
	d, err := usage.ParseQuantity(string(q))
	if err != nil {
		panic(err)
	}
	return d
}

func modelAggregate(model map[string]usage.Event, q usage.AggregateQuery) usage.Totals {
	spec, err := q.Spec()
	if err != nil {
		panic(err)
	}
	type acc struct {
		g    usage.GroupTotals
		sums []usage.Decimal
	}
	groups := map[string]*acc{}
	var keys []string
	for _, e := range model {
		m := e.Time.UnixMilli()
		if e.Meter != spec.Meter || m < spec.FromMs || m >= spec.ToMs {
			continue
		}
		ok := true
		for _, f := range spec.Filters {
			ok = ok && f.Matches(e.Dims)
		}
		if !ok {
			continue
		}
		var g usage.GroupTotals
		if spec.WindowMs > 0 {
			g.WindowStart = time.UnixMilli(m / spec.WindowMs * spec.WindowMs).UTC()
		}
		for _, name := range spec.GroupBy {
			v, present := e.Dims[name]
			g.Dims = append(g.Dims, usage.GroupValue{Name: name, Present: present, Value: v})
		}
		k := describeGroupKey(g)
		a := groups[k]
		if a == nil {
			a = &acc{g: g}
			groups[k] = a
			keys = append(keys, k)
		}
		a.g.Count++
		a.sums = append(a.sums, mustDecimal(e.Quantity))
	}
	var gs []usage.GroupTotals
	for _, k := range keys {
		a := groups[k]
		a.g.Sum, _ = usage.SumDecimals(a.sums...)
		gs = append(gs, a.g)
	}
	t, err := usage.Finish(spec, gs)
	if err != nil {
		panic(err)
	}
	return t
}

func describeGroupKey(g usage.GroupTotals) string {
	s := usage.FormatTime(g.WindowStart)
	for _, d := range g.Dims {
		if d.Present {
			s += "|" + d.Value.Kind().String() + ":" + d.Value.String()
		} else {
			s += "|missing"
		}
	}
	return s
}

func describe(t usage.Totals) string {
	s := fmt.Sprintf("sum=%s count=%d", t.Sum, t.Count)
	for _, g := range t.Groups {
		s += fmt.Sprintf(" [%s %s/%d]", describeGroupKey(g), g.Sum, g.Count)
	}
	return s
}

// testExactDecimals: quantities of 38 significant digits (the whole of
// DECIMAL(38,9)) are stored, summed and returned exactly, retries with other
// quantities do not move the total, and a sum beyond 29 integer digits is
// refused rather than wrapped or rounded.
func testExactDecimals(t *testing.T, l usage.Log) {
	a := usage.Decimal("12345678901234567890123456789.123456789")
	b := usage.Decimal("-2345678901234567890123456789.987654321")
	c := usage.Decimal("0.000000001")
	d := usage.Decimal("87654321098765432109876543210.87654321") // 29 integer digits
	mustWrite(t, l, evq("x-a", ms(0), "exact", a), evq("x-d", ms(1), "exact", d))
	// Retries, one with different facts: the first copy stays.
	if r := mustWrite(t, l, evq("x-a", ms(0), "exact", a), evq("x-d", ms(1), "exact", "1"), evq("x-a", ms(0), "exact", c)); r.Inserted != 0 || r.Duplicates != 3 {
		t.Fatalf("retries: %+v, want 3 duplicates", r)
	}
	wantTotals(t, "a+d", total(t, l, "exact", Base, ms(10)), "99999999999999999999999999999.999999999", 2)
	if got := total(t, l, "exact", Base, ms(10)).Sum.Fixed(); got != "99999999999999999999999999999.999999999" {
		t.Fatalf("fixed text %s", got)
	}
	mustWrite(t, l, evq("y-a", ms(0), "exact2", a), evq("y-b", ms(1), "exact2", b), evq("y-c", ms(2), "exact2", c), evq("y-b", ms(1), "exact2", a))
	wantTotals(t, "a+b+c", total(t, l, "exact2", Base, ms(10)), "9999999999999999999999999999.135802469", 3)
	if s, ok, err := l.Get(ctxT(t), "x-d"); err != nil || !ok || s.Quantity != d {
		t.Fatalf("Get(x-d) = %+v %v %v, want quantity %s", s, ok, err, d)
	}
	// 10^29 needs 30 integer digits.
	mustWrite(t, l, evq("o-a", ms(0), "over", a), evq("o-d", ms(1), "over", d), evq("o-c", ms(2), "over", c))
	if tot, err := l.Aggregate(ctxT(t), usage.AggregateQuery{Meter: "over", From: Base, To: ms(10)}); !errors.Is(err, usage.ErrSumOutOfRange) {
		t.Fatalf("sum of 10^29: %+v, %v; want ErrSumOutOfRange", tot, err)
	}
	// About 1.78e29: beyond the 128-bit range of a DECIMAL(38,9) sum.
	mustWrite(t, l, evq("w-d", ms(0), "wrap", d), evq("w-9", ms(1), "wrap", "90000000000000000000000000000"))
	if tot, err := l.Aggregate(ctxT(t), usage.AggregateQuery{Meter: "wrap", From: Base, To: ms(10)}); !errors.Is(err, usage.ErrSumOutOfRange) {
		t.Fatalf("sum of 1.78e29: %+v, %v; want ErrSumOutOfRange", tot, err)
	}
	// Each group fits though the whole does not: still refused.
	mustWrite(t, l, evq("g-d", ms(0), "grp", d, "r", usage.String("1")), evq("g-a", ms(1), "grp", d, "r", usage.String("2")))
	if tot, err := l.Aggregate(ctxT(t), usage.AggregateQuery{Meter: "grp", From: Base, To: ms(10), GroupBy: []string{"r"}}); !errors.Is(err, usage.ErrSumOutOfRange) {
		t.Fatalf("total of 2 x 8.7e28: %+v, %v; want ErrSumOutOfRange", tot, err)
	}
}

// testExactNumbers: number dimensions keep their exact decimal value, so
// 2^53+1 and 2^53 (one float64) are two accounts, while 1 and 1.0 are one
// number.
func testExactNumbers(t *testing.T, l usage.Log) {
	num := func(s string) usage.Value {
		var v usage.Value
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	hi, lo := num("9007199254740993"), num("9007199254740992")
	mustWrite(t, l,
		ev("acct-hi", ms(0), "xn", 5, "account", hi),
		ev("acct-lo", ms(1), "xn", 7, "account", lo),
		ev("one", ms(2), "xn", 100, "account", num("1")),
		ev("one-point-zero", ms(3), "xn", 200, "account", num("1.0")),
		ev("tiny", ms(4), "xn", 1000, "account", num("0.30000000000000000001")),
	)
	from, to := Base, Base.Add(time.Minute)
	wantTotals(t, "filter 2^53+1", total(t, l, "xn", from, to, usage.Eq("account", hi)), "5", 1)
	wantTotals(t, "filter 2^53", total(t, l, "xn", from, to, usage.Eq("account", lo)), "7", 1)
	wantTotals(t, "filter 1.0e0 is 1", total(t, l, "xn", from, to, usage.Eq("account", num("1.0e0"))), "300", 2)
	wantTotals(t, "filter 0.3 is not 0.30000000000000000001", total(t, l, "xn", from, to, usage.Eq("account", num("0.3"))), "0", 0)
	g := agg(t, l, usage.AggregateQuery{Meter: "xn", From: from, To: to, GroupBy: []string{"account"}})
	var got []string
	for _, x := range g.Groups {
		got = append(got, x.Dims[0].Value.String()+"="+x.Sum.String())
	}
	want := []string{"0.30000000000000000001=1000", "1=300", "9007199254740992=7", "9007199254740993=5"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("group by account:\n got %v\nwant %v", got, want)
	}
	listed := listAll(t, l, usage.ListQuery{Meter: "xn", Filters: []usage.Filter{usage.Eq("account", hi)}}, 1, listWait)
	if s, ok := listed["acct-hi"]; !ok || len(listed) != 1 || s.Dims["account"].String() != "9007199254740993" {
		t.Fatalf("listing account 2^53+1: %v", listed)
	}
	s, ok, err := l.Get(ctxT(t), "one-point-zero")
	if err != nil || !ok || s.Dims["account"].String() != "1" {
		t.Fatalf("Get(one-point-zero) = %v %v %v, want account 1", s.Dims, ok, err)
	}
}
