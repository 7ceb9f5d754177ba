package ubik_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/types"
)

// A query over a view whose body is an interval join of two streams: the
// view counts the joined rows per campaign and minute (EMIT FINAL), the
// reader sums the minutes into 5-minute windows. The graph's root is the
// join, fed by both streams (Push and PushTable, or by name); its finals
// must not depend on the interleaving of the two inputs, on shuffles
// within their delays, on output bounds or on a checkpoint and restore
// at any point, and must equal the one query that aggregates the joined
// rows into 5-minute windows directly (held to PostgreSQL by
// TestIntervalJoinOracle).

const viewIJoinSQL = `
CREATE SOURCE impressions (id BIGINT, tag VARCHAR, d DOUBLE, campaign VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND);
CREATE SOURCE clicks (impression_id BIGINT, tag VARCHAR, d DOUBLE, amount BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND);
CREATE VIEW clicks_1m AS SELECT i.campaign, TUMBLE_START(%[1]s.ts, INTERVAL '1' MINUTE) AS w, count(*) AS clicks, sum(c.amount) AS amount
FROM impressions i JOIN clicks c
  ON c.impression_id = i.id AND c.tag = i.tag AND i.d = c.d AND %[2]s
GROUP BY i.campaign, TUMBLE(%[1]s.ts, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW clicks_5m AS SELECT campaign, TUMBLE_START(w, INTERVAL '5' MINUTE) AS w, sum(clicks) AS clicks, sum(amount) AS amount
FROM clicks_1m GROUP BY campaign, TUMBLE(w, INTERVAL '5' MINUTE);`

func TestViewOverIntervalJoin(t *testing.T) {
	t.Parallel()
	imps, clicks := genIJoin(11, 2000, 1800)
	for bi, bd := range ijoinBounds[:2] {
		for _, side := range []string{"c", "i"} {
			t.Run(fmt.Sprintf("bound%d/time=%s", bi, side), func(t *testing.T) {
				sql := fmt.Sprintf(viewIJoinSQL, side, bd.ubik)
				direct := strings.ReplaceAll(fmt.Sprintf(ijoinSQL, side, bd.ubik), "'1' MINUTE", "'5' MINUTE")
				var ref []joinInput
				for _, x := range imps {
					ref = append(ref, joinInput{raw: x.json()})
				}
				for _, x := range clicks {
					ref = append(ref, joinInput{table: true, raw: x.json()})
				}
				want := joinRun(t, direct, ref, 0, -1)
				if len(want) < 20 {
					t.Fatalf("only %d finals: the history is too small to test anything", len(want))
				}
				if got := joinRunNamed(t, sql, "clicks_5m", ref, 0, -1, -1); !slices.Equal(got, want) {
					t.Fatalf("the reader differs from the direct query:\n%s", diffLines(want, got))
				}
				r := rand.New(rand.NewPCG(uint64(bi), 29))
				for trial := range 8 {
					si := shuffleWithin(r, imps, func(x ijRow) int64 { return x.ts }, 4_000_000)
					sc := shuffleWithin(r, clicks, func(x ijRow) int64 { return x.ts }, 3_000_000)
					var in []joinInput
					switch trial % 3 {
					case 0:
						in = ijInterleave(r, si, sc)
					case 1: // the clicks first
						for _, x := range sc {
							in = append(in, joinInput{table: true, raw: x.json()})
						}
						for _, x := range si {
							in = append(in, joinInput{raw: x.json()})
						}
					default: // in long runs of one input
						for len(si) > 0 || len(sc) > 0 {
							k := min(r.IntN(300), len(si))
							for _, x := range si[:k] {
								in = append(in, joinInput{raw: x.json()})
							}
							si = si[k:]
							k = min(r.IntN(300), len(sc))
							for _, x := range sc[:k] {
								in = append(in, joinInput{table: true, raw: x.json()})
							}
							sc = sc[k:]
						}
					}
					bound := []int{0, 1, 7, 0}[trial%4]
					ckpt, full := -1, -1
					if trial%2 == 1 {
						ckpt = r.IntN(len(in))
						if trial%4 == 3 {
							full = r.IntN(ckpt + 1)
						}
					}
					got := joinRunNamed(t, sql, "clicks_5m", in, bound, full, ckpt)
					if d := diffLines(want, got); d != "" {
						t.Fatalf("trial %d (bound %d, full checkpoint before %d, restore before %d): finals differ:\n%s", trial, bound, full, ckpt, d)
					}
				}
			})
		}
	}
}

