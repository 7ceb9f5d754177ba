package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ubiksql/ubik/internal/sql/parser"
	"github.com/ubiksql/ubik/internal/types"
)

// Explain renders a compiled program as text: sources, then each query's
// window, filter, key layout, aggregates, HAVING, projection and emit
// policy. References into the post-aggregation row print as name#slot.
func (p *Program) Explain() string {
	var b strings.Builder
	for _, s := range p.Sources {
		b.WriteString(explainSource(s))
	}
	for _, q := range p.Queries {
		b.WriteString(q.Explain())
	}
	for _, s := range p.Sinks {
		fmt.Fprintf(&b, "sink %s from %s%s\n", s.Name, s.Query, explainOptions(s.Options))
	}
	return b.String()
}

func explainOptions(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		// Explain output is shared and logged: no password in it.
		v := parser.Redact(m[k])
		if parser.SecretName(k) {
			v = "xxx"
		}
		parts[i] = fmt.Sprintf("%s=%q", k, v)
	}
	return " with (" + strings.Join(parts, ", ") + ")"
}

func explainSource(s *Source) string {
	cols := make([]string, len(s.Columns))
	for i := range s.Columns {
		cols[i] = s.Columns[i].Decl()
	}
	wm := "no watermark"
	if s.TimeCol >= 0 {
		wm = fmt.Sprintf("watermark %s - %s", s.Columns[s.TimeCol].Name, ValueText(types.Interv(0, 0, s.WatermarkDelay)))
	}
	kind := "source"
	if s.PrimaryKey != nil {
		kind = "table"
		pk := make([]string, len(s.PrimaryKey))
		for i, c := range s.PrimaryKey {
			pk[i] = s.Columns[c].Name
		}
		wm += ", primary key (" + strings.Join(pk, ", ") + ")"
	}
	return fmt.Sprintf("%s %s (%s) %s%s\n", kind, s.Name, strings.Join(cols, ", "), wm, explainOptions(s.Options))
}

func us(d int64) string { return ValueText(types.Interv(0, 0, d)) }

// Explain renders one query.
func (q *Query) Explain() string {
	var b strings.Builder
	out := q.Output
	if out == "" {
		out = "(default)"
	}
	fmt.Fprintf(&b, "query %s -> %s from %s\n", q.Name, out, q.Source.Name)
	if q.Source.View != nil {
		b.WriteString(explainView(q.Source))
	}
	if q.Join != nil {
		b.WriteString(q.Join.explain())
	}
	if q.IJoin != nil {
		b.WriteString(q.IJoin.explain())
	}
	if w := q.Window; w != nil {
		col := q.Source.Columns[w.TimeCol].Name
		switch w.Kind {
		case Tumble:
			fmt.Fprintf(&b, "  window: TUMBLE(%s, size %s)\n", col, us(w.Size))
		case Hop:
			n := w.WindowsPerEvent()
			fmt.Fprintf(&b, "  window: HOP(%s, slide %s, size %s), %d windows per event [state: each event updates %d windows; each group keeps up to %d open]\n",
				col, us(w.Slide), us(w.Size), n, n, n)
		case Session:
			fmt.Fprintf(&b, "  window: SESSION(%s, gap %s)\n", col, us(w.Gap))
		}
	}
	if q.Filter != nil {
		fmt.Fprintf(&b, "  where: %s\n", q.Filter)
	}
	for i, k := range q.Keys {
		switch k.Kind {
		case KeyExpr:
			fmt.Fprintf(&b, "  key #%d: %s %s\n", i, k.Expr, k.Expr.Type())
		case KeyWindowStart:
			fmt.Fprintf(&b, "  key #%d: window_start TIMESTAMP (%s)\n", i, k.Name)
		case KeyWindowEnd:
			fmt.Fprintf(&b, "  key #%d: window_end TIMESTAMP (%s)\n", i, k.Name)
		}
	}
	for i, a := range q.Aggs {
		d := ""
		if a.Distinct {
			d = " distinct"
		}
		args := make([]string, len(a.Args))
		for j, x := range a.Args {
			args[j] = x.String() + " " + x.Type().String()
		}
		if a.Func == "approx_quantile" {
			args = append(args, ValueText(a.Param))
		}
		if a.Filter != nil {
			d += " filter (where " + a.Filter.String() + ")"
		}
		fmt.Fprintf(&b, "  agg #%d: %s(%s)%s -> %s%s\n", q.AggOffset()+i, a.Func, strings.Join(args, ", "), d, a.Type, aggStateCost(&a))
	}
	fmt.Fprintf(&b, "  slots: window_start #%d, window_end #%d, final #%d, revision #%d\n", q.WindowStartSlot(), q.WindowEndSlot(), q.FinalSlot(), q.RevisionSlot())
	if q.Having != nil {
		fmt.Fprintf(&b, "  having: %s\n", q.Having)
	}
	for _, c := range q.Select {
		fmt.Fprintf(&b, "  select %q: %s %s\n", c.Name, c.Expr, c.Expr.Type())
	}
	switch q.Emit.Mode {
	case EmitFinal:
		b.WriteString("  emit: FINAL")
	case EmitEarly:
		fmt.Fprintf(&b, "  emit: EARLY every %s", us(q.Emit.EarlyEvery))
	case EmitChanges:
		b.WriteString("  emit: CHANGES")
	}
	if q.Emit.AllowedLateness != 0 {
		fmt.Fprintf(&b, ", allowed lateness %s", us(q.Emit.AllowedLateness))
	}
	b.WriteString("\n")
	return b.String()
}

// aggStateCost notes the aggregates whose state is not a few fixed bytes.
func aggStateCost(a *AggCall) string {
	switch {
	case a.Distinct && a.Func != "approx_count_distinct":
		return " [state: the set of distinct values, grows with them]"
	case a.Func == "approx_count_distinct":
		return " [state: HyperLogLog, 14-bit precision, sparse then at most 16 KiB]"
	case a.Func == "approx_quantile":
		return " [state: DDSketch, 1% relative accuracy, at most 2 x 4096 bins]"
	}
	return ""
}
