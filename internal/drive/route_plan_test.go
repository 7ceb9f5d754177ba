package drive

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// routePlanScript has a query of each placement a decoded source gets:
// by a GROUP BY expression, by a dedup key (before a dedup stage, and
// before a temporal join that deduplicates where it joins), by each side's
// join key, by a temporal join stream's GROUP BY, and a table's broadcast.
const routePlanScript = `CREATE SOURCE ev (id VARCHAR, c VARCHAR, k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE dd (id VARCHAR, c VARCHAR, k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (dedup_key = 'id', dedup_within = '1 hour');
CREATE SOURCE rr (k BIGINT, w BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE TABLE tt (k BIGINT, r VARCHAR, ts TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR ts AS ts);
CREATE VIEW grouped AS SELECT lower(c) AS c, count(*) AS n FROM ev GROUP BY lower(c);
CREATE VIEW deduped AS SELECT c, count(*) AS n FROM dd GROUP BY c;
CREATE VIEW ij AS SELECT e.k AS k, count(*) AS n FROM ev e JOIN rr r ON e.k = r.k AND r.ts BETWEEN e.ts AND e.ts + INTERVAL '1' MINUTE GROUP BY e.k;
CREATE VIEW tj AS SELECT e.c AS c, count(*) AS n FROM ev e JOIN tt FOR SYSTEM_TIME AS OF e.ts AS t ON e.k = t.k GROUP BY e.c;
CREATE VIEW tjd AS SELECT t.r AS r, count(*) AS n FROM dd e JOIN tt FOR SYSTEM_TIME AS OF e.ts AS t ON e.k = t.k GROUP BY t.r`

// TestExchangeRouterFromPlan: the router the plan gives each exchange
// fed by a decode node places every record as the router of its
// consumer's kind does, byte for byte, with the same counts; a table's
// broadcast has none.
func TestExchangeRouterFromPlan(t *testing.T) {
	qs := scriptQueries(t, routePlanScript)
	recs := [][]byte{
		[]byte(`{"id":"a","c":"X","k":1,"w":2,"r":"z","ts":"2024-01-01T00:00:00Z"}`),
		[]byte(`{"id":"b","c":"x","k":-0.0,"w":1,"r":"y","ts":"2024-01-01T00:00:01Z"}`),
		[]byte(`{"id":null,"c":null,"k":null,"w":null,"r":null,"ts":"2024-01-01T00:00:02Z"}`),
		[]byte(`{"id":"a","c":"\u00e9","k":3,"w":4,"r":"\"","ts":"2024-01-01T00:00:03Z"}`),
		[]byte(`not json`),
	}
	cases := []struct {
		query, source string
		want          func(q *plan.Query, dec *exec.Decoder) (Placer, error) // nil: a broadcast
	}{
		{"grouped", "ev", func(q *plan.Query, dec *exec.Decoder) (Placer, error) { return NewRouter(q, Config{Decoder: dec}) }},
		{"deduped", "dd", func(q *plan.Query, dec *exec.Decoder) (Placer, error) { return NewDedupRouter(q, Config{Decoder: dec}) }},
		{"ij", "ev", func(q *plan.Query, dec *exec.Decoder) (Placer, error) {
			return NewIntervalRouter(q, 0, Config{Decoder: dec})
		}},
		{"ij", "rr", func(q *plan.Query, dec *exec.Decoder) (Placer, error) {
			return NewIntervalRouter(q, 1, Config{Decoder: dec})
		}},
		{"tj", "ev", func(q *plan.Query, dec *exec.Decoder) (Placer, error) { return NewRouter(q, Config{Decoder: dec}) }},
		{"tj", "tt", nil},
		{"tjd", "dd", func(q *plan.Query, dec *exec.Decoder) (Placer, error) { return NewDedupRouter(q, Config{Decoder: dec}) }},
		{"tjd", "tt", nil},
	}
	for _, c := range cases {
		t.Run(c.query+"/"+c.source, func(t *testing.T) {
			q := qs[c.query]
			p, err := dataflow.LowerQueries([]*plan.Query{q})
			if err != nil {
				t.Fatal(err)
			}
			x := decodedExchange(t, p, c.source)
			dec := exec.NewSourceDecoder(p.Node(p.Node(x).Inputs[0].From).Source, nil)
			got, err := NewExchangeRouter(p, x, Config{Decoder: dec})
			if err != nil {
				t.Fatal(err)
			}
			if c.want == nil {
				if got != nil {
					t.Fatalf("a broadcast got a router %T", got)
				}
				return
			}
			want, err := c.want(q, exec.NewSourceDecoder(p.Node(p.Node(x).Inputs[0].From).Source, nil))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
				t.Fatalf("router %T, want %T", got, want)
			}
			keys := map[string]bool{}
			for i, r := range recs {
				gk, gerr := got.Route([]byte{1}, r)
				wk, werr := want.Route([]byte{1}, r)
				if !bytes.Equal(gk, wk) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Errorf("record %d: key %q (%v), want %q (%v)", i, gk, gerr, wk, werr)
				}
				if gk != nil {
					keys[string(gk)] = true
				}
			}
			if len(keys) < 2 {
				t.Errorf("%d distinct keys of %d records", len(keys), len(recs))
			}
			// -0.0 is no BIGINT, and one record is no JSON.
			if g, w := got.TakeCounts(), want.TakeCounts(); g != w || g.Malformed != 2 {
				t.Errorf("counts %+v, want %+v with two malformed", g, w)
			}
			placesDecoded(t, c.want, q, p, x, recs)
		})
	}
}

