package kafka

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/drive"
)

func TestParseURL(t *testing.T) {
	env := func(k string) string {
		if k == "UBIK_KAFKA_PASSWORD" || k == "OTHER" {
			return "s3cret-" + k
		}
		return ""
	}
	e, err := ParseURL("kafka://a:9092,b:9093/events?from=latest&idle_timeout=5s&partitioned_by_key=true&sasl_mechanism=scram-sha-512&sasl_user=u&tls_ca=/ca.pem", RoleSource, env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(e.Config.Brokers, ",") != "a:9092,b:9093" || e.Topic != "events" || e.From != FromLatest || e.IdleTimeout != 5*time.Second ||
		!e.PartitionedByKey || e.Config.SASL.Mechanism != SASLScramSHA512 || e.Config.SASL.Password != "s3cret-UBIK_KAFKA_PASSWORD" || e.Config.TLS.CAFile != "/ca.pem" {
		t.Fatalf("parsed %+v", e)
	}
	e, err = ParseURL("kafka://a:1/out?allow_uncompacted=true&partitions=6&sasl_mechanism=PLAIN&sasl_user=u&sasl_password_env=OTHER", RoleSink, env)
	if err != nil || !e.AllowUncompacted || e.Partitions != 6 || e.Config.SASL.Password != "s3cret-OTHER" {
		t.Fatalf("sink: %+v %v", e, err)
	}
	e, err = ParseURL("kafka://a:1/t?format=csv&delimiter=%3B&header=true", RoleSource, env)
	if err != nil || e.Format != (drive.MessageFormat{CSV: true, Delimiter: ';', SkipHeader: true}) {
		t.Fatalf("csv source: %+v %v", e.Format, err)
	}
	e, err = FromOptions(map[string]string{"connector": "kafka", "brokers": "a:1", "topic": "t", "format": "csv"}, RoleSource, env)
	if err != nil || e.Format != (drive.MessageFormat{CSV: true, Delimiter: ','}) {
		t.Fatalf("csv WITH options: %+v %v", e.Format, err)
	}
	if _, err := ParseURL("kafka://a:1/out?format=csv", RoleSink, env); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "unknown sink option") {
		t.Fatalf("format on a sink: %v", err)
	}
	for _, bad := range []struct{ url, want string }{
		{"http://a:1/t", "scheme"},
		{"kafka://u:pw@a:1/t", "user info"},
		{"kafka://a:1/t?password=x", "never taken from a URL"},
		{"kafka://a:1/t?sasl_password=x", "never taken from a URL"},
		{"kafka://a:1/t?fromm=latest", "unknown source option"},
		{"kafka://a:1/t?partitions=3", "unknown source option"},
		{"kafka://a:1/", "no topic"},
		{"kafka://a:1/bad topic", "topic name"},
		{"kafka://a/t", "host:port"},
		{"kafka://a:1/t?from=middle", "earliest, latest or committed"},
		{"kafka://a:1/t?format=avro", `unknown format "avro"`},
		{"kafka://a:1/t?delimiter=%3B", "delimiter is for format csv"},
		{"kafka://a:1/t?format=csv&delimiter=%3B%3B", "delimiter must be one character"},
		{"kafka://a:1/t?format=csv&header=sometimes", "header must be true or false"},
		{"kafka://a:1/t?idle_timeout=-1s", "idle_timeout"},
		{"kafka://a:1/t?sasl_mechanism=GSSAPI&sasl_user=u", "unknown SASL"},
		{"kafka://a:1/t?sasl_mechanism=PLAIN", "needs a user"},
		{"kafka://a:1/t?sasl_mechanism=PLAIN&sasl_user=nobody&sasl_password_env=UNSET", "empty password"},
		{"kafka://a:1/t?tls_cert=c.pem", "both a cert file and a key file"},
	} {
		_, err := ParseURL(bad.url, RoleSource, env)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseURL(%q) = %v, want ErrConfig containing %q", bad.url, err, bad.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error leaks the password: %v", err)
		}
	}
}

