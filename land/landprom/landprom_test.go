package landprom

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/landtest"
)

// gather reads reg into "name{k=v,...}" -> value (histograms: their count
// and cumulative buckets "name_bucket{le=...}").
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			name := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[name] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[f.GetName()+"_count{}"] = float64(m.GetHistogram().GetSampleCount())
				for _, b := range m.GetHistogram().GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					out[f.GetName()+"_bucket{le="+le+"}"] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// TestInstrumentRun: a Go host passes its own registry and gets the
// metrics of land.Run without the CLI: every counter after a real run over
// the in-memory lander, the caller's OnBatch still called, partitions read
// at scrape time, unknown values left out.
func TestInstrumentRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	var hostBatches int
	parts := func() []kafkasrc.PartitionStats {
		return []kafkasrc.PartitionStats{{Topic: "t", Partition: 2, Committed: -1, End: 7}}
	}
	ro, err := Instrument(land.RunOptions{OnBatch: func(land.BatchStats) { hostBatches++ }},
		Options{Reg: reg, Partitions: parts, Info: Info{Topic: "t", Group: "g", Mode: "latest", Store: "memory"}})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Counters == nil {
		t.Fatal("Instrument left Counters nil")
	}
	rec := func(rev uint64) changelog.Record {
		return changelog.Record{Key: []byte(`["a"]`), Value: []byte(`{"n":1}`), Meta: changelog.Meta{Query: "q", Revision: rev}}
	}
	l := landtest.NewMemory(land.Continuous, "")
	notArray := rec(3)
	notArray.Key = []byte(`{"a":1}`)
	src := land.NewSliceSource([]changelog.Record{rec(1), rec(2)}, []changelog.Record{rec(2), rec(1), notArray})
	ro.OnBadRecord = func(land.BadRecord) error { return nil }
	if err := land.Run(context.Background(), src, l, ro); err != nil {
		t.Fatal(err)
	}
	if hostBatches != 2 {
		t.Fatalf("the host's OnBatch ran %d times, want 2", hostBatches)
	}
	got := gather(t, reg)
	for k, v := range map[string]float64{
		"ubik_land_info{group=g,mode=latest,store=memory,topic=t}": 1,
		"ubik_land_records_landed_total{}":                         1, // rev 1 is superseded within its batch
		"ubik_land_records_duplicate_total{}":                      1,
		"ubik_land_records_superseded_total{}":                     2,
		"ubik_land_records_rejected_total{}":                       1,
		"ubik_land_records_bad_total{}":                            0,
		"ubik_land_batches_total{}":                                2,
		"ubik_land_batch_store_seconds_count{}":                    2,
		"ubik_land_partition_end_offset{partition=2,topic=t}":      7,
		"ubik_land_backlog_records{}":                              0,
	} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	for _, k := range []string{"ubik_land_partition_committed_offset{partition=2,topic=t}", "ubik_land_partition_lag_records{partition=2,topic=t}"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s is exported while unknown", k)
		}
	}
	// The registry is the caller's: a second lander in one registry fails,
	// in another it works.
	if _, err := Instrument(land.RunOptions{}, Options{Reg: reg}); err == nil {
		t.Error("registering twice in one registry succeeded")
	}
	if _, err := Instrument(land.RunOptions{}, Options{Reg: prometheus.NewRegistry()}); err != nil {
		t.Errorf("a second registry: %v", err)
	}
}

func TestInstrumentHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	ro, err := Instrument(land.RunOptions{}, Options{Reg: reg})
	if err != nil {
		t.Fatal(err)
	}
	ro.OnBatch(land.BatchStats{StoreTime: 3 * time.Millisecond})
	got := gather(t, reg)
	if got["ubik_land_batch_store_seconds_bucket{le=0.004}"] != 1 || got["ubik_land_batch_store_seconds_bucket{le=0.002}"] != 0 {
		t.Fatalf("a 3ms batch in the buckets: %v", got)
	}
}

// TestInstrumentNil: a nil registry is no metrics, and the options are
// returned as they came.
func TestInstrumentNil(t *testing.T) {
	ro, err := Instrument(land.RunOptions{MaxInFlight: 3}, Options{})
	if err != nil || ro.Counters != nil || ro.OnBatch != nil || ro.MaxInFlight != 3 {
		t.Fatalf("Instrument with no registry changed the options: %+v, %v", ro, err)
	}
}
