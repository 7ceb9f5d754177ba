package ubik

import (
	"maps"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/handle"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// Program is a compiled script: its sources, its queries and its sinks
// (see Engine.Compile). Its Plans, Sources and Sinks are each one value
// for the life of the Program, so they compare with ==.
type Program struct {
	p *plan.Program
	c *catalog
}

// catalog gives each compiled query and source of a program one wrapper.
type catalog struct {
	plans   map[*plan.Query]*Plan
	sources map[*plan.Source]*Source
}

func newProgram(p *plan.Program) *Program {
	return &Program{p: p, c: &catalog{plans: map[*plan.Query]*Plan{}, sources: map[*plan.Source]*Source{}}}
}

func (c *catalog) plan(q *plan.Query) *Plan {
	if q == nil {
		return nil
	}
	if p := c.plans[q]; p != nil {
		return p
	}
	p := &Plan{planHandle: handle.New(q), q: q, c: c}
	c.plans[q] = p
	return p
}

func (c *catalog) source(s *plan.Source) *Source {
	if s == nil {
		return nil
	}
	if w := c.sources[s]; w != nil {
		return w
	}
	w := &Source{s: s, c: c}
	c.sources[s] = w
	return w
}

// Queries returns the script's queries, in script order.
func (p *Program) Queries() []*Plan {
	out := make([]*Plan, len(p.p.Queries))
	for i, q := range p.p.Queries {
		out[i] = p.c.plan(q)
	}
	return out
}

// Sources returns the sources the script declares and those registered
// before it was compiled.
func (p *Program) Sources() []*Source {
	out := make([]*Source, len(p.p.Sources))
	for i, s := range p.p.Sources {
		out[i] = p.c.source(s)
	}
	return out
}

// Sink returns the CREATE SINK that q writes to, or nil.
func (p *Program) Sink(q *Plan) *Sink {
	for _, s := range p.p.Sinks {
		if s.Query == q.q.Name {
			return &Sink{s: s}
		}
	}
	return nil
}

// Explain renders the program as text: its sources, each query's plan
// (see Plan.Explain) and its sinks.
func (p *Program) Explain() string { return p.p.Explain() }

// Graph describes, one line per edge, which query reads which view.
func (p *Program) Graph() []string { return p.p.Graph() }

// ExplainDataflow renders the script's physical plan: its nodes, the
// placement each input needs, the exchanges where it changes and the
// segments between them.
func (p *Program) ExplainDataflow() (string, error) {
	df, err := dataflow.Lower(p.p)
	if err != nil {
		return "", err
	}
	return df.Explain(), nil
}

// ResolvePaths makes each relative path option of the script's sources,
// tables and sinks relative to dir (the script's own directory, as a C
// #include is), except a Kafka connector's. Options are shared by the
// plan's copies of a source, so each is changed once.
func (p *Program) ResolvePaths(dir string) {
	seen := map[uintptr]bool{}
	fix := func(opts map[string]string) {
		if opts == nil {
			return
		}
		id := reflect.ValueOf(opts).Pointer()
		if seen[id] {
			return
		}
		seen[id] = true
		path := opts["path"]
		if path == "" || path == "-" || filepath.IsAbs(path) || strings.EqualFold(opts["connector"], "kafka") {
			return
		}
		opts["path"] = filepath.Join(dir, path)
	}
	for _, s := range p.p.Sources {
		fix(s.Options)
	}
	for _, s := range p.p.Sinks {
		fix(s.Options)
	}
}

// Plan is one compiled query of a Program.
type Plan struct {
	planHandle // for the Kafka runtime of this module (internal/handle)
	q          *plan.Query
	c          *catalog
}

// planHandle is unexported so that the embedded field is.
type planHandle = handle.Plan

// Name is the query's name (CREATE VIEW's, or the script's for a bare
// SELECT).
func (p *Plan) Name() string { return p.q.Name }

// Explain renders the query's plan: its source and watermark, window,
// key layout, aggregates, HAVING, projection and emit policy.
func (p *Plan) Explain() string { return p.q.Explain() }

// Views returns the views the query reads directly: its source's, or
// those of the two inputs of an interval join (the left first).
func (p *Plan) Views() []*Plan {
	vs := p.q.Views()
	out := make([]*Plan, len(vs))
	for i, v := range vs {
		out[i] = p.c.plan(v)
	}
	return out
}

// Source is the row the query reads: a declared source, a view's output,
// or the row a join makes of its inputs.
func (p *Plan) Source() *Source { return p.c.source(p.q.Source) }

// TemporalJoin returns the stream and the versioned table of the query's
// temporal join (ok false without one).
func (p *Plan) TemporalJoin() (stream, table *Source, ok bool) {
	if j := p.q.Join; j != nil {
		return p.c.source(j.Stream), p.c.source(j.Table), true
	}
	return nil, nil, false
}

// IntervalJoin returns the two streams of the query's interval join (ok
// false without one).
func (p *Plan) IntervalJoin() (left, right *Source, ok bool) {
	if j := p.q.IJoin; j != nil {
		return p.c.source(j.Left), p.c.source(j.Right), true
	}
	return nil, nil, false
}

// EarlyEvery is the interval of an EMIT EARLY query's early records (0
// for any other).
func (p *Plan) EarlyEvery() time.Duration {
	return time.Duration(p.q.Emit.EarlyEvery) * time.Microsecond
}

// Columns are the query's output columns, in SELECT order.
func (p *Plan) Columns() []Column { return columnsOf(p.q) }

// Source is a source a Program reads: declared by CREATE SOURCE or
// CREATE TABLE, a view's output, or a join's row.
type Source struct {
	s *plan.Source
	c *catalog
}

// Name is the source's name.
func (s *Source) Name() string { return s.s.Name }

// Options returns a copy of the source's WITH (...) options, keys
// lowercased.
func (s *Source) Options() map[string]string { return maps.Clone(s.s.Options) }

// Option returns one WITH option ("" when absent).
func (s *Source) Option(key string) string { return s.s.Options[key] }

// View returns the view whose output the source is, or nil.
func (s *Source) View() *Plan { return s.c.plan(s.s.View) }

// Explain renders the source's declaration as explain prints it, on one
// line.
func (s *Source) Explain() string {
	text := (&plan.Program{Sources: []*plan.Source{s.s}}).Explain()
	line, _, _ := strings.Cut(text, "\n")
	return line
}

// Sink is a CREATE SINK statement: where a query's changelog goes.
type Sink struct{ s *plan.Sink }

// Name is the sink's name.
func (s *Sink) Name() string { return s.s.Name }

// Options returns a copy of the sink's WITH (...) options, keys
// lowercased.
func (s *Sink) Options() map[string]string { return maps.Clone(s.s.Options) }

// Option returns one WITH option ("" when absent).
func (s *Sink) Option(key string) string { return s.s.Options[key] }
