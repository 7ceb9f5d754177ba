package cli

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// csvField quotes s when CSV needs it (a delimiter, a quote, a line break),
// doubling its quotes.
func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\r\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// csvEvents writes a CSV file of n events with a header: merchant names
// and notes with delimiters, quotes and line breaks, notes that are NULL
// (empty, unquoted) or the empty string (""), event times within 2 s of
// order (less than the 5 s watermark delay: nothing is late in either
// run), and a malformed record now and then. It returns the file and the
// number of malformed records.
func csvEvents(t *testing.T, n int) (string, int) {
	r := rand.New(rand.NewPCG(11, 12))
	merchants := []string{"acme", `acme, "inc"`, "multi\nline", "crlf\r\nline", `"quoted"`, " spaced ", "naïve"}
	notes := []string{"", `""`, "ok", "a,b", `say "hi"`, "x\ny", " "}
	var b strings.Builder
	b.WriteString("merchant,amount,note,event_time\n")
	base := time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC)
	bad := 0
	for i := 0; i < n; i++ {
		ts := base.Add(time.Duration(i)*150*time.Millisecond - time.Duration(r.IntN(2000))*time.Millisecond)
		note := notes[r.IntN(len(notes))]
		if note != "" && note != `""` {
			note = csvField(note)
		}
		fmt.Fprintf(&b, "%s,%d.%02d,%s,%s\r\n", csvField(merchants[r.IntN(len(merchants))]), r.IntN(1000), r.IntN(100), note,
			ts.Format("2006-01-02 15:04:05.000"))
		if i%401 == 200 {
			bad++
			switch bad % 3 {
			case 0:
				b.WriteString("acme,12.5,too,many,fields\n")
			case 1:
				b.WriteString("acme,twelve,x,2026-07-18 10:00:00\n")
			case 2:
				b.WriteString("\"acme\"x,1,x,2026-07-18 10:00:00\n")
			}
		}
	}
	path := filepath.Join(t.TempDir(), "events.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, bad
}

var malformedCount = regexp.MustCompile(`(\d+) malformed`)

// TestRunKafkaCSV runs one windowed query twice over the same CSV events:
// from the file through the file source, and from a Kafka topic (filled
// by `ubik produce --format csv`, header row included) through a Kafka CSV
// source that skips header records, with --until-caught-up against an
// in-process kfake broker. The final changelogs must be byte-identical and
// both runs must count the same malformed records.
func TestRunKafkaCSV(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	input, nBad := csvEvents(t, 4000)

	const view = `CREATE VIEW csv_totals AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, count(note) AS notes, max(note) AS top_note
FROM events GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE);
`
	const cols = `CREATE SOURCE events (merchant VARCHAR, amount DECIMAL(10,2), note VARCHAR, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND)`
	dir := t.TempDir()
	fileSQL := filepath.Join(dir, "file.sql")
	kafkaSQL := filepath.Join(dir, "kafka.sql")
	if err := os.WriteFile(fileSQL, []byte(cols+" WITH (format = 'csv');\n"+view), 0o644); err != nil {
		t.Fatal(err)
	}
	ksql := fmt.Sprintf(cols+`
  WITH (connector = 'kafka', brokers = '%s', topic = 'csv_events', format = 'csv', header = 'true');
%sCREATE SINK out FROM csv_totals WITH (connector = 'kafka', brokers = '%s', topic = 'csv_out');
`, addr, view, addr)
	if err := os.WriteFile(kafkaSQL, []byte(ksql), 0o644); err != nil {
		t.Fatal(err)
	}

	// The file run.
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", fileSQL, "--input", input}); code != 0 {
		t.Fatalf("file run: exit %d: %s", code, errb)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("file run output line %q", line)
		}
		if _, dup := want[k]; dup {
			t.Fatalf("file run emitted key %s twice (EMIT FINAL)", k)
		}
		want[k] = v
	}
	if len(want) < 40 {
		t.Fatalf("file run emitted only %d windows", len(want))
	}
	m := malformedCount.FindStringSubmatch(errb.String())
	if m == nil || m[1] != fmt.Sprint(nBad) {
		t.Fatalf("file run: want %d malformed in the summary: %s", nBad, errb)
	}

	// The same file to a topic, every record as is (the header too).
	env, _, errb = runTestEnv("")
	if code := Main(context.Background(), env, []string{"produce", "--to", "kafka://" + addr + "/csv_events", "--format", "csv",
		"--input", input, "--partitions", "3"}); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), fmt.Sprintf("produced %d records", 4000+nBad+1)) {
		t.Fatalf("produce: %s", errb)
	}

	// The Kafka run, until caught up.
	stderr := &syncBuf{}
	kenv := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: stderr, Getenv: func(string) string { return "" }}
	code := make(chan int, 1)
	go func() {
		code <- Main(context.Background(), kenv, []string{"run", kafkaSQL, "--until-caught-up", "--instance-id", "csv-1"})
	}()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("kafka run: exit %d\n%s", c, stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("kafka run did not catch up within 60s\n%s", stderr)
	}
	got := consumeLatest(t, addr, "csv_out", want, 30*time.Second)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %s:\n kafka %s\n file  %s", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("kafka emitted key %s, the file run did not", k)
		}
	}
	summary := stderr.String()
	m = malformedCount.FindStringSubmatch(summary)
	if m == nil || m[1] != fmt.Sprint(nBad) || !strings.Contains(summary, "1 CSV header records skipped") || !strings.Contains(summary, "caught up") {
		t.Errorf("kafka run: want %d malformed, 1 header skipped, caught up:\n%s", nBad, summary)
	}

	// A --source URL replaces the statement's options; one that would read
	// this CSV script's input as JSON is refused before anything runs.
	env, _, errb = runTestEnv("")
	if code := Main(context.Background(), env, []string{"run", fileSQL, "--source", "kafka://" + addr + "/csv_events",
		"--sink", "kafka://" + addr + "/csv_out2"}); code == 0 || !strings.Contains(errb.String(), "say format=csv in the URL") {
		t.Errorf("a json --source for a csv script: exit %d: %s", code, errb)
	}
}
