package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/land/kafkasrc"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRunKafka drives `ubik run` over Kafka twice: once declared in SQL
// (CREATE SOURCE / CREATE SINK with connector = 'kafka'), once with
// --source/--sink URLs overriding it, against an in-process kfake broker.
func TestRunKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 2, -1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < 300; i++ {
		recs = append(recs, &kgo.Record{Topic: "events", Value: fmt.Appendf(nil, `{"merchant":"m%d","amount":%d,"event_time":"2026-07-18 10:00:%02d"}`, i%3, i, i%60)})
	}
	recs = append(recs, &kgo.Record{Topic: "events", Value: []byte(`{"merchant":"m0","amount":"bad"}`)})
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	sql := fmt.Sprintf(`CREATE SOURCE events (merchant VARCHAR, amount BIGINT, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)
  WITH (connector = 'kafka', brokers = '%s', topic = 'events');
CREATE VIEW totals AS SELECT merchant, count(*) AS orders, sum(amount) AS total FROM events GROUP BY merchant;
CREATE SINK out FROM totals WITH (connector = 'kafka', brokers = '%s', topic = 'out');
`, addr, addr)
	path := filepath.Join(t.TempDir(), "totals.sql")
	if err := os.WriteFile(path, []byte(sql), 0o644); err != nil {
		t.Fatal(err)
	}
	// The query name names the consumer groups: a second query over the
	// same input needs its own name, or it resumes from the first one's
	// committed offsets.
	path2 := filepath.Join(t.TempDir(), "totals2.sql")
	if err := os.WriteFile(path2, []byte(strings.ReplaceAll(sql, "totals", "totals2")), 0o644); err != nil {
		t.Fatal(err)
	}
	path3 := filepath.Join(t.TempDir(), "totals3.sql")
	if err := os.WriteFile(path3, []byte(strings.ReplaceAll(sql, "totals", "totals3")), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for m := 0; m < 3; m++ {
		n, sum := 0, 0
		for i := m; i < 300; i += 3 {
			n++
			sum += i
		}
		want[fmt.Sprintf(`["m%d"]`, m)] = fmt.Sprintf(`{"merchant": "m%d", "orders": %d, "total": %d}`, m, n, sum)
	}
	for _, tc := range []struct {
		name, path, topic string
		args              []string
	}{
		{"sql", path, "out", nil},
		{"urls", path2, "out2", []string{"--source", "kafka://" + addr + "/events", "--sink", "kafka://" + addr + "/out2", "--instance-id", "cli-2"}},
		// --until-caught-up: the command exits 0 by itself.
		{"until-caught-up", path3, "out3", []string{"--sink", "kafka://" + addr + "/out3", "--instance-id", "cli-3", "--until-caught-up"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// cmd/ubik cancels the context with the signal as its cause.
			ctx, cancelCause := context.WithCancelCause(context.Background())
			cancel := func() { cancelCause(StopSignal{Signal: os.Interrupt}) }
			stderr := &syncBuf{}
			env := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: stderr, Getenv: func(string) string { return "" }}
			code := make(chan int, 1)
			go func() { code <- Main(ctx, env, append([]string{"run", tc.path}, tc.args...)) }()
			untilCaughtUp := strings.HasSuffix(tc.name, "caught-up")
			if untilCaughtUp {
				select {
				case c := <-code:
					if c != 0 {
						t.Fatalf("exit status %d\n%s", c, stderr)
					}
				case <-time.After(60 * time.Second):
					cancel()
					t.Fatalf("--until-caught-up did not exit by itself within 60s\n%s", stderr)
				}
			}
			got := consumeLatest(t, addr, tc.topic, want, 30*time.Second)
			cancel()
			if !untilCaughtUp {
				// Stopped by SIGINT: a service's normal stop, 0.
				if c := <-code; c != 0 {
					t.Fatalf("exit status %d, want 0\n%s", c, stderr)
				}
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("key %s: got %s, want %s", k, got[k], v)
				}
			}
			out := stderr.String()
			if !strings.Contains(out, "301 events consumed, 1 malformed") || !strings.Contains(out, "offset") {
				t.Errorf("summary or bad-event report missing:\n%s", out)
			}
			if untilCaughtUp != strings.Contains(out, ", caught up") {
				t.Errorf("summary says caught up: %v, want %v:\n%s", !untilCaughtUp, untilCaughtUp, out)
			}
		})
	}
}

func consumeLatest(t *testing.T, addr, topic string, want map[string]string, timeout time.Duration) map[string]string {
	t.Helper()
	return consumeUntil(t, addr, topic, timeout, func(got map[string]string) bool {
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	})
}

// consumeUntil reads topic's committed records from its start, each
// key's latest value, until done says so or timeout passes.
func consumeUntil(t *testing.T, addr, topic string, timeout time.Duration, done func(map[string]string) bool) map[string]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]string{}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if _, err := kafkasrc.Decode(r); err != nil {
				t.Errorf("sink record: %v", err)
			}
			got[string(r.Key)] = string(r.Value)
		})
		if done(got) {
			break
		}
	}
	return got
}
