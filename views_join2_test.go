package ubik_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// A window join of two EMIT FINAL views over two different sources (the
// Nexmark q8 shape: persons and auctions), run in one graph with each
// source pushed by name (PushInput) and each view's watermark its own
// source's: view_join_two_sources.txt's query q8.

type tsEvent struct {
	src  string // "ps" or "au"
	id   *int64 // NULL when nil
	name *string
	ts   int64 // µs
}

func (e tsEvent) json() []byte {
	t := time.UnixMicro(e.ts).UTC().Format("2006-01-02 15:04:05.000000")
	id := "null"
	if e.id != nil {
		id = fmt.Sprint(*e.id)
	}
	if e.src == "au" {
		return fmt.Appendf(nil, `{"seller":%s,"ts":"%s"}`, id, t)
	}
	name := "null"
	if e.name != nil {
		b, _ := json.Marshal(*e.name)
		name = string(b)
	}
	return fmt.Appendf(nil, `{"id":%s,"name":%s,"ts":"%s"}`, id, name, t)
}

// genTwoSources returns each source's events in arrival order: times
// move forward with disorder, some beyond the 2 s delay (late at the
// view), and NULL keys (and names) on both sides.
func genTwoSources(rng *rand.Rand, n int) (ps, au []tsEvent) {
	gen := func(src string) []tsEvent {
		var out []tsEvent
		t := int64(1_700_000_000_000_000)
		for range n {
			t += rng.Int64N(40_000)
			ts := t - rng.Int64N(1_500_000) // within the delay
			if rng.IntN(40) == 0 {
				ts = t - 2_000_000 - rng.Int64N(15_000_000) // often late
			}
			e := tsEvent{src: src, ts: ts}
			if rng.IntN(25) != 0 {
				id := rng.Int64N(30)
				e.id = &id
			}
			if src == "ps" && rng.IntN(20) != 0 {
				nm := []string{"ann", "bo", "ça", ""}[rng.IntN(4)]
				e.name = &nm
			}
			out = append(out, e)
		}
		return out
	}
	return gen("ps"), gen("au")
}

// twoSourceOracle is the batch answer: each source's events less those
// late at its view (behind its own watermark, max time - 2 s, at arrival:
// their window has ended), grouped per view, joined on key and window
// start (NULL never matches), one row per (id, name, window).
func twoSourceOracle(ps, au []tsEvent) map[string]string {
	const size, delay = 10_000_000, 2_000_000
	start := func(ts int64) int64 { return ts - ((ts%size)+size)%size }
	kept := func(evs []tsEvent) []tsEvent {
		var out []tsEvent
		wm := int64(-1 << 62)
		for _, e := range evs {
			if start(e.ts)+size <= wm {
				continue // late at the view
			}
			out = append(out, e)
			wm = max(wm, e.ts-delay)
		}
		return out
	}
	type pk struct {
		id   string
		name string
		ws   int64
	}
	cell := func(id *int64) string {
		if id == nil {
			return "null"
		}
		return fmt.Sprint(*id)
	}
	np := map[pk]int64{}
	for _, e := range kept(ps) {
		nm := "null"
		if e.name != nil {
			b, _ := json.Marshal(*e.name)
			nm = strings.ReplaceAll(string(b), "ç", `\u00e7`) // the key text escapes non-ASCII
		}
		np[pk{cell(e.id), nm, start(e.ts)}]++
	}
	ns := map[pk]int64{}
	for _, e := range kept(au) {
		ns[pk{cell(e.id), "", start(e.ts)}]++
	}
	want := map[string]string{}
	for k, v := range np {
		if k.id == "null" {
			continue
		}
		a, ok := ns[pk{k.id, "", k.ws}]
		if !ok {
			continue
		}
		ws := time.UnixMicro(k.ws).UTC().Format("2006-01-02 15:04:05")
		want[fmt.Sprintf(`[%s, %s, "%s"]`, k.id, k.name, ws)] = fmt.Sprintf("v=%d a=%d", v, a)
	}
	return want
}

