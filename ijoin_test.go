package ubik_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
)

// The interval join tests: one generated history of impressions and
// clicks, with join keys that are NULL, NaN, ±0, ±Inf, strings with
// escapes and invalid UTF-8, run under shuffles of both inputs within
// their watermark delays, random interleavings, output bounds and
// checkpoint/restore at random points, must give byte-identical finals;
// and those finals must equal PostgreSQL's batch join and aggregate.

const ijoinSQL = `
CREATE SOURCE impressions (id BIGINT, tag VARCHAR, d DOUBLE, campaign VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND);
CREATE SOURCE clicks (impression_id BIGINT, tag VARCHAR, d DOUBLE, amount BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND);
SELECT i.campaign, TUMBLE_START(%[1]s.ts, INTERVAL '1' MINUTE) AS w, count(*) AS clicks, sum(c.amount) AS amount
FROM impressions i JOIN clicks c
  ON c.impression_id = i.id AND c.tag = i.tag AND i.d = c.d AND %[2]s
GROUP BY i.campaign, TUMBLE(%[1]s.ts, INTERVAL '1' MINUTE)`

// ijoinBounds are the time bounds tested, each as ubik and PostgreSQL
// write it.
var ijoinBounds = []struct{ ubik, pg string }{
	{"c.ts BETWEEN i.ts - INTERVAL '2' SECOND AND i.ts + INTERVAL '30' SECOND",
		"c.ts BETWEEN i.ts - interval '2 seconds' AND i.ts + interval '30 seconds'"},
	{"i.ts < c.ts + INTERVAL '20' SECOND AND c.ts < INTERVAL '5' SECOND + i.ts",
		"i.ts < c.ts + interval '20 seconds' AND c.ts < interval '5 seconds' + i.ts"},
	{"c.ts >= i.ts + INTERVAL '1' SECOND AND i.ts >= c.ts - INTERVAL '9' SECOND",
		"c.ts >= i.ts + interval '1 second' AND i.ts >= c.ts - interval '9 seconds'"},
}

type ijRow struct {
	id    *int64
	tag   *string
	d     *float64
	name  string // campaign (impressions) or amount text (clicks)
	ts    int64
	click bool
}

var ijTags = []string{`a"b`, "tab\there", "x\xffy", "x\xfey", "é\\n"}
var ijDoubles = []float64{math.NaN(), 0, math.Copysign(0, -1), 1.5, math.Inf(1), math.Inf(-1)}

func (r ijRow) json() []byte {
	var b strings.Builder
	if r.click {
		b.WriteString(`{"impression_id":`)
	} else {
		b.WriteString(`{"id":`)
	}
	if r.id == nil {
		b.WriteString("null")
	} else {
		fmt.Fprintf(&b, "%d", *r.id)
	}
	b.WriteString(`,"tag":`)
	if r.tag == nil {
		b.WriteString("null")
	} else if !strings.ContainsAny(*r.tag, "\xff\xfe") {
		j, _ := json.Marshal(*r.tag)
		b.Write(j)
	} else {
		b.WriteString(`"` + *r.tag + `"`) // raw invalid UTF-8
	}
	b.WriteString(`,"d":`)
	switch {
	case r.d == nil:
		b.WriteString("null")
	case math.IsNaN(*r.d):
		b.WriteString(`"NaN"`)
	case math.IsInf(*r.d, 1):
		b.WriteString(`"Infinity"`)
	case math.IsInf(*r.d, -1):
		b.WriteString(`"-Infinity"`)
	case *r.d == 0 && math.Signbit(*r.d):
		b.WriteString("-0.0")
	default:
		fmt.Fprintf(&b, "%g", *r.d)
	}
	if r.click {
		fmt.Fprintf(&b, `,"amount":%s,"ts":"%s"}`, r.name, ts(r.ts))
	} else {
		j, _ := json.Marshal(r.name)
		fmt.Fprintf(&b, `,"campaign":%s,"ts":"%s"}`, j, ts(r.ts))
	}
	return []byte(b.String())
}

