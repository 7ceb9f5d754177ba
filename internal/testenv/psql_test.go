package testenv

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPGScriptRoundTrip loads random strings (every byte COPY escapes,
// "\N" and "\." as text, multi-byte UTF-8), numbers and timestamps through
// PGScript and reads them back, and has the server hash each string:
// the hash proves the server stored the bytes sent (the load is right on
// its own), the read-back that the decoder returns them.
func TestPGScriptRoundTrip(t *testing.T) {
	dsn := RequirePostgres(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	atoms := []string{"\\", "\n", "\r", "\t", "\b", "\f", "\v", `\N`, `\.`, "\\.\n", "N", ".", "a", "é", "😀", " ", "'", `"`, "$$", ";", ":x", "--", "\x01", pgResultEnd}
	const n = 400
	var rows [][]any
	want := make([]*string, n)
	floats := []float64{0, math.Copysign(0, -1), 0.1, -2.5e-308, 1e300, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), 1.4999999999999998}
	for i := range n {
		var s any
		if i%17 != 0 {
			var b strings.Builder
			for range r.IntN(8) {
				b.WriteString(atoms[r.IntN(len(atoms))])
			}
			str := b.String()
			want[i], s = &str, str
		}
		f := floats[r.IntN(len(floats))]
		if r.IntN(2) == 0 {
			f = math.Float64frombits(r.Uint64())
			if math.IsNaN(f) {
				f = 7
			}
		}
		ts := time.UnixMicro(r.Int64N(4e15) - 2e15).UTC() // about 1906 to 2033
		rows = append(rows, []any{i, s, f, r.Int64() - r.Int64(), ts, i%3 == 0})
	}
	var sc PGScript
	sc.Exec(`SET TIME ZONE 'UTC'; SET extra_float_digits = 1; CREATE TEMP TABLE rt (id int, s text, f float8, i bigint, ts timestamp, b bool)`)
	sc.CopyIn(t, "rt", []string{"id", "s", "f", "i", "ts", "b"}, rows)
	q := sc.Query(`SELECT id, s, md5(convert_to(s, 'UTF8')), f::text, i::text, (extract(epoch FROM ts) * 1000000)::bigint::text, b::text FROM rt ORDER BY id`)
	empty := sc.Query(`SELECT 1 WHERE false`)
	res := sc.Run(t, dsn)
	if len(res[empty]) != 0 {
		t.Fatalf("an empty result came back with %d rows", len(res[empty]))
	}
	got := res[q]
	if len(got) != n {
		t.Fatalf("%d rows back, want %d", len(got), n)
	}
	for i, row := range got {
		if len(row) != 7 || row[0] == nil || *row[0] != strconv.Itoa(i) {
			t.Fatalf("row %d: %q", i, derefAll(row))
		}
		switch {
		case want[i] == nil:
			if row[1] != nil || row[2] != nil {
				t.Errorf("row %d: NULL came back as %q", i, derefAll(row[1:3]))
			}
		case row[1] == nil || *row[1] != *want[i]:
			t.Errorf("row %d: read back %q, want %q", i, deref(row[1]), *want[i])
		default:
			sum := md5.Sum([]byte(*want[i]))
			if h := hex.EncodeToString(sum[:]); row[2] == nil || *row[2] != h {
				t.Errorf("row %d: the server stored bytes with md5 %s, want %s (%q)", i, deref(row[2]), h, *want[i])
			}
		}
		f, err := strconv.ParseFloat(deref(row[3]), 64)
		if wf := rows[i][2].(float64); err != nil || math.Float64bits(f) != math.Float64bits(wf) {
			t.Errorf("row %d: float %s came back, want %v (bits %x)", i, deref(row[3]), wf, math.Float64bits(wf))
		}
		if wi := strconv.FormatInt(rows[i][3].(int64), 10); deref(row[4]) != wi {
			t.Errorf("row %d: bigint %s came back, want %s", i, deref(row[4]), wi)
		}
		if wt := strconv.FormatInt(rows[i][4].(time.Time).UnixMicro(), 10); deref(row[5]) != wt {
			t.Errorf("row %d: timestamp %s µs came back, want %s", i, deref(row[5]), wt)
		}
		if wb := strconv.FormatBool(rows[i][5].(bool)); deref(row[6]) != wb {
			t.Errorf("row %d: bool %s came back, want %s", i, deref(row[6]), wb)
		}
	}
}

// TestPGScriptFails: a failing statement fails the test with the server's
// message, and later statements do not run.
func TestPGScriptFails(t *testing.T) {
	dsn := RequirePostgres(t)
	var sc PGScript
	sc.Exec("SELECT 1/0")
	sc.Query("SELECT 1")
	ft := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc.Run(ft, dsn)
	}()
	<-done
	if !strings.Contains(ft.msg, "division by zero") {
		t.Fatalf("Run on a failing script: %q, want a failure naming division by zero", ft.msg)
	}
}

// fatalRecorder records Fatalf and ends the goroutine, as testing.T does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestPGCopyRowRejectsUnknownEscapes(t *testing.T) {
	for _, line := range []string{`a\`, `a\N`, `\101`, `\x41`} {
		if _, err := pgCopyRow(line); err == nil {
			t.Errorf("pgCopyRow(%q) accepted it", line)
		}
	}
	row, err := pgCopyRow(`\N` + "\t" + `a\\b\tc` + "\t")
	if err != nil || len(row) != 3 || row[0] != nil || *row[1] != "a\\b\tc" || *row[2] != "" {
		t.Fatalf("pgCopyRow: %q, %v", derefAll(row), err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}

func derefAll(row []*string) []string {
	out := make([]string, len(row))
	for i, s := range row {
		out[i] = deref(s)
	}
	return out
}
