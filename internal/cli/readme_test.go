package cli

import (
	"bytes"
	"context"
	"fmt"
	"github.com/ubiksql/ubik"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/testenv"
)

// readmeBlock is one fenced block of README.md or of a topic doc.
type readmeBlock struct {
	file string // relative to the repository root
	line int    // of the opening fence
	lang string // after the fence: "sql" or ""
	text string // the lines between the fences
}

// readmeFiles are the files whose examples CI runs: the README and every
// topic doc under docs/ but the key contract, whose blocks show bytes
// the contract's golden vectors (testdata/contract) pin instead.
func readmeFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		if name := filepath.Base(d); name != "contract.md" {
			files = append(files, filepath.Join("docs", name))
		}
	}
	if len(files) < 2 {
		t.Fatalf("no topic docs under %s", filepath.Join(repoRoot(t), "docs"))
	}
	return files
}

func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	var out []readmeBlock
	for _, f := range readmeFiles(t) {
		out = append(out, fileBlocks(t, f)...)
	}
	return out
}

func fileBlocks(t *testing.T, file string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeBlock
	var cur *readmeBlock
	var lines []string
	for i, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "```") {
			if cur != nil {
				lines = append(lines, l)
			}
			continue
		}
		if cur == nil {
			cur = &readmeBlock{file: file, line: i + 1, lang: strings.TrimPrefix(l, "```")}
			lines = nil
			continue
		}
		cur.text = strings.Join(lines, "\n")
		out = append(out, *cur)
		cur = nil
	}
	if cur != nil {
		t.Fatalf("%s:%d: unterminated fenced block", file, cur.line)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readmeEnv is what the README's examples run with: the ubik binary on
// PATH and the first command's output.
type readmeEnv struct {
	root, binDir     string
	firstOut, firstE string
	capiDir          string // capiLib's build, once per run
	scratch          string // the test's temporary directory
}

// sh runs script with bash in dir, the ubik binary first on PATH, and
// returns stdout, stderr and the exit status.
func (r *readmeEnv) sh(t *testing.T, dir, script string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+r.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("bash: %v", err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// service starts one README command that runs until stopped (a Kafka
// query) as its own process, waits for ready, stops it with SIGINT and
// checks the documented stop: exit 0 (a service's normal stop) and a
// "stopped" summary.
func (r *readmeEnv) service(t *testing.T, dir, line string, ready func() bool) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+r.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var errb syncBuf
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(90 * time.Second)
	for !ready() {
		select {
		case err := <-done:
			t.Fatalf("%s: ended before it was ready (%v):\n%s", line, err, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("%s: not ready within 90s:\n%s", line, errb.String())
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%s: no exit within 60s of SIGINT:\n%s", line, errb.String())
	}
	if c := cmd.ProcessState.ExitCode(); c != 0 || !strings.Contains(errb.String(), ": stopped (interrupted by SIGINT): ") {
		t.Errorf("%s: exit %d after SIGINT, want 0 and a stopped summary:\n%s", line, c, errb.String())
	}
	return errb.String()
}

// first runs the README's first command (once) and keeps its output.
func (r *readmeEnv) first(t *testing.T) (string, string) {
	t.Helper()
	if r.firstOut == "" {
		out, errb, code := r.sh(t, r.root, "go run ./cmd/ubik run examples/merchant_totals.sql --input examples/events.jsonl")
		if code != 0 || out == "" {
			t.Fatalf("the first command: exit %d, %d bytes out:\n%s", code, len(out), errb)
		}
		r.firstOut, r.firstE = out, errb
	}
	return r.firstOut, r.firstE
}

// sinkHas reports whether a sink topic holds at least one committed record.
func sinkHas(t *testing.T, broker, topic string) func() bool {
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		return cl.PollFetches(ctx).NumRecords() > 0
	}
}

// compileBlock compiles an SQL block (with rest appended) and returns the
// explained program.
func compileBlock(t *testing.T, sql, rest string) string {
	t.Helper()
	eng, err := ubik.Open(ubik.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	prog, err := eng.CompileViews(sql+"\n"+rest, "")
	if err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return prog.Explain()
}

// readmeRuns says, for every fenced block of README.md (by its exact text),
// how CI runs or checks it. TestReadmeExamples fails for a block that is
// not listed (a new or changed example must be given a run here) and for a
// listed block the README no longer has.
var readmeRuns = map[string]func(t *testing.T, r *readmeEnv){
	// docs/embedding.md and docs/landing.md: the build lines built and
	// run, the store tables created beside the landers' own.
	docGoGet:        func(t *testing.T, r *readmeEnv) { checkGoGet(t, r, docGoGet) },
	docCBuild:       func(t *testing.T, r *readmeEnv) { runCBuild(t, r, docCBuild) },
	docPythonImport: func(t *testing.T, r *readmeEnv) { runPythonImport(t, r, docPythonImport) },
	docPGTable:      func(t *testing.T, r *readmeEnv) { checkPGSchema(t, r, docPGTable) },
	docCHTable:      func(t *testing.T, r *readmeEnv) { checkCHSchema(t, r, docCHTable) },
	// Install. The install of a release is TestInstallFromRelease's
	// (internal/install_test.go: scripts/release.sh --proxy, then this
	// command); here the README's other form, from a clone, is run.
	"go install github.com/ubiksql/ubik/cmd/ubik@VERSION": func(t *testing.T, r *readmeEnv) {
		gobin := t.TempDir()
		if out, errb, code := r.sh(t, r.root, "GOBIN="+gobin+" go install ./cmd/ubik && "+filepath.Join(gobin, "ubik")+" version"); code != 0 || !strings.Contains(out, "ubik") {
			t.Fatalf("go install ./cmd/ubik: exit %d\n%s%s", code, out, errb)
		}
	},
	// The first command.
	"go run ./cmd/ubik run examples/merchant_totals.sql --input examples/events.jsonl": func(t *testing.T, r *readmeEnv) {
		r.first(t)
	},
	// The metamorphic harness's long run takes 30 minutes, so it is run by
	// hand; CI runs the short version of the same test. This checks that
	// the test and every variable the block sets exist as it says.
	`eval "$(bash scripts/services.sh env)"
UBIK_METAMORPHIC=long UBIK_METAMORPHIC_DURATION=30m UBIK_METAMORPHIC_FOUND=/tmp/found \
  go test -v -timeout 90m -run TestPaths ./internal/metamorphic/`: func(t *testing.T, r *readmeEnv) {
		src, err := os.ReadFile(filepath.Join(r.root, "internal", "metamorphic", "metamorphic_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"func TestPaths(", `"UBIK_METAMORPHIC"`, `"UBIK_METAMORPHIC_DURATION"`, `"UBIK_METAMORPHIC_FOUND"`, `"long"`} {
			if !strings.Contains(string(src), want) {
				t.Errorf("internal/metamorphic/metamorphic_test.go lacks %s, which the README's long-run command relies on", want)
			}
		}
	},
	// The test command is CI's own: .ci/run runs it.
	"bash scripts/test.sh": func(t *testing.T, r *readmeEnv) {
		b, err := os.ReadFile(filepath.Join(r.root, ".ci", "run"))
		if err != nil || !strings.Contains(string(b), "scripts/test.sh") {
			t.Fatalf(".ci/run does not run scripts/test.sh (%v):\n%s", err, b)
		}
	},
	// The walkthrough's query is the one examples/usage-billing/run.sh
	// runs (CI runs it as test/e2e/usage_billing.sh): same plan.
	`CREATE SOURCE usage_events (event_id VARCHAR, customer VARCHAR, plan VARCHAR, qty DECIMAL(18,9), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '3' MINUTE)
  WITH (format = 'jsonl', dedup_key = 'event_id', dedup_within = '2 hours');
CREATE VIEW hourly_usage AS
SELECT customer, TUMBLE_START(ts, INTERVAL '1' HOUR) AS hour, sum(qty) AS total, count(*) AS events
FROM usage_events GROUP BY customer, TUMBLE(ts, INTERVAL '1' HOUR)
EMIT EARLY EVERY INTERVAL '500' MILLISECOND;

CREATE TABLE prices (plan VARCHAR, price DECIMAL(12,6), valid_from TIMESTAMP,
  PRIMARY KEY (plan) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'prices.jsonl');
CREATE VIEW hourly_charge AS
SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '1' HOUR) AS hour, sum(u.qty * p.price) AS charge, count(*) AS events
FROM usage_events u
JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.plan = p.plan
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '1' HOUR);`: func(t *testing.T, r *readmeEnv) {
		file, err := os.ReadFile(filepath.Join(r.root, "examples", "usage-billing", "hourly_usage.sql"))
		if err != nil {
			t.Fatal(err)
		}
		block := readmeText(t, "CREATE SOURCE usage_events")
		// The SQL text differs (comments, layout); the plans must not.
		a := strings.SplitN(compileBlock(t, block, ""), "\n", 2)[1]
		b := strings.SplitN(compileBlock(t, string(file), ""), "\n", 2)[1]
		if a != b {
			t.Errorf("the README's query and hourly_usage.sql differ:\n%s\nvs\n%s", a, b)
		}
	},
	// Queries over views: the README's two views are examples/views.sql's
	// (same plan), and the command runs them from a copy of examples/.
	`CREATE VIEW minute_totals AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
EMIT FINAL;

CREATE VIEW hourly AS
SELECT merchant, TUMBLE_START(window_start, INTERVAL '1' HOUR) AS hour,
       sum(orders) AS orders, sum(total) AS total, count(*) AS minutes
FROM minute_totals
GROUP BY merchant, TUMBLE(window_start, INTERVAL '1' HOUR);`: func(t *testing.T, r *readmeEnv) {
		file, err := os.ReadFile(filepath.Join(r.root, "examples", "views.sql"))
		if err != nil {
			t.Fatal(err)
		}
		src, _, _ := strings.Cut(string(file), "CREATE VIEW")
		a := compileBlock(t, src+readmeText(t, "CREATE VIEW minute_totals AS"), "")
		if b := compileBlock(t, string(file), ""); a != b {
			t.Errorf("the README's views and examples/views.sql differ:\n%s\nvs\n%s", a, b)
		}
	},
	"ubik run examples/views.sql --output-dir out/": func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, "examples"), 0o755)
		for _, f := range []string{"views.sql", "events.jsonl"} {
			copyFile(t, filepath.Join(r.root, "examples", f), filepath.Join(dir, "examples", f))
		}
		if out, errb, code := r.sh(t, dir, readmeText(t, "ubik run examples/views.sql")); code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errb)
		}
		// Each hour's orders are the sum of its minutes' orders.
		orders := map[string]int{}
		events := 0
		for _, name := range []string{"minute_totals", "hourly"} {
			b, err := os.ReadFile(filepath.Join(dir, "out", name+".tsv"))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var n int
				var m, ts string
				k, v, _ := strings.Cut(l, "\t")
				fmt.Sscanf(k, "[%q, %q]", &m, &ts)
				_, o, _ := strings.Cut(v, `"orders": `)
				fmt.Sscanf(o, "%d", &n)
				hour := m + " " + ts[:13]
				if name == "hourly" {
					orders[hour] -= n
				} else {
					orders[hour] += n
					events += n
				}
			}
		}
		if events != 400 { // examples/events.jsonl: 401 lines, one malformed
			t.Fatalf("the minutes count %d orders, want 400", events)
		}
		for h, n := range orders {
			if n != 0 {
				t.Errorf("%s: the minutes' orders and the hour's differ by %d", h, n)
			}
		}
	},
	// Output of the first command: this line is in it.
	`["acme", "2026-07-18 10:00:00"]	{"merchant": "acme", "window_start": "2026-07-18 10:00:00", "orders": 24, "total": 5918.42, "biggest": 463.26}`: func(t *testing.T, r *readmeEnv) {
		out, _ := r.first(t)
		want := readmeText(t, `["acme", "2026-07-18 10:00:00"]`)
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the first command's output lacks the README's line\n%s\n---\n%s", want, out)
		}
	},
	// Its summary: the same line but for the time and the rate.
	"ubik: merchant_totals: 401 events read, 1 malformed, 0 eval errors, 0 late, 27 records emitted, 27 windows finalized, 10.0ms, 40268 events/s": func(t *testing.T, r *readmeEnv) {
		_, errb := r.first(t)
		clock := regexp.MustCompile(`, [0-9.]+(µs|ms|s|m[0-9.]+s), [0-9]+ events/s`)
		want := clock.ReplaceAllString(readmeText(t, "ubik: merchant_totals:"), ", TIME")
		if !strings.Contains(clock.ReplaceAllString(errb, ", TIME"), want+"\n") {
			t.Errorf("the first command's summary is not the README's\n%s\n---\n%s", want, errb)
		}
	},
	// Restart after a crash: q.sql is the first command's query; the same
	// command run again resumes and adds nothing.
	"ubik run q.sql --input events.jsonl --output totals.jsonl --state-dir state/": func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		copyFile(t, filepath.Join(r.root, "examples", "merchant_totals.sql"), filepath.Join(dir, "q.sql"))
		copyFile(t, filepath.Join(r.root, "examples", "events.jsonl"), filepath.Join(dir, "events.jsonl"))
		line := readmeText(t, "ubik run q.sql --input")
		for i := 0; i < 2; i++ {
			if _, errb, code := r.sh(t, dir, line); code != 0 {
				t.Fatalf("run %d: exit %d\n%s", i+1, code, errb)
			}
		}
		b, _ := os.ReadFile(filepath.Join(dir, "totals.jsonl"))
		if n := strings.Count(string(b), "\n"); n != 27 {
			t.Errorf("totals.jsonl has %d records after a run and a resumed run, want 27", n)
		}
	},
	// Kafka: the first command's query over a topic the first command's
	// events were produced to, until stopped. Topics and the query get
	// names of their own (a broker keeps a query name's binding).
	"ubik run q.sql --source kafka://127.0.0.1:9092/events --sink kafka://127.0.0.1:9092/merchant_totals": func(t *testing.T, r *readmeEnv) {
		broker := testenv.RequireKafka(t)[0]
		dir := t.TempDir()
		in, out := testenv.Name(t, "events"), testenv.Name(t, "merchant_totals")
		q, _ := os.ReadFile(filepath.Join(r.root, "examples", "merchant_totals.sql"))
		os.WriteFile(filepath.Join(dir, "q.sql"), []byte(strings.Replace(string(q), "CREATE VIEW merchant_totals", "CREATE VIEW "+testenv.Name(t, "q"), 1)), 0o644)
		if _, errb, code := r.sh(t, r.root, fmt.Sprintf("ubik produce --to kafka://%s/%s --input examples/events.jsonl", broker, in)); code != 0 {
			t.Fatalf("produce: exit %d\n%s", code, errb)
		}
		line := strings.NewReplacer("127.0.0.1:9092/events", broker+"/"+in, "127.0.0.1:9092/merchant_totals", broker+"/"+out).
			Replace(readmeText(t, "ubik run q.sql --source kafka://"))
		r.service(t, dir, line, sinkHas(t, broker, out))
	},
	// A CSV topic: produce then run, as written, with orders.csv holding
	// the first command's events and orders.sql a query over them.
	`ubik produce --to kafka://127.0.0.1:9092/orders --format csv --input orders.csv
ubik run orders.sql --source 'kafka://127.0.0.1:9092/orders?format=csv&header=true' --sink kafka://127.0.0.1:9092/totals`: func(t *testing.T, r *readmeEnv) {
		broker := testenv.RequireKafka(t)[0]
		dir := t.TempDir()
		in, out := testenv.Name(t, "orders"), testenv.Name(t, "totals")
		os.WriteFile(filepath.Join(dir, "orders.csv"), []byte("merchant,amount,event_time\nacme,10.5,2026-07-18 10:00:01\nglobex,3,2026-07-18 10:00:02\nacme,1,2026-07-18 10:00:03\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "orders.sql"), []byte(`CREATE SOURCE orders (merchant VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND) WITH (format = 'csv');
CREATE VIEW `+testenv.Name(t, "q")+` AS SELECT merchant, count(*) AS orders, sum(amount) AS total FROM orders GROUP BY merchant;
`), 0o644)
		lines := strings.Split(strings.NewReplacer("127.0.0.1:9092/orders", broker+"/"+in, "127.0.0.1:9092/totals", broker+"/"+out).
			Replace(readmeText(t, "ubik produce --to kafka://127.0.0.1:9092/orders")), "\n")
		if _, errb, code := r.sh(t, dir, lines[0]); code != 0 {
			t.Fatalf("%s: exit %d\n%s", lines[0], code, errb)
		}
		errb := r.service(t, dir, lines[1], sinkHas(t, broker, out))
		if !strings.Contains(errb, "1 CSV header records skipped") {
			t.Errorf("the header record was not skipped:\n%s", errb)
		}
	},
	// Temporal joins: the README's query over a usage file and a price
	// table with a mid-hour change, and its command.
	`CREATE SOURCE metered_usage (customer VARCHAR, plan VARCHAR, qty DECIMAL(10,2), ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'usage.jsonl');
CREATE TABLE prices (plan VARCHAR, price DECIMAL(12,6), valid_from TIMESTAMP,
  PRIMARY KEY (plan) NOT ENFORCED,
  WATERMARK FOR valid_from AS valid_from - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'prices.jsonl');
CREATE VIEW hourly_charge AS
SELECT u.customer, TUMBLE_START(u.ts, INTERVAL '1' HOUR) AS hour,
       sum(u.qty * p.price) AS charge, count(*) AS events
FROM metered_usage u
JOIN prices FOR SYSTEM_TIME AS OF u.ts AS p ON u.plan = p.plan
GROUP BY u.customer, TUMBLE(u.ts, INTERVAL '1' HOUR);`: func(t *testing.T, r *readmeEnv) {},
	"ubik run hourly_charge.sql": func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "hourly_charge.sql"), []byte(readmeText(t, "CREATE SOURCE metered_usage")), 0o644)
		os.WriteFile(filepath.Join(dir, "prices.jsonl"), []byte(`{"plan":"basic","price":"0.100000","valid_from":"2026-07-18 10:00:00"}
{"plan":"basic","price":"0.150000","valid_from":"2026-07-18 10:30:00"}
`), 0o644)
		os.WriteFile(filepath.Join(dir, "usage.jsonl"), []byte(`{"customer":"c1","plan":"basic","qty":"10.00","ts":"2026-07-18 10:10:00"}
{"customer":"c1","plan":"basic","qty":"10.00","ts":"2026-07-18 10:40:00"}
{"customer":"c1","plan":"free","qty":"99.00","ts":"2026-07-18 10:41:00"}
`), 0o644)
		out, errb, code := r.sh(t, dir, readmeText(t, "ubik run hourly_charge.sql"))
		want := `["c1", "2026-07-18 10:00:00"]	{"customer": "c1", "hour": "2026-07-18 10:00:00", "charge": 2.50000000, "events": 2}` + "\n"
		if code != 0 || out != want || !strings.Contains(errb, "2 events joined, 1 unmatched") {
			t.Errorf("exit %d\n%s%s", code, out, errb)
		}
	},
	// The interval join of two streams: the script, then its run over two
	// files.
	`CREATE SOURCE impressions (id BIGINT, campaign VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'impressions.jsonl');
CREATE SOURCE clicks (impression_id BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (format = 'jsonl', path = 'clicks.jsonl');
CREATE VIEW clicks_after_view AS
SELECT i.campaign, TUMBLE_START(c.ts, INTERVAL '10' MINUTE) AS w, count(*) AS clicks_after_view
FROM impressions i JOIN clicks c
  ON c.impression_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '5' MINUTE
GROUP BY i.campaign, TUMBLE(c.ts, INTERVAL '10' MINUTE);`: func(t *testing.T, r *readmeEnv) {},
	"ubik run clicks_after_view.sql": func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "clicks_after_view.sql"), []byte(readmeText(t, "CREATE SOURCE impressions")), 0o644)
		os.WriteFile(filepath.Join(dir, "impressions.jsonl"), []byte(`{"id":1,"campaign":"spring","ts":"2026-07-18 10:00:00"}
{"id":2,"campaign":"spring","ts":"2026-07-18 10:06:00"}
`), 0o644)
		os.WriteFile(filepath.Join(dir, "clicks.jsonl"), []byte(`{"impression_id":1,"ts":"2026-07-18 10:02:00"}
{"impression_id":1,"ts":"2026-07-18 10:07:00"}
{"impression_id":2,"ts":"2026-07-18 10:09:00"}
`), 0o644)
		out, errb, code := r.sh(t, dir, "ubik run clicks_after_view.sql")
		want := `["spring", "2026-07-18 10:00:00"]	{"campaign": "spring", "w": "2026-07-18 10:00:00", "clicks_after_view": 2}` + "\n"
		if code != 0 || out != want || !strings.Contains(errb, "5 events read (impressions 2, clicks 3), 0 malformed, 0 eval errors, 0 late, ") {
			t.Errorf("exit %d\n%s%s", code, out, errb)
		}
	},
	// A query over the interval join's view: it compiles appended to the
	// join's script; then its run over the two files, against the counts
	// of the join's own run above.
	`CREATE VIEW clicks_hourly AS
SELECT campaign, TUMBLE_START(w, INTERVAL '1' HOUR) AS hour, sum(clicks_after_view) AS clicks
FROM clicks_after_view
GROUP BY campaign, TUMBLE(w, INTERVAL '1' HOUR);`: func(t *testing.T, r *readmeEnv) {
		if out := compileBlock(t, readmeText(t, "CREATE SOURCE impressions"), readmeText(t, "CREATE VIEW clicks_hourly")); !strings.Contains(out, "input: the final rows of view clicks_after_view") {
			t.Errorf("explain:\n%s", out)
		}
	},
	"ubik run clicks_after_view.sql --query clicks_hourly": func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "clicks_after_view.sql"), []byte(readmeText(t, "CREATE SOURCE impressions")+"\n"+readmeText(t, "CREATE VIEW clicks_hourly")), 0o644)
		os.WriteFile(filepath.Join(dir, "impressions.jsonl"), []byte(`{"id":1,"campaign":"spring","ts":"2026-07-18 10:00:00"}
{"id":2,"campaign":"spring","ts":"2026-07-18 10:06:00"}
`), 0o644)
		os.WriteFile(filepath.Join(dir, "clicks.jsonl"), []byte(`{"impression_id":1,"ts":"2026-07-18 10:02:00"}
{"impression_id":1,"ts":"2026-07-18 10:07:00"}
{"impression_id":2,"ts":"2026-07-18 10:09:00"}
{"impression_id":2,"ts":"2026-07-18 10:10:30"}
`), 0o644)
		out, errb, code := r.sh(t, dir, readmeText(t, "ubik run clicks_after_view.sql --query"))
		want := `["spring", "2026-07-18 10:00:00"]	{"campaign": "spring", "hour": "2026-07-18 10:00:00", "clicks": 3}` + "\n"
		if code != 0 || out != want || !strings.Contains(errb, "6 events read (impressions 2, clicks 4), 0 malformed, 0 eval errors, 0 late, ") {
			t.Errorf("exit %d\n%s%s", code, out, errb)
		}
	},
	// The window join of two views (Nexmark q8's shape).
	`CREATE SOURCE events (kind VARCHAR, id BIGINT, name VARCHAR, seller BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = 'jsonl', path = 'events.jsonl');
CREATE VIEW new_people AS
SELECT id, name, TUMBLE_START(ts, INTERVAL '10' SECOND) AS starttime, count(*) AS n
FROM events WHERE kind = 'person' GROUP BY id, name, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW new_sellers AS
SELECT seller, TUMBLE_START(ts, INTERVAL '10' SECOND) AS starttime, count(*) AS auctions
FROM events WHERE kind = 'auction' GROUP BY seller, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;
CREATE VIEW q8 AS
SELECT p.id, p.name, TUMBLE_START(p.starttime, INTERVAL '10' SECOND) AS starttime, sum(a.auctions) AS auctions
FROM new_people p JOIN new_sellers a ON p.id = a.seller AND p.starttime = a.starttime
GROUP BY p.id, p.name, TUMBLE(p.starttime, INTERVAL '10' SECOND);`: func(t *testing.T, r *readmeEnv) {},
	"ubik run q8.sql --query q8": func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "q8.sql"), []byte(readmeText(t, "CREATE SOURCE events (kind")), 0o644)
		os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(`{"kind":"person","id":7,"name":"ann","ts":"2026-07-18 10:00:01"}
{"kind":"auction","seller":7,"ts":"2026-07-18 10:00:03"}
{"kind":"auction","seller":7,"ts":"2026-07-18 10:00:04"}
{"kind":"person","id":8,"name":"bob","ts":"2026-07-18 10:00:05"}
{"kind":"auction","seller":8,"ts":"2026-07-18 10:00:12"}
{"kind":"auction","seller":9,"ts":"2026-07-18 10:00:13"}
`), 0o644)
		out, errb, code := r.sh(t, dir, readmeText(t, "ubik run q8.sql --query q8"))
		want := `[7, "ann", "2026-07-18 10:00:00"]	{"id": 7, "name": "ann", "starttime": "2026-07-18 10:00:00", "auctions": 2}` + "\n"
		if code != 0 || out != want {
			t.Errorf("exit %d\n%s%s", code, out, errb)
		}
	},
	// Input deduplication: a copy of an event within the horizon is not
	// counted.
	`CREATE SOURCE usage (event_id VARCHAR, customer VARCHAR, qty BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)
  WITH (format = 'jsonl', dedup_key = 'event_id', dedup_within = '1 hour');`: func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "q.sql"), []byte(readmeText(t, "CREATE SOURCE usage (")+"\nSELECT customer, sum(qty) AS total FROM usage GROUP BY customer;\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "e.jsonl"), []byte(`{"event_id":"a","customer":"c","qty":5,"ts":"2026-07-18 10:00:00"}
{"event_id":"a","customer":"c","qty":5,"ts":"2026-07-18 10:00:00"}
{"event_id":"b","customer":"c","qty":1,"ts":"2026-07-18 10:00:01"}
`), 0o644)
		out, errb, code := r.sh(t, dir, "ubik run q.sql --input e.jsonl")
		if code != 0 || !strings.HasSuffix(out, `{"customer": "c", "total": 6}`+"\n") || !strings.Contains(errb, "1 duplicates") {
			t.Errorf("exit %d\n%s%s", code, out, errb)
		}
	},
	// The SQL reference's source, with its path, and the query after it.
	`CREATE SOURCE events (
  merchant VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (format = 'jsonl', path = 'events.jsonl');`: func(t *testing.T, r *readmeEnv) {
		runSourceAndQuery(t, r)
	},
	`CREATE VIEW merchant_totals AS            -- or a bare SELECT, named after the file
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest
FROM events
WHERE amount > 0
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
HAVING count(*) > 0
EMIT EARLY EVERY INTERVAL '1' SECOND ALLOWED LATENESS INTERVAL '10' SECOND;`: func(t *testing.T, r *readmeEnv) {
		runSourceAndQuery(t, r)
	},
	// Computed columns: the example event in its comment, and one more.
	`CREATE SOURCE clicks (
  user_id VARCHAR,
  ms BIGINT,                              -- {"user_id":"a","ms":1784368800123}
  ts AS TO_TIMESTAMP_LTZ(ms, 3),          -- 2026-07-18 10:00:00.123
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (format = 'jsonl', path = 'clicks.jsonl');

CREATE VIEW clicks_per_minute AS
SELECT user_id, window_start, count(*) AS clicks
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY user_id, window_start;`: func(t *testing.T, r *readmeEnv) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "clicks.sql"), []byte(readmeText(t, "CREATE SOURCE clicks (")), 0o644)
		os.WriteFile(filepath.Join(dir, "clicks.jsonl"), []byte(`{"user_id":"a","ms":1784368800123}`+"\n"+`{"user_id":"a","ms":1784368859999}`+"\n"), 0o644)
		out, errb, code := r.sh(t, dir, "ubik run clicks.sql")
		if want := `["a", "2026-07-18 10:00:00"]	{"user_id": "a", "window_start": "2026-07-18 10:00:00", "clicks": 2}` + "\n"; code != 0 || out != want {
			t.Errorf("exit %d\n%s%s\nwant %s", code, out, errb, want)
		}
	},
}

// runSourceAndQuery runs the SQL reference's CREATE SOURCE and CREATE VIEW
// together over the first command's events (in events.jsonl, the path the
// source names).
func runSourceAndQuery(t *testing.T, r *readmeEnv) {
	dir := t.TempDir()
	copyFile(t, filepath.Join(r.root, "examples", "events.jsonl"), filepath.Join(dir, "events.jsonl"))
	sql := readmeText(t, "CREATE SOURCE events (\n  merchant VARCHAR") + "\n" + readmeText(t, "CREATE VIEW merchant_totals AS")
	os.WriteFile(filepath.Join(dir, "q.sql"), []byte(sql), 0o644)
	out, errb, code := r.sh(t, dir, "ubik run q.sql")
	if code != 0 || strings.Count(out, "\n") != 27 || !strings.Contains(errb, "401 events read, 1 malformed") {
		t.Errorf("exit %d, %d records\n%s", code, strings.Count(out, "\n"), errb)
	}
}

// readmeText returns the README block that starts with prefix.
func readmeText(t *testing.T, prefix string) string {
	t.Helper()
	var found []string
	for _, b := range readmeBlocks(t) {
		if strings.HasPrefix(b.text, prefix) {
			found = append(found, b.text)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d README blocks start with %q, want 1", len(found), prefix)
	}
	return found[0]
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadmeExamples runs every fenced block of README.md and docs/ as readmeRuns
// says: commands as written (with the ubik binary on PATH; Kafka topic
// and query names made unique), SQL over data, printed output against what
// the command prints. A block without an entry fails: an example added to
// the README or a doc without a run here cannot pass CI.
func TestReadmeExamples(t *testing.T) {
	blocks := readmeBlocks(t)
	seen := map[string]bool{}
	for _, b := range blocks {
		if _, ok := readmeRuns[b.text]; !ok {
			t.Errorf("%s:%d: this fenced block has no run in readmeRuns (internal/cli/readme_test.go); add one that runs or checks it:\n%s", b.file, b.line, b.text)
		}
		seen[b.text] = true
	}
	for text := range readmeRuns {
		if !seen[text] {
			t.Errorf("readmeRuns lists a block neither README.md nor docs/ has (remove or update it):\n%s", text)
		}
	}
	if t.Failed() {
		return
	}
	bin := buildUbik(t)
	r := &readmeEnv{root: repoRoot(t), binDir: filepath.Dir(bin), scratch: t.TempDir()}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", strings.TrimSuffix(filepath.Base(b.file), ".md"), b.line), func(t *testing.T) { readmeRuns[b.text](t, r) })
	}
}
