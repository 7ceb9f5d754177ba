package ubik_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/testenv"
)

// Random aggregating queries over joins whose two inputs have the same
// column names (k, g, a, b, ts on both sides), checked against
// PostgreSQL's batch join and aggregate over the same rows: every
// aggregate, FILTER and GROUP BY term names a side, and a query mixing
// them must keep each side's column its own. The rows arrive in time
// order, so none is late and the batch answer is the whole answer.

const identGenSources = `
CREATE SOURCE l (k VARCHAR, g BIGINT, a BIGINT, b BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE SOURCE r (k VARCHAR, g BIGINT, a BIGINT, b BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
CREATE TABLE t (k VARCHAR, g BIGINT, a BIGINT, b BIGINT, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND);
`

// identRow is one row of l, r or t.
type identRow struct {
	input   string
	k       *string
	g, a, b *int64
	ts      int64 // µs
}

func (x identRow) json() []byte {
	cell := func(v *int64) string {
		if v == nil {
			return "null"
		}
		return fmt.Sprint(*v)
	}
	k := "null"
	if x.k != nil {
		k = `"` + *x.k + `"`
	}
	return fmt.Appendf(nil, `{"k":%s,"g":%s,"a":%s,"b":%s,"ts":"%s"}`, k, cell(x.g), cell(x.a), cell(x.b),
		time.UnixMicro(x.ts).UTC().Format("2006-01-02 15:04:05.000000"))
}

// genIdentRows makes the rows of the three inputs in one time order.
func genIdentRows(r *rand.Rand, n int) []identRow {
	num := func(span int64) *int64 {
		if r.IntN(8) == 0 {
			return nil
		}
		v := r.Int64N(span) - span/3
		return &v
	}
	out := make([]identRow, n)
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for i := range out {
		ts += 1 + r.Int64N(700_000)
		in := []string{"l", "r", "t"}[r.IntN(3)]
		x := identRow{input: in, g: num(4), a: num(9), b: num(30), ts: ts}
		if in == "t" || r.IntN(15) != 0 { // a table row always has its key
			k := string(rune('p' + r.IntN(4)))
			x.k = &k
		}
		out[i] = x
	}
	return out
}

// identQuery is one generated query, as ubik and PostgreSQL write it,
// with its output columns (the group terms first).
type identQuery struct {
	ubik, pg string
	keys     int
	cols     []string
}

// identViews are two views over l and r whose columns have the same
// names, as ubik and PostgreSQL write them.
const identViews = `
CREATE VIEW vl AS SELECT k, g, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, sum(a) AS a, max(b) AS b
  FROM l GROUP BY k, g, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW vr AS SELECT k, g, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, sum(a) AS a, max(b) AS b
  FROM r GROUP BY k, g, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
`

const identPGViews = `WITH vl AS (SELECT k, g, timestamp 'epoch' + floor(extract(epoch FROM ts) / 10) * interval '10 seconds' AS ws,
  sum(a) AS a, max(b) AS b FROM l GROUP BY 1, 2, 3),
vr AS (SELECT k, g, timestamp 'epoch' + floor(extract(epoch FROM ts) / 10) * interval '10 seconds' AS ws,
  sum(a) AS a, max(b) AS b FROM r GROUP BY 1, 2, 3) `