// genIJoin makes n impressions and n clicks over span seconds, with
// duplicates (a row twice) and the edge cells above.
func genIJoin(seed uint64, n int, span int64) (imps, clicks []ijRow) {
	r := rand.New(rand.NewPCG(seed, 17))
	campaigns := []string{"c0", "c1", `c"2`, "c3\\"}
	mk := func(click bool) ijRow {
		row := ijRow{click: click, ts: joinBase + r.Int64N(span*1_000_000)}
		if r.IntN(30) != 0 {
			id := r.Int64N(8)
			row.id = &id
		}
		if r.IntN(30) != 0 {
			row.tag = &ijTags[r.IntN(len(ijTags))]
		}
		if r.IntN(30) != 0 {
			row.d = &ijDoubles[r.IntN(len(ijDoubles))]
		}
		if click {
			row.name = fmt.Sprint(r.IntN(100) - 20)
		} else {
			row.name = campaigns[r.IntN(len(campaigns))]
		}
		return row
	}
	for i := 0; i < n; i++ {
		imps = append(imps, mk(false))
		clicks = append(clicks, mk(true))
		if r.IntN(20) == 0 {
			imps = append(imps, imps[len(imps)-1])
		}
		if r.IntN(20) == 0 {
			clicks = append(clicks, clicks[len(clicks)-1])
		}
	}
	byTS := func(a, b ijRow) int { return cmpI(a.ts, b.ts) }
	slices.SortStableFunc(imps, byTS)
	slices.SortStableFunc(clicks, byTS)
	return imps, clicks
}

func ijInterleave(r *rand.Rand, imps, clicks []ijRow) []joinInput {
	out := make([]joinInput, 0, len(imps)+len(clicks))
	i, j := 0, 0
	for i < len(imps) || j < len(clicks) {
		if j == len(clicks) || i < len(imps) && r.IntN(len(imps)+len(clicks)) < len(imps) {
			out = append(out, joinInput{raw: imps[i].json()})
			i++
		} else {
			out = append(out, joinInput{table: true, raw: clicks[j].json()})
			j++
		}
	}
	return out
}

func TestIntervalJoinOrderIndependence(t *testing.T) {
	imps, clicks := genIJoin(3, 1500, 600)
	for bi, bd := range ijoinBounds {
		for _, side := range []string{"c", "i"} {
			t.Run(fmt.Sprintf("bound%d/time=%s", bi, side), func(t *testing.T) {
				sql := fmt.Sprintf(ijoinSQL, side, bd.ubik)
				// Reference: all impressions, then all clicks, in time order.
				var ref []joinInput
				for _, x := range imps {
					ref = append(ref, joinInput{raw: x.json()})
				}
				for _, x := range clicks {
					ref = append(ref, joinInput{table: true, raw: x.json()})
				}
				want := joinRun(t, sql, ref, 0, -1)
				if len(want) < 20 {
					t.Fatalf("only %d finals: the history is too small to test anything", len(want))
				}
				r := rand.New(rand.NewPCG(uint64(bi), 13))
				for trial := 0; trial < 12; trial++ {
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
					got := joinRunIncr(t, sql, in, bound, full, ckpt)
					if d := diffLines(want, got); d != "" {
						t.Fatalf("trial %d (bound %d, full checkpoint before %d, restore before %d): finals differ:\n%s", trial, bound, full, ckpt, d)
					}
				}
			})
		}
	}
}