// TestNoSecretsInLogs prints a config every way a program might and checks
// the password never appears.
func TestNoSecretsInLogs(t *testing.T) {
	c := Config{Brokers: []string{"a:1"}, SASL: SASLConfig{Mechanism: SASLPlain, User: "u", Password: "hunter2"}}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	log.Info("x", "cfg", c, "sasl", c.SASL)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "cfg", c, "sasl", c.SASL)
	fmt.Fprintf(&buf, "%v %+v %#v %s %v %+v %#v", c, c, c, c, c.SASL, c.SASL, c.SASL)
	e := Endpoint{Config: c, Topic: "t"}
	fmt.Fprintf(&buf, "%v %+v", e, e)
	if strings.Contains(buf.String(), "hunter2") {
		t.Fatalf("password printed:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "REDACTED") {
		t.Fatalf("no redaction marker:\n%s", buf.String())
	}
}

// TestTrackerProperties checks the combined watermark against a direct
// computation over random observations, and the encoding round trip.
func TestTrackerProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 7))
	for iter := 0; iter < 2000; iter++ {
		n := 1 + r.IntN(6)
		tr := newTracker(n)
		wms := map[int32]int64{}
		idle := map[int32]bool{}
		for step := 0; step < 20; step++ {
			p := int32(r.IntN(n))
			w := r.Int64N(1000)
			tr.observe(p, w)
			if old, ok := wms[p]; !ok || w > old {
				wms[p] = w
			}
			if _, ok := idle[p]; !ok {
				idle[p] = false
			}
			if r.IntN(4) == 0 {
				b := r.IntN(2) == 0
				tr.setIdle(p, b)
				idle[p] = b
			}
			want := int64(math.MinInt64)
			if len(wms) == n {
				minA, maxAll, active := int64(math.MaxInt64), int64(math.MinInt64), false
				for q, w := range wms {
					maxAll = max(maxAll, w)
					if !idle[q] {
						active = true
						minA = min(minA, w)
					}
				}
				want = maxAll
				if active {
					want = minA
				}
			}
			if got := tr.watermark(); got != want {
				t.Fatalf("seed %d: watermark %d, want %d (wms %v idle %v)", seed, got, want, wms, idle)
			}
			back, err := decodeTracker(tr.appendTo(nil))
			if err != nil || back.watermark() != tr.watermark() || len(back.parts) != len(tr.parts) {
				t.Fatalf("seed %d: round trip: %v", seed, err)
			}
		}
	}
}

func FuzzDecodeTracker(f *testing.F) {
	tr := newTracker(3)
	tr.observe(0, 5)
	tr.observe(2, -7)
	tr.setIdle(2, true)
	f.Add(tr.appendTo(nil))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := decodeTracker(b)
		if err != nil {
			return
		}
		back, err := decodeTracker(tr.appendTo(nil))
		if err != nil || back.watermark() != tr.watermark() {
			t.Fatalf("re-encoding changed the tracker: %v", err)
		}
	})
}

// TestNewCommitIntervalBounds: New takes a commit interval up to half the
// transaction timeout and refuses one above it, or a negative one.
func TestNewCommitIntervalBounds(t *testing.T) {
	src := endpoint([]string{"127.0.0.1:1"}, "events")
	sink := endpoint([]string{"127.0.0.1:1"}, "out")
	for _, c := range []struct {
		interval, timeout time.Duration
		want              string // "" when New must accept it
	}{
		{0, 0, ""}, // the defaults
		{DefaultTransactionTimeout / 2, 0, ""},
		{DefaultTransactionTimeout/2 + time.Nanosecond, 0, "commit interval 15.000000001s is above 15s, half the transaction timeout 30s"},
		{5 * time.Second, 10 * time.Second, ""},
		{5*time.Second + time.Millisecond, 10 * time.Second, "commit interval 5.001s is above 5s, half the transaction timeout 10s"},
		{-time.Millisecond, 0, "negative interval"},
	} {
		p, err := New(Options{Query: tumbleQuery("q", 0), Source: src, Sink: sink, CommitInterval: c.interval, TransactionTimeout: c.timeout})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("interval %s, timeout %s: %v", c.interval, c.timeout, err)
		case c.want == "" && c.interval != 0 && p.opts.CommitInterval != c.interval:
			t.Errorf("interval %s: the pipeline uses %s", c.interval, p.opts.CommitInterval)
		case c.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(fmt.Sprint(err), c.want)):
			t.Errorf("interval %s, timeout %s: %v, want ErrConfig containing %q", c.interval, c.timeout, err, c.want)
		}
	}
	if p, err := New(Options{Query: tumbleQuery("q", 0), Source: src, Sink: sink}); err != nil || p.opts.CommitInterval != DefaultCommitInterval || DefaultCommitInterval != 100*time.Millisecond {
		t.Errorf("default commit interval: %v, %v", p, err)
	}
}