// genIdentQuery writes a query over a temporal join (the table t), an
// interval join (the stream r) or a window join of the views vl and vr,
// with aliases or the inputs' names.
func genIdentQuery(r *rand.Rand, kind string) identQuery {
	L, R := "l", "r"
	switch {
	case kind == "views":
		L, R = "vl", "vr"
	case kind == "temporal":
		R = "t"
	}
	if r.IntN(2) == 0 {
		L, R = "x", "y"
	}
	col := func() string {
		return []string{L, R}[r.IntN(2)] + "." + []string{"a", "b", "g"}[r.IntN(3)]
	}
	terms := []string{L + ".g", R + ".g", L + ".k", L + ".a", R + ".b", L + ".g + " + R + ".g"}
	r.Shuffle(len(terms), func(i, j int) { terms[i], terms[j] = terms[j], terms[i] })
	group := terms[:1+r.IntN(2)]
	var items, cols []string
	if kind == "views" {
		cols = append(cols, "w")
		items = append(items, "TUMBLE_START("+L+".ws, INTERVAL '10' SECOND) AS w")
	}
	for i, g := range group {
		cols = append(cols, fmt.Sprintf("g%d", i))
		items = append(items, g+" AS "+cols[len(cols)-1])
	}
	// mirror swaps the sides of every column of s: an aggregate and its
	// mirror differ only in their qualifiers.
	mirror := func(s string) string {
		s = strings.ReplaceAll(s, L+".", "\x00")
		s = strings.ReplaceAll(s, R+".", L+".")
		return strings.ReplaceAll(s, "\x00", R+".")
	}
	for i := range 2 + r.IntN(5) {
		var call string
		switch f := []string{"count", "sum", "min", "max", "star"}[r.IntN(5)]; {
		case i > 0 && r.IntN(2) == 0:
			call = mirror(strings.SplitN(items[len(items)-1], " AS ", 2)[0])
		case f == "star":
			call = "count(*)"
		default:
			arg := col()
			switch r.IntN(4) {
			case 0:
				arg += " + " + col()
			case 1:
				arg += " - " + col()
			}
			call = f + "(" + arg + ")"
		}
		if !strings.Contains(call, "FILTER") && r.IntN(2) == 0 {
			call += fmt.Sprintf(" FILTER (WHERE %s %s %d)", col(), []string{"=", "<", ">"}[r.IntN(3)], r.IntN(5)-1)
		}
		cols = append(cols, fmt.Sprintf("c%d", i))
		items = append(items, call+" AS "+cols[len(cols)-1])
	}
	// The group terms again, re-spelled, among the aggregates: each must
	// find its own term.
	if r.IntN(2) == 0 {
		i := r.IntN(len(group))
		cols = append(cols, "again")
		items = append(items, strings.ToUpper(group[i])+" AS again")
	}
	var from, pgFrom string
	lq, rq := " "+L, " "+R
	if L == "l" || L == "vl" {
		lq = ""
	}
	keys := len(group)
	switch kind {
	case "views":
		on := fmt.Sprintf("vl%s JOIN vr%s ON %s.k = %s.k AND %s.ws = %s.ws", lq, strings.TrimPrefix(rq, " vr"), L, R, L, R)
		sel := "SELECT " + strings.Join(items, ", ") + " FROM " + on + " GROUP BY "
		pgSel := strings.Replace(sel, "TUMBLE_START("+L+".ws, INTERVAL '10' SECOND)", L+".ws", 1)
		return identQuery{
			ubik: "CREATE VIEW j AS " + sel + "TUMBLE(" + L + ".ws, INTERVAL '10' SECOND), " + strings.Join(group, ", ") + " EMIT FINAL",
			pg:   identPGViews + pgSel + L + ".ws, " + strings.Join(group, ", "),
			keys: keys + 1, cols: cols,
		}
	case "temporal":
		from = fmt.Sprintf("l%s JOIN t FOR SYSTEM_TIME AS OF %s.ts AS %s ON %s.k = %s.k", lq, L, R, L, R)
		pgFrom = fmt.Sprintf("l%s JOIN LATERAL (SELECT * FROM t v WHERE v.k = %s.k AND v.ts <= %s.ts ORDER BY v.ts DESC LIMIT 1) %s ON true", lq, L, L, R)
	default:
		on := fmt.Sprintf("%s.k = %s.k AND %s.ts BETWEEN %s.ts - INTERVAL '%%s AND %s.ts + INTERVAL '%%s", L, R, R, L, L)
		from = fmt.Sprintf("l%s JOIN r%s ON ", lq, strings.TrimPrefix(rq, " r")) + fmt.Sprintf(on, "3' SECOND", "2' SECOND")
		pgFrom = fmt.Sprintf("l%s JOIN r%s ON ", lq, strings.TrimPrefix(rq, " r")) + fmt.Sprintf(on, "3 seconds'", "2 seconds'")
	}
	sel := "SELECT " + strings.Join(items, ", ") + " FROM %s GROUP BY " + strings.Join(group, ", ")
	return identQuery{ubik: fmt.Sprintf(sel, from), pg: fmt.Sprintf(sel, pgFrom), keys: keys, cols: cols}
}

