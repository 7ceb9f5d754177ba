package metamorphic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// The second input of a join case: a temporal join's versioned table
// (GenerateTemporalJoin) or an interval join's right stream
// (GenerateStreamJoin), or a join of two views' second source
// (GenerateViewJoinSources). Their WITH clauses begin with the format,
// after which each path adds its own options (SecondSQL): none in
// process, a file's path for ubik run, a topic for Kafka.
const (
	TableName = "tv"
	RightName = "ck"

	secondWith = " WITH (format = 'jsonl');\n"

	// The table's watermark delay is 1 s; a late row is at least 1.5 s
	// behind the newest earlier row of its own key (so late in any
	// partitioning of the table topic by its primary key) and every
	// other row is less than 0.8 s behind the newest row of the table
	// (late in none).
	tableDecl = "CREATE TABLE " + TableName + " (g VARCHAR, lab VARCHAR, w BIGINT, vts TIMESTAMP,\n" +
		"  PRIMARY KEY (g) NOT ENFORCED, WATERMARK FOR vts AS vts - INTERVAL '1' SECOND)" + secondWith
	// The right stream's delay is 1 s, its disorder under 0.8 s: no row
	// is late on any path.
	rightDecl = "CREATE SOURCE " + RightName + " (g VARCHAR, v BIGINT, cts TIMESTAMP,\n" +
		"  WATERMARK FOR cts AS cts - INTERVAL '1' SECOND)" + secondWith

	// SecondSourceName is the second source of a join of two views over
	// two sources (GenerateViewJoinSources): the right stream's rows with
	// an id, its dedup key, each eighth row sent twice.
	SecondSourceName = "cd"
	secondSourceDecl = "CREATE SOURCE " + SecondSourceName + " (id VARCHAR, g VARCHAR, v BIGINT, cts TIMESTAMP,\n" +
		"  WATERMARK FOR cts AS cts - INTERVAL '1' SECOND) WITH (format = 'jsonl', dedup_key = 'id', dedup_within = '1 hour');\n"
)

// joinSource is Source without its dedup key, which a join's input
// does not take (a retried event is an event again).
var joinSource = strings.Replace(Source, ", dedup_key = 'id', dedup_within = '1 hour'", "", 1)

// joinStream is Generate's case for seed with the retries a join's
// stream cannot take left out. Without the dedup key a retry is an
// event of its own, and a retry of an event already near maxDisorder
// behind may come more than the delay (2 s) behind the newest event:
// late in process, where a row is judged against the newest row before
// it, and not over Kafka, whose watermark trails by its batches of
// markers and the slowest partition. So a retry further behind the
// newest event than maxDisorder is dropped: every line is then within
// maxDisorder of the newest before it, and no event is late on any path.
func joinStream(seed uint64, size Size) *Case {
	c := Generate(seed, size)
	var newest int64 = math.MinInt64
	lines, events := c.Lines[:0], c.Events[:0]
	for i, e := range c.Events {
		if e.Dup && e.TS < newest-maxDisorder.Microseconds() {
			continue
		}
		newest = max(newest, e.TS)
		lines, events = append(lines, c.Lines[i]), append(events, e)
	}
	c.Lines, c.Events = lines, events
	return c
}

// SecondSQL is c's script with its second input's declaration given
// options (", path = '...'", ", connector = 'kafka', topic = '...'").
func (c *Case) SecondSQL(sql, options string) string {
	if c.Second == "" || options == "" {
		return sql
	}
	for _, decl := range []string{"CREATE TABLE " + c.Second + " (", "CREATE SOURCE " + c.Second + " ("} {
		if i := strings.Index(sql, decl); i >= 0 {
			return sql[:i] + strings.Replace(sql[i:], " WITH (format = 'jsonl'", " WITH (format = 'jsonl'"+options, 1)
		}
	}
	return sql
}

// secondAt draws where each second-input row is pushed among the
// stream's: before the first event at or after its time plus a lag of
// -3 s to +5 s (the second input ahead of the stream or behind it, so
// events wait for the table's watermark, or rows of one side wait for
// the other's), kept in the second input's own order; in one case of
// eight after the whole stream.
func secondAt(r *rand.Rand, evTS []int64, rowTS []int64) []int {
	at := make([]int, len(rowTS))
	// The first event index whose time is at or after t, by a running
	// maximum (the stream is out of order within its delay).
	maxTS := make([]int64, len(evTS))
	var m int64 = -1 << 62
	for i, t := range evTS {
		m = max(m, t)
		maxTS[i] = m
	}
	// One case in eight pushes the whole second input after the stream
	// (every event of a temporal join waits).
	atEnd := r.IntN(8) == 0
	prev := 0
	for j, t := range rowTS {
		t += int64(r.IntN(8_000_000)) - 3_000_000
		i := sort.Search(len(maxTS), func(i int) bool { return maxTS[i] >= t })
		if atEnd {
			i = len(evTS)
		}
		i = max(i, prev)
		at[j], prev = i, i
	}
	return at
}

