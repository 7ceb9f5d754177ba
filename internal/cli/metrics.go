package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/kafka"
)

// queryMetrics exposes one query's counters to Prometheus. The run loop is
// the only goroutine that may touch the Query, so it publishes snapshots
// (publish) and the collector reads the latest one.
type queryMetrics struct {
	name string
	snap atomic.Pointer[ubik.Stats]
	now  func() time.Time

	eventsIn, malformed, late, evalErrors, recordsOut, finalized *prometheus.Desc
	liveGroups, stateBytes, watermark, watermarkLag, emitP99     *prometheus.Desc
	duplicates, dedupLate, dedupKeys, dedupBytes                 *prometheus.Desc
	unchanged                                                    *prometheus.Desc
	join                                                         joinMetrics
	interval                                                     intervalMetrics
	// inputs names the two inputs of a query that reads two (setInputs):
	// the counters above are then their sums, and these each one's.
	inputs                                 []string
	inputEvents, inputMalformed, inputLate *prometheus.Desc
}

func newQueryMetrics(name string) *queryMetrics {
	l := prometheus.Labels{"query": name}
	d := func(n, help string) *prometheus.Desc { return prometheus.NewDesc("ubik_"+n, help, nil, l) }
	return &queryMetrics{
		name:         name,
		now:          time.Now,
		eventsIn:     d("events_read_total", "Events read from the input (summary: events_read)."),
		malformed:    d("events_malformed_total", "Events that could not be decoded."),
		evalErrors:   d("events_eval_errors_total", "Events rejected by a runtime evaluation error."),
		late:         d("events_late_total", "Events that arrived for a window already final."),
		recordsOut:   d("records_emitted_total", "Changelog records emitted (summary: records_emitted)."),
		finalized:    d("windows_finalized_total", "(group, window) pairs closed."),
		unchanged:    d("records_unchanged_suppressed_total", "Records not emitted because their value equals the last one emitted for the key (summary: unchanged_suppressed)."),
		liveGroups:   d("live_groups", "Live (group, window) states."),
		stateBytes:   d("state_bytes", "Estimated bytes of live operator state."),
		watermark:    d("watermark_seconds", "Event-time watermark, Unix seconds."),
		watermarkLag: d("watermark_lag_seconds", "Wall-clock time minus the watermark."),
		emitP99:      d("emit_latency_p99_seconds", "99th percentile of emission latency (first change to emission)."),
		duplicates:   d("events_duplicate_total", "Events dropped as copies of a dedup key seen within the horizon."),
		dedupLate:    d("events_dedup_late_total", "Events beyond the dedup horizon (a retry can no longer be told from a new event)."),
		dedupKeys:    d("dedup_keys", "Keys remembered for input deduplication."),
		dedupBytes:   d("dedup_state_bytes", "Estimated bytes of the dedup state."),
		join:         newJoinMetrics(d),
		interval: newIntervalMetrics(d, func(n, help string) *prometheus.Desc {
			return prometheus.NewDesc("ubik_"+n, help, []string{"input"}, l)
		}),
	}
}

// setInputs names the two inputs of a query that reads two (nil: one).
func (m *queryMetrics) setInputs(names []string) {
	if len(names) != 2 {
		return
	}
	m.inputs = names
	l := prometheus.Labels{"query": m.name}
	d := func(n, help string) *prometheus.Desc {
		return prometheus.NewDesc("ubik_"+n, help, []string{"input"}, l)
	}
	m.inputEvents = d("input_events_read_total", "Events (or table rows) read from one input of a query that reads two.")
	m.inputMalformed = d("input_events_malformed_total", "Events of one input that could not be decoded.")
	m.inputLate = d("input_events_late_total", "Events of one input that were late (at a window or at the join).")
}

func (m *queryMetrics) publish(s ubik.Stats) { m.snap.Store(&s) }

func (m *queryMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.eventsIn, m.malformed, m.evalErrors, m.late, m.recordsOut, m.finalized,
		m.liveGroups, m.stateBytes, m.watermark, m.watermarkLag, m.emitP99, m.duplicates, m.dedupLate, m.dedupKeys, m.dedupBytes, m.unchanged} {
		ch <- d
	}
	m.join.describe(ch)
	m.interval.describe(ch)
	if m.inputs != nil {
		ch <- m.inputEvents
		ch <- m.inputMalformed
		ch <- m.inputLate
	}
}

