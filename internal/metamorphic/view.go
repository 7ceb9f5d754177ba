package metamorphic

import (
	"strings"
)

// ViewName names the upstream view of a view case (GenerateView).
const ViewName = "mqv"

// GenerateView is the case Generate makes for seed, read through a view:
// its query, made a TUMBLE or HOP with EMIT FINAL, becomes the view
// ViewName, and the case's query (QueryName) groups the view's final
// rows again by the same cells (g, and x and payload->'k' when the view
// groups by them: NaN, ±Inf, -0.0, NULL, repaired strings and JSON text
// meet a second GROUP BY) in 30-second windows over the view's window
// start. Every path runs the graph: the C ABI, Python and the file run
// start the query by name, Kafka runs the script's chain in each
// partition (the query groups by the view's cells, the view's
// partitioning), with the view's changelog on a topic of its own. The
// case has no Query spec, so the batch oracle does not load it.
func GenerateView(seed uint64, size Size) *Case {
	c := Generate(seed, size)
	q := *c.Query
	if q.Window != "hop" {
		q.Window = "tumble"
	}
	q.Early = false
	up := strings.Replace(q.sql(), "CREATE VIEW "+QueryName+" AS", "CREATE VIEW "+ViewName+" AS", 1)
	sel := append([]string(nil), q.GroupBy...)
	grp := append([]string(nil), q.GroupBy...)
	sel = append(sel, "TUMBLE_START(ws, INTERVAL '30' SECOND) AS w", "count(*) AS c", "sum(c) AS sc", "min(ws) AS ws0")
	grp = append(grp, "TUMBLE(ws, INTERVAL '30' SECOND)")
	for _, a := range q.Aggs {
		switch a {
		case "sx", "sn":
			sel = append(sel, "sum("+a+") AS "+a)
		case "lo", "ln", "mg":
			sel = append(sel, "min("+a+") AS "+a)
		case "hi", "xg":
			sel = append(sel, "max("+a+") AS "+a)
		}
	}
	down := "CREATE VIEW " + QueryName + " AS SELECT " + strings.Join(sel, ", ") + "\nFROM " + ViewName + " GROUP BY " + strings.Join(grp, ", ") + ";\n"
	c.SQL = Source + up + down
	c.Windowed, c.Monotone = true, true
	c.Query, c.Events = nil, nil
	c.Note = "view"
	return c
}

// JoinViewNames name the two views of an interval-join case
// (GenerateIntervalJoin).
const (
	JoinLeftName  = "mqa"
	JoinRightName = "mqb"
)

// GenerateIntervalJoin is the case Generate makes for seed, joined: its
// query, made a TUMBLE or HOP with EMIT FINAL, becomes the view
// JoinLeftName; a second view JoinRightName counts the events per g in
// 10-second windows; and the case's query (QueryName) is an interval
// join of the two on g (NULL never matches; repaired strings and escapes
// meet the join key) whose window starts are at most 10 s before or 20
// s after the left's, grouped again by the left view's cells in 30-second
// windows over one side's window start (the left or the right, by the
// seed). So the join's state, its bounds and its derived watermark run
// on every path that runs a query over views (the C ABI, Python, the
// file run under kill -9; not Kafka). The case has no Query spec.
func GenerateIntervalJoin(seed uint64, size Size) *Case {
	c := Generate(seed, size)
	q := *c.Query
	if q.Window != "hop" {
		q.Window = "tumble"
	}
	q.Early = false
	up := strings.Replace(q.sql(), "CREATE VIEW "+QueryName+" AS", "CREATE VIEW "+JoinLeftName+" AS", 1)
	right := "CREATE VIEW " + JoinRightName + " AS SELECT g, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS c2, max(n) AS hn2\n" +
		"FROM ev GROUP BY g, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;\n"
	side := "a"
	if seed%2 == 1 {
		side = "b"
	}
	var sel, grp []string
	for _, g := range q.GroupBy {
		sel = append(sel, "a."+g)
		grp = append(grp, "a."+g)
	}
	sel = append(sel, "TUMBLE_START("+side+".ws, INTERVAL '30' SECOND) AS w", "count(*) AS c", "sum(a.c) AS sc", "sum(b.c2) AS sb",
		"min(b.ws) AS bw0", "max(a.ws) AS aw1", "max(b.hn2) AS hn2")
	grp = append(grp, "TUMBLE("+side+".ws, INTERVAL '30' SECOND)")
	for _, a := range q.Aggs {
		switch a {
		case "sx", "sn":
			sel = append(sel, "sum(a."+a+") AS "+a)
		case "lo", "ln", "mg":
			sel = append(sel, "min(a."+a+") AS "+a)
		}
	}
	down := "CREATE VIEW " + QueryName + " AS SELECT " + strings.Join(sel, ", ") + "\nFROM " + JoinLeftName + " a JOIN " + JoinRightName +
		" b ON a.g = b.g AND b.ws BETWEEN a.ws - INTERVAL '10' SECOND AND a.ws + INTERVAL '20' SECOND\nGROUP BY " + strings.Join(grp, ", ") + ";\n"
	c.SQL = Source + up + right + down
	c.Windowed, c.Monotone = true, true
	c.Query, c.Events = nil, nil
	c.Note = "interval join"
	return c
}
