package exec

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/sql/plan"
	"github.com/ubiksql/ubik/types"
)

// The state-bytes gauge is an estimate (StateCost plus key bytes plus the
// growth of growing aggregates); it must track what the heap really holds
// per live (group, window), or the figure bench/run reports means nothing.
func TestStateBytesTrackHeap(t *testing.T) {
	cases := map[string]string{
		"tumble std": `SELECT merchant, count(*), sum(amount), max(amount) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT EARLY EVERY INTERVAL '1' SECOND`,
		"hop count":  `SELECT merchant, count(*) FROM events GROUP BY merchant, HOP(event_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND)`,
		"continuous": `SELECT merchant, count(*), avg(amount), min(event_time) FROM events GROUP BY merchant`,
		"session":    `SELECT merchant, count(*), sum(amount) FROM events GROUP BY merchant, SESSION(event_time, INTERVAL '10' SECOND)`,
		"boxed":      `SELECT merchant, min(customer), stddev_samp(amount), bool_or(amount > 10) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`,
		"distinct":   `SELECT merchant, count(DISTINCT customer) FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)`,
		"two keys":   `SELECT merchant, customer, count(*) FROM events GROUP BY merchant, customer, TUMBLE(event_time, INTERVAL '1' MINUTE)`,
	}
	for name, sql := range cases {
		t.Run(name, func(t *testing.T) {
			prog, err := plan.Compile(benchSource+sql, plan.CompileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var clock int64
			op, err := New(prog.Queries[0], Config{Emit: func(*changelog.Record) error { return nil }, Nanotime: func() int64 { clock++; return clock }})
			if err != nil {
				t.Fatal(err)
			}
			const n = 60000
			row := make([]types.Value, 5)
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			for i := 0; i < 3*n; i++ {
				// n groups, three events each (the distinct case sees three
				// customers per group), all within one minute.
				g := i % n
				row[0] = types.Str("e")
				row[1] = types.Str(fmt.Sprintf("m%d", g))
				row[2] = types.Str(fmt.Sprintf("c%d", i%7))
				row[3] = types.Float(float64(i%500) + 0.25)
				row[4] = types.TS(36000000000 + int64(i)*100)
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