// streamTimes are the event times of c's lines, in line order.
func streamTimes(c *Case) []int64 {
	ts := make([]int64, len(c.Events))
	for i, e := range c.Events {
		ts[i] = e.TS
	}
	return ts
}

// joinKeys are the g values of c's events, plus one only the second
// input has.
func joinKeys(c *Case) []string {
	seen := map[string]bool{}
	var ks []string
	for _, e := range c.Events {
		if !e.GNull && !seen[e.G] {
			seen[e.G] = true
			ks = append(ks, e.G)
		}
	}
	sort.Strings(ks)
	return append(ks, "only-the-table")
}

// GenerateTemporalJoin is the case Generate makes for seed, its stream
// joined with a versioned table (JOIN or LEFT JOIN tv FOR SYSTEM_TIME AS
// OF e.ts ON e.g = t.g): random versions of each key (labels, weights,
// NULLs, the keys spelled with escapes and invalid UTF-8 as the stream's
// g is), some rows late (behind the table's watermark: counted, not
// applied), pushed ahead of the stream or behind it so that events wait
// for the table's watermark. The query counts and sums the joined rows
// in 10-second windows grouped by the join key e.g, or by the table's
// column t.lab (over Kafka: the joined rows through a second
// repartition). The case has no Query spec.
func GenerateTemporalJoin(seed uint64, size Size) *Case {
	c := joinStream(seed, size)
	r := rand.New(rand.NewPCG(seed, 0x74a0))
	keys := joinKeys(c)
	join := []string{"JOIN", "LEFT JOIN"}[r.IntN(2)]
	byTable := r.IntN(2) == 1
	grp := "e.g"
	if byTable {
		grp = "t.lab"
	}
	c.SQL = joinSource + tableDecl + "CREATE VIEW " + QueryName + " AS SELECT " + grp + " AS kg, TUMBLE_START(e.ts, INTERVAL '10' SECOND) AS ws, count(*) AS c,\n" +
		"  count(t.w) AS cw, sum(t.w) AS sw, min(t.lab) AS ml, max(t.lab) AS xl, max(t.vts) AS tv, min(e.g) AS mg, sum(e.n) AS sn, count(DISTINCT e.x) AS dx\n" +
		"FROM ev e " + join + " " + TableName + " FOR SYSTEM_TIME AS OF e.ts AS t ON e.g = t.g\n" +
		"GROUP BY " + grp + ", TUMBLE(e.ts, INTERVAL '10' SECOND);\n"
	c.Windowed, c.Monotone = true, true
	c.Query = nil
	c.Note = "temporal " + strings.ToLower(join)
	if byTable {
		c.Note += " by a table column"
	}
	c.Second = TableName

	// The table: versions every 50..550 ms, each of a random key; a late
	// one now and then.
	evTS := streamTimes(c)
	start := evTS[0] - int64(r.IntN(3_000_000))
	end := evTS[len(evTS)-1]
	var rowTS []int64
	newest := map[string]int64{} // a key's newest row time
	var maxTS int64 = -1 << 62
	labs := genStrings[:2+r.IntN(4)]
	for ts := start; ts < end; ts += int64(50_000 + r.IntN(500_000)) {
		k := keys[r.IntN(len(keys))]
		t := ts - int64(r.IntN(800_000)) // disorder under the delay
		if lo := maxTS - 799_000; t < lo {
			t = lo
		}
		if nk, ok := newest[k]; ok && r.IntN(12) == 0 && nk-1_500_000 > start {
			// Late in any partitioning: behind its key's newest by more
			// than the delay.
			t = nk - 1_500_000 - int64(r.IntN(3_000_000))
		} else {
			maxTS = max(maxTS, t)
			newest[k] = max(newest[k], t)
		}
		var f []string
		f = append(f, `"g":`+ws(r)+spellString(r, k))
		switch r.IntN(8) {
		case 0:
			f = append(f, `"lab":null`)
		case 1:
		default:
			f = append(f, `"lab":`+spellString(r, labs[r.IntN(len(labs))]))
		}
		if r.IntN(6) > 0 {
			f = append(f, fmt.Sprintf(`"w":%d`, r.IntN(1000)-300))
		}
		f = append(f, `"vts":"`+time.UnixMicro(t).UTC().Format("2006-01-02 15:04:05.000000")+`"`)
		r.Shuffle(len(f), func(i, j int) { f[i], f[j] = f[j], f[i] })
		c.SecondLines = append(c.SecondLines, []byte("{"+strings.Join(f, ","+ws(r))+"}"))
		rowTS = append(rowTS, t)
	}
	c.SecondAt = secondAt(r, evTS, rowTS)
	c.Events = nil
	return c
}