func (m *queryMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.snap.Load()
	if s == nil {
		return
	}
	c := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	in, bad, late := s.EventsIn, s.Malformed, s.Late
	if m.inputs != nil {
		// The summary's rule: the totals are both inputs' sums.
		in, bad, late = in+s.Table.RowsIn, bad+s.Table.Malformed, late+s.Table.Late
		for i, v := range [][3]int64{{s.EventsIn, s.Malformed, s.Late}, {s.Table.RowsIn, s.Table.Malformed, s.Table.Late}} {
			for j, d := range []*prometheus.Desc{m.inputEvents, m.inputMalformed, m.inputLate} {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v[j]), m.inputs[i])
			}
		}
	}
	c(m.eventsIn, float64(in))
	c(m.malformed, float64(bad))
	c(m.evalErrors, float64(s.EvalErrors))
	c(m.late, float64(late))
	c(m.recordsOut, float64(s.RecordsOut))
	c(m.finalized, float64(s.WindowsFinalized))
	c(m.unchanged, float64(s.UnchangedSuppressed))
	g(m.liveGroups, float64(s.LiveGroups))
	g(m.stateBytes, float64(s.StateBytes))
	g(m.emitP99, s.LatencyP99/1e9)
	c(m.duplicates, float64(s.Duplicates))
	c(m.dedupLate, float64(s.DedupLate))
	g(m.dedupKeys, float64(s.DedupKeys))
	g(m.dedupBytes, float64(s.DedupBytes))
	m.join.collect(s, c, g)
	m.interval.collect(s, func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}, func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	})
	if s.Watermark != minInt64 {
		wm := float64(s.Watermark) / 1e6
		g(m.watermark, wm)
		g(m.watermarkLag, float64(m.now().UnixMicro())/1e6-wm)
	}
}

// checkMetricsAddr refuses a --metrics-addr without a host part, so the
// endpoint is never exposed beyond loopback by accident (":9464" is
// refused; pass "0.0.0.0:9464" to mean it).
func checkMetricsAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: --metrics-addr %q: %v", ErrUsage, addr, err)
	}
	if host == "" {
		return fmt.Errorf("%w: --metrics-addr %q has no host; use 127.0.0.1:PORT (or 0.0.0.0:PORT to listen on every interface)", ErrUsage, addr)
	}
	return nil
}

// serveMetrics starts the /metrics endpoint of a run's queries on addr; a
// failure after the start is written to logw.
func serveMetrics(ctx context.Context, logw io.Writer, addr string, ms ...*queryMetrics) (stop func(), bound string, err error) {
	if err := checkMetricsAddr(addr); err != nil {
		return nil, "", err
	}
	reg := prometheus.NewRegistry()
	for _, m := range ms {
		if err := reg.Register(m); err != nil {
			return nil, "", err
		}
	}
	return serveRegistry(ctx, logw, addr, reg)
}

// serveRegistry starts the /metrics endpoint on addr for what the caller
// registered in reg (never the default registry: two commands in one
// process, or two tests, must not share metrics). An address that cannot
// be listened on (in use, not this host's) is a configuration error at
// the start, before any work; a failure after the start goes to logw.
func serveRegistry(ctx context.Context, logw io.Writer, addr string, reg prometheus.Gatherer) (stop func(), bound string, err error) {
	if err := checkMetricsAddr(addr); err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("%w: --metrics-addr %s: cannot listen: %v", ErrUsage, addr, unwrapOpError(err))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go serveUntilStopped(srv, ln, logw)
	return func() {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(c)
	}, ln.Addr().String(), nil
}

// serveUntilStopped serves srv on ln until it is shut down. A failure
// before that (the listener broken) is reported on logw: the command goes
// on, without metrics, as it would with --metrics-addr unset.
func serveUntilStopped(srv *http.Server, ln net.Listener, logw io.Writer) {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(logw, "ubik: metrics at http://%s/metrics stopped: %v (the command goes on without them)\n", ln.Addr(), err)
	}
}

// unwrapOpError drops the "listen tcp ADDR: " prefix of a net.OpError
// (the message names the address already) and keeps its cause.
func unwrapOpError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// serveKafkaMetrics exposes the counters of a Kafka run's pipelines and
// the gauges of the operators they own, each series labeled with its
// query, polled once a second (they are atomic, so no lock with a
// pipeline is needed). The watermark is per partition in Kafka and is
// left out.
func serveKafkaMetrics(ctx context.Context, env *Env, addr string, runs []*kafkaRun) (func(), error) {
	var cs []prometheus.Collector
	var pubs []func()
	for _, r := range runs {
		m, pm := newQueryMetrics(r.q.Name()), newPartitionMetrics(r.q.Name())
		cs = append(cs, m, pm)
		pubs = append(pubs, func() { publishKafka(m, pm, r.pl.Stats()) })
	}
	publish := func() {
		for _, p := range pubs {
			p()
		}
	}
	publish()
	reg := prometheus.NewRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	stop, bound, err := serveRegistry(ctx, env.Stderr, addr, reg)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(env.Stderr, "ubik: metrics on http://%s/metrics\n", bound)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				publish()
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); stop() }, nil
}

