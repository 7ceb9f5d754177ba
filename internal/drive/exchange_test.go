package drive

import (
	"bytes"
	"testing"

	"github.com/ubiksql/ubik/internal/dataflow"
	"github.com/ubiksql/ubik/internal/exec"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// exchangeScript adds to segmentScript a join of np and ns on
// expressions of their columns, and a view grouped by an expression.
const exchangeScript = segmentScript + `
CREATE VIEW qe AS SELECT p.id + 1 AS k, TUMBLE_START(p.ws, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM np p JOIN ns a ON p.id + 1 = a.seller + 1 AND p.ws = a.ws GROUP BY p.id + 1, TUMBLE(p.ws, INTERVAL '1' SECOND) EMIT FINAL;
CREATE VIEW ge AS SELECT seller % 3 AS s, TUMBLE_START(ts, INTERVAL '1' SECOND) AS ws, count(*) AS n FROM auction GROUP BY seller % 3, TUMBLE(ts, INTERVAL '1' SECOND) EMIT FINAL;`

// TestExchangeKeys: the keys of the exchanges into a join's segment,
// as the plan places them, are equal for the rows that meet there,
// whichever segment sends them: an event of auction (whose view ns runs
// in the join's segment) and a row of np (from its own segment); a row
// of each view, placed by expressions of their join keys. An exchange
// by a GROUP BY expression keys as the aggregate's group key does, and
// an interval join's streams as its router (exec.IntervalRoute).
func TestExchangeKeys(t *testing.T) {
	qs := scriptQueries(t, exchangeScript)
	// keyOf is the key of row sent by the first exchange of query's plan
	// whose producer is named from.
	keyOf := func(query, from string, row ...types.Value) []byte {
		t.Helper()
		p, err := dataflow.LowerQueries([]*plan.Query{qs[query]})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range p.Nodes {
			if n.Kind == dataflow.Exchange && p.Node(n.Inputs[0].From).Name == from {
				k, err := NewExchangeKeys(p, n.ID)
				if err != nil {
					t.Fatal(err)
				}
				key, err := k.Append([]byte{1}, row)
				if err != nil {
					t.Fatal(err)
				}
				return key
			}
		}
		t.Fatalf("no exchange from %s in the plan of %s", from, query)
		return nil
	}
	ws, ts := types.TS(1_000_000), types.TS(1_200_000)
	np := func(id int64) []types.Value { return []types.Value{types.Big(id), types.Str("n"), ws, types.Big(1)} }
	ns := func(seller int64) []types.Value { return []types.Value{types.Big(seller), ws, types.Big(2)} }
	auction := func(seller int64) []types.Value { return []types.Value{types.Big(seller), ts} }
	want := AppendGroupIdentity([]byte{1}, []types.Value{types.Big(5)})
	for _, c := range []struct {
		name      string
		left, got []byte
	}{
		{"q: np's row and auction's event", keyOf("q", "np", np(5)...), keyOf("q", "auction", auction(5)...)},
		{"qe: np's row and ns's, by id + 1 and seller + 1", keyOf("qe", "np", np(4)...), keyOf("qe", "ns", ns(4)...)},
	} {
		if !bytes.Equal(c.left, want) || !bytes.Equal(c.got, want) {
			t.Errorf("%s: keys %x and %x, want both %x", c.name, c.left, c.got, want)
		}
	}
	if a, b := keyOf("q", "np", np(5)...), keyOf("q", "auction", auction(6)...); bytes.Equal(a, b) {
		t.Errorf("q: np's id 5 and auction's seller 6 share the key %x", a)
	}
	row := auction(7)
	g, err := exec.NewGroupKeys(qs["ge"]).Append([]byte{1}, row)
	if err != nil {
		t.Fatal(err)
	}
	if got := keyOf("ge", "auction", row...); !bytes.Equal(got, g) {
		t.Errorf("ge: the exchange's key %x, the group key %x", got, g)
	}
	for side, from := range []string{"person", "auction"} {
		r, err := exec.NewIntervalRoute(qs["pa"], side)
		if err != nil {
			t.Fatal(err)
		}
		row := []types.Value{types.Big(3), types.Str("n"), ts}
		if side == 1 {
			row = auction(3)
		}
		want, err := r.Append([]byte{1}, row)
		if err != nil {
			t.Fatal(err)
		}
		if got := keyOf("qp", from, row...); !bytes.Equal(got, want) {
			t.Errorf("qp: the key of %s's event into pa %x, its interval route %x", from, got, want)
		}
	}
}
