package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestParse(t *testing.T) {
	o, err := parse(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.port != 9092 || o.brokers != 1 || o.autoTopic || o.dataDir != "" || o.configs["log.cleaner.backoff.ms"] != "1000" {
		t.Fatalf("defaults: %+v", o)
	}
	o, err = parse([]string{"--broker-config", "log.cleaner.backoff.ms=5", "--brokers", "3", "--allow-auto-topic-creation"}, io.Discard)
	if err != nil || o.configs["log.cleaner.backoff.ms"] != "5" || o.brokers != 3 || !o.autoTopic {
		t.Fatalf("flags: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--port", "0"}, {"--brokers", "0"}, {"--port", "65535", "--brokers", "2"}, {"--broker-config", "novalue"}, {"extra"}, {"--log-level", "loud"}} {
		if code := run(bad, io.Discard, io.Discard, nil); code != 2 {
			t.Errorf("run(%q) = %d, want 2", bad, code)
		}
	}
}

// TestRun starts the broker, checks it prints ready, refuses to auto-create
// a topic, serves a created one, and exits 0 on SIGTERM.
func TestRun(t *testing.T) {
	port := freePort(t)
	pr, pw := io.Pipe()
	stop := make(chan os.Signal, 1)
	exit := make(chan int, 1)
	go func() { exit <- run([]string{"--port", strconv.Itoa(port)}, pw, io.Discard, stop); pw.Close() }()

	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("first stdout line %q, %v; want ready", line, err)
	}
	go io.Copy(io.Discard, pr)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("t"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// A client that asks for auto-creation must still be refused.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "auto", Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("producing to a missing topic succeeded: auto-creation must be off by default")
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("fetched %d records", len(recs))
	}

	stop <- syscall.SIGTERM
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit status %d after SIGTERM, want 0", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30s after SIGTERM")
	}
}

// TestCPUProfile: --cpuprofile writes a profile that ends at the stop, and
// a profile file that cannot be created is refused before the broker starts.
func TestCPUProfile(t *testing.T) {
	prof := t.TempDir() + "/cpu.prof"
	port := freePort(t)
	pr, pw := io.Pipe()
	stop := make(chan os.Signal, 1)
	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"--port", strconv.Itoa(port), "--cpuprofile", prof}, pw, io.Discard, stop)
		pw.Close()
	}()
	if line, err := bufio.NewReader(pr).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("first stdout line %q, %v; want ready", line, err)
	}
	go io.Copy(io.Discard, pr)
	stop <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile: %d bytes, %v; want a gzipped pprof profile", len(b), err)
	}
	var stderr strings.Builder
	if code := run([]string{"--port", strconv.Itoa(freePort(t)), "--cpuprofile", t.TempDir() + "/no/such/dir/p"}, io.Discard, &stderr, nil); code != 2 ||
		!strings.Contains(stderr.String(), "--cpuprofile") {
		t.Fatalf("unwritable profile: exit %d, stderr %q; want 2 naming --cpuprofile", code, stderr.String())
	}
}
