package cli

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A window join of two views over two different sources, run from two
// files: the first source from --input, the second from its path.
const viewJoinRunSQL = `
CREATE SOURCE impressions (id BIGINT, campaign VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (format = 'jsonl');
CREATE SOURCE clicks (impression_id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (format = 'jsonl', path = '%s');
CREATE VIEW shown AS SELECT id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n
  FROM impressions GROUP BY id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW clicked AS SELECT impression_id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS c
  FROM clicks GROUP BY impression_id, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW both_seen AS SELECT s.id, TUMBLE_START(s.ws, INTERVAL '10' SECOND) AS ws, sum(s.n) AS n, sum(k.c) AS c
  FROM shown s JOIN clicked k ON s.id = k.impression_id AND s.ws = k.ws
  GROUP BY s.id, TUMBLE(s.ws, INTERVAL '10' SECOND) EMIT FINAL;`

// TestKill9ResumeViewJoinTwoSources kills `ubik run --state-dir` of the
// join at random points and reruns it: the changelog equals an
// uninterrupted run's byte for byte (both files' positions and every
// view's state are in the checkpoint).
func TestKill9ResumeViewJoinTwoSources(t *testing.T) {
	bin := buildUbik(t)
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 60_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewJoinRunSQL, clicks), 0o644)
	args := func(out, state string) []string {
		a := []string{"run", sql, "--query", "both_seen", "--input", imps, "--output", out, "--format", "jsonl", "--no-progress"}
		if state != "" {
			a = append(a, "--state-dir", state, "--checkpoint-interval", "10ms")
		}
		return a
	}
	ref := filepath.Join(dir, "ref.jsonl")
	out, err := exec.Command(bin, args(ref, "")...).CombinedOutput()
	if err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "120000 right rows read") {
		t.Fatalf("the run did not read the second file whole:\n%s", out)
	}
	got := filepath.Join(dir, "got.jsonl")
	state := filepath.Join(dir, "state")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))
	kills := 0
	for kills < 6 {
		cmd := exec.Command(bin, args(got, state)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			os.RemoveAll(state)
			continue
		case <-time.After(time.Duration(30+r.IntN(400)) * time.Millisecond):
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		kills++
	}
	if out, err := exec.Command(bin, args(got, state)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	refB, _ := os.ReadFile(ref)
	gotB, _ := os.ReadFile(got)
	if bytes.Count(refB, []byte("\n")) < 1000 || !bytes.Equal(refB, gotB) {
		t.Fatalf("after %d kills the changelog differs from the uninterrupted run (%d vs %d bytes)", kills, len(refB), len(gotB))
	}
}

// TestViewJoinTwoSourcesExplain: explain's graph shows both branches of
// the join, one line per source.
func TestViewJoinTwoSourcesExplain(t *testing.T) {
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, viewJoinRunSQL, filepath.Join(dir, "clicks.jsonl")), 0o644)
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", sql}); code != 0 {
		t.Fatalf("explain: exit %d: %s", code, errb)
	}
	want := "graph: impressions -> shown -> both_seen\ngraph: clicks -> clicked -> both_seen\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("explain lacks %q:\n%s", want, out)
	}
}
