package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRunFlagScope: every ubik run flag is classified as applying to runs
// over files only, to Kafka runs only, or to both, and a flag given to a
// run it does not apply to is a usage error (exit 2) naming it, never
// ignored. A new flag fails the test until it is classified. The Kafka runs
// here name a broker that does not exist: the refusal comes before any
// connection.
func TestRunFlagScope(t *testing.T) {
	both := map[string]bool{"query": true, "quiet": true, "no-progress": true, "late-output": true,
		"metrics-addr": true, "cpuprofile": true, "join-buffer": true}
	dir := t.TempDir()
	sql := filepath.Join(dir, "totals.sql")
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(sql, []byte(commitSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(events, []byte(`{"merchant":"m0","amount":1,"event_time":"2026-07-18 10:00:00"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A valid value for each flag that takes one, so that only the scope
	// can refuse it.
	value := map[string]string{
		"input": events, "output": filepath.Join(dir, "out.tsv"), "output-dir": filepath.Join(dir, "outdir"),
		"format": "jsonl", "state-dir": filepath.Join(dir, "state"), "checkpoint-interval": "2s",
		"max-bad": "5", "dead-letter": filepath.Join(dir, "bad.jsonl"), "stats-json": filepath.Join(dir, "stats.json"),
		"threads": "2", "source": events, "sink": filepath.Join(dir, "sink.tsv"), "from": "earliest",
		"idle-timeout": "1s", "instance-id": "a", "log-level": "warn", "commit-interval": "100ms", "commit-records": "1000", "join-buffer": "1000", "give-up-after": "1m",
	}
	env, out, errb := runTestEnv("")
	Main(context.Background(), env, []string{"run", "--help"})
	help := out.String() + errb.String()
	names := regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(help, -1)
	if len(names) < 20 {
		t.Fatalf("ubik run --help lists %d flags:\n%s", len(names), help)
	}
	kafkaRun := []string{"run", sql, "--source", "kafka://127.0.0.1:1/events", "--sink", "kafka://127.0.0.1:1/out"}
	var files, kafkas int
	for _, m := range names {
		name := m[1]
		arg := []string{"--" + name}
		if v, ok := value[name]; ok {
			arg = append(arg, v)
		}
		_, file := fileOnly(name)
		switch {
		case both[name]:
			if file || kafkaOnly(name) {
				t.Errorf("--%s: classified both as applying to every run and to one", name)
			}
		case file && kafkaOnly(name):
			t.Errorf("--%s: classified as file-only and Kafka-only", name)
		case file:
			files++
			code, errs := kafkaCLI(t, "", append(kafkaRun, arg...)...)
			if want := "--" + name + " applies to runs over files only"; code != 2 || !strings.Contains(errs, want) {
				t.Errorf("Kafka run with %v: exit %d, want 2 and %q:\n%s", arg, code, want, errs)
			}
		case kafkaOnly(name):
			kafkas++
			want := "--" + name + " applies to Kafka runs only"
			if name == "source" || name == "sink" {
				want = "--" + name + " takes a kafka:// URL and applies to Kafka runs only"
			}
			code, errs := kafkaCLI(t, "", append([]string{"run", sql, "--input", events}, arg...)...)
			if code != 2 || !strings.Contains(errs, want) {
				t.Errorf("file run with %v: exit %d, want 2 and %q:\n%s", arg, code, want, errs)
			}
		default:
			t.Errorf("--%s is not classified: add it to fileOnly or kafkaOnly (run_kafka.go), or to this test's both", name)
		}
	}
	if files < 10 || kafkas < 10 {
		t.Errorf("%d file-only and %d Kafka-only flags checked, want at least 10 each", files, kafkas)
	}
	// The flags that apply to both, and a plain file run, still run.
	if code, errs := kafkaCLI(t, "", "run", sql, "--input", events, "--quiet", "--no-progress",
		"--late-output", filepath.Join(dir, "late.jsonl"), "--query", "totals"); code != 0 {
		t.Fatalf("file run with flags that apply to both: exit %d:\n%s", code, errs)
	}
}
