package exec

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/sql/plan"
	"github.com/ubiksql/ubik/internal/types"
)

// The state-bytes gauge is an estimate (StateCost plus key bytes plus the
// growth of growing aggregates); it must track what the heap really holds
// per live (group, window), or the figure bench/run reports means nothing.
func TestStateBytesTrackHeap(t *testing.T) {
	type shape struct {
		sql              string
		groups, perGroup int // events: groups × perGroup, all within one minute
	}
	cases := map[string]shape{
		"tumble std":     {`SELECT merchant, count(*), sum(amount), max(amount) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND`, 60000, 3},
		"hop count":      {`SELECT merchant, count(*) FROM events GROUP BY merchant, HOP(event_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)`, 60000, 3},
		"continuous":     {`SELECT merchant, count(*), avg(amount), min(event_time) FROM events GROUP BY merchant`, 60000, 3},
		"session":        {`SELECT merchant, count(*), sum(amount) FROM events GROUP BY merchant, SESSION(event_time, INTERVAL '10' SECOND)`, 60000, 3},
		"boxed":          {`SELECT merchant, min(customer), stddev_samp(amount), bool_or(amount > 10) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, 60000, 3},
		"distinct":       {`SELECT merchant, count(DISTINCT customer) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, 60000, 3},
		"distinct wide":  {`SELECT merchant, count(DISTINCT customer) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, 1000, 300},
		"sketches":       {`SELECT merchant, approx_count_distinct(customer), approx_quantile(amount, 0.5) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, 60000, 3},
		"sketches wide":  {`SELECT merchant, approx_count_distinct(customer), approx_quantile(amount, 0.5) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, 1000, 300},
		"exact sum wide": {`SELECT merchant, sum(amount), avg(amount) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`, 4000, 100},
		"two keys":       {`SELECT merchant, customer, count(*) FROM events GROUP BY merchant, customer, TUMBLE(event_time, INTERVAL '1' MINUTE)`, 60000, 3},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			prog, err := plan.Compile(benchSource+c.sql, plan.CompileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var clock int64
			op, err := New(prog.Queries[0], Config{Emit: func(*changelog.Record) error { return nil }, Nanotime: func() int64 { clock++; return clock }})
			if err != nil {
				t.Fatal(err)
			}
			n := c.groups
			row := make([]types.Value, 5)
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			for i := 0; i < c.perGroup*n; i++ {
				g := i % n
				row[0] = types.Str("e")
				row[1] = types.Str(fmt.Sprintf("m%d", g))
				row[2] = types.Str(fmt.Sprintf("c%d", i%(7+c.perGroup*n/10)))
				row[3] = types.Float(float64(i%977)*1.37 + 0.25)
				row[4] = types.TS(36000000000 + int64(i)*50000000/int64(c.perGroup*n))
				if err := op.Process(row); err != nil {
					t.Fatal(err)
				}
			}
			if err := op.EmitEarly(); err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if f := os.Getenv("UBIK_HEAP_PROFILE"); f != "" {
				fh, _ := os.Create(f)
				_ = pprof.WriteHeapProfile(fh)
				fh.Close()
			}
			st := op.Stats()
			real := float64(int64(ms.HeapAlloc)-int64(before)) / float64(st.LiveGroups)
			est := float64(st.StateBytes) / float64(st.LiveGroups)
			t.Logf("%s: %d live: heap %.0f B per live (group, window), gauge %.0f", name, st.LiveGroups, real, est)
			if est < real*0.8 || est > real*1.2 {
				t.Errorf("state gauge %.0f B per group, heap %.0f: more than 20%% apart", est, real)
			}
			runtime.KeepAlive(op)
		})
	}
}
