package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/crashtest"
)

const ijoinRunSQL = `CREATE SOURCE impressions (id BIGINT, campaign VARCHAR, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = 'jsonl');
CREATE SOURCE clicks (impression_id BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (format = 'jsonl', path = '%s');
SELECT i.campaign, TUMBLE_START(c.ts, INTERVAL '10' MINUTE) AS w, count(*) AS clicks_after_view
FROM impressions i JOIN clicks c
  ON c.impression_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '5' MINUTE
GROUP BY i.campaign, TUMBLE(c.ts, INTERVAL '10' MINUTE)`

// TestRunIntervalJoin runs `ubik run` with two stream files: clicks
// within and outside five minutes of their impression, a late click
// (routed to --late-output), a malformed one (--dead-letter), a click
// with no impression.
func TestRunIntervalJoin(t *testing.T) {
	dir := t.TempDir()
	clicks := filepath.Join(dir, "clicks.jsonl")
	os.WriteFile(clicks, []byte(`{"impression_id":1,"ts":"2026-07-18 10:01:00"}
{"impression_id":1,"ts":"2026-07-18 10:04:59"}
{"impression_id":2,"ts":"2026-07-18 10:09:00"}
{"impression_id":1,"ts":"2026-07-18 10:00:30"}
{"impression_id":"x","ts":"2026-07-18 10:09:30"}
{"impression_id":3,"ts":"2026-07-18 10:12:00"}
{"impression_id":9,"ts":"2026-07-18 10:13:00"}
{"impression_id":2,"ts":"2026-07-18 10:20:00"}
`), 0o644)
	imps := filepath.Join(dir, "impressions.jsonl")
	os.WriteFile(imps, []byte(`{"id":1,"campaign":"spring","ts":"2026-07-18 10:00:00"}
{"id":2,"campaign":"spring","ts":"2026-07-18 10:05:00"}
{"id":3,"campaign":"autumn","ts":"2026-07-18 10:08:00"}
`), 0o644)
	want := `["spring", "2026-07-18 10:00:00"]	{"campaign": "spring", "w": "2026-07-18 10:00:00", "clicks_after_view": 3}
["autumn", "2026-07-18 10:10:00"]	{"campaign": "autumn", "w": "2026-07-18 10:10:00", "clicks_after_view": 1}
`
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, ijoinRunSQL, clicks), 0o644)
	late, dead, stats := filepath.Join(dir, "late"), filepath.Join(dir, "dead"), filepath.Join(dir, "stats")
	env, out, errb := runTestEnv("")
	code := Main(context.Background(), env, []string{"run", sql, "--input", imps, "--late-output", late, "--dead-letter", dead, "--stats-json", stats, "--threads", "2"})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if out.String() != want {
		t.Fatalf("changelog:\n%s\nwant:\n%s", out, want)
	}
	l, _ := os.ReadFile(late)
	if !strings.Contains(string(l), `"line": 4`) || !strings.Contains(string(l), "behind the watermark of clicks") {
		t.Fatalf("late output: %s", l)
	}
	d, _ := os.ReadFile(dead)
	if !strings.Contains(string(d), `"line": 5`) || !strings.Contains(string(d), "clicks.jsonl") {
		t.Fatalf("dead letters: %s", d)
	}
	var s summary
	b, _ := os.ReadFile(stats)
	if err := json.Unmarshal(b, &s); err != nil || s.Interval == nil {
		t.Fatalf("summary %s: %v", b, err)
	}
	// Each input is counted: the totals are their sums.
	wantIn := []inputSummary{{"impressions", 3, 0, 0}, {"clicks", 8, 1, 1}}
	if s.EventsRead != 11 || s.Malformed != 1 || s.Late != 1 || !slices.Equal(s.Inputs, wantIn) {
		t.Fatalf("summary %+v, want inputs %+v", s, wantIn)
	}
	if s.Interval.LeftRows != 3 || s.Interval.RightRows != 7 || s.Interval.LateRight != 1 || s.Interval.Matches != 4 {
		t.Fatalf("summary %+v %+v", s, *s.Interval)
	}
	if !strings.Contains(errb.String(), "11 events read (impressions 3, clicks 8), 1 malformed (impressions 0, clicks 1), 0 eval errors, 1 late (impressions 0, clicks 1), ") ||
		!strings.Contains(errb.String(), "interval join: 3 left and 7 right rows, 4 joined rows; late at the join: 0 left, 1 right") {
		t.Fatalf("summary line: %s", errb)
	}
}