// GenerateStreamJoin is the case Generate makes for seed, its stream
// joined with a second stream ck on g (NULL never matches), ck's rows
// at most 1 s before or 2 s after the event, interleaved with the
// stream at random (either side ahead). The query counts and sums the
// joined rows in 10-second windows grouped by the join key e.g, or by
// the event's x or payload->'k' (over Kafka: the joined rows through a
// second repartition). The case has no Query spec.
func GenerateStreamJoin(seed uint64, size Size) *Case {
	c := joinStream(seed, size)
	r := rand.New(rand.NewPCG(seed, 0x1d7a))
	keys := joinKeys(c)
	grp, sel := "e.g", "e.g"
	switch r.IntN(3) {
	case 1:
		grp, sel = "e.x", "e.x"
	case 2:
		grp, sel = "e.payload->'k'", "e.payload->'k' AS k"
	}
	c.SQL = joinSource + rightDecl + "CREATE VIEW " + QueryName + " AS SELECT " + sel + ", TUMBLE_START(e.ts, INTERVAL '10' SECOND) AS ws, count(*) AS c,\n" +
		"  sum(r.v) AS sv, min(r.cts) AS mc, max(r.cts) AS xc, min(e.g) AS mg, max(e.n) AS hn, count(DISTINCT r.v) AS dv\n" +
		"FROM ev e JOIN " + RightName + " r ON r.g = e.g AND r.cts BETWEEN e.ts - INTERVAL '1' SECOND AND e.ts + INTERVAL '2' SECOND\n" +
		"GROUP BY " + grp + ", TUMBLE(e.ts, INTERVAL '10' SECOND);\n"
	c.Windowed, c.Monotone = true, true
	c.Query = nil
	c.Note = "interval join of two streams by " + grp
	c.Second = RightName
	rightRows(c, r, keys, false)
	c.Events = nil
	return c
}

// rightRows draws c's second input, a right stream over the events'
// time span and keys, and where each row is pushed among the events. With
// ids each row has a distinct id, and each eighth is followed by a copy
// (a retry, which the stream's dedup key drops).
func rightRows(c *Case, r *rand.Rand, keys []string, ids bool) {
	evTS := streamTimes(c)
	var rowTS []int64
	var maxTS int64 = -1 << 62
	for ts := evTS[0] - 2_000_000; ts < evTS[len(evTS)-1]+2_000_000; ts += int64(10_000 + r.IntN(90_000)) {
		t := ts - int64(r.IntN(800_000))
		if lo := maxTS - 799_000; t < lo {
			t = lo
		}
		maxTS = max(maxTS, t)
		var f []string
		if r.IntN(30) == 0 {
			f = append(f, `"g":null`)
		} else {
			f = append(f, `"g":`+ws(r)+spellString(r, keys[r.IntN(len(keys))]))
		}
		if r.IntN(10) > 0 {
			f = append(f, fmt.Sprintf(`"v":%d`, r.IntN(50)))
		}
		f = append(f, `"cts":"`+time.UnixMicro(t).UTC().Format("2006-01-02 15:04:05.000000")+`"`)
		if ids {
			f = append(f, fmt.Sprintf(`"id":"r%d"`, len(rowTS)))
		}
		r.Shuffle(len(f), func(i, j int) { f[i], f[j] = f[j], f[i] })
		line := []byte("{" + strings.Join(f, ","+ws(r)) + "}")
		c.SecondLines = append(c.SecondLines, line)
		rowTS = append(rowTS, t)
		if ids && r.IntN(8) == 0 {
			c.SecondLines = append(c.SecondLines, line)
			rowTS = append(rowTS, t)
		}
	}
	c.SecondAt = secondAt(r, evTS, rowTS)
}

