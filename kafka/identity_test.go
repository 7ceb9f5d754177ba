package kafka

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// TestRepartitionByGroupIdentity: the rows the operator puts in one group
// (-0.0 and 0.0; NaN, ±Infinity and NULL) meet on one repartition
// partition, so the sink gets one final per (group, window), not one per
// spelling.
func TestRepartitionByGroupIdentity(t *testing.T) {
	c := cluster(t)
	addrs := c.ListenAddrs()
	const parts = 4
	mkTopic(t, addrs, "events", parts, nil)
	src := testSource()
	src.Columns = append(src.Columns, plan.Column{Name: "x", Type: types.Double})
	x := &countingCol{col: col{3, types.Double}}
	q := &plan.Query{
		Name:   "identity",
		Source: src,
		Window: &plan.Window{Kind: plan.Tumble, TimeCol: 2, Size: 60_000_000, Slide: 60_000_000},
		Keys: []plan.KeyTerm{{Kind: plan.KeyExpr, Expr: x, Name: "x"}, {Kind: plan.KeyExpr, Expr: col{0, types.Varchar}, Name: "merchant"},
			{Kind: plan.KeyWindowStart, Name: "window"}},
		Aggs: aggs(),
		Select: []plan.OutputColumn{
			{Name: "x", Expr: col{0, types.Double}},
			{Name: "merchant", Expr: col{1, types.Varchar}},
			{Name: "window_start", Expr: col{2, types.Timestamp}},
			{Name: "orders", Expr: col{3, types.BigInt}},
			{Name: "total", Expr: col{4, types.HugeInt}},
		},
	}
	// 16 merchants, each with every spelling: the chance that the
	// spellings of all of them hash alike by luck is negligible.
	var lines [][]byte
	ts := func(i int) string { return string(changelog.AppendCell(nil, types.TS(baseTS+int64(i)*1000))) }
	want := map[string]agg{}
	zeros := []string{"-0.0", "0.0", "-0", "0"}
	for i := 0; i < 16*4*4; i++ {
		m := fmt.Sprintf("m%02d", i/4%16)
		lines = append(lines, fmt.Appendf(nil, `{"merchant":%q,"amount":1,"x":%s,"event_time":%s}`, m, zeros[i%4], ts(i)))
		want[`[0.0, "`+m+`", "2026-07-18 10:00:00"]`] = agg{orders: 16, total: 16}
	}
	nonFinite := []string{"NaN", "Infinity", "-Infinity", "null", "1e400", "-NaN"}
	for i := 0; i < 16*6; i++ {
		m := fmt.Sprintf("m%02d", i/6%16)
		lines = append(lines, fmt.Appendf(nil, `{"merchant":%q,"amount":2,"x":%s,"event_time":%s}`, m, nonFinite[i%6], ts(300+i)))
		want[`[null, "`+m+`", "2026-07-18 10:00:00"]`] = agg{orders: 6, total: 12}
	}
	var flush [][]byte
	for p := 0; p < parts; p++ {
		flush = append(flush, fmt.Appendf(nil, `{"merchant":"%s%d","amount":0,"x":1.0,"event_time":%s}`, flushMerchant, p, ts(10*60_000)))
	}
	produceValues(t, addrs, "events", parts, lines, flush)
	runPipeline(t, Options{Query: q, Source: endpoint(addrs, "events"), Sink: endpoint(addrs, "out"), InstanceID: "a", Logger: testLogger(t)})
	f := follow(t, addrs, "out", false)
	f.waitFinals(t, want, 60*time.Second)
	// Stage 2 takes the group key stage 1 routed by: the GROUP BY is
	// evaluated once per event, not once per stage.
	events := int64(len(lines) + parts)
	if n := x.n.Load(); n < events || n >= 2*events {
		t.Errorf("the GROUP BY term was evaluated %d times for %d events", n, events)
	}
}

// countingCol is a column reference that counts its evaluations. It is not
// a *plan.ColRef, so the operator evaluates it like any expression.
type countingCol struct {
	col
	n atomic.Int64
}

func (c *countingCol) Eval(row []types.Value) (types.Value, error) {
	c.n.Add(1)
	return c.col.Eval(row)
}
