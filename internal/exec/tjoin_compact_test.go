package exec

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// wideJoinQuery reads x, y and d of the table, not its name.
func wideJoinQuery(t *testing.T) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(`CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND);
CREATE TABLE v (k VARCHAR, name VARCHAR, x BIGINT, y VARCHAR, d DOUBLE, vt TIMESTAMP,
                PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt - INTERVAL '2' SECOND);
SELECT s.k, sum(v.x), max(v.y), sum(v.d) FROM s LEFT JOIN v FOR SYSTEM_TIME AS OF s.ts ON s.k = v.k GROUP BY s.k`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

func wideVer(k, name string, x int64, y types.Value, d float64, ts int64) []types.Value {
	return []types.Value{types.Str(k), types.Str(name), types.Big(x), y, {Kind: types.KindDouble, F: d}, types.TS(ts)}
}

// TestTemporalJoinKeepsReadColumns: a version holds the cells of the
// columns the query reads, whatever their kind, and a joined row has
// them; a column the query does not read is NULL, as the table decoder
// gives it.
func TestTemporalJoinKeepsReadColumns(t *testing.T) {
	j, err := NewTemporalJoin(wideJoinQuery(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.PushTable(wideVer("a", "Ann", -1<<40, types.Str("Zürich, a long city name"), -1.5, 100*sec)); err != nil {
		t.Fatal(err)
	}
	if _, err := j.PushTable(wideVer("b", "Bob", 7, types.NullOf(types.Varchar), math.Inf(1), 100*sec)); err != nil {
		t.Fatal(err)
	}
	j.EndTable()
	check := func(k string, x int64, y types.Value, d float64) {
		t.Helper()
		row, ok, err := j.JoinNow(ev(k, 200*sec))
		if err != nil || !ok {
			t.Fatalf("JoinNow %s: %v %v", k, ok, err)
		}
		// s.k, s.ts, then v.k, v.name, v.x, v.y, v.d, v.vt
		if !row[3].Null || row[3].Kind != types.KindVarchar {
			t.Fatalf("%s: the unread name is %+v, want NULL", k, row[3])
		}
		if row[4] != types.Big(x) || row[5] != y || row[6].F != d || row[6].Kind != types.KindDouble || row[6].Null {
			t.Fatalf("%s: joined %+v", k, row[2:])
		}
	}
	check("a", -1<<40, types.Str("Zürich, a long city name"), -1.5)
	check("b", 7, types.NullOf(types.Varchar), math.Inf(1))
	if st := j.Stats(); st.Versions != 2 || st.Keys != 2 || st.Joined != 2 || st.Events != 2 || st.Buffered != 0 || st.BufferedPeak != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTemporalJoinNow: an event joins in place only when nothing waits,
// it is not late and the table watermark has passed it (or the table
// ended); otherwise nothing is done or counted.
func TestTemporalJoinNow(t *testing.T) {
	j, _ := NewTemporalJoin(joinQuery(t, "LEFT"), 0)
	j.PushTable(ver("a", 1, 100*sec))
	j.PushTable(ver("a", 2, 110*sec)) // table watermark 108s
	if _, ok, _ := j.JoinNow(ev("a", 108*sec)); ok {
		t.Fatal("joined an event the table watermark has not passed")
	}
	row, ok, err := j.JoinNow(ev("a", 107*sec))
	if err != nil || !ok || row[3].I != 1 {
		t.Fatalf("JoinNow at 107s: %v %v %v", row, ok, err)
	}
	j.PushEvent(ev("a", 120*sec)) // waits
	if _, ok, _ := j.JoinNow(ev("a", 105*sec)); ok {
		t.Fatal("joined an event while an older one waits")
	}
	j.EndTable()
	if _, ok, _ := j.JoinNow(ev("a", 130*sec)); ok {
		t.Fatal("joined an event while one waits")
	}
	if got := released(t, j); len(got) != 1 || got[0] != 2 {
		t.Fatalf("released %v", got)
	}
	// Stream watermark 110s: an event at 99s is late, left to PushEvent.
	if _, ok, _ := j.JoinNow(ev("a", 99*sec)); ok {
		t.Fatal("joined a late event")
	}
	if row, ok, _ := j.JoinNow(ev("z", 200*sec)); !ok || !row[3].Null {
		t.Fatalf("an event without a version: %v %v", row, ok)
	}
	st := j.Stats()
	if st.Events != 3 || st.Joined != 2 || st.Unmatched != 1 || st.LateEvents != 0 || st.StreamWM != 190*sec || st.BufferedPeak != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTemporalJoinRestoresWholeRows restores an entry whose versions hold
// every table column, as joins before versions kept only the columns
// the query reads wrote them: the join has the read cells and writes the
// others NULL.
func TestTemporalJoinRestoresWholeRows(t *testing.T) {
	q := wideJoinQuery(t)
	b := []byte{stateVersion}
	// streamMax, tableMax, StreamWM, TableWM, seq, Events, LateEvents, Joined,
	// Unmatched, NullKeys, TableRows, LateTableRows, BadTableRows, BufferedPeak, VersionsPeak, Dropped
	for _, x := range []int64{math.MinInt64, 100 * sec, math.MinInt64, 98 * sec, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0} {
		b = binary.AppendVarint(b, x)
	}
	b = append(b, 0)               // not ended
	b = binary.AppendUvarint(b, 0) // no waiting event
	b = binary.AppendUvarint(b, 1) // one key
	key := AppendGroupIdentity(nil, []types.Value{types.Str("a")})
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, 1)
	b = appendRow(b, wideVer("a", "Ann", 5, types.Str("Bern"), 0.25, 100*sec))
	j, _ := NewTemporalJoin(q, 0)
	if err := j.RestoreState(b); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.Versions != 1 || st.Keys != 1 || st.TableWM != 98*sec {
		t.Fatalf("stats %+v", st)
	}
	again := j.AppendState(nil)
	if bytes.Equal(again, b) {
		t.Fatal("the unread name was written back")
	}
	k, _ := NewTemporalJoin(q, 0)
	if err := k.RestoreState(again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k.AppendState(nil), again) {
		t.Fatal("a restored join writes different state")
	}
	for _, jj := range []*TemporalJoin{j, k} {
		jj.EndTable()
		row, ok, err := jj.JoinNow(ev("a", 150*sec))
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if !row[3].Null || row[4] != types.Big(5) || row[5] != types.Str("Bern") || row[6].F != 0.25 {
			t.Fatalf("joined %+v", row[2:])
		}
	}
}