// runTwoSources pushes both sources interleaved at random (pick: the
// chance of taking a person next) and returns q8's finals by key.
func runTwoSources(t *testing.T, ps, au []tsEvent, rng *rand.Rand, pick float64) (map[string]string, ubik.Stats) {
	t.Helper()
	eng, _ := ubik.Open(ubik.DefaultOptions())
	got := map[string]string{}
	q, err := eng.Start(scriptSQL(t, "view_join_two_sources", 1), ubik.QueryOptions{Name: "q8", OnRecord: func(r changelog.Record) error {
		if !r.Meta.Final {
			t.Errorf("a record that is not final: %s", r.Value)
		}
		if _, dup := got[string(r.Key)]; dup {
			t.Errorf("key %s published twice", r.Key)
		}
		var v struct{ V, A int64 }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		got[string(r.Key)] = fmt.Sprintf("v=%d a=%d", v.V, v.A)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	i, j := 0, 0
	for i < len(ps) || j < len(au) {
		if j == len(au) || (i < len(ps) && rng.Float64() < pick) {
			if err := q.PushInput("ps", ps[i].json()); err != nil {
				t.Fatalf("ps %d: %v", i, err)
			}
			i++
			// The first input may end on its own too (EndInput): the
			// join then holds no row of the second for it.
			if i == len(ps) && j < len(au) && rng.IntN(2) == 0 {
				if err := q.EndInput("ps"); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if err := q.PushInput("au", au[j].json()); err != nil {
			t.Fatalf("au %d: %v", j, err)
		}
		j++
		if j == len(au) && rng.IntN(2) == 0 {
			if err := q.EndInput("au"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	var late [2]int64
	for i, v := range []string{"np", "ns"} {
		st, _ := q.ViewStats(v)
		if st.Late == 0 {
			t.Fatalf("view %s saw no late rows: the history tests nothing late", v)
		}
		late[i] = st.Late
	}
	// Each source's late events are its own view's: Late the first's,
	// Table.Late the second's; the join saw none.
	st := q.Stats()
	if st.Late != late[0] || st.Table.Late != late[1] {
		t.Fatalf("Stats: Late %d, Table.Late %d; the views' late events: %d, %d", st.Late, st.Table.Late, late[0], late[1])
	}
	if own, _ := q.ViewStats("q8"); own.Late != 0 {
		t.Fatalf("rows of the views late at the join: %d", own.Late)
	}
	return got, st
}

// TestViewJoinTwoSourcesOracle: the finals equal the batch answer under
// any interleaving of the two sources (persons first, auctions first,
// alternating), with NULL keys on both sides and late rows at each view.
func TestViewJoinTwoSourcesOracle(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 17))
		ps, au := genTwoSources(rng, 3000)
		want := twoSourceOracle(ps, au)
		if len(want) < 50 {
			t.Fatalf("seed %d: only %d joined rows: the test would prove little", seed, len(want))
		}
		for _, pick := range []float64{0, 1, 0.5, 0.9} {
			got, st := runTwoSources(t, ps, au, rng, pick)
			if st.Interval.LateLeft != 0 || st.Interval.LateRight != 0 {
				t.Fatalf("seed %d pick %v: rows late after the views: %+v", seed, pick, st)
			}
			if len(got) != len(want) {
				t.Errorf("seed %d pick %v: %d rows, want %d", seed, pick, len(got), len(want))
			}
			keys := make([]string, 0, len(want))
			for k := range want {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			bad := 0
			for _, k := range keys {
				if got[k] != want[k] && bad < 5 {
					t.Errorf("seed %d pick %v: key %s: got %q, want %q", seed, pick, k, got[k], want[k])
					bad++
				}
			}
		}
	}
}

// TestViewJoinTwoSourcesMetamorphic holds the full changelogs of both
// views and their join to one reference run, byte for byte, under output
// bounds, partial pulls, full and incremental checkpoints and restarts
// (the interleaving of the two sources fixed; TestViewJoinTwoSourcesOracle
// varies it).
func TestViewJoinTwoSourcesMetamorphic(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 18))
	ps, au := genTwoSources(rng, 1500)
	var evs [][]byte
	var inputs []string
	for i, j := 0, 0; i < len(ps) || j < len(au); {
		if j == len(au) || (i < len(ps) && rng.IntN(2) == 0) {
			evs, inputs = append(evs, ps[i].json()), append(inputs, "ps")
			i++
		} else {
			evs, inputs = append(evs, au[j].json()), append(inputs, "au")
			j++
		}
	}
	twoSourceJoinSQL := scriptSQL(t, "view_join_two_sources", 1)
	ref := runViews(t, viewOpts{primary: "q8", script: twoSourceJoinSQL, eventsIn: evs, inputOf: inputs})
	if len(ref.logs["q8"]) < 20 || len(ref.logs["np"]) < 20 || len(ref.logs["ns"]) < 20 || ref.late == 0 {
		t.Fatalf("too little: q8 %d, np %d, ns %d records, %d late", len(ref.logs["q8"]), len(ref.logs["np"]), len(ref.logs["ns"]), ref.late)
	}
	for trial := 0; trial < 12; trial++ {
		o := viewOpts{primary: "q8", script: twoSourceJoinSQL, eventsIn: evs, inputOf: inputs, full: trial%2 == 0,
			pull: trial%3 != 0, maxPend: 1 + rng.IntN(5)}
		for k := 0; k < 1+rng.IntN(6); k++ {
			c := rng.IntN(len(evs))
			o.ckptAt = append(o.ckptAt, c)
			if rng.IntN(2) == 0 {
				o.crashAt = append(o.crashAt, c+rng.IntN(400))
			}
		}
		got := runViews(t, o)
		for _, name := range ref.queries() {
			if d := firstDiff(ref.logs[name], got.logs[name]); d != "" {
				t.Fatalf("seed %d trial %d (checkpoints %v, crashes %v) query %s: %s", seed, trial, o.ckptAt, o.crashAt, name, d)
			}
		}
	}
}
