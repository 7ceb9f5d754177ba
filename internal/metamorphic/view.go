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
// start. No path but Kafka (which does not run a query over a view)
// treats it differently: the C ABI, Python and the file run start the
// query by name and get its graph. The case has no Query spec, so the
// batch oracle does not load it.
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