// The late rows of either input of the view's join: a row behind its own
// stream's watermark is turned away by the join, counted (Stats.Late for
// the first input, Stats.Table.Late for the second) and handed to OnLate
// or OnLateTable; the reader's finals are the batch answer over the rows
// that were not late, computed here by hand, whatever the interleaving,
// with a checkpoint and restore mid-run and the first input ended early.
// The query is view_over_interval_join_late.txt's per_minute.

type lateRow struct {
	click    bool
	id       int64
	campaign string
	amount   int64
	ts       int64
}

func (r lateRow) json() []byte {
	if r.click {
		return fmt.Appendf(nil, `{"impression_id":%d,"amount":%d,"ts":"%s"}`, r.id, r.amount, ts(r.ts))
	}
	return fmt.Appendf(nil, `{"id":%d,"campaign":%q,"ts":"%s"}`, r.id, r.campaign, ts(r.ts))
}

// genLateSides makes n rows of each input, in arrival order: times move
// forward with disorder within the delay, and one row in 15 far behind
// (late, or not when the input has not gone far yet).
func genLateSides(r *rand.Rand, n int) (imp, clk []lateRow) {
	gen := func(click bool, delay int64) []lateRow {
		var out []lateRow
		t := joinBase
		for range n {
			t += r.Int64N(1_000_000)
			x := lateRow{click: click, id: r.Int64N(12), ts: t - r.Int64N(delay)}
			if r.IntN(15) == 0 {
				x.ts = t - delay - r.Int64N(20_000_000)
			}
			x.campaign = []string{"c0", "c1", `c"2`}[r.IntN(3)]
			x.amount = r.Int64N(50) - 10
			out = append(out, x)
		}
		return out
	}
	return gen(false, 2_000_000), gen(true, 1_000_000)
}

// lateOracle is the batch answer: each input less its late rows (behind
// the newest earlier kept row less the delay), joined by brute force,
// counted per campaign and minute of the click; and the late counts.
func lateOracle(imp, clk []lateRow) (map[string]string, int, int) {
	kept := func(rows []lateRow, delay int64) ([]lateRow, int) {
		var out []lateRow
		late := 0
		wm := int64(-1 << 62)
		for _, x := range rows {
			if x.ts < wm {
				late++
				continue
			}
			out = append(out, x)
			wm = max(wm, x.ts-delay)
		}
		return out, late
	}
	ki, li := kept(imp, 2_000_000)
	kc, lc := kept(clk, 1_000_000)
	type g struct {
		campaign string
		m        int64
	}
	type agg struct{ n, amount, windows int64 }
	aggs := map[g]*agg{}
	wins := map[g]map[int64]bool{}
	for _, i := range ki {
		for _, c := range kc {
			if c.id != i.id || c.ts < i.ts || c.ts > i.ts+5_000_000 {
				continue
			}
			k := g{i.campaign, c.ts - ((c.ts%60_000_000)+60_000_000)%60_000_000}
			if aggs[k] == nil {
				aggs[k], wins[k] = &agg{}, map[int64]bool{}
			}
			aggs[k].n++
			aggs[k].amount += c.amount
			wins[k][c.ts-((c.ts%10_000_000)+10_000_000)%10_000_000] = true
		}
	}
	want := map[string]string{}
	for k, a := range aggs {
		key := changelog.AppendKey(nil, []types.Value{types.Str(k.campaign), types.TS(k.m)})
		want[string(key)] = fmt.Sprintf("n=%d amount=%d windows=%d", a.n, a.amount, len(wins[k]))
	}
	return want, li, lc
}