// placesDecoded checks Placer.Place: a placer handed the row another
// placer of the same input decoded places each record as its own Route
// does, counting no event; a record that does not decode leaves no row.
func placesDecoded(t *testing.T, mk func(*plan.Query, *exec.Decoder) (Placer, error), q *plan.Query, p *dataflow.Plan, x int, recs [][]byte) {
	t.Helper()
	src := p.Node(p.Node(x).Inputs[0].From).Source
	dec := exec.NewSourceDecoder(src, nil)
	first, err1 := mk(q, dec)
	placed, err2 := mk(q, dec)
	alone, err3 := mk(q, exec.NewSourceDecoder(src, nil))
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		_, ferr := first.Route([]byte{1}, r)
		wk, werr := alone.Route([]byte{1}, r)
		row := first.Decoded()
		if row == nil {
			if ferr == nil || werr == nil {
				t.Errorf("record %d: no row decoded, errors %v and %v", i, ferr, werr)
			}
			continue
		}
		gk, gerr := placed.Place([]byte{1}, r, row)
		if !bytes.Equal(gk, wk) || fmt.Sprint(errors.Unwrap(gerr)) != fmt.Sprint(errors.Unwrap(werr)) {
			t.Errorf("record %d placed: key %q (%v), want %q (%v)", i, gk, gerr, wk, werr)
		}
	}
	if n := placed.TakeCounts(); n.Events != 0 || n.Malformed != 0 {
		t.Errorf("a placer that decodes nothing counted %+v", n)
	}
}

// TestExchangeRouterNotGroupKey: an exchange into an aggregate that
// places its rows by other cells than the aggregate's group key (as a
// view placed by the join key of a join after it would be) gets no group
// key router: its host takes the key for the group's.
func TestExchangeRouterNotGroupKey(t *testing.T) {
	qs := scriptQueries(t, routePlanScript)
	p, err := dataflow.LowerQueries([]*plan.Query{qs["deduped"]})
	if err != nil {
		t.Fatal(err)
	}
	// The exchange after the dedup places by c, the group key; place it
	// by id instead, as a plan placing the view for a join by id would.
	for _, n := range p.Nodes {
		if n.Kind == dataflow.Exchange && p.Node(n.Inputs[0].From).Kind == dataflow.Decode {
			n.Out = dataflow.Partitioning{Kind: dataflow.Hash, Rule: dataflow.GroupIdentity, Cols: []int{0}, Names: []string{"id"}}
			c := p.Node(p.Consumers(n.ID)[0])
			if c.Kind != dataflow.Dedup {
				t.Fatalf("the decoded events go to a %s", c.Kind)
			}
			// Skip the dedup: the decode feeds the aggregate.
			agg := p.Aggregate(qs["deduped"])
			agg.Inputs[0].From = n.ID
			c.Kind = dataflow.Sink // no longer a consumer of n
			c.Inputs = nil
			dec := exec.NewSourceDecoder(p.Node(n.Inputs[0].From).Source, nil)
			if r, err := NewExchangeRouter(p, n.ID, Config{Decoder: dec}); err == nil || !strings.Contains(err.Error(), "not by its group key") {
				t.Fatalf("router %T, error %v", r, err)
			}
			return
		}
	}
	t.Fatal("no decoded exchange")
}

// decodedExchange is the exchange of p fed by the decode node of source.
func decodedExchange(t *testing.T, p *dataflow.Plan, source string) int {
	t.Helper()
	for _, n := range p.Nodes {
		if n.Kind == dataflow.Exchange && p.Node(n.Inputs[0].From).Kind == dataflow.Decode && p.Node(n.Inputs[0].From).Name == source {
			return n.ID
		}
	}
	t.Fatalf("no exchange fed by decoding %s", source)
	return -1
}
