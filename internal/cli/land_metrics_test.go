package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/landtest"
	"github.com/ubiksql/ubik/land/redislander"
)

// scrape reads a /metrics page into "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("scraping %s: %s: %s", url, resp.Status, body)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scraping %s: line %q: %v", url, line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLandMetrics runs ubik land with --metrics-addr against the real
// broker and Redis, and scrapes the endpoint while it runs: first after
// three fresh records, then after a stale one, a copy, a newer window, a new
// group and a record that is not a changelog record. Every counter is
// checked exactly, with the committed offsets.
func TestLandMetrics(t *testing.T) {
	brokers := testenv.RequireKafka(t)
	redisAddr := testenv.RequireRedis(t)
	topic := testenv.Name(t, "landmetrics")
	query := testenv.Name(t, "q")
	group := testenv.Name(t, "g")
	prefix := testenv.Name(t, "cli") + "/"

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// One partition: the offsets to expect are the records produced.
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
	defer adm.DeleteTopics(context.Background(), topic)
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	w1 := landtest.Base()
	rec := func(group string, ws time.Time, rev uint64) *kgo.Record {
		return kafkasrc.ToKafka(topic, landtest.Record(land.Latest, query, group, ws, rev, false))
	}

	// Three fresh identities, all landed.
	produce(rec("a", w1, 1), rec("b", w1, 1), rec("c", w1, 1))

	stderr := &syncBuffer{}
	env := &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr, Getenv: func(string) string { return "" }}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- Main(runCtx, env, []string{"land", "--from", "kafka://" + strings.Join(brokers, ",") + "/" + topic,
			"--to", "redis://" + redisAddr + "/0?prefix=" + prefix, "--mode", "latest", "--group", group,
			"--skip-bad-records", "--metrics-addr", "127.0.0.1:0", "--stats-interval", "0"})
	}()
	addrRE := regexp.MustCompile(`metrics on (http://127\.0\.0\.1:\d+/metrics)`)
	var url string
	for deadline := time.Now().Add(20 * time.Second); url == ""; {
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("ubik land exited %d before serving metrics: %s", code, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics address on stderr: %s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}

	part := fmt.Sprintf(`{partition="0",topic=%q}`, topic)
	// waitFor scrapes until the group committed offset want and the
	// counters account for want records (they move right after the commit).
	waitFor := func(want int) map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			m := scrape(t, url)
			counted := m["ubik_land_records_landed_total"] + m["ubik_land_records_duplicate_total"] +
				m["ubik_land_records_superseded_total"] + m["ubik_land_records_bad_total"]
			if m["ubik_land_partition_committed_offset"+part] == float64(want) && counted >= float64(want) {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("offset %d never committed and counted; metrics: %v\nstderr: %s", want, m, stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	check := func(m map[string]float64, want map[string]float64) {
		t.Helper()
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}
		batches := m["ubik_land_batches_total"]
		if batches < 1 || m["ubik_land_batch_store_seconds_count"] != batches {
			t.Errorf("%v batches, %v store round trips observed; want one per batch",
				batches, m["ubik_land_batch_store_seconds_count"])
		}
	}

	m := waitFor(3)
	check(m, map[string]float64{
		"ubik_land_records_landed_total":     3,
		"ubik_land_records_duplicate_total":  0,
		"ubik_land_records_superseded_total": 0,
		"ubik_land_records_bad_total":        0,
		"ubik_land_store_errors_total":       0,
		"ubik_land_commit_errors_total":      0,
		"ubik_land_retries_total":            0,
		"ubik_land_backlog_records":          0,
		fmt.Sprintf(`ubik_land_info{group=%q,mode="latest",store="redis",topic=%q}`, group, topic): 1,
		"ubik_land_partition_committed_offset" + part:                                              3,
		"ubik_land_partition_end_offset" + part:                                                    3,
		"ubik_land_partition_lag_records" + part:                                                   0,
	})

	// A stale record (an earlier window of a), a copy of b, a later window
	// of c, a new group d, and a record with no ubik headers. Distinct
	// identities, so the counts do not depend on how they are batched.
	produce(rec("a", w1.Add(-time.Hour), 5), rec("b", w1, 1), rec("c", w1.Add(time.Hour), 1), rec("d", w1, 1),
		&kgo.Record{Topic: topic, Key: []byte(`["not a changelog record"]`), Value: []byte(`{}`)})
	m = waitFor(8)
	check(m, map[string]float64{
		"ubik_land_records_landed_total":              5,
		"ubik_land_records_duplicate_total":           1,
		"ubik_land_records_superseded_total":          1,
		"ubik_land_records_bad_total":                 1,
		"ubik_land_store_errors_total":                0,
		"ubik_land_commit_errors_total":               0,
		"ubik_land_retries_total":                     0,
		"ubik_land_partition_committed_offset" + part: 8,
		"ubik_land_partition_end_offset" + part:       8,
		"ubik_land_partition_lag_records" + part:      0,
	})
	if m["ubik_land_batches_total"] < 2 {
		t.Errorf("%v batches for two produce rounds landed apart", m["ubik_land_batches_total"])
	}

	stop()
	if code := <-done; code != 0 {
		t.Fatalf("ubik land exited %d: %s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "done: "+topic) || !strings.Contains(stderr.String(), "landed 5, duplicate 1, superseded 1, bad 1, rejected 0, store errors 0") {
		t.Errorf("the exit line disagrees with the metrics: %s", stderr)
	}
	if _, err := http.Get(url); err == nil {
		t.Error("the metrics endpoint outlived ubik land")
	}

	// The store agrees: the stale record of a did not overwrite it.
	rc := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rc.Close()
	rl, err := redislander.New(ctx, redislander.Options{Client: rc, Mode: land.Latest, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for g, want := range map[string]land.Version{
		"a": {WindowStart: w1.UnixMicro(), Revision: 1},
		"c": {WindowStart: w1.Add(time.Hour).UnixMicro(), Revision: 1},
		"d": {WindowStart: w1.UnixMicro(), Revision: 1},
	} {
		st, err := rl.Get(ctx, land.Ref{Query: query, Group: fmt.Appendf(nil, "[%q]", g)})
		if err != nil || st.Version != want {
			t.Errorf("group %s: %+v, %v; want version %+v", g, st.Version, err, want)
		}
	}
}

// TestLandMetricsNoSecrets: the store is named by its kind only, so the
// store URL's password reaches no label (landprom's tests check the rest).
func TestLandMetricsNoSecrets(t *testing.T) {
	for to, kind := range map[string]string{
		"postgres://u:s3cret@h:5432/db?table=t": "postgres", "postgresql://h/db": "postgres",
		"redis://:s3cret@h:6379/0": "redis", "rediss://h:6379/0": "redis",
		"clickhouse://u:s3cret@h:8123/db?table=t": "clickhouse", "dynamodb://h:8000/t": "dynamodb",
		"ftp://s3cret@h": "unknown",
	} {
		if got := storeKind(to); got != kind {
			t.Errorf("storeKind(%s) = %q, want %q", redactURL(to), got, kind)
		}
	}
}