// TestIntervalJoinOracle holds the finals to PostgreSQL's batch join.
func TestIntervalJoinOracle(t *testing.T) {
	imps, clicks := genIJoin(5, 2500, 900)
	dsn := testenv.RequirePostgres(t)
	sc := &testenv.PGScript{}
	sc.Exec(`SET TIME ZONE 'UTC'`)
	sc.Exec(`CREATE TEMP TABLE impressions (id bigint, tag text, d float8, campaign text, ts timestamp)`)
	sc.Exec(`CREATE TEMP TABLE clicks (impression_id bigint, tag text, d float8, amount bigint, ts timestamp)`)
	cells := func(x ijRow) []any {
		var id, tag, d any
		if x.id != nil {
			id = *x.id
		}
		if x.tag != nil {
			tag = changelog.RepairUTF8(*x.tag)
		}
		if x.d != nil {
			d = *x.d
		}
		var name any = x.name
		if x.click {
			var n int64
			fmt.Sscan(x.name, &n)
			name = n
		}
		return []any{id, tag, d, name, time.UnixMicro(x.ts).UTC()}
	}
	var rows [][]any
	for _, x := range imps {
		rows = append(rows, cells(x))
	}
	sc.CopyIn(t, "impressions", []string{"id", "tag", "d", "campaign", "ts"}, rows)
	rows = nil
	for _, x := range clicks {
		rows = append(rows, cells(x))
	}
	sc.CopyIn(t, "clicks", []string{"impression_id", "tag", "d", "amount", "ts"}, rows)
	type job struct {
		sql  string
		side string
		idx  int
	}
	var jobs []job
	for _, bd := range ijoinBounds {
		for _, side := range []string{"c", "i"} {
			pg := fmt.Sprintf(`SELECT i.campaign, date_trunc('minute', %[1]s.ts), i.campaign, date_trunc('minute', %[1]s.ts), count(*), sum(c.amount)
FROM impressions i JOIN clicks c ON c.impression_id = i.id AND c.tag = i.tag AND i.d = c.d AND %[2]s
GROUP BY i.campaign, date_trunc('minute', %[1]s.ts)`, side, bd.pg)
			jobs = append(jobs, job{fmt.Sprintf(ijoinSQL, side, bd.ubik), side, sc.Query(pg)})
		}
	}
	res := sc.Run(t, dsn)
	keyT := []types.Type{types.Varchar, types.Timestamp}
	valT := []types.Type{types.Varchar, types.Timestamp, types.BigInt, types.HugeInt}
	cols := []string{"campaign", "w", "clicks", "amount"}
	for n, jb := range jobs {
		t.Run(fmt.Sprintf("%d/time=%s", n/2, jb.side), func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(n)))
			in := ijInterleave(r, shuffleWithin(r, imps, func(x ijRow) int64 { return x.ts }, 4_000_000),
				shuffleWithin(r, clicks, func(x ijRow) int64 { return x.ts }, 3_000_000))
			got := joinRun(t, jb.sql, in, 0, -1)
			var want []string
			for _, row := range res[jb.idx] {
				key := make([]types.Value, len(keyT))
				for i, kt := range keyT {
					key[i] = pgCell(t, row[i], kt)
				}
				val := make([]types.Value, len(valT))
				for i, vt := range valT {
					val[i] = pgCell(t, row[len(keyT)+i], vt)
				}
				want = append(want, string(changelog.AppendKey(nil, key))+"\t"+string(changelog.AppendValue(nil, cols, val)))
			}
			sort.Strings(want)
			if len(want) < 20 {
				t.Fatalf("the oracle has only %d rows", len(want))
			}
			if d := diffLines(want, got); d != "" {
				t.Fatalf("ubik differs from PostgreSQL:\n%s", d)
			}
		})
	}
}