func TestJoinSidesGenerated(t *testing.T) {
	dsn := testenv.RequirePostgres(t)
	r := rand.New(rand.NewPCG(32, 1))
	rows := genIdentRows(r, 600)
	sc := &testenv.PGScript{}
	sc.Exec(`SET TIME ZONE 'UTC'`)
	byInput := map[string][][]any{}
	var in [][2]string
	for _, x := range rows {
		var k, g, a, b any
		if x.k != nil {
			k = *x.k
		}
		for _, p := range []struct {
			v   *int64
			dst *any
		}{{x.g, &g}, {x.a, &a}, {x.b, &b}} {
			if p.v != nil {
				*p.dst = *p.v
			}
		}
		byInput[x.input] = append(byInput[x.input], []any{k, g, a, b, time.UnixMicro(x.ts).UTC()})
		in = append(in, [2]string{x.input, string(x.json())})
	}
	for _, name := range []string{"l", "r", "t"} {
		sc.Exec(fmt.Sprintf(`CREATE TEMP TABLE %s (k text, g bigint, a bigint, b bigint, ts timestamp)`, name))
		sc.CopyIn(t, name, []string{"k", "g", "a", "b", "ts"}, byInput[name])
	}
	var qs []identQuery
	var idx []int
	for i := range 90 {
		q := genIdentQuery(r, []string{"temporal", "interval", "views"}[i%3])
		qs = append(qs, q)
		idx = append(idx, sc.Query(q.pg))
	}
	res := sc.Run(t, dsn)
	groups := map[string]int{}
	for i, q := range qs {
		want := map[string]string{}
		for _, row := range res[idx[i]] {
			cells := make([]string, len(row))
			for j, c := range row {
				cells[j] = "null"
				if c != nil {
					cells[j] = *c
				}
			}
			want[strings.Join(cells[:q.keys], "|")] = strings.Join(cells, "|")
		}
		groups[[]string{"temporal", "interval", "views"}[i%3]] += len(want)
		skip := "t"
		if strings.Contains(q.ubik, "SYSTEM_TIME") {
			skip = "r"
		}
		var qin [][2]string
		for _, x := range in {
			if x[0] != skip {
				qin = append(qin, x)
			}
		}
		sql := identGenSources + q.ubik + ";"
		if strings.Contains(q.ubik, "vl") {
			sql = identGenSources + identViews + q.ubik + ";"
		}
		got := identFinals(t, sql, q, qin)
		if d := identDiff(want, got); d != "" {
			t.Errorf("query %d: %s\n%s", i, q.ubik, d)
		}
	}
	for kind, n := range groups {
		if n < 200 {
			t.Errorf("only %d groups over the %s joins: the history is too small to test anything", n, kind)
		}
	}
	t.Logf("groups per join kind: %v", groups)
}

// identFinals runs q over the rows and returns each group's last record
// as "cell|cell|..." (the output columns in order) by its key cells.
func identFinals(t *testing.T, sql string, q identQuery, in [][2]string) map[string]string {
	t.Helper()
	got := map[string]string{}
	name := ""
	if strings.HasPrefix(q.ubik, "CREATE VIEW j") {
		name = "j"
	}
	for _, line := range runInputs(t, sql, name, in) {
		kv := strings.SplitN(line, "\t", 2)
		var v map[string]any
		dec := json.NewDecoder(bytes.NewReader([]byte(kv[1])))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("value %s: %v", kv[1], err)
		}
		cells := make([]string, len(q.cols))
		for j, c := range q.cols {
			x, ok := v[c]
			switch {
			case !ok:
				t.Fatalf("value %s has no %s", kv[1], c)
			case x == nil:
				cells[j] = "null"
			default:
				cells[j] = fmt.Sprint(x)
			}
		}
		got[strings.Join(cells[:q.keys], "|")] = strings.Join(cells, "|")
	}
	return got
}

func identDiff(want, got map[string]string) string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	n := 0
	for _, k := range keys {
		if want[k] != got[k] {
			if n++; n <= 5 {
				fmt.Fprintf(&b, "  group %s: ubik %q, PostgreSQL %q\n", k, got[k], want[k])
			}
		}
	}
	if n > 5 {
		fmt.Fprintf(&b, "  ... %d groups differ\n", n)
	}
	return b.String()
}
