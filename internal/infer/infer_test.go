package infer

import (
	"strings"
	"testing"

	"github.com/ubiksql/ubik/sql/plan"
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
CREATE SOURCE events (
  id VARCHAR,
  n BIGINT,
  x DOUBLE,
  ok BOOLEAN,
  day DATE,
  at TIMESTAMP,
  nested VARCHAR,
  maybe VARCHAR,
  late_field VARCHAR,
  WATERMARK FOR at AS at - INTERVAL '5' SECOND
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
	for _, w := range []string{`CREATE SOURCE "my events" (`, "  when TIMESTAMP,", "  who VARCHAR,", "  amount DOUBLE,", "  flag BOOLEAN,", "WATERMARK FOR when AS when", "format = 'csv'"} {
		if !strings.Contains(got, w) {
			t.Errorf("missing %q in\n%s", w, got)
		}
	}
	if _, err := Infer(strings.NewReader(""), Options{}); err != ErrNoRecords {
		t.Errorf("empty input: %v", err)
	}
}
