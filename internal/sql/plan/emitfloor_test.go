package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/ubiksql/ubik/internal/sql/parser"
)

// An EMIT EARLY interval below MinEarlyEvery is a planning error at the
// interval (1 µs once planned and then woke the query a million times a
// second); the floor itself plans.
func TestEmitEarlyFloor(t *testing.T) {
	const head = "CREATE SOURCE ev (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'jsonl');\n" +
		"SELECT k, count(*) FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT EARLY EVERY "
	for _, iv := range []string{"INTERVAL '1' MICROSECOND", "INTERVAL '9999' MICROSECOND", "INTERVAL '9' MILLISECOND", "INTERVAL '0.001' SECOND"} {
		_, err := Compile(head+iv, CompileOptions{})
		var pe *parser.Error
		if !errors.As(err, &pe) || pe.Line != 2 || pe.Pos != len(head) || !strings.Contains(pe.Msg, "shorter than the shortest interval, 00:00:00.01") {
			t.Errorf("%s: got %v, want an error at line 2 byte %d naming the 10 ms floor", iv, err, len(head))
		}
	}
	for _, iv := range []string{"INTERVAL '10' MILLISECOND", "INTERVAL '1' SECOND"} {
		if _, err := Compile(head+iv, CompileOptions{}); err != nil {
			t.Errorf("%s: %v", iv, err)
		}
	}
	// A plan built by hand is held to the same floor.
	prog, err := Compile(head+"INTERVAL '1' SECOND", CompileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q := prog.Queries[0]
	q.Emit.EarlyEvery = 9_999 // below the 10 ms floor
	if err := q.Validate(); err == nil {
		t.Error("Validate accepts an early interval below the floor")
	}
}