// ijoinCrashInputs writes n impressions and about 2n clicks, each file
// in time order within its delay.
func ijoinCrashInputs(t *testing.T, dir string, n int) (string, string) {
	t.Helper()
	r := rand.New(rand.NewPCG(8, 9))
	write := func(name string, rows int, line func(i int, ms int64) string) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for i := 0; i < rows; i++ {
			ms := max(int64(i)*3600_000/int64(rows)-r.Int64N(900), 0)
			w.WriteString(line(i, ms))
		}
		w.Flush()
		f.Close()
		return p
	}
	stamp := func(ms int64) string {
		return fmt.Sprintf("2026-07-18 10:%02d:%02d.%03d", ms/60000%60, ms/1000%60, ms%1000)
	}
	imps := write("impressions.jsonl", n, func(i int, ms int64) string {
		return fmt.Sprintf(`{"id":%d,"campaign":"c%d","ts":"%s"}`+"\n", r.IntN(500), r.IntN(30), stamp(ms))
	})
	clicks := write("clicks.jsonl", 2*n, func(i int, ms int64) string {
		return fmt.Sprintf(`{"impression_id":%d,"ts":"%s"}`+"\n", r.IntN(500), stamp(ms))
	})
	return imps, clicks
}

// TestKill9ResumeIntervalJoin kills `ubik run --state-dir` of an
// interval join with SIGKILL at random points and reruns it: the
// changelog must equal an uninterrupted run's byte for byte (both
// inputs' positions and held rows are in the checkpoint).
func TestKill9ResumeIntervalJoin(t *testing.T) {
	bin := buildUbik(t)
	dir := t.TempDir()
	imps, clicks := ijoinCrashInputs(t, dir, 150_000)
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, ijoinRunSQL, clicks), 0o644)
	args := func(out, state string) []string {
		a := []string{"run", sql, "--input", imps, "--output", out, "--format", "jsonl", "--no-progress"}
		if state != "" {
			a = append(a, "--state-dir", state, "--checkpoint-interval", "10ms")
		}
		return a
	}
	ref := filepath.Join(dir, "ref.jsonl")
	if out, err := exec.Command(bin, args(ref, "")...).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	got := filepath.Join(dir, "got.jsonl")
	state := filepath.Join(dir, "state")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	// A run that ends before its kill starts over from scratch, so the
	// next one can be interrupted.
	const kills = 6
	crashtest.Loop(t, r, kills, 30*time.Millisecond, 430*time.Millisecond,
		func() *exec.Cmd { return exec.Command(bin, args(got, state)...) },
		func() { os.RemoveAll(state) })
	if out, err := exec.Command(bin, args(got, state)...).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	refB, _ := os.ReadFile(ref)
	gotB, _ := os.ReadFile(got)
	if len(refB) < 1000 || !bytes.Equal(refB, gotB) {
		t.Fatalf("after %d kills the changelog differs from the uninterrupted run (%d vs %d bytes)", kills, len(refB), len(gotB))
	}
}

