package ubik_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/internal/types"
)

// The temporal join tests: one generated history of usage events and
// price versions, run under shuffles of both inputs within their
// watermark delays, random interleavings of the two inputs, output bounds
// and checkpoint/restore at random points, must give byte-identical final
// records; and those finals must equal PostgreSQL's batch answer (the
// latest version at or before each event's time, by a LATERAL query).

const joinSQL = `
CREATE SOURCE usage (customer VARCHAR, plan VARCHAR, qty DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE TABLE prices (plan VARCHAR, price DECIMAL(12,6), valid_from TIMESTAMP,
  PRIMARY KEY (plan) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '3' SECOND);
SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '1' MINUTE) AS m, p.plan, sum(u.qty * p.price) AS charge,
  count(*) AS events, max(p.price) AS top
FROM usage u %s JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.plan = p.plan
GROUP BY u.customer, p.plan, TUMBLE(u.ts, INTERVAL '1' MINUTE)`

type joinEvent struct {
	customer string
	plan     *string
	qty      string // DECIMAL(10,2) text
	ts       int64
}

type joinVersion struct {
	plan  string
	price string // DECIMAL(12,6) text
	ts    int64
}

func (e joinEvent) json() []byte {
	plan := "null"
	if e.plan != nil {
		plan = `"` + *e.plan + `"`
	}
	return fmt.Appendf(nil, `{"customer":"%s","plan":%s,"qty":"%s","ts":"%s"}`, e.customer, plan, e.qty, ts(e.ts))
}

func (v joinVersion) json() []byte {
	return fmt.Appendf(nil, `{"plan":"%s","price":"%s","valid_from":"%s"}`, v.plan, v.price, ts(v.ts))
}

const joinBase = int64(1_784_368_800_000_000) // 2026-07-18 10:00:00

// genJoin makes n events over span seconds and the price versions of five
// plans (one with no version, so inner and left joins differ), each plan's
// versions at distinct whole seconds.
func genJoin(seed uint64, n int, span int64) ([]joinEvent, []joinVersion) {
	r := rand.New(rand.NewPCG(seed, 7))
	plans := []string{"basic", "pro", "team", "gold", "none"}
	var vs []joinVersion
	for _, p := range plans[:4] {
		used := map[int64]bool{}
		for k := 0; k < 3+r.IntN(12); k++ {
			s := r.Int64N(span)
			if used[s] {
				continue
			}
			used[s] = true
			vs = append(vs, joinVersion{plan: p, price: fmt.Sprintf("%d.%06d", r.IntN(3), r.IntN(1_000_000)), ts: joinBase + s*1_000_000})
		}
	}
	evs := make([]joinEvent, n)
	for i := range evs {
		e := joinEvent{customer: fmt.Sprintf("c%d", r.IntN(6)), qty: fmt.Sprintf("%d.%02d", r.IntN(50), r.IntN(100)),
			ts: joinBase + r.Int64N(span*1_000_000)}
		if r.IntN(25) != 0 {
			p := plans[r.IntN(len(plans))]
			e.plan = &p
		}
		evs[i] = e
	}
	slices.SortFunc(evs, func(a, b joinEvent) int { return cmpI(a.ts, b.ts) })
	slices.SortFunc(vs, func(a, b joinVersion) int { return cmpI(a.ts, b.ts) })
	return evs, vs
}

func cmpI(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// shuffleWithin reorders items so that none is late: sorted by time plus
// a jitter below the delay, each item comes after no item more than the
// delay later than it.
func shuffleWithin[T any](r *rand.Rand, items []T, at func(T) int64, delay int64) []T {
	type keyed struct {
		k int64
		v T
	}
	ks := make([]keyed, len(items))
	for i, it := range items {
		ks[i] = keyed{at(it) + r.Int64N(delay), it}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmpI(a.k, b.k) })
	out := make([]T, len(items))
	for i := range ks {
		out[i] = ks[i].v
	}
	return out
}

type joinInput struct {
	table bool
	raw   []byte
}

// joinRun runs the inputs in order through one query, optionally pulling
// with Next under a small bound, and checkpointing and restoring into a
// new query before input ckptAt (-1: never). It returns the final records
// as sorted "key<TAB>value" lines.
func joinRun(t *testing.T, sql string, in []joinInput, bound int, ckptAt int) []string {
	return joinRunIncr(t, sql, in, bound, -1, ckptAt)
}

