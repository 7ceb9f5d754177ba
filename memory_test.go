package ubik_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
)

// TestMemoryFlatAsWindowsClose pushes 10M events with 10M distinct keys
// over 1000 one-second windows (10k keys per window) and checks that the
// live heap stays flat: each window's state is dropped when it finalizes,
// so memory follows the open windows, not the stream.
func TestMemoryFlatAsWindowsClose(t *testing.T) {
	const (
		events    = 10_000_000
		perWindow = 10_000
	)
	eng, _ := ubik.Open(ubik.DefaultOptions())
	finals := 0
	q, err := eng.Start(`CREATE SOURCE ev (k VARCHAR, v DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'jsonl');
		SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' SECOND)`,
		ubik.QueryOptions{OnRecord: func(r changelog.Record) error { finals++; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro()
	row := make([]ubik.Value, 3)
	heapAt := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var early, peak uint64
	var livePeak int64
	for i := 0; i < events; i++ {
		row[0] = ubik.Varchar("key-" + strconv.Itoa(i)) // every key is new
		row[1] = ubik.Double(float64(i % 1000))
		row[2] = ubik.TimestampMicros(base + int64(i)*(1_000_000/perWindow))
		if err := q.PushRow(row); err != nil {
			t.Fatal(err)
		}
		if i%1_000_000 == 999_999 {
			h := heapAt()
			if st := q.Stats(); st.LiveGroups > livePeak {
				livePeak = st.LiveGroups
			}
			if i < 2_000_000 {
				early = max(early, h)
			} else {
				peak = max(peak, h)
			}
			t.Logf("after %d events: heap %d MB, live groups %d", i+1, h>>20, q.Stats().LiveGroups)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if finals != events {
		t.Fatalf("%d final records, want %d", finals, events)
	}
	if livePeak > 3*perWindow {
		t.Errorf("live groups peaked at %d; at most about two windows (%d) should be open", livePeak, 2*perWindow)
	}
	// Flat: the heap late in the stream is within 25% (+4 MB of slack for
	// the runtime) of the heap after the first 2M events.
	if peak > early+early/4+4<<20 {
		t.Errorf("heap grew from %d MB to %d MB while windows closed", early>>20, peak>>20)
	}
}
