package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ubiksql/ubik"
)

// runExplain prints the plan of each query in a script: source and
// watermark, window, key layout, aggregates with their state cost, HAVING,
// projection, emit policy, and the memory model.
func runExplain(ctx context.Context, env *Env, args []string) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	setUsage(fs, env, "usage: ubik explain QUERY.sql [--query NAME]\n\nprints the plan of each query of the script: source and watermark, window, key layout, aggregates and their state cost, emit policy; then the script's dataflow: its nodes, the exchanges where rows are repartitioned, and the segments between them",
		"ubik explain examples/merchant_totals.sql",
		"ubik explain views.sql --query hourly")
	query := fs.String("query", "", "explain only this query")
	sqlPath, rest := splitPositional(args)
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	sqlPath, err := onePositional(fs, sqlPath)
	if err != nil {
		return err
	}
	if sqlPath == "" {
		return fmt.Errorf("%w: explain needs a query file", ErrUsage)
	}
	text, err := os.ReadFile(sqlPath)
	if err != nil {
		return err
	}
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		return err
	}
	prog, err := eng.CompileViews(string(text), strings.TrimSuffix(filepath.Base(sqlPath), filepath.Ext(sqlPath)))
	if err != nil {
		return inferHint(sqlError(sqlPath, err), string(text), false)
	}
	resolveScriptPaths(prog, sqlPath)
	var b strings.Builder
	for _, s := range prog.Sources() {
		b.WriteString(s.Explain() + "\n")
	}
	for _, g := range prog.Graph() {
		b.WriteString("graph: " + g + "\n")
	}
	found := false
	for _, q := range prog.Queries() {
		if *query != "" && q.Name() != *query {
			continue
		}
		found = true
		b.WriteString(q.Explain())
		explainState(&b, q)
	}
	if !found {
		return fmt.Errorf("%w: no query named %q", ErrUsage, *query)
	}
	if *query == "" {
		// The physical plan: nodes, the placement each input needs, the
		// exchanges where it changes, and the segments between them.
		df, err := prog.ExplainDataflow()
		if err != nil {
			return sqlError(sqlPath, err)
		}
		b.WriteString("dataflow:\n" + df)
	}
	_, err = fmt.Fprint(env.Stdout, b.String())
	return err
}

func explainState(b *strings.Builder, q *planQuery) {
	c := q.StateCost()
	total := c.Overhead
	fmt.Fprintf(b, "  state per live (group, window): ~%d bytes + key text", c.Overhead)
	for _, a := range c.Aggregates {
		total += a.Bytes
		grows := ""
		if a.Grows {
			grows = "+"
		}
		fmt.Fprintf(b, "; %s %d%s", a.Name, a.Bytes, grows)
	}
	fmt.Fprintf(b, " (total ~%d bytes; + grows with input)\n", total)
	var positions []string
	for _, p := range c.WindowPositions {
		positions = append(positions, fmt.Sprint(p))
	}
	if d := c.Dedup; d != nil {
		fmt.Fprintf(b, "  dedup: first copy of each %s wins within %s of event time behind the watermark; state: one entry per key within the horizon (~%d bytes + the key), evicted as the watermark passes it\n",
			d.Column, d.Within, d.EntryBytes)
	}
	if j := c.IntervalJoin; j != nil {
		fmt.Fprintf(b, "  interval join state: %s; at most --join-buffer rows (default %d) of both inputs together: one more stops the run\n",
			heldRowCost(j), ubik.DefaultJoinBuffer)
	}
	switch {
	case !c.Windowed:
		b.WriteString("  memory: one entry per distinct group, kept for the life of the query (a continuous view never closes)\n")
	case c.Session:
		fmt.Fprintf(b, "  memory: one entry per open session; dropped when it closes. window cells at key positions [%s]\n", strings.Join(positions, ", "))
	default:
		fmt.Fprintf(b, "  memory: one entry per open (group, window); dropped when the window's final record is emitted. window cells at key positions [%s]\n", strings.Join(positions, ", "))
	}
}
