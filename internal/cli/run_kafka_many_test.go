package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// manyScript has two queries no other reads, over one view they both
// read: by_merchant (a continuous total per merchant) and per_minute (the
// windows of minute, a TUMBLE view, counted per merchant), and
// busiest (the largest window of each merchant, read from minute too).
const manyScript = `CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (%[1]s);
CREATE VIEW minute AS SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS ws, count(*) AS n
  FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE) EMIT FINAL;
CREATE VIEW by_merchant AS SELECT merchant, count(*) AS orders, sum(amount) AS total FROM events GROUP BY merchant;
CREATE VIEW per_minute AS SELECT merchant, count(*) AS windows, sum(n) AS events FROM minute GROUP BY merchant;
CREATE VIEW busiest AS SELECT merchant, max(n) AS top FROM minute GROUP BY merchant;
CREATE SINK bm FROM by_merchant WITH (%[2]s);
CREATE SINK pm FROM per_minute WITH (%[3]s);
CREATE SINK bu FROM busiest WITH (%[4]s);
`

// TestRunKafkaSeveralQueries: `ubik run` over Kafka runs every query of a
// script that no other reads, side by side, each from its own pipeline:
// each sink topic holds what a file run of the script writes, a view two
// queries read is published by each to its own topic, and the flags and
// topics that would give one topic two writers are refused; one query's
// failure stops the others and fails the run.
func TestRunKafkaSeveralQueries(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	dir := t.TempDir()
	var lines bytes.Buffer
	var recs []*kgo.Record
	for i := 0; i < 600; i++ {
		v := fmt.Appendf(nil, `{"merchant":"m%d","amount":%d,"event_time":"2026-07-18 10:%02d:%02d"}`, i%4, i, i/60, i%60)
		lines.Write(append(v, '\n'))
		recs = append(recs, &kgo.Record{Topic: "events", Value: v})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 3, -1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(in, lines.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k := func(topic string) string {
		return fmt.Sprintf("connector = 'kafka', brokers = '%s', topic = '%s'", addr, topic)
	}
	sql := fmt.Sprintf(manyScript, k("events"), k("bm-out"), k("pm-out"), k("bu-out"))
	// The oracle: the same script over the file, each query to its path.
	p := func(path string) string { return fmt.Sprintf("path = '%s'", path) }
	fileSQL := script("files.sql", fmt.Sprintf(manyScript, p(in), p(dir+"/by_merchant.tsv"), p(dir+"/per_minute.tsv"), p(dir+"/busiest.tsv")))
	if code, out := runMain(t, "run", fileSQL, "--output-dir", dir); code != 0 {
		t.Fatalf("file run: exit status %d\n%s", code, out)
	}
	kafkaSQL := script("many.sql", sql)
	code, out := runMain(t, "run", kafkaSQL, "--until-caught-up", "--instance-id", "many-1")
	if code != 0 {
		t.Fatalf("exit status %d\n%s", code, out)
	}
	for q, topic := range map[string]string{"by_merchant": "bm-out", "per_minute": "pm-out", "busiest": "bu-out"} {
		want := lastValues(t, filepath.Join(dir, q+".tsv"))
		got := consumeLatest(t, addr, topic, want, 30*time.Second)
		if len(got) != len(want) || len(want) != 4 {
			t.Errorf("%s: %d keys, the file run %d", q, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s key %s: %s, the file run %s", q, k, got[k], v)
			}
		}
		if !strings.Contains(out, "ubik: "+q+": 600 events consumed") {
			t.Errorf("no summary of %s:\n%s", q, out)
		}
	}
	// The view both read, published by each to its own topic.
	want := lastValues(t, filepath.Join(dir, "minute.tsv"))
	for _, topic := range []string{"pm-out-minute", "bu-out-minute"} {
		got := consumeKeys(t, addr, topic, 40, 30*time.Second)
		if len(got) != 40 || len(want) != 40 {
			t.Errorf("%s: %d keys of view minute, the file run %d, want 40 (4 merchants, 10 minutes)", topic, len(got), len(want))
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s key %s: %s, the file run %s", topic, k, got[k], v)
			}
		}
	}
	refusals(t, addr, sql, script)
	t.Run("stopped", func(t *testing.T) {
		// A service's stop (SIGINT) ends every query's open transaction
		// and exits 0; each summary says why it ended.
		stopped := script("stop.sql", strings.NewReplacer("by_merchant", "bm3", "per_minute", "pm3", "busiest", "bu3",
			"'bm-out'", "'bm3-out'", "'pm-out'", "'pm3-out'", "'bu-out'", "'bu3-out'").Replace(sql))
		ctx, cancelCause := context.WithCancelCause(context.Background())
		out := &syncBuf{}
		env := &Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: out, Getenv: func(string) string { return "" }}
		code := make(chan int, 1)
		go func() { code <- Main(ctx, env, []string{"run", stopped, "--instance-id", "many-3"}) }()
		consumeKeys(t, addr, "bm3-out", 4, 30*time.Second)
		cancelCause(StopSignal{Signal: os.Interrupt})
		select {
		case c := <-code:
			if c != 0 || strings.Count(out.String(), ": stopped (") != 3 {
				t.Errorf("exit status %d, want 0 and three stopped summaries:\n%s", c, out)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("not stopped within 30s of SIGINT:\n%s", out)
		}
	})
}

// refusals: what a run of several queries, or of one of them, refuses.
func refusals(t *testing.T, addr, sql string, script func(name, text string) string) {
	viewSink := script("viewsink.sql", sql+fmt.Sprintf("CREATE SINK mi FROM minute WITH (connector = 'kafka', brokers = '%s', topic = 'mi-out');\n", addr))
	sameSink := script("samesink.sql", strings.Replace(sql, "topic = 'bu-out'", "topic = 'pm-out'", 1))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"sink flag", []string{script("flag.sql", sql), "--sink", "kafka://" + addr + "/x"}, "--sink is one query's changelog topic, and this run runs queries by_merchant, per_minute, busiest"},
		{"view sink, together", []string{viewSink}, "queries per_minute and busiest both read a view whose changelog goes to CREATE SINK mi (view minute)"},
		{"view sink, apart", []string{viewSink, "--query", "per_minute"}, "view minute's changelog goes to CREATE SINK mi, and query busiest reads minute too"},
		{"one topic", []string{sameSink}, "are both topic pm-out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := runMain(t, append([]string{"run"}, tc.args...)...)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit status %d, want 2 saying %q:\n%s", code, tc.want, out)
			}
		})
	}
	t.Run("one fails", func(t *testing.T) {
		// A sink topic that is not compacted stops its query at start:
		// the others stop with it, and the run fails naming it.
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		del := "delete"
		if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, -1, map[string]*string{"cleanup.policy": &del}, "bu2-out"); err != nil {
			t.Fatal(err)
		}
		// New names: a query name is bound to its topics.
		failing := script("fails.sql", strings.NewReplacer("by_merchant", "bm2", "per_minute", "pm2", "busiest", "bu2",
			"'bm-out'", "'bm2-out'", "'pm-out'", "'pm2-out'", "'bu-out'", "'bu2-out'").Replace(sql))
		code, out := runMain(t, "run", failing, "--instance-id", "many-2")
		if code != 1 || !strings.Contains(out, "query bu2: ") || !strings.Contains(out, "bu2-out") {
			t.Errorf("exit status %d, want 1 naming query bu2 and its topic:\n%s", code, out)
		}
	})
}

// runMain runs the CLI with args and returns its exit status and output.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out := &syncBuf{}
	env := &Env{Stdin: strings.NewReader(""), Stdout: out, Stderr: out, Getenv: func(string) string { return "" }}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return Main(ctx, env, args), out.String()
}

// consumeKeys reads topic until it has n keys or timeout passes.
func consumeKeys(t *testing.T, addr, topic string, n int, timeout time.Duration) map[string]string {
	t.Helper()
	return consumeUntil(t, addr, topic, timeout, func(got map[string]string) bool { return len(got) >= n })
}

// lastValues reads a TSV changelog: each key's last value.
func lastValues(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		out[k] = v
	}
	return out
}