// publishKafka publishes a pipeline's stats as a query's metrics.
func publishKafka(m *queryMetrics, pm *partitionMetrics, st kafka.Stats) {
	pm.publish(st.IdlePartitions, st.SilentPartitions)
	pm.lost.Store(st.DataLost)
	var s ubik.Stats
	s.EventsIn, s.Malformed, s.EvalErrors, s.Late, s.RecordsOut = st.EventsIn, st.Malformed, st.EvalErrors, st.Late, st.RecordsOut
	s.LiveGroups, s.StateBytes = st.LiveGroups, st.StateBytes
	s.Duplicates, s.DedupLate, s.DedupKeys, s.DedupBytes = st.Duplicates, st.DedupLate, st.DedupKeys, st.DedupBytes
	s.UnchangedSuppressed = st.UnchangedSuppressed
	s.Watermark = minInt64 // per partition in Kafka; not one number
	s.Table.RowsIn, s.Table.Malformed, s.Table.Late = st.TableRows, st.TableMalformed, st.TableLate
	s.Join.Joined, s.Join.Unmatched, s.Join.Buffered, s.Join.Versions, s.Join.Keys = st.JoinJoined, st.JoinUnmatched, st.JoinWaiting, st.JoinVersions, st.JoinKeys
	s.Join.Events = st.JoinJoined + st.JoinUnmatched
	s.Join.TableWM = minInt64 // per partition in Kafka
	m.publish(s)
}

// partitionMetrics names the source partitions of a Kafka query that do
// not move its watermark: idle ones (quiet for the idle timeout, left out
// of the watermark) and silent ones (no event in this run yet, holding the
// watermark back until the idle timeout passes). A partition's series is
// 1 while it is in that state and absent otherwise; the counts are always
// there.
type partitionMetrics struct {
	snap                               atomic.Pointer[[2][]int32]
	lost                               atomic.Int64 // source records deleted before the query read them
	idle, silent, idleCount, silentCnt *prometheus.Desc
	lostDesc                           *prometheus.Desc
}

func newPartitionMetrics(name string) *partitionMetrics {
	l := prometheus.Labels{"query": name}
	return &partitionMetrics{
		idle:      prometheus.NewDesc("ubik_kafka_source_partition_idle", "1 for a source partition quiet for the idle timeout: it no longer holds the watermark back.", []string{"partition"}, l),
		silent:    prometheus.NewDesc("ubik_kafka_source_partition_silent", "1 for a source partition that delivered no event in this run and is not idle yet: it holds the watermark back.", []string{"partition"}, l),
		idleCount: prometheus.NewDesc("ubik_kafka_source_partitions_idle", "Source partitions of this process that are idle.", nil, l),
		silentCnt: prometheus.NewDesc("ubik_kafka_source_partitions_silent", "Source partitions of this process that delivered no event yet and are not idle.", nil, l),
		lostDesc:  prometheus.NewDesc("ubik_kafka_source_records_lost_total", "Source records deleted (retention, DeleteRecords) below the query's committed offsets before it read them (--allow-data-loss).", nil, l),
	}
}

func (m *partitionMetrics) publish(idle, silent []int32) { m.snap.Store(&[2][]int32{idle, silent}) }

func (m *partitionMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.idle, m.silent, m.idleCount, m.silentCnt, m.lostDesc} {
		ch <- d
	}
}

func (m *partitionMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.snap.Load()
	if s == nil {
		return
	}
	for i, d := range []*prometheus.Desc{m.idle, m.silent} {
		for _, p := range s[i] {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 1, fmt.Sprint(p))
		}
	}
	ch <- prometheus.MustNewConstMetric(m.idleCount, prometheus.GaugeValue, float64(len(s[0])))
	ch <- prometheus.MustNewConstMetric(m.silentCnt, prometheus.GaugeValue, float64(len(s[1])))
	ch <- prometheus.MustNewConstMetric(m.lostDesc, prometheus.CounterValue, float64(m.lost.Load()))
}
