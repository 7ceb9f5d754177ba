package cli

import (
	"net/url"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
)

// landInfo names what a lander does, for the info metric. It holds no URL:
// a store URL may carry a password, and labels end up in every dashboard.
type landInfo struct {
	topic, group, mode, store string
}

// storeKind is the store a --to URL names (redis, dynamodb, postgres,
// clickhouse), without anything else of the URL.
func storeKind(to string) string {
	u, err := url.Parse(to)
	if err != nil {
		return "unknown"
	}
	switch u.Scheme {
	case "redis", "rediss":
		return "redis"
	case "postgres", "postgresql":
		return "postgres"
	case "dynamodb", "clickhouse":
		return u.Scheme
	}
	return "unknown"
}

// landMetrics exposes a lander to Prometheus. The counters are land.Run's
// own (land.Counters, atomic, read at scrape time); the per-partition
// offsets are the Kafka source's view, read from the client without a
// request; the store round trip is observed by the OnBatch hook.
type landMetrics struct {
	c     *land.Counters
	parts func() []kafkasrc.PartitionStats

	infoVals                                          []string
	info, landed, duplicate, superseded, bad, batches *prometheus.Desc
	storeErrors, commitErrors, retries, backlog       *prometheus.Desc
	partCommitted, partEnd, partLag                   *prometheus.Desc
	storeTime                                         prometheus.Histogram
}

// newLandMetrics registers a lander's metrics in reg. parts may be nil.
func newLandMetrics(reg prometheus.Registerer, c *land.Counters, parts func() []kafkasrc.PartitionStats, info landInfo) (*landMetrics, error) {
	d := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("ubik_land_"+n, help, labels, nil)
	}
	m := &landMetrics{
		c: c, parts: parts,
		infoVals:      []string{info.topic, info.group, info.mode, info.store},
		info:          d("info", "The lander's topic, consumer group, mode and store kind; always 1.", "topic", "group", "mode", "store"),
		landed:        d("records_landed_total", "Records written: a new identity, or a higher (window_start, revision)."),
		duplicate:     d("records_duplicate_total", "Records equal to the stored version: no-op successes."),
		superseded:    d("records_superseded_total", "Stale records refused by the guard (the stored version is higher)."),
		bad:           d("records_bad_total", "Records skipped as not changelog records (--skip-bad-records)."),
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
func (m *landMetrics) observe(s land.BatchStats) {
	m.storeTime.Observe(s.StoreTime.Seconds())
}

func (m *landMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.info, m.landed, m.duplicate, m.superseded, m.bad, m.batches,
		m.storeErrors, m.commitErrors, m.retries, m.backlog, m.partCommitted, m.partEnd, m.partLag} {
		ch <- d
	}
}

func (m *landMetrics) Collect(ch chan<- prometheus.Metric) {
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
