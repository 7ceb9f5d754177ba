package infer

import (
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/plan"
)

func TestInferJSONAndCompile(t *testing.T) {
	in := `{"id":"a","n":1,"x":1.5,"ok":true,"day":"2026-07-18","at":"2026-07-18T10:00:00Z","nested":{"a":1},"maybe":null}
{"id":"b","n":2,"x":2,"ok":false,"day":"2026-07-19","at":"2026-07-18 10:00:01.5","nested":[1],"maybe":null,"late_field":"t"}
`
	s, err := Infer(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `-- inferred from 2 records; check the types and the watermark delay
-- at was in order in these records; the watermark delay is the smallest, raise it if later input is out of order
CREATE SOURCE events (
  id VARCHAR,
  n BIGINT,
  x DECIMAL(2,1),
  ok BOOLEAN,
  day DATE,
  at TIMESTAMP,
  nested JSON,
  maybe VARCHAR,
  late_field VARCHAR,
  WATERMARK FOR at AS at - INTERVAL '1' SECOND
) WITH (format = 'jsonl');
`
	if got := s.SQL(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// What infer prints must compile.
	if _, err := plan.Compile(s.SQL()+"SELECT count(*) FROM events", plan.CompileOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestInferCSV(t *testing.T) {
	in := "when,who,amount,flag\n2026-07-18 10:00:00,\"a, b\",1,true\n2026-07-18 10:00:01,c,2.5,\n"
	s, err := Infer(strings.NewReader(in), Options{Format: "csv", Name: "my events"})
	if err != nil {
		t.Fatal(err)
	}
	got := s.SQL()
	for _, w := range []string{`CREATE SOURCE "my events" (`, "  when TIMESTAMP,", "  who VARCHAR,", "  amount DECIMAL(2,1),", "  flag BOOLEAN,", "WATERMARK FOR when AS when", "format = 'csv'"} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
	if _, err := Infer(strings.NewReader(""), Options{}); err != ErrNoRecords {
		t.Errorf("empty input: %v", err)
	}
}

// compiles fails the test unless the suggestion compiles with a query on it.
func compiles(t *testing.T, s *Schema) string {
	t.Helper()
	sql := s.SQL()
	if _, err := plan.Compile(sql+"SELECT count(*) FROM "+ident(s.Name), plan.CompileOptions{}); err != nil {
		t.Fatalf("the suggestion does not compile: %v\n%s", err, sql)
	}
	return sql
}

func TestInferNestedIsJSON(t *testing.T) {
	in := `{"id":"a","meta":{"v":{"t":"x"}},"tags":["a","b"],"mixed":"s"}
{"id":"b","meta":{"v":1},"tags":[],"mixed":{"k":1}}
`
	s, err := Infer(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := compiles(t, s)
	for _, w := range []string{"  meta JSON,", "  tags JSON,", "  mixed JSON\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
}

func TestInferEpochCandidate(t *testing.T) {
	in := `{"id":"a","ts_ms":1784368800001,"n":3,"sec":1784368800,"us":1784368800000002}
{"id":"b","ts_ms":1784368801500,"n":4,"sec":1784368801,"us":1784368800000003}
{"id":"c","ts_ms":1784368798200,"n":5,"sec":1784368801,"us":1784368800000003}
`
	s, err := Infer(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := compiles(t, s)
	for _, w := range []string{
		"  ts_ms BIGINT,",
		"-- event-time candidate: ts_ms holds epoch milliseconds (2026-07-18 09:59:58.2 to 2026-07-18 10:00:01.5); TO_TIMESTAMP_LTZ(ts_ms, 3) reads it as a TIMESTAMP, as the computed column event_time does",
		"-- event-time candidate: sec holds epoch seconds (2026-07-18 10:00:00 to 2026-07-18 10:00:01); TO_TIMESTAMP_LTZ(sec, 0) reads it as a TIMESTAMP\n",
		"-- event-time candidate: us holds epoch microseconds (2026-07-18 10:00:00.000002 to 2026-07-18 10:00:00.000003); TO_TIMESTAMP_LTZ(us, 6) reads it as a TIMESTAMP\n",
		// The disorder of the epoch column sets the delay: 3.3 s -> 4 s.
		"-- the largest disorder seen in ts_ms: 3.3s behind the latest before it (line 3)",
		"  event_time AS TO_TIMESTAMP_LTZ(ts_ms, 3),\n  WATERMARK FOR event_time AS event_time - INTERVAL '4' SECOND\n",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
	// The calls the comments name read the columns in a query, and the
	// computed event time carries windows.
	for _, e := range []string{"TO_TIMESTAMP_LTZ(ts_ms, 3)", "TO_TIMESTAMP_LTZ(sec, 0)", "TO_TIMESTAMP_LTZ(us, 6)", "event_time"} {
		q := got + "SELECT date_trunc('minute', " + e + ") AS m, count(*) AS c FROM events GROUP BY date_trunc('minute', " + e + ")"
		if _, err := plan.Compile(q, plan.CompileOptions{}); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
	q := got + "SELECT window_start, count(*) AS c FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '1' MINUTE)) GROUP BY window_start"
	if _, err := plan.Compile(q, plan.CompileOptions{}); err != nil {
		t.Errorf("window over the computed event time: %v", err)
	}
	if strings.Contains(got, "candidate: n ") {
		t.Errorf("a small count is no epoch:\n%s", got)
	}
	// A column already named event_time: the computed one takes another name.
	s, err = Infer(strings.NewReader(`{"event_time":"x","sec":1784368800}`+"\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := compiles(t, s); !strings.Contains(got, "  event_time_2 AS TO_TIMESTAMP_LTZ(sec, 0),") {
		t.Errorf("want event_time_2:\n%s", got)
	}
}

func TestInferSkipsBadLine(t *testing.T) {
	in := "{\"id\":\"a\",\"n\":1}\nnot json\n[1,2]\n{\"id\":\"b\",\"n\":2}\n"
	s, err := Infer(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != 2 {
		t.Errorf("records = %d, want 2", s.Records)
	}
	got := compiles(t, s)
	if !strings.Contains(got, "-- skipped 2 malformed lines (first at line 2: ") {
		t.Errorf("no note of the skipped lines in\n%s", got)
	}
	// Only bad lines: the error names the first one.
	_, err = Infer(strings.NewReader("nope\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("all lines bad: %v", err)
	}
}

func TestInferWatermarkFromDisorder(t *testing.T) {
	in := `{"at":"2026-07-18T10:00:00Z"}
{"at":"2026-07-18T10:00:10Z"}
{"at":"2026-07-18T10:00:02.5Z"}
{"at":"2026-07-18T10:00:11Z"}
{"at":"2026-07-18T10:00:09Z"}
`
	s, err := Infer(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := compiles(t, s)
	for _, w := range []string{
		"WATERMARK FOR at AS at - INTERVAL '8' SECOND",
		"-- the largest disorder seen in at: 7.5s behind the latest before it (line 3)",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
	// In order: the smallest delay, and the note says so.
	s, err = Infer(strings.NewReader("{\"at\":\"2026-07-18T10:00:00Z\"}\n{\"at\":\"2026-07-18T10:00:01Z\"}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got = compiles(t, s)
	if !strings.Contains(got, "INTERVAL '1' SECOND") || !strings.Contains(got, "-- at was in order in these records") {
		t.Errorf("in-order input:\n%s", got)
	}
}

func TestInferSkipsBOM(t *testing.T) {
	for _, c := range []struct{ format, in string }{
		{"jsonl", "\xEF\xBB\xBF{\"id\":\"a\",\"n\":1}\n"},
		{"csv", "\xEF\xBB\xBFid,n\na,1\n"},
	} {
		s, err := Infer(strings.NewReader(c.in), Options{Format: c.format})
		if err != nil {
			t.Fatalf("%s: %v", c.format, err)
		}
		got := compiles(t, s)
		if !strings.Contains(got, "  id VARCHAR,") || s.Records != 1 {
			t.Errorf("%s: %d records\n%s", c.format, s.Records, got)
		}
	}
}

// TestInferCommentsStayComments: a line break in a column name or in a
// skipped line's excerpt does not end a comment of the suggestion.
func TestInferCommentsStayComments(t *testing.T) {
	in := "{\"a\\nSELECT 1;\":1784368800001,\"t\\n\":\"2026-07-18T10:00:00Z\"}\n{\"x\r\r DROP\n"
	s, err := Infer(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := compiles(t, s)
	for _, w := range []string{"\n-- event-time candidate: \"a SELECT 1;\" holds epoch milliseconds", "\n-- \"t \" was in order"} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
}

// TestInferDecimal: a column whose every sampled number is plain decimal
// text (or an integer) within 38 digits is a DECIMAL holding the widest
// integer part and the longest fraction seen, so sums of money are exact;
// an exponent, a DOUBLE-only form or more than 38 digits make it DOUBLE.
func TestInferDecimal(t *testing.T) {
	in := `{"fare":12.50,"qty":0.000000001,"big":1.5,"sci":1.5,"wide":1.5,"n":3,"ts":"2026-07-18 10:00:00"}
{"fare":1234.99,"qty":123456789.5,"big":12345678901234567890,"sci":2e3,"wide":1234567890123456789012345678901234567.89,"n":4,"ts":"2026-07-18 10:00:01"}
{"fare":7,"qty":-1.25,"big":0.5,"sci":0.5,"wide":0.5,"n":5,"ts":"2026-07-18 10:00:02"}
`
	s, err := Infer(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sql := compiles(t, s)
	for _, w := range []string{"  fare DECIMAL(6,2),", "  qty DECIMAL(18,9),", "  big DOUBLE,", "  sci DOUBLE,", "  wide DOUBLE,", "  n BIGINT,"} {
		if !strings.Contains(sql, w) {
			t.Errorf("missing %q in\n%s", w, sql)
		}
	}
	// The same in CSV text.
	s, err = Infer(strings.NewReader("fare,ts\n12.50,2026-07-18 10:00:00\n-1234.999,2026-07-18 10:00:01\n"), Options{Format: "csv"})
	if err != nil {
		t.Fatal(err)
	}
	if sql := compiles(t, s); !strings.Contains(sql, "  fare DECIMAL(7,3),") {
		t.Errorf("CSV: want fare DECIMAL(7,3) in\n%s", sql)
	}
	for _, c := range []struct {
		text string
		ok   bool
	}{{"1.5", true}, {"-0.25", true}, {"1.", false}, {".5", false}, {"1e3", false}, {"1.5e3", false}, {"--1.5", false}, {"1.2.3", false},
		{"1" + strings.Repeat("0", 36) + ".5", true}, {"1" + strings.Repeat("0", 37) + ".5", false}} {
		if _, _, ok := decimalText(c.text); ok != c.ok {
			t.Errorf("decimalText(%q) = %v, want %v", c.text, ok, c.ok)
		}
	}
}