// GenerateStreamJoinView is GenerateStreamJoin read through a view: the
// interval join of the two streams, counted in 10-second windows with
// EMIT FINAL, becomes the view ViewName, and the case's query (QueryName)
// groups the view's final rows again in 30-second windows over its
// window start, by the view's cell (g, x or k: NaN, ±Inf, -0.0, NULL,
// repaired strings and JSON text meet a second GROUP BY) or by none (one
// group per window). So the graph's root is the join of two streams,
// fed by both inputs: in process the second input's rows are pushed by
// name among the events, the C ABI and Python push them with
// ubik_push_input / push_input, the file run reads them from the
// declaration's path, Kafka reads both topics (the chain's root is the
// join). The case has no Query spec.
func GenerateStreamJoinView(seed uint64, size Size) *Case {
	c := GenerateStreamJoin(seed, size)
	r := rand.New(rand.NewPCG(seed, 0x1d7b))
	body := "CREATE VIEW " + QueryName + " AS "
	i := strings.Index(c.SQL, body)
	up := "CREATE VIEW " + ViewName + " AS " + strings.TrimSuffix(c.SQL[i+len(body):], ";\n") + " EMIT FINAL;\n"
	cell := ""
	switch {
	case strings.Contains(up, "SELECT e.g,"):
		cell = "g"
	case strings.Contains(up, "SELECT e.x,"):
		cell = "x"
	default:
		cell = "k"
	}
	by := "by " + cell
	if r.IntN(3) == 0 {
		cell, by = "", "by none"
	}
	sel := "TUMBLE_START(ws, INTERVAL '30' SECOND) AS w, count(*) AS n, sum(c) AS c, sum(sv) AS sv, min(mc) AS mc, max(xc) AS xc,\n" +
		"  min(mg) AS mg, max(hn) AS hn, min(ws) AS ws0, max(dv) AS dv"
	grp := "TUMBLE(ws, INTERVAL '30' SECOND)"
	if cell != "" {
		sel, grp = cell+", "+sel, cell+", "+grp
	}
	down := "CREATE VIEW " + QueryName + " AS SELECT " + sel + "\nFROM " + ViewName + " GROUP BY " + grp + ";\n"
	c.SQL = c.SQL[:i] + up + down
	c.Note = "view over an " + c.Note + ", read " + by
	c.Views = []string{ViewName}
	return c
}

// GenerateTemporalJoinView is GenerateTemporalJoin read through a view:
// the temporal join, counted in 10-second windows with EMIT FINAL,
// becomes the view ViewName, and the case's query (QueryName) groups the
// view's final rows again in 30-second windows over its window start, by
// the view's cell kg (the join key e.g, or the table's column t.lab) or
// by none. So the graph's root is the temporal join, fed by the stream
// and the versioned table: in process the table's rows are pushed by
// name among the events, the C ABI and Python push them with
// ubik_push_input / push_input, the file run reads the table first,
// Kafka from a table topic (by the join key: the chain's root keeps the
// table stage; by a table column the joined rows are repartitioned by
// the view's GROUP BY before its aggregate). The case has no Query spec.
func GenerateTemporalJoinView(seed uint64, size Size) *Case {
	c := GenerateTemporalJoin(seed, size)
	r := rand.New(rand.NewPCG(seed, 0x74a1))
	body := "CREATE VIEW " + QueryName + " AS "
	i := strings.Index(c.SQL, body)
	up := "CREATE VIEW " + ViewName + " AS " + strings.TrimSuffix(c.SQL[i+len(body):], ";\n") + " EMIT FINAL;\n"
	cell, by := "kg", "by kg"
	if r.IntN(3) == 0 {
		cell, by = "", "by none"
	}
	sel := "TUMBLE_START(ws, INTERVAL '30' SECOND) AS w, count(*) AS n, sum(c) AS c, sum(cw) AS cw, sum(sw) AS sw,\n" +
		"  min(ml) AS ml, max(xl) AS xl, max(tv) AS tv, min(mg) AS mg, sum(sn) AS sn, max(dx) AS dx, min(ws) AS ws0"
	grp := "TUMBLE(ws, INTERVAL '30' SECOND)"
	if cell != "" {
		sel, grp = cell+", "+sel, cell+", "+grp
	}
	down := "CREATE VIEW " + QueryName + " AS SELECT " + sel + "\nFROM " + ViewName + " GROUP BY " + grp + ";\n"
	c.SQL = c.SQL[:i] + up + down
	c.Note = "view over a " + c.Note + ", read " + by
	c.Views = []string{ViewName}
	return c
}