// TestIntervalJoinStateDropped drives one input far ahead: the other's
// rows are dropped as soon as its watermark makes a match impossible,
// and a row behind its input's watermark is late (counted, handed to the
// hook, not joined).
func TestIntervalJoinStateDropped(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var finals int
	var late, lateRight []string
	q, err := eng.Start(fmt.Sprintf(ijoinSQL, "c", ijoinBounds[0].ubik), ubik.QueryOptions{
		OnRecord: func(r changelog.Record) error {
			if r.Meta.Final {
				finals++
			}
			return nil
		},
		OnLate:      func(ev *ubik.LateEvent) { late = append(late, string(ev.Event)) },
		OnLateTable: func(ev *ubik.LateEvent) { lateRight = append(lateRight, string(ev.Event)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	id, tag, d := int64(1), "k", 1.5
	imp := func(sec int64) []byte {
		return ijRow{id: &id, tag: &tag, d: &d, name: "c0", ts: joinBase + sec*1_000_000}.json()
	}
	click := func(sec int64) []byte {
		return ijRow{id: &id, tag: &tag, d: &d, name: "1", ts: joinBase + sec*1_000_000, click: true}.json()
	}
	for s := int64(0); s < 1000; s++ {
		if err := q.PushInput("impressions", imp(s)); err != nil {
			t.Fatal(err)
		}
	}
	if st := q.Stats().Interval; st.LeftHeld != 1000 || st.RightHeld != 0 {
		t.Fatalf("before any click: %+v", st)
	}
	// One click at 2000 s: the clicks' watermark is 1997 s, so every
	// impression before 1997 - 30 s can match no click still to come.
	if err := q.PushInput("clicks", click(2000)); err != nil {
		t.Fatal(err)
	}
	st := q.Stats().Interval
	if st.LeftHeld != 0 || st.Dropped != 1000 || st.Matches != 0 {
		t.Fatalf("the impressions were not dropped: %+v", st)
	}
	// The click waits for impressions up to 2002 s, until the
	// impressions' watermark passes 2002.
	if st.RightHeld != 1 {
		t.Fatalf("the click is not held: %+v", st)
	}
	if err := q.PushInput("impressions", imp(1999)); err != nil { // matches the click (2000 - 1999 = 1 s)
		t.Fatal(err)
	}
	if err := q.PushInput("impressions", imp(2010)); err != nil { // watermark 2006: the click goes
		t.Fatal(err)
	}
	st = q.Stats().Interval
	if st.RightHeld != 0 || st.Matches != 1 || st.LeftHeld != 2 {
		t.Fatalf("after the impressions passed the click: %+v", st)
	}
	// Late rows: a click behind the clicks' watermark (1997 s) and an
	// impression behind the impressions' (2006 s).
	if err := q.PushInput("clicks", click(1990)); err != nil {
		t.Fatal(err)
	}
	if err := q.PushInput("impressions", imp(2000)); err != nil {
		t.Fatal(err)
	}
	st = q.Stats().Interval
	if st.LateRight != 1 || st.LateLeft != 1 || st.Matches != 1 || len(late) != 1 || len(lateRight) != 1 {
		t.Fatalf("late rows: %+v, hooks %q %q", st, late, lateRight)
	}
	if qs := q.Stats(); qs.Table.Late != 1 || qs.Late != int64(len(late)) {
		t.Fatalf("query counters: right late %d, late %d with %d handed to OnLate", qs.Table.Late, qs.Late, len(late))
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if st = q.Stats().Interval; st.LeftHeld != 0 || st.RightHeld != 0 || finals != 1 {
		t.Fatalf("after Close: %+v, %d finals", st, finals)
	}
}

// TestIntervalJoinBoundedState: over a long history in time order, the
// rows held stay those of the bound's span, not the history's.
func TestIntervalJoinBoundedState(t *testing.T) {
	imps, clicks := genIJoin(9, 20000, 20000)
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	q, err := eng.Start(fmt.Sprintf(ijoinSQL, "c", ijoinBounds[0].ubik), ubik.QueryOptions{OnRecord: func(changelog.Record) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	// Both inputs merged by time, each within its delay.
	var in []joinInput
	for i, j := 0, 0; i < len(imps) || j < len(clicks); {
		if j == len(clicks) || i < len(imps) && imps[i].ts <= clicks[j].ts {
			in = append(in, joinInput{raw: imps[i].json()})
			i++
		} else {
			in = append(in, joinInput{table: true, raw: clicks[j].json()})
			j++
		}
	}
	for _, x := range in {
		if x.table {
			err = q.PushInput("clicks", x.raw)
		} else {
			err = q.PushInput("impressions", x.raw)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	st := q.Stats().Interval
	// About one row a second per input: an impression is held for the
	// upper bound (30 s) and the clicks' delay (3 s), a click for the
	// impressions' delay (4 s) less the lower bound (2 s); the peaks
	// allow for bursts (22 clicks fall in one 7 s span of this history).
	if st.LeftPeak > 80 || st.RightPeak > 30 || st.LeftHeld+st.RightHeld > 100 || st.Matches < 1000 {
		t.Fatalf("state not bounded by the watermarks: %+v", st)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkIntervalJoinQuery pushes one row of each input per iteration
// (1,000 keys, 1 ms apart, each click 0-2 s after its impression, a 5 s
// bound): the cost of a matched pair against a plain aggregation of the
// same rows.
func BenchmarkIntervalJoinQuery(b *testing.B) {
	const src = `CREATE SOURCE l (k VARCHAR, q BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE r (k VARCHAR, q BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);`
	for _, c := range []struct{ name, sql string }{
		{"plain", src + `SELECT l.k, sum(l.q) AS total FROM l GROUP BY l.k, TUMBLE(l.ts, INTERVAL '1' MINUTE)`},
		{"join", src + `SELECT l.k, sum(l.q * r.q) AS total FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts AND l.ts + INTERVAL '5' SECOND GROUP BY l.k, TUMBLE(r.ts, INTERVAL '1' MINUTE)`},
	} {
		b.Run(c.name, func(b *testing.B) {
			eng, _ := ubik.Open(ubik.DefaultOptions())
			q, err := eng.Start(c.sql, ubik.QueryOptions{OnRecord: func(changelog.Record) error { return nil }})
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]ubik.Value, 1000)
			for i := range keys {
				keys[i] = ubik.Varchar(fmt.Sprintf("k%d", i))
			}
			row := make([]ubik.Value, 3)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ts := joinBase + int64(i)*1000
				row[0], row[1], row[2] = keys[i%len(keys)], ubik.BigInt(3), ubik.TimestampMicros(ts)
				if err := q.PushRow(row); err != nil {
					b.Fatal(err)
				}
				row[0], row[1], row[2] = keys[(i+500)%len(keys)], ubik.BigInt(2), ubik.TimestampMicros(ts+int64(i%2000)*1000-1_000_000)
				if c.name == "join" {
					err = q.PushInputRow("r", row)
				} else {
					err = q.PushRow(row)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if c.name == "join" {
				st := q.Stats().Interval
				b.ReportMetric(float64(st.Matches)/float64(b.N), "matches/op")
				b.ReportMetric(float64(st.LeftPeak+st.RightPeak), "peak-rows")
			}
		})
	}
}

// TestIntervalJoinRangeEdges: rows at the ends of the TIMESTAMP range
// with bounds of a day on either side match without wrapping.
func TestIntervalJoinRangeEdges(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	q, err := eng.Start(`CREATE SOURCE l (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE r (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT l.k, count(*) AS n FROM l JOIN r ON l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '1' DAY AND l.ts + INTERVAL '1' DAY GROUP BY l.k`,
		ubik.QueryOptions{OnRecord: func(r changelog.Record) error { out = append(out, string(r.Value)); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		in, line string
	}{
		{"r", `{"k":2,"ts":"290309-12-22 (BC) 00:00:00"}`},
		{"l", `{"k":2,"ts":"290309-12-22 (BC) 00:00:01"}`},
		{"l", `{"k":1,"ts":"294247-01-10 04:00:00"}`},
		{"r", `{"k":1,"ts":"294247-01-10 04:00:54"}`},
	} {
		if err := q.PushInput(x.in, []byte(x.line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats().Interval; st.Matches != 2 || len(out) != 2 {
		t.Fatalf("matches %d, records %q", st.Matches, out)
	}
}

// TestIntervalJoinEndFirstInput: the left input ends on its own
// (EndInput): the right rows that follow are matched with the held left
// rows and never held, a left row pushed after it is refused, and ending
// twice is a no-op. A temporal join's stream still ends with Close.
func TestIntervalJoinEndFirstInput(t *testing.T) {
	eng, _ := ubik.Open(ubik.DefaultOptions())
	var finals int
	q, err := eng.Start(fmt.Sprintf(ijoinSQL, "c", ijoinBounds[0].ubik), ubik.QueryOptions{OnRecord: func(r changelog.Record) error {
		if r.Meta.Final {
			finals++
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	id, tag, d := int64(1), "k", 1.5
	imp := func(sec int64) []byte {
		return ijRow{id: &id, tag: &tag, d: &d, name: "c0", ts: joinBase + sec*1_000_000}.json()
	}
	click := func(sec int64) []byte {
		return ijRow{id: &id, tag: &tag, d: &d, name: "1", ts: joinBase + sec*1_000_000, click: true}.json()
	}
	for s := int64(0); s < 10; s++ {
		if err := q.PushInput("impressions", imp(s)); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := q.EndInput("impressions"); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.PushInput("impressions", imp(20)); !errors.Is(err, ubik.ErrClosed) {
		t.Fatalf("an impression after its input ended: %v, want ErrClosed", err)
	}
	for s := int64(0); s < 1000; s++ {
		if err := q.PushInput("clicks", click(s)); err != nil {
			t.Fatal(err)
		}
	}
	st := q.Stats().Interval
	if st.Matches == 0 || st.RightHeld != 0 || st.RightPeak != 0 {
		t.Fatalf("after the impressions ended the clicks are held: %+v", st)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if finals == 0 {
		t.Fatal("no final record")
	}

	tq, err := eng.Start(fmt.Sprintf(joinSQL, ""), ubik.QueryOptions{OnRecord: func(changelog.Record) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := tq.EndInput("usage"); err == nil || !strings.Contains(err.Error(), "ends with Close") {
		t.Fatalf("EndInput of a temporal join's stream: %v", err)
	}
}
