package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/testenv"
)

// TestRunKafkaSignalStop runs `ubik run` over Kafka as a real process
// against the real broker (scripts/services.sh), with a source whose event
// time is a computed column over epoch milliseconds, and stops it with
// SIGINT, then (resumed) with SIGTERM: each stop prints one "stopped"
// summary line and exits 0 (a service's normal stop, as ubik land's), and
// the sink holds the results the computed column implies.
func TestRunKafkaSignalStop(t *testing.T) {
	brokers := testenv.RequireKafka(t)
	addr := brokers[0]
	bin := buildUbik(t)
	in, out := testenv.Name(t, "in"), testenv.Name(t, "out")
	view := testenv.Name(t, "v")
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, []byte(fmt.Sprintf(`CREATE SOURCE clicks (k VARCHAR, ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ms, 3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'json');
CREATE VIEW %s AS SELECT k, count(*) AS n, max(ts) AS last FROM clicks WHERE ts >= TIMESTAMP '2026-07-18 10:00:00' GROUP BY k;
`, view)), 0o644)
	var events strings.Builder
	for i := 0; i < 40; i++ {
		// 1784368800000 ms is 2026-07-18 10:00:00; one event is earlier
		// (filtered by the computed column), one lacks ms (malformed).
		fmt.Fprintf(&events, `{"k":"k%d","ms":%d}`+"\n", i%2, 1784368800000+int64(i)*1500)
	}
	events.WriteString(`{"k":"k0","ms":1784368700000}` + "\n" + `{"k":"k1"}` + "\n")
	to := "kafka://" + addr + "/" + in
	if code, errs := kafkaCLI(t, events.String(), "produce", "--to", to, "--partitions", "2"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	want := map[string]string{
		`["k0"]`: `{"k": "k0", "n": 20, "last": "2026-07-18 10:00:57"}`,
		`["k1"]`: `{"k": "k1", "n": 20, "last": "2026-07-18 10:00:58.5"}`,
	}
	args := []string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/" + out, "--instance-id", "sig", "--log-level", "warn"}
	for _, tc := range []struct {
		sig    syscall.Signal
		status int
		name   string
	}{{syscall.SIGINT, 0, "interrupted by SIGINT"}, {syscall.SIGTERM, 0, "terminated by SIGTERM"}} {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if tc.sig == syscall.SIGINT {
			// Stop once the results are in the sink: the run is surely
			// past its start and idle, waiting for more input.
			got := consumeLatest(t, addr, out, want, 60*time.Second)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("sink key %s: got %s, want %s", k, got[k], v)
				}
			}
		} else {
			time.Sleep(3 * time.Second) // resumed from the committed offsets: nothing new to read
		}
		cmd.Process.Signal(tc.sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%s: no exit within 60s\n%s", tc.sig, stderr.String())
		}
		if got := cmd.ProcessState.ExitCode(); got != tc.status {
			t.Errorf("%s: exit status %d, want %d\n%s", tc.sig, got, tc.status, stderr.String())
		}
		var summaries []string
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, "events consumed") {
				summaries = append(summaries, l)
			}
		}
		wantPrefix := "ubik: " + view + ": stopped (" + tc.name + "): "
		if len(summaries) != 1 || !strings.HasPrefix(summaries[0], wantPrefix) {
			t.Errorf("%s: want one summary line starting %q, got:\n%s", tc.sig, wantPrefix, stderr.String())
		}
		if tc.sig == syscall.SIGINT && !strings.Contains(stderr.String(), "42 events consumed, 1 malformed") {
			t.Errorf("first run: want 42 events consumed, 1 malformed:\n%s", stderr.String())
		}
	}
}

// TestRunKafkaStopWhileStarting: a SIGTERM that lands while ubik run is
// still starting (here before it reached the broker) is a stop like a
// later one: a "stopped" line, and exit status 0 for the service, 143 for
// a run with --until-caught-up (it did not reach its end). It used to end
// without a word (seen in the chaos test: an instance restarted a moment
// before the stop).
func TestRunKafkaStopWhileStarting(t *testing.T) {
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, []byte(restartSQL), 0o644)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(StopSignal{Signal: syscall.SIGTERM})
	for _, c := range []struct {
		extra []string
		want  int
	}{{nil, 0}, {[]string{"--until-caught-up"}, 143}} {
		env, _, errb := runTestEnv("")
		// Nothing listens on port 1: the start is stopped, not refused.
		code := Main(ctx, env, append([]string{"run", sql, "--source", "kafka://127.0.0.1:1/in", "--sink", "kafka://127.0.0.1:1/out"}, c.extra...))
		if code != c.want || !strings.Contains(errb.String(), "stopped (terminated by SIGTERM) while starting") {
			t.Errorf("%q: exit %d, stderr %q; want %d and a stopped line", c.extra, code, errb.String(), c.want)
		}
	}
}