// joinRunIncr is joinRun with a full checkpoint before input fullAt (-1:
// none) kept by the host, and an incremental one before ckptAt applied to
// it (a nil value deletes an entry), from which the new query restores.
func joinRunIncr(t *testing.T, sql string, in []joinInput, bound int, fullAt, ckptAt int) []string {
	t.Helper()
	return joinRunNamed(t, sql, "", in, bound, fullAt, ckptAt)
}

// joinRunNamed is joinRunIncr for the script's query name (a query over a
// view: the graph of it and its views).
func joinRunNamed(t *testing.T, sql, name string, in []joinInput, bound int, fullAt, ckptAt int) []string {
	t.Helper()
	opts := ubik.DefaultOptions()
	if bound > 0 {
		opts.MaxPendingRecords = bound
	}
	eng, err := ubik.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var finals []string
	take := func(r changelog.Record) error {
		if r.Meta.Final {
			finals = append(finals, string(r.Key)+"\t"+string(r.Value))
		}
		return nil
	}
	start := func() *ubik.Query {
		qo := ubik.QueryOptions{Name: name}
		if bound == 0 {
			qo.OnRecord = take
		}
		q, err := eng.Start(sql, qo)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	drain := func(q *ubik.Query) {
		for r := range q.Records() {
			_ = take(r)
		}
	}
	q := start()
	retry := func(f func() error) {
		for {
			err := f()
			if !errors.Is(err, ubik.ErrBackpressure) {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			drain(q)
		}
	}
	entries := map[string][]byte{}
	checkpoint := func(full bool) {
		retry(func() error {
			return q.Checkpoint(full, []byte("pos"), func(k, v []byte) error {
				if v == nil {
					delete(entries, string(k))
				} else {
					entries[string(k)] = slices.Clone(v)
				}
				return nil
			})
		})
	}
	for i, x := range in {
		if i == fullAt {
			checkpoint(true)
		}
		if i == ckptAt {
			checkpoint(fullAt < 0 || fullAt >= ckptAt)
			drain(q) // records rendered before the checkpoint are the host's
			q = start()
			meta := "m" // a graph's: the primary's, under its name
			if _, ok := entries[meta]; !ok && name != "" {
				meta = string(rune(len(name))) + name + "m"
			}
			order := make([]string, 0, len(entries))
			for k := range entries {
				if k != meta {
					order = append(order, k)
				}
			}
			sort.Strings(order)
			order = append(order, meta) // the meta entry last
			for _, k := range order {
				if _, err := q.Restore([]byte(k), entries[k]); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.FinishRestore(); err != nil {
				t.Fatal(err)
			}
		}
		if x.table {
			retry(func() error { return q.PushTable(x.raw) })
		} else {
			retry(func() error { return q.Push(x.raw) })
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	drain(q)
	st := q.Stats()
	if st.Late != 0 || st.Malformed != 0 || st.EvalErrors != 0 || st.Table.Late != 0 || st.Table.Malformed != 0 {
		t.Fatalf("unexpected rejects: %+v", st)
	}
	if st.Join.Buffered != 0 {
		t.Fatalf("%d events still wait after Close", st.Join.Buffered)
	}
	sort.Strings(finals)
	return finals
}

// interleave merges the two inputs in a random order.
func interleave(r *rand.Rand, evs []joinEvent, vs []joinVersion) []joinInput {
	out := make([]joinInput, 0, len(evs)+len(vs))
	i, j := 0, 0
	for i < len(evs) || j < len(vs) {
		if j == len(vs) || i < len(evs) && r.IntN(len(evs)+len(vs)) < len(evs) {
			out = append(out, joinInput{raw: evs[i].json()})
			i++
		} else {
			out = append(out, joinInput{table: true, raw: vs[j].json()})
			j++
		}
	}
	return out
}

func TestTemporalJoinOrderIndependence(t *testing.T) {
	for _, kind := range []string{"", "LEFT"} {
		t.Run("join="+kind, func(t *testing.T) {
			sql := fmt.Sprintf(joinSQL, kind)
			evs, vs := genJoin(3, 3000, 600)
			// Reference: the table first, then the events, both in time order.
			var ref []joinInput
			for _, v := range vs {
				ref = append(ref, joinInput{table: true, raw: v.json()})
			}
			for _, e := range evs {
				ref = append(ref, joinInput{raw: e.json()})
			}
			want := joinRun(t, sql, ref, 0, -1)
			if len(want) < 100 {
				t.Fatalf("only %d finals: the history is too small to test anything", len(want))
			}
			r := rand.New(rand.NewPCG(11, 13))
			for trial := 0; trial < 30; trial++ {
				se := shuffleWithin(r, evs, func(e joinEvent) int64 { return e.ts }, 5_000_000)
				sv := shuffleWithin(r, vs, func(v joinVersion) int64 { return v.ts }, 3_000_000)
				in := interleave(r, se, sv)
				bound := []int{0, 1, 7}[trial%3]
				ckpt := -1
				if trial%2 == 1 {
					ckpt = r.IntN(len(in))
				}
				full := -1
				if trial%4 == 3 {
					full = r.IntN(ckpt + 1) // an incremental checkpoint over a full one
				}
				got := joinRunIncr(t, sql, in, bound, full, ckpt)
				if d := diffLines(want, got); d != "" {
					t.Fatalf("trial %d (bound %d, full checkpoint before input %d, restore before %d): finals differ from the reference:\n%s", trial, bound, full, ckpt, d)
				}
			}
		})
	}
}

func diffLines(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	w := map[string]bool{}
	for _, l := range want {
		w[l] = true
	}
	g := map[string]bool{}
	for _, l := range got {
		g[l] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "want %d finals, got %d\n", len(want), len(got))
	n := 0
	for _, l := range want {
		if !g[l] && n < 5 {
			fmt.Fprintf(&b, "- %s\n", l)
			n++
		}
	}
	for _, l := range got {
		if !w[l] && n < 10 {
			fmt.Fprintf(&b, "+ %s\n", l)
			n++
		}
	}
	return b.String()
}

// TestTemporalJoinOracle holds the finals to PostgreSQL: the same join in
// batch, each event with the latest version at or before its time
// (LATERAL ... ORDER BY valid_from DESC LIMIT 1).
func TestTemporalJoinOracle(t *testing.T) {
	evs, vs := genJoin(5, 4000, 900)
	dsn := testenv.RequirePostgres(t)
	sc := &testenv.PGScript{}
	sc.Exec(`SET TIME ZONE 'UTC'`)
	sc.Exec(`CREATE TEMP TABLE usage (customer text, plan text, qty numeric(10,2), ts timestamp)`)
	sc.Exec(`CREATE TEMP TABLE prices (plan text, price numeric(12,6), valid_from timestamp)`)
	rows := make([][]any, len(evs))
	for i, e := range evs {
		var plan any
		if e.plan != nil {
			plan = *e.plan
		}
		rows[i] = []any{e.customer, plan, e.qty, time.UnixMicro(e.ts).UTC()}
	}
	sc.CopyIn(t, "usage", []string{"customer", "plan", "qty", "ts"}, rows)
	rows = make([][]any, len(vs))
	for i, v := range vs {
		rows[i] = []any{v.plan, v.price, time.UnixMicro(v.ts).UTC()}
	}
	sc.CopyIn(t, "prices", []string{"plan", "price", "valid_from"}, rows)
	pg := `SELECT u.customer, p.plan, date_trunc('minute', u.ts), u.customer, date_trunc('minute', u.ts), p.plan,
  sum(u.qty * p.price), count(*), max(p.price)
FROM usage u %s JOIN LATERAL (SELECT * FROM prices v WHERE v.plan = u.plan AND v.valid_from <= u.ts
  ORDER BY v.valid_from DESC LIMIT 1) p ON true
GROUP BY u.customer, p.plan, date_trunc('minute', u.ts)`
	inner := sc.Query(fmt.Sprintf(pg, "INNER"))
	left := sc.Query(fmt.Sprintf(pg, "LEFT"))
	res := sc.Run(t, dsn)
	dec := types.Decimal(38, 8)
	keyT := []types.Type{types.Varchar, types.Varchar, types.Timestamp}
	valT := []types.Type{types.Varchar, types.Timestamp, types.Varchar, dec, types.BigInt, types.Decimal(12, 6)}
	cols := []string{"customer", "m", "plan", "charge", "events", "top"}
	for _, c := range []struct {
		kind string
		idx  int
	}{{"", inner}, {"LEFT", left}} {
		t.Run("join="+c.kind, func(t *testing.T) {
			var in []joinInput
			r := rand.New(rand.NewPCG(1, 2))
			in = interleave(r, shuffleWithin(r, evs, func(e joinEvent) int64 { return e.ts }, 5_000_000),
				shuffleWithin(r, vs, func(v joinVersion) int64 { return v.ts }, 3_000_000))
			got := joinRun(t, fmt.Sprintf(joinSQL, c.kind), in, 0, -1)
			var want []string
			for _, row := range res[c.idx] {
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
			if len(want) < 100 {
				t.Fatalf("the oracle has only %d rows", len(want))
			}
			if d := diffLines(want, got); d != "" {
				t.Fatalf("ubik differs from PostgreSQL:\n%s", d)
			}
		})
	}
}

// TestTemporalJoinAPI: typed rows on both inputs (a stream with a computed
// event time), inputs by name, a registered versioned table checked at
// compile time, and a query without a table refusing table input.
func TestTemporalJoinAPI(t *testing.T) {
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	q, err := eng.Start(`CREATE SOURCE s (k VARCHAR, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3), WATERMARK FOR ts AS ts);
CREATE TABLE t (k VARCHAR, x BIGINT, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt);
SELECT s.k, sum(t.x) AS total FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k GROUP BY s.k`,
		ubik.QueryOptions{OnRecord: func(r changelog.Record) error { out = append(out, string(r.Value)); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.PushTableRow([]ubik.Value{ubik.Varchar("a"), ubik.BigInt(7), ubik.TimestampMicros(joinBase)}); err != nil {
		t.Fatal(err)
	}
	if err := q.PushTableRow([]ubik.Value{ubik.Varchar("a"), ubik.Varchar("x"), ubik.TimestampMicros(joinBase)}); err == nil {
		t.Fatal("a table row of the wrong kinds was taken")
	}
	if err := q.PushRow([]ubik.Value{ubik.Varchar("a"), ubik.BigInt(joinBase/1000 + 1)}); err != nil {
		t.Fatal(err)
	}
	if err := q.PushInput("T", []byte(`{"k":"a","x":1,"vt":"2026-07-18 10:00:05"}`)); err != nil {
		t.Fatal(err)
	}
	if err := q.PushInput("s", []byte(`{"k":"a","ms":1784368806000}`)); err != nil {
		t.Fatal(err)
	}
	if err := q.PushInput("nope", nil); err == nil || !strings.Contains(err.Error(), "its inputs: s, t") {
		t.Fatalf("an unknown input: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 || out[len(out)-1] != `{"k": "a", "total": 8}` {
		t.Fatalf("records %q", out)
	}
	if st := q.Stats(); st.Table.RowsIn != 3 || st.Table.Malformed != 1 || st.Join.Joined != 2 {
		t.Fatalf("stats %+v", st)
	}
	plain, err := eng.Start(`CREATE SOURCE s2 (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts); SELECT k, count(*) FROM s2 GROUP BY k`, ubik.QueryOptions{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.PushTable([]byte(`{}`)); err == nil {
		t.Fatal("a query without a table took a table row")
	}
	bad := ubik.DefaultOptions()
	e2, _ := ubik.Open(bad)
	if err := ubik.RegisterRawSource(e2, plan.Source{Name: "v", Columns: []plan.Column{{Name: "k", Type: types.Varchar}}, TimeCol: -1, PrimaryKey: []int{0}}); err != nil {
		t.Fatal(err)
	}
	_, err = e2.Start(`CREATE SOURCE s3 (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts); SELECT s3.k, count(*) FROM s3 JOIN v FOR SYSTEM_TIME AS OF s3.ts ON s3.k = v.k GROUP BY s3.k`, ubik.QueryOptions{})
	if !errors.Is(err, plan.ErrInvalidSource) {
		t.Fatalf("a versioned table without a time: %v", err)
	}
}

// BenchmarkTemporalJoinQuery compares one query over the same events with
// and without a temporal join (1,000 plans, a price change every 10
// events), per event through PushRow.
func BenchmarkTemporalJoinQuery(b *testing.B) {
	const src = `CREATE SOURCE s (k VARCHAR, q BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE TABLE p (k VARCHAR, price BIGINT, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt - INTERVAL '1' SECOND);`
	for _, c := range []struct{ name, sql string }{
		{"plain", src + `SELECT s.k, sum(s.q) AS total FROM s GROUP BY s.k, TUMBLE(s.ts, INTERVAL '1' MINUTE)`},
		{"join", src + `SELECT s.k, sum(s.q * p.price) AS total FROM s JOIN p FOR SYSTEM_TIME AS OF s.ts ON s.k = p.k GROUP BY s.k, TUMBLE(s.ts, INTERVAL '1' MINUTE)`},
	} {
		b.Run(c.name, func(b *testing.B) {
			eng, _ := ubik.Open(ubik.DefaultOptions())
			q, err := eng.Start(c.sql, ubik.QueryOptions{OnRecord: func(changelog.Record) error { return nil }})
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]ubik.Value, 1000)
			for i := range keys {
				keys[i] = ubik.Varchar(fmt.Sprintf("plan%d", i))
				if c.name == "join" {
					q.PushTableRow([]ubik.Value{keys[i], ubik.BigInt(1), ubik.TimestampMicros(joinBase)})
				}
			}
			row := make([]ubik.Value, 3)
			trow := make([]ubik.Value, 3)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ts := joinBase + int64(i)*1000
				if c.name == "join" && i%10 == 0 {
					trow[0], trow[1], trow[2] = keys[(i*7)%len(keys)], ubik.BigInt(int64(i%5)), ubik.TimestampMicros(ts)
					if err := q.PushTableRow(trow); err != nil {
						b.Fatal(err)
					}
				}
				row[0], row[1], row[2] = keys[i%len(keys)], ubik.BigInt(3), ubik.TimestampMicros(ts)
				if err := q.PushRow(row); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTemporalJoinHostWatermark: a watermark the host advances reaches
// the windows only as far as the oldest waiting event (so that event is
// not late when it is released), and survives a checkpoint.
func TestTemporalJoinHostWatermark(t *testing.T) {
	sql := fmt.Sprintf(joinSQL, "LEFT")
	eng, _ := ubik.Open(ubik.DefaultOptions())
	var finals []string
	start := func() *ubik.Query {
		q, err := eng.Start(sql, ubik.QueryOptions{OnRecord: func(r changelog.Record) error {
			if r.Meta.Final {
				finals = append(finals, string(r.Value))
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q := start()
	plan := "basic"
	push := func(q *ubik.Query, sec int64) {
		if err := q.Push(joinEvent{customer: "c", plan: &plan, qty: "1.00", ts: joinBase + sec*1_000_000}.json()); err != nil {
			t.Fatal(err)
		}
	}
	push(q, 10)
	// The host moves the stream watermark two minutes on; the event at
	// 10s still waits for the table, so no window may finalize yet.
	if err := q.AdvanceWatermark(time.UnixMicro(joinBase + 120_000_000)); err != nil {
		t.Fatal(err)
	}
	if len(finals) != 0 || q.Stats().Watermark > joinBase+10_000_000 {
		t.Fatalf("the windows moved past a waiting event: finals %v, watermark %d", finals, q.Stats().Watermark)
	}
	entries := map[string][]byte{}
	if err := q.Checkpoint(true, nil, func(k, v []byte) error { entries[string(k)] = slices.Clone(v); return nil }); err != nil {
		t.Fatal(err)
	}
	q = start()
	for _, k := range []string{"j", "m"} {
		if _, err := q.Restore([]byte(k), entries[k]); err != nil {
			t.Fatal(err)
		}
	}
	q.FinishRestore()
	// The table passes 10s: the event joins, and the host's watermark
	// (restored) finalizes its minute.
	if err := q.PushTable(joinVersion{plan: "basic", price: "2.000000", ts: joinBase + 20_000_000}.json()); err != nil {
		t.Fatal(err)
	}
	if len(finals) != 1 || !strings.Contains(finals[0], `"events": 1`) {
		t.Fatalf("finals %v", finals)
	}
}
