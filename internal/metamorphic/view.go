package metamorphic

import (
	"fmt"
	"math/rand/v2"
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
func GenerateView(seed uint64, size Size) *Case { return generateView(seed, size, false) }

// GenerateViewRegroup is GenerateView with a reader that groups by less
// than its view: a strict subset of the view's cells (g, x, k), drawn
// by the seed, down to none (one group per window). Over Kafka the
// chain is cut there (a view repartition): the view's final rows go to
// the reader's partitions through a topic keyed by the reader's group
// key, with the view's watermark as markers.
func GenerateViewRegroup(seed uint64, size Size) *Case { return generateView(seed, size, true) }

func generateView(seed uint64, size Size, regroup bool) *Case {
	c := Generate(seed, size)
	q := *c.Query
	if q.Window != "hop" {
		q.Window = "tumble"
	}
	q.Early = false
	up := strings.Replace(q.sql(), "CREATE VIEW "+QueryName+" AS", "CREATE VIEW "+ViewName+" AS", 1)
	cells := q.GroupBy
	if regroup {
		// Each cell kept or not, never all of them.
		r := rand.New(rand.NewPCG(seed, 0x5e6))
		for {
			var sub []string
			for _, g := range q.GroupBy {
				if r.IntN(2) == 0 {
					sub = append(sub, g)
				}
			}
			if len(sub) < len(q.GroupBy) {
				cells = sub
				break
			}
		}
	}
	sel := append([]string(nil), cells...)
	grp := append([]string(nil), cells...)
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
	if regroup {
		c.Note = fmt.Sprintf("view regrouped by %v of %v", cells, q.GroupBy)
	}
	c.Views = []string{ViewName}
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
// file run under kill -9, and Kafka: a join of two EMIT FINAL views
// grouped by the join column a.g). The case has no Query spec.
func GenerateIntervalJoin(seed uint64, size Size) *Case { return intervalJoin(seed, size, false) }

// GenerateViewJoinSources is GenerateIntervalJoin with its right view
// over a second source, SecondSourceName (a right stream over the
// events' keys and time span, with a dedup key and retries), pushed
// among the events. So a join of two views reads two sources, each with
// a dedup key: over Kafka, when the left view groups by g alone, the
// join stage decodes both (the second through its own dedup stage), else
// the left view is a side.
func GenerateViewJoinSources(seed uint64, size Size) *Case { return intervalJoin(seed, size, true) }

func intervalJoin(seed uint64, size Size, sources bool) *Case {
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
	c.Query = nil
	c.Note = "interval join"
	c.Views = []string{JoinLeftName, JoinRightName}
	if sources {
		right = "CREATE VIEW " + JoinRightName + " AS SELECT g, TUMBLE_START(cts, INTERVAL '10' SECOND) AS ws, count(*) AS c2, max(v) AS hn2\n" +
			"FROM " + SecondSourceName + " GROUP BY g, TUMBLE(cts, INTERVAL '10' SECOND) EMIT FINAL;\n"
		c.SQL = Source + secondSourceDecl + up + right + down
		c.Note = "interval join of views over two sources"
		c.Second = SecondSourceName
		rightRows(c, rand.New(rand.NewPCG(seed, 0xd5c)), joinKeys(c), true)
	}
	c.Events = nil
	return c
}

// ViewCase is the case of view name of c (one of c.Views) alone: the
// script's source and that view, renamed QueryName, with the views it
// reads, so that its reference is the view's own changelog, which a
// Kafka run publishes to the view's topic. Every view of these cases is
// windowed EMIT FINAL (one record per key, so no count to watch).
func (c *Case) ViewCase(name string) (*Case, error) {
	stmts := strings.SplitAfter(c.SQL, ";\n")
	text := map[string]string{} // a view's name: its statement
	var order []string
	for _, st := range stmts {
		if rest, ok := strings.CutPrefix(st, "CREATE VIEW "); ok {
			v, _, _ := strings.Cut(rest, " ")
			text[v] = st
			order = append(order, v)
		}
	}
	if _, ok := text[name]; !ok {
		return nil, fmt.Errorf("seed %d: the script has no view %s:\n%s", c.Seed, name, c.SQL)
	}
	keep := map[string]bool{name: true}
	for i := len(order) - 1; i >= 0; i-- { // a view follows the views it reads
		if !keep[order[i]] {
			continue
		}
		for _, w := range order[:i] {
			st := text[order[i]]
			if strings.Contains(st, "FROM "+w+" ") || strings.Contains(st, "JOIN "+w+" ") || strings.HasSuffix(st, "FROM "+w+";\n") {
				keep[w] = true
			}
		}
	}
	var b strings.Builder
	for _, st := range stmts {
		if rest, ok := strings.CutPrefix(st, "CREATE VIEW "); ok {
			v, _, _ := strings.Cut(rest, " ")
			if !keep[v] {
				continue
			}
			if v == name {
				st = "CREATE VIEW " + QueryName + strings.TrimPrefix(rest, v)
			}
		}
		b.WriteString(st)
	}
	v := *c
	v.SQL = b.String()
	if c.Second != "" && !strings.Contains(v.SQL, "FROM "+c.Second+" ") && !strings.Contains(v.SQL, "JOIN "+c.Second+" ") {
		// The view reads no second input: its declaration and rows go.
		i := strings.Index(v.SQL, "CREATE SOURCE "+c.Second+" (")
		n := strings.Index(v.SQL[i:], ";\n") + 2
		v.SQL = v.SQL[:i] + v.SQL[i+n:]
		v.Second, v.SecondLines, v.SecondAt = "", nil, nil
	}
	v.Windowed, v.Monotone, v.Views = true, false, nil
	v.Note = c.Note + ", view " + name
	return &v, nil
}

// JoinViewName names the view of a view-join-view case
// (GenerateViewJoinView): the interval join of two views, read by the
// case's query.
const JoinViewName = "mqj"

// GenerateViewJoinView is GenerateIntervalJoin read through a view: the
// join of the two EMIT FINAL views, with EMIT FINAL, becomes the view
// JoinViewName, and the case's query (QueryName) groups its final rows
// again in 1-minute windows over the join's window start, by the join
// column g (NULL, repaired strings and escapes meet a third GROUP BY) or
// by none (one group per window). So the graph runs a join of two views
// with a reader on every path: over Kafka the join stage runs the reader
// in its partitions when it groups by g; by none the join's final rows
// reach the reader through a view repartition. The case has no Query
// spec.
func GenerateViewJoinView(seed uint64, size Size) *Case {
	c := GenerateIntervalJoin(seed, size)
	r := rand.New(rand.NewPCG(seed, 0x7a1e))
	body := "CREATE VIEW " + QueryName + " AS "
	i := strings.Index(c.SQL, body)
	up := "CREATE VIEW " + JoinViewName + " AS " + strings.TrimSuffix(c.SQL[i+len(body):], ";\n") + " EMIT FINAL;\n"
	sel := "TUMBLE_START(w, INTERVAL '1' MINUTE) AS w, count(*) AS n, sum(c) AS c, sum(sc) AS sc, sum(sb) AS sb,\n" +
		"  min(bw0) AS bw0, max(aw1) AS aw1, max(hn2) AS hn2"
	grp := "TUMBLE(w, INTERVAL '1' MINUTE)"
	by := "by g"
	if r.IntN(3) == 0 {
		by = "by none"
	} else {
		sel, grp = "g, "+sel, "g, "+grp
	}
	down := "CREATE VIEW " + QueryName + " AS SELECT " + sel + "\nFROM " + JoinViewName + " GROUP BY " + grp + ";\n"
	c.SQL = c.SQL[:i] + up + down
	c.Note = "view over an interval join of views, read " + by
	c.Views = []string{JoinLeftName, JoinRightName, JoinViewName}
	return c
}