func TestViewOverIntervalJoinLate(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 77))
	imp, clk := genLateSides(r, 1500)
	want, lateImp, lateClk := lateOracle(imp, clk)
	if len(want) < 20 || lateImp < 20 || lateClk < 20 {
		t.Fatalf("the history tests too little: %d finals, %d and %d late rows", len(want), lateImp, lateClk)
	}
	for trial := range 6 {
		// Each input keeps its own order (its late rows are the same);
		// how they interleave is drawn, and one trial in two ends the
		// first input as soon as it is out, and one restores mid-run.
		var in []joinInput
		i, j := 0, 0
		pick := []float64{0.5, 0.1, 0.9}[trial%3]
		for i < len(imp) || j < len(clk) {
			if j == len(clk) || i < len(imp) && r.Float64() < pick {
				in = append(in, joinInput{raw: imp[i].json()})
				i++
			} else {
				in = append(in, joinInput{table: true, raw: clk[j].json()})
				j++
			}
		}
		ckpt := -1
		if trial%3 != 0 {
			ckpt = r.IntN(len(in))
		}
		endFirst := trial%2 == 1
		got, st, hooks := runViewIJoinLate(t, in, ckpt, endFirst)
		if len(got) != len(want) {
			t.Errorf("trial %d: %d finals, want %d", trial, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("trial %d: %s: got %q, want %q", trial, k, got[k], v)
			}
		}
		if st.Late != int64(lateImp) || st.Table.Late != int64(lateClk) || st.Interval.LateLeft != int64(lateImp) || st.Interval.LateRight != int64(lateClk) {
			t.Errorf("trial %d: late %d (interval %d), table late %d (interval %d); want %d and %d", trial, st.Late, st.Interval.LateLeft, st.Table.Late, st.Interval.LateRight, lateImp, lateClk)
		}
		if ckpt < 0 && (hooks[0] != lateImp || hooks[1] != lateClk) {
			t.Errorf("trial %d: OnLate had %d rows, OnLateTable %d; want %d and %d", trial, hooks[0], hooks[1], lateImp, lateClk)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// runViewIJoinLate runs per_minute over in by input name, restoring into
// a new query before input ckptAt (-1: never), ending the first input
// once it is out when endFirst, and returns the finals, the counters and
// the late hooks' counts (of the last query).
func runViewIJoinLate(t *testing.T, in []joinInput, ckptAt int, endFirst bool) (map[string]string, ubik.Stats, [2]int) {
	t.Helper()
	eng, _ := ubik.Open(ubik.DefaultOptions())
	got := map[string]string{}
	var hooks [2]int
	start := func() *ubik.Query {
		hooks = [2]int{}
		q, err := eng.Start(scriptSQL(t, "view_over_interval_join_late", 1), ubik.QueryOptions{Name: "per_minute",
			OnLate:      func(*ubik.LateEvent) { hooks[0]++ },
			OnLateTable: func(ev *ubik.LateEvent) { hooks[1]++ },
			OnRecord: func(r changelog.Record) error {
				if !r.Meta.Final {
					return fmt.Errorf("a record that is not final: %s", r.Value)
				}
				if _, dup := got[string(r.Key)]; dup {
					return fmt.Errorf("key %s published twice", r.Key)
				}
				var v struct{ N, Amount, Windows int64 }
				if err := json.Unmarshal(r.Value, &v); err != nil {
					return err
				}
				got[string(r.Key)] = fmt.Sprintf("n=%d amount=%d windows=%d", v.N, v.Amount, v.Windows)
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q := start()
	if in := q.Inputs(); !slices.Equal(in, []string{"imp", "clk"}) {
		t.Fatalf("inputs %q, want imp and clk", in)
	}
	left := 0
	for _, x := range in {
		if !x.table {
			left++
		}
	}
	for n, x := range in {
		if n == ckptAt {
			entries := map[string][]byte{}
			var meta string
			err := q.Checkpoint(true, []byte("pos"), func(k, v []byte) error {
				entries[string(k)] = slices.Clone(v)
				if strings.HasSuffix(string(k), "per_minutem") {
					meta = string(k)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			q = start()
			var order []string
			for k := range entries {
				if k != meta {
					order = append(order, k)
				}
			}
			sort.Strings(order)
			for _, k := range append(order, meta) {
				if _, err := q.Restore([]byte(k), entries[k]); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.FinishRestore(); err != nil {
				t.Fatal(err)
			}
		}
		input := "imp"
		if x.table {
			input = "clk"
		}
		if err := q.PushInput(input, x.raw); err != nil {
			t.Fatalf("row %d of %s: %v", n, input, err)
		}
		if !x.table {
			left--
			if left == 0 && endFirst {
				if err := q.EndInput("imp"); err != nil {
					t.Fatal(err)
				}
				if err := q.PushInput("imp", x.raw); !errors.Is(err, ubik.ErrClosed) {
					t.Fatalf("a push to the ended input: %v, want ErrClosed", err)
				}
			}
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	return got, q.Stats(), hooks
}
