package cli

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/ubiksql/ubik/internal/testenv"
)

// TestMetricsAddrInUse: a --metrics-addr whose port is taken is a
// configuration error at the start (exit 2) naming the address, for a file
// run, a Kafka run and ubik land, never a command that runs on without its
// metrics.
func TestMetricsAddrInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic("events", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("totals", 1, nil); err != nil {
		t.Fatal(err)
	}
	k := "kafka://" + c.ListenAddrs()[0]
	// One record in the changelog topic, so that land does not stop at
	// once as caught up: it stops at its metrics, before reading it.
	if code, errs := kafkaCLI(t, `{"x":1}`+"\n", "produce", "--to", k+"/totals"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	sql := filepath.Join(t.TempDir(), "totals.sql")
	if err := os.WriteFile(sql, []byte(restartSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	input := `{"merchant":"m","amount":1,"event_time":"2026-07-18 10:00:00"}` + "\n"
	for name, args := range map[string][]string{
		"file run":  {"run", sql, "--no-progress"},
		"kafka run": {"run", sql, "--source", k + "/events", "--sink", k + "/totals", "--until-caught-up", "--instance-id", "m"},
		"land":      {"land", "--from", k + "/totals", "--to", "redis://" + testenv.RequireRedis(t) + "/0", "--mode", "latest", "--until-caught-up"},
	} {
		code, errs := kafkaCLI(t, input, append(args, "--metrics-addr", addr)...)
		if code != ExitUsage || !strings.Contains(errs, "--metrics-addr "+addr+": cannot listen: ") || !strings.Contains(errs, "address already in use") {
			t.Errorf("%s: exit %d, want %d naming %s:\n%s", name, code, ExitUsage, addr, errs)
		}
	}
}

// TestMetricsServeFailureLogged: once the endpoint is up, a failure of
// its listener is written to the log, not dropped.
func TestMetricsServeFailureLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close() // Serve's first Accept fails for good
	var log bytes.Buffer
	serveUntilStopped(&http.Server{}, ln, &log)
	if want := "ubik: metrics at http://" + ln.Addr().String() + "/metrics stopped: "; !strings.HasPrefix(log.String(), want) || !strings.Contains(log.String(), "closed") {
		t.Fatalf("log %q, want %q...", log.String(), want)
	}
}
