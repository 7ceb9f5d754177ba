package exec

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

func joinQuery(t *testing.T, kind string) *plan.Query {
	t.Helper()
	prog, err := plan.Compile(`CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND);
CREATE TABLE v (k VARCHAR, x BIGINT, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt - INTERVAL '2' SECOND);
SELECT s.k, sum(v.x) FROM s `+kind+` JOIN v FOR SYSTEM_TIME AS OF s.ts ON s.k = v.k GROUP BY s.k`, plan.CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return prog.Queries[0]
}

const sec = int64(1_000_000)

func ev(k string, ts int64) []types.Value { return []types.Value{types.Str(k), types.TS(ts)} }
func ver(k string, x, ts int64) []types.Value {
	return []types.Value{types.Str(k), types.Big(x), types.TS(ts)}
}

// released drains the releasable events: the x of each joined row, -1 for
// a NULL-extended one.
func released(t *testing.T, j *TemporalJoin) []int64 {
	t.Helper()
	var out []int64
	for {
		row, ok, err := j.Release()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		switch {
		case row == nil:
			out = append(out, -2) // dropped by an inner join
		case row[3].Null:
			out = append(out, -1)
		default:
			out = append(out, row[3].I)
		}
	}
}

func TestTemporalJoinVersions(t *testing.T) {
	j, err := NewTemporalJoin(joinQuery(t, "LEFT"), 0)
	if err != nil {
		t.Fatal(err)
	}
	must := func(late bool, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return late
	}
	must(j.PushTable(ver("a", 1, 100*sec)))
	must(j.PushTable(ver("a", 2, 110*sec)))
	must(j.PushEvent(ev("a", 105*sec)))
	must(j.PushEvent(ev("a", 110*sec))) // the version at exactly its time applies
	// Behind the stream watermark (110s - 10s): late, where the versions
	// it needs may be gone.
	if !must(j.PushEvent(ev("a", 99*sec))) {
		t.Fatal("an event behind the stream watermark was taken")
	}
	must(j.PushEvent(ev("b", 101*sec))) // no such key: NULL-extended
	must(j.PushEvent(ev("a", 100*sec))) // the version at exactly its time
	// The table watermark is 108s: events before it are released, in time order.
	if got := released(t, j); len(got) != 3 || got[0] != 1 || got[1] != -1 || got[2] != 1 {
		t.Fatalf("released %v, want [1 -1 1] (100s, 101s, 105s)", got)
	}
	must(j.PushTable(ver("a", 3, 113*sec)))
	if got := released(t, j); len(got) != 1 || got[0] != 2 {
		t.Fatalf("released %v, want [2]", got)
	}
	// A row behind the table watermark (111s) is late, never applied.
	if !must(j.PushTable(ver("a", 99, 109*sec))) {
		t.Fatal("a table row behind the watermark was applied")
	}
	// A second version of a key at one time replaces the first.
	must(j.PushTable(ver("a", 4, 113*sec)))
	must(j.PushEvent(ev("a", 113*sec)))
	j.EndTable()
	if got := released(t, j); len(got) != 1 || got[0] != 4 {
		t.Fatalf("released %v, want [4]", got)
	}
	st := j.Stats()
	if st.LateTableRows != 1 || st.LateEvents != 1 || st.Joined != 4 || st.Unmatched != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTemporalJoinStateBound pushes a long history of one key's versions
// and events in order: the join keeps only the versions the stream
// watermark has not passed, whatever the history's length.
func TestTemporalJoinStateBound(t *testing.T) {
	j, _ := NewTemporalJoin(joinQuery(t, ""), 0)
	for i := int64(0); i < 100_000; i++ {
		if _, err := j.PushTable(ver("k"+string(rune('a'+i%7)), i, i*sec)); err != nil {
			t.Fatal(err)
		}
		if _, err := j.PushEvent(ev("ka", i*sec)); err != nil {
			t.Fatal(err)
		}
		released(t, j)
		if st := j.Stats(); st.Versions > 2*1024+7*12 || st.Buffered > 3 {
			t.Fatalf("after %d rows: %+v", i, st)
		}
	}
	if st := j.Stats(); st.Dropped < 90_000 || st.Joined < 99_990 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTemporalJoinBufferBound(t *testing.T) {
	j, _ := NewTemporalJoin(joinQuery(t, ""), 3)
	for i := int64(0); i < 3; i++ {
		if _, err := j.PushEvent(ev("a", i*sec)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := j.PushEvent(ev("a", 3*sec))
	if !errors.Is(err, ErrJoinBuffer) {
		t.Fatalf("the fourth event: %v, want ErrJoinBuffer", err)
	}
	if st := j.Stats(); st.Events != 3 || st.Buffered != 3 {
		t.Fatalf("a refused event changed the state: %+v", st)
	}
	j.AdvanceTable(math.MaxInt64)
	if got := released(t, j); len(got) != 3 {
		t.Fatalf("released %v", got)
	}
	if _, err := j.PushEvent(ev("a", 3*sec)); err != nil {
		t.Fatal(err)
	}
}

func TestTemporalJoinStateRoundTrip(t *testing.T) {
	q := joinQuery(t, "LEFT")
	j, _ := NewTemporalJoin(q, 0)
	j.PushTable(ver("a", 1, 100*sec))
	j.PushTable(ver("b\xff", 2, 101*sec))
	j.PushTable([]types.Value{types.Str("c"), types.NullOf(types.BigInt), types.TS(102 * sec)})
	j.PushEvent(ev("a", 150*sec))
	j.PushEvent(ev("b", 150*sec))
	a := j.AppendState(nil)
	k, _ := NewTemporalJoin(q, 0)
	if err := k.RestoreState(a); err != nil {
		t.Fatal(err)
	}
	if b := k.AppendState(nil); !bytes.Equal(a, b) {
		t.Fatal("a restored join writes different state")
	}
	if k.Stats() != j.Stats() {
		t.Fatalf("stats %+v, want %+v", k.Stats(), j.Stats())
	}
	for n := 0; n < len(a); n++ {
		bad, _ := NewTemporalJoin(q, 0)
		if err := bad.RestoreState(a[:n]); !errors.Is(err, ErrBadState) {
			t.Fatalf("a state cut to %d bytes: %v", n, err)
		}
	}
	again, _ := NewTemporalJoin(q, 0)
	again.PushEvent(ev("a", 1))
	if err := again.RestoreState(a); !errors.Is(err, ErrBadState) {
		t.Fatalf("restore into a used join: %v", err)
	}
}

// BenchmarkTemporalJoin: per event, one push, its release and lookup
// among 1,000 keys; a new version of some key every 10 events.
func BenchmarkTemporalJoin(b *testing.B) {
	prog, err := plan.Compile(`CREATE SOURCE s (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND);
CREATE TABLE v (k VARCHAR, x BIGINT, vt TIMESTAMP, PRIMARY KEY (k) NOT ENFORCED, WATERMARK FOR vt AS vt - INTERVAL '2' SECOND);
SELECT s.k, sum(v.x) FROM s JOIN v FOR SYSTEM_TIME AS OF s.ts ON s.k = v.k GROUP BY s.k`, plan.CompileOptions{})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "key" + string(rune('a'+i%26)) + string(rune('a'+i/26%26))
	}
	j, _ := NewTemporalJoin(prog.Queries[0], 0)
	for i := range keys {
		j.PushTable(ver(keys[i], int64(i), 0))
	}
	evRow := ev("", 0)
	vRow := ver("", 0, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts := int64(i) * 1000
		if i%10 == 0 {
			vRow[0], vRow[1], vRow[2] = types.Str(keys[(i*7)%len(keys)]), types.Big(int64(i)), types.TS(ts)
			if _, err := j.PushTable(vRow); err != nil {
				b.Fatal(err)
			}
		}
		evRow[0], evRow[1] = types.Str(keys[i%len(keys)]), types.TS(ts)
		if _, err := j.PushEvent(evRow); err != nil {
			b.Fatal(err)
		}
		for {
			_, ok, _ := j.Release()
			if !ok {
				break
			}
		}
	}
	b.StopTimer()
	if st := j.Stats(); st.Versions > 5000 {
		b.Fatalf("versions not bounded: %+v", st)
	}
}
