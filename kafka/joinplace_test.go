package kafka

import (
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

// TestJoinRepartitionedByKeyIdentity: an interval join of two streams
// whose GROUP BY is the column a join key reads under a cast keeps its
// aggregate in the join's partitions only when the cast gives rows of one
// group one key: an INTEGER column does; a DOUBLE column does not (NaN,
// ±Infinity and NULL are one group, but CAST(x AS VARCHAR) routes them to
// three partitions), so its joined rows are repartitioned by the GROUP BY.
func TestJoinRepartitionedByKeyIdentity(t *testing.T) {
	for _, c := range []struct {
		typ  string
		want bool
	}{{"DOUBLE", true}, {"INTEGER", false}, {"BIGINT", false}} {
		prog, err := plan.Compile(`CREATE SOURCE l (x `+c.typ+`, ts TIMESTAMP, WATERMARK FOR ts AS ts);
CREATE SOURCE r (s VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT l.x AS x, count(*) AS n FROM l JOIN r ON CAST(l.x AS VARCHAR) = r.s AND r.ts BETWEEN l.ts AND l.ts + INTERVAL '1' MINUTE GROUP BY l.x`, plan.CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := joinRepartitioned(prog.Queries[0]); got != c.want {
			t.Errorf("a join on CAST(%s AS VARCHAR) grouped by the column: repartitioned %v, want %v", c.typ, got, c.want)
		}
	}
}