func TestIntervalJoinMetricsAndExplain(t *testing.T) {
	m := newQueryMetrics("q1")
	stop, addr, err := serveMetrics(context.Background(), io.Discard, "127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var st ubik.Stats
	st.Watermark = minInt64
	iv := &st.Interval
	iv.LeftRows, iv.RightRows, iv.LateRight, iv.Matches, iv.LeftHeld, iv.RightHeld, iv.Dropped = 10, 20, 2, 7, 3, 4, 11
	iv.LeftWM, iv.RightWM = time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).UnixMicro(), minInt64
	m.publish(st)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ubik_interval_join_rows_total{input="left",query="q1"} 10`, `ubik_interval_join_rows_total{input="right",query="q1"} 20`,
		`ubik_interval_join_rows_late_total{input="right",query="q1"} 2`, `ubik_interval_join_matches_total{query="q1"} 7`,
		`ubik_interval_join_rows_held{input="left",query="q1"} 3`, `ubik_interval_join_rows_held{input="right",query="q1"} 4`,
		`ubik_interval_join_rows_dropped_total{query="q1"} 11`, `ubik_interval_join_watermark_seconds{input="left",query="q1"} 1.7843688e+09`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if strings.Contains(string(body), `ubik_interval_join_watermark_seconds{input="right"`) {
		t.Errorf("a watermark before the first row is exported:\n%s", body)
	}
	dir := t.TempDir()
	sql := filepath.Join(dir, "q.sql")
	os.WriteFile(sql, fmt.Appendf(nil, ijoinRunSQL, "c.jsonl"), 0o644)
	env, out, errb := runTestEnv("")
	if code := Main(context.Background(), env, []string{"explain", sql}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	for _, want := range []string{"interval join (inner) impressions AS i JOIN clicks AS c ON i.id = c.impression_id AND 00:00:00 <= c.ts - i.ts <= 00:05:00",
		"a row of i is kept until the watermark of c less the allowed lateness passes i.ts + 00:05:00",
		"joined rows: append-only, event time c.ts, watermark min(c watermark, i watermark + 00:00:00)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
}

func TestRunIntervalJoinRefusals(t *testing.T) {
	dir := t.TempDir()
	for name, sql := range map[string]string{
		"no path": `CREATE SOURCE a (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');
CREATE SOURCE b (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts);
SELECT a.k, count(*) FROM a JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND GROUP BY a.k`,
	} {
		p := filepath.Join(dir, name+".sql")
		os.WriteFile(p, []byte(sql), 0o644)
		env, _, errb := runTestEnv(`{"k":"a","ts":"2026-07-18 10:00:00"}` + "\n")
		if code := Main(context.Background(), env, []string{"run", p}); code != 2 {
			t.Errorf("%s: exit %d, want 2 (usage): %s", name, code, errb)
		}
		want := map[string]string{"no path": "has no path option"}[name]
		if !strings.Contains(errb.String(), want) {
			t.Errorf("%s: %s", name, errb)
		}
	}
}

// TestRunFirstFileEndsFirst runs a join of two inputs whose first file
// ends long before the second (200 impressions in 200 seconds, 20,000
// clicks over nearly three hours), as an interval join of two streams
// and as a join of two views over the two sources: the join holds a row
// of the second input only while a row of the first may still match it,
// so once the first file has ended it holds none (not the rest of the
// second file, 19,600 rows). The changelog equals the Go API's, fed the
// first input whole, then the second, then Close.
func TestRunFirstFileEndsFirst(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 17))
	stamp := func(ms int64) string {
		return time.Date(2026, 7, 18, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond).Format("2006-01-02 15:04:05.000")
	}
	var imps, clicks []string
	for i := range 200 {
		imps = append(imps, fmt.Sprintf(`{"id":%d,"campaign":"c%d","ts":"%s"}`, r.IntN(50), r.IntN(5), stamp(int64(i)*1000)))
	}
	for i := range 20000 {
		clicks = append(clicks, fmt.Sprintf(`{"impression_id":%d,"ts":"%s"}`, r.IntN(50), stamp(int64(i)*500-r.Int64N(500))))
	}
	impsPath, clicksPath := filepath.Join(dir, "imps.jsonl"), filepath.Join(dir, "clicks.jsonl")
	os.WriteFile(impsPath, []byte(strings.Join(imps, "\n")+"\n"), 0o644)
	os.WriteFile(clicksPath, []byte(strings.Join(clicks, "\n")+"\n"), 0o644)
	for _, tc := range []struct {
		name, sql, query string
		maxHeld          int64
	}{
		// A click is held while an impression of the last five minutes
		// may still come: the rows of five minutes and the delays.
		{"interval join", ijoinRunSQL, "", 700},
		// A view row is held until the other view's watermark passes its
		// window start: a window's rows and the delays.
		{"views over two sources", viewJoinRunSQL, "both_seen", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := fmt.Sprintf(tc.sql, clicksPath)
			sql := filepath.Join(dir, "q.sql")
			os.WriteFile(sql, []byte(text), 0o644)
			stats := filepath.Join(dir, "stats.json")
			args := []string{"run", sql, "--input", impsPath, "--stats-json", stats, "--quiet"}
			if tc.query != "" {
				args = append(args, "--query", tc.query)
			}
			env, out, errb := runTestEnv("")
			if code := Main(context.Background(), env, args); code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
			var s summary
			b, _ := os.ReadFile(stats)
			if err := json.Unmarshal(b, &s); err != nil || s.Interval == nil {
				t.Fatalf("summary %s: %v", b, err)
			}
			t.Logf("joined %d rows, held at most %d left, %d right", s.Interval.Matches, s.Interval.LeftPeak, s.Interval.RightPeak)
			if s.Interval.Matches < 40 {
				t.Fatalf("only %d joined rows: the test would prove little", s.Interval.Matches)
			}
			if s.Interval.RightPeak > tc.maxHeld {
				t.Errorf("the join held up to %d rows of the second input (bound %d): the rest of its file was held after the first ended", s.Interval.RightPeak, tc.maxHeld)
			}

			// The oracle: the first input whole, then the second.
			eng, _ := ubik.Open(ubik.DefaultOptions())
			var want []byte
			var buf []byte
			q, err := eng.Start(text, ubik.QueryOptions{Name: tc.query, OnRecord: func(rec changelog.Record) error {
				buf = formatRecord(buf[:0], "tsv", &rec)
				want = append(want, buf...)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range imps {
				if err := q.Push([]byte(l)); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range clicks {
				if err := q.PushInput("clicks", []byte(l)); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if out.String() != string(want) {
				t.Fatalf("changelog differs from the Go API's (%d bytes, want %d)", out.Len(), len(want))
			}
		})
	}
}
