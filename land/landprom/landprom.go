// Package landprom exposes land.Run's counters to Prometheus, for the
// ubik land command and for any Go host that runs land.Run itself: the
// registry is passed in (as Prometheus's own promql.EngineOpts.Reg is),
// nil means no metrics, and nothing is registered anywhere else, so two
// landers in one process each use their own registry.
package landprom

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
)

// Info names what a lander does, for the ubik_land_info metric. Labels end
// up in every dashboard: put no URL here (a store URL may carry a
// password), only the store's kind.
type Info struct {
	Topic, Group, Mode, Store string
}

// Options say where the metrics go.
type Options struct {
	// Reg receives the metrics; nil means no metrics.
	Reg prometheus.Registerer
	// Info labels the ubik_land_info metric.
	Info Info
	// Partitions, when set, reports the Kafka source's per-partition
	// offsets at scrape time (kafkasrc.Source.Partitions).
	Partitions func() []kafkasrc.PartitionStats
}

// Instrument registers a lander's metrics in o.Reg and returns ro set up
// to feed them: ro.Counters (allocated when nil) is read at scrape time,
// and ro.OnBatch (the caller's, if any, still runs after) observes the
// store round trip of each batch. With a nil o.Reg it returns ro
// unchanged. Registering twice in one registry fails.
func Instrument(ro land.RunOptions, o Options) (land.RunOptions, error) {
	if o.Reg == nil {
		return ro, nil
	}
	if ro.Counters == nil {
		ro.Counters = new(land.Counters)
		ro.Counters.Lag.Store(-1)
	}
	m, err := newMetrics(o.Reg, ro.Counters, o.Partitions, o.Info)
	if err != nil {
		return ro, err
	}
	next := ro.OnBatch
	ro.OnBatch = func(s land.BatchStats) {
		m.observe(s)
		if next != nil {
			next(s)
		}
	}
	return ro, nil
}

// metrics exposes a lander to Prometheus. The counters are land.Run's
// own (land.Counters, atomic, read at scrape time); the per-partition
// offsets are the Kafka source's view, read from the client without a
// request; the store round trip is observed by the OnBatch hook.
type metrics struct {
	c     *land.Counters
	parts func() []kafkasrc.PartitionStats

	infoVals                                          []string
	info, landed, duplicate, superseded, bad, batches *prometheus.Desc
	rejected                                          *prometheus.Desc
	storeErrors, commitErrors, retries, backlog       *prometheus.Desc
	partCommitted, partEnd, partLag                   *prometheus.Desc
	storeTime                                         prometheus.Histogram
}

// newMetrics registers a lander's metrics in reg. parts may be nil.
func newMetrics(reg prometheus.Registerer, c *land.Counters, parts func() []kafkasrc.PartitionStats, info Info) (*metrics, error) {
	d := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("ubik_land_"+n, help, labels, nil)
	}
	m := &metrics{
		c: c, parts: parts,
		infoVals:      []string{info.Topic, info.Group, info.Mode, info.Store},
		info:          d("info", "The lander's topic, consumer group, mode and store kind; always 1.", "topic", "group", "mode", "store"),
		landed:        d("records_landed_total", "Records written: a new identity, or a higher (window_start, revision)."),
		duplicate:     d("records_duplicate_total", "Records equal to the stored version: no-op successes."),
		superseded:    d("records_superseded_total", "Stale records refused by the guard (the stored version is higher)."),
		bad:           d("records_bad_total", "Records skipped as not changelog records (--skip-bad-records)."),
		rejected:      d("records_rejected_total", "Records that can never land (the lander or the store refuses them), set aside (--skip-bad-records)."),
		batches:       d("batches_total", "Batches landed and committed."),
		storeErrors:   d("store_errors_total", "Failed store writes (each attempt)."),
		commitErrors:  d("commit_errors_total", "Failed offset commits (each attempt)."),
		retries:       d("retries_total", "Failed store writes and commits that were retried."),
		backlog:       d("backlog_records", "Records fetched past the last batch handed out, summed over the assigned partitions, as of the last commit."),
		partCommitted: d("partition_committed_offset", "The consumer group's committed offset (next record to land).", "topic", "partition"),
		partEnd:       d("partition_end_offset", "The partition's end (last stable offset) as of the last fetch.", "topic", "partition"),
		partLag:       d("partition_lag_records", "End offset minus committed offset.", "topic", "partition"),
		storeTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ubik_land_batch_store_seconds",
			Help:    "Store round trip of each committed batch: the Land call that succeeded.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1ms .. 16s
		}),
	}
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	if err := reg.Register(m.storeTime); err != nil {
		return nil, err
	}
	return m, nil
}

// observe is the land.RunOptions.OnBatch hook.
func (m *metrics) observe(s land.BatchStats) {
	m.storeTime.Observe(s.StoreTime.Seconds())
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.info, m.landed, m.duplicate, m.superseded, m.bad, m.rejected, m.batches,
		m.storeErrors, m.commitErrors, m.retries, m.backlog, m.partCommitted, m.partEnd, m.partLag} {
		ch <- d
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	c := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	g := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	g(m.info, 1, m.infoVals...)
	c(m.landed, m.c.Landed.Load())
	c(m.duplicate, m.c.Duplicate.Load())
	c(m.superseded, m.c.Superseded.Load())
	c(m.bad, m.c.Skipped.Load())
	c(m.rejected, m.c.Rejected.Load())
	c(m.batches, m.c.Batches.Load())
	c(m.storeErrors, m.c.StoreErrors.Load())
	c(m.commitErrors, m.c.CommitErrors.Load())
	c(m.retries, m.c.Retried.Load())
	if lag := m.c.Lag.Load(); lag >= 0 {
		g(m.backlog, lag)
	}
	if m.parts == nil {
		return
	}
	for _, p := range m.parts() {
		n := strconv.Itoa(int(p.Partition))
		if p.Committed >= 0 {
			g(m.partCommitted, p.Committed, p.Topic, n)
		}
		if p.End >= 0 {
			g(m.partEnd, p.End, p.Topic, n)
		}
		if lag := p.Lag(); lag >= 0 {
			g(m.partLag, lag, p.Topic, n)
		}
	}
}
