package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// stopAtPoll is a context that reports itself cancelled from its n-th Err
// on: the run loop looks at Err when it polls, so a run stops, gracefully
// and checkpointed, at a poll the test chooses.
type stopAtPoll struct {
	context.Context
	left atomic.Int32
}

func (c *stopAtPoll) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

const tooLongSQL = `CREATE SOURCE ev (k VARCHAR, note VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'csv');
SELECT k, count(*) AS n FROM ev GROUP BY k`

// tooLongCSV: a header, two records, a record over maxLineBytes whose
// quoted field spans many lines (it ends on line bigEnd), and more records.
func tooLongCSV() (in string, bigEnd int64) {
	var b strings.Builder
	b.WriteString("k,note,ts\na,x,2026-07-18 10:00:00\nb,y,2026-07-18 10:00:01\nbig,\"")
	line := strings.Repeat("z", 1023) + "\n"
	n := maxLineBytes/len(line) + 2
	b.WriteString(strings.Repeat(line, n))
	b.WriteString("end\",2026-07-18 10:00:02\n")
	bigEnd = int64(4 + n) // the header, two records, the first line of the field, n more
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "%c,w,2026-07-18 10:00:%02d\n", 'a'+i%3, 3+i)
	}
	return b.String(), bigEnd
}

// A CSV record over the bound that spans lines is malformed, with its line
// number, and the run goes on: it once stopped the run with "record too
// long" and no position, and again on every restart. Stopped right after
// it, the run checkpoints an input offset that resumes at the next record,
// and the resumed run ends with the uninterrupted run's changelog.
func TestRunCSVRecordTooLongIsMalformed(t *testing.T) {
	in, bigEnd := tooLongCSV()
	dir := t.TempDir()
	sql := writeFile(t, "q.sql", tooLongSQL)
	input := filepath.Join(dir, "in.csv")
	if err := os.WriteFile(input, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, name string) (int, string, summary) {
		out := filepath.Join(dir, name+".tsv")
		env, _, errb := runTestEnv("")
		code := Main(ctx, env, []string{"run", sql, "--input", input, "--output", out, "--no-progress",
			"--state-dir", filepath.Join(dir, name+".state"), "--checkpoint-interval", "1h",
			"--dead-letter", out + ".dead", "--stats-json", out + ".stats"})
		var s summary
		b, _ := os.ReadFile(out + ".stats")
		json.Unmarshal(b, &s)
		o, _ := os.ReadFile(out)
		return code, errb.String() + "\n" + string(o), s
	}
	code, text, ref := run(context.Background(), "ref")
	if code != 0 || ref.Malformed != 1 || ref.EventsRead != 13 {
		t.Fatalf("uninterrupted run: exit %d, summary %+v:\n%.2000s", code, ref, text)
	}
	var dead struct {
		Line  int64  `json:"line"`
		Error string `json:"error"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "ref.tsv.dead"))
	if err := json.Unmarshal(b, &dead); err != nil || dead.Line != bigEnd || !strings.Contains(dead.Error, "longer than") {
		t.Fatalf("dead letter %.300s (%v), want line %d", b, err, bigEnd)
	}
	refOut, _ := os.ReadFile(filepath.Join(dir, "ref.tsv"))

	// The first poll is at line 0, the second right after the oversized
	// record (a poll every pollBytes of input): stop there.
	ctx := &stopAtPoll{Context: context.Background()}
	ctx.left.Store(1)
	code, text, s := run(ctx, "got")
	if code == 0 || s.StoppedAtLine != bigEnd {
		t.Fatalf("stopped run: exit %d, stopped at line %d, want %d:\n%.2000s", code, s.StoppedAtLine, bigEnd, text)
	}
	code, text, s = run(context.Background(), "got")
	gotOut, _ := os.ReadFile(filepath.Join(dir, "got.tsv"))
	if code != 0 || string(gotOut) != string(refOut) || s.Malformed != 1 {
		t.Fatalf("resumed run: exit %d, summary %+v, changelog\n%s\nwant\n%s\n%.2000s", code, s, gotOut, refOut, text)
	}
}

// A run of long events looks at signals every pollBytes of input, not only
// every 4096 lines: 200 events of 2,000 columns (24 KB each) once ran to
// the end of the input before a stop was seen.
func TestRunPollsSignalsOnLongEvents(t *testing.T) {
	var sql, in strings.Builder
	sql.WriteString("CREATE SOURCE ev (ts TIMESTAMP")
	for c := 0; c < 2000; c++ {
		fmt.Fprintf(&sql, ", c%d BIGINT", c)
	}
	sql.WriteString(", WATERMARK FOR ts AS ts) WITH (format = 'jsonl');\nSELECT c0, count(*) AS n FROM ev GROUP BY c0")
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&in, `{"ts":"2026-07-18 10:00:00"`)
		for c := 1999; c >= 0; c-- {
			fmt.Fprintf(&in, `,"c%d":%d`, c, 1000000+i)
		}
		in.WriteString("}\n")
	}
	dir := t.TempDir()
	q := writeFile(t, "q.sql", sql.String())
	input := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(input, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := &stopAtPoll{Context: context.Background()}
	ctx.left.Store(1) // the poll at line 0 passes, the next stops
	env, _, errb := runTestEnv("")
	stats := filepath.Join(dir, "stats.json")
	code := Main(ctx, env, []string{"run", q, "--input", input, "--output", filepath.Join(dir, "out.tsv"), "--no-progress", "--stats-json", stats})
	var s summary
	b, _ := os.ReadFile(stats)
	json.Unmarshal(b, &s)
	if want := int64((1<<20)/(24<<10) + 2); code == 0 || s.StoppedAtLine <= 0 || s.StoppedAtLine > want {
		t.Fatalf("exit %d, stopped at line %d, want a stop by line %d:\n%s", code, s.StoppedAtLine, want, errb)
	}
}

// rewriteCkptHeader replaces the input offset and line of the checkpoint
// in dir (and its CRC, so only the values can refuse it).
func rewriteCkptHeader(t *testing.T, dir string, offset, line int64) {
	t.Helper()
	p := filepath.Join(dir, "checkpoint")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	body := b[:len(b)-4]
	const at = len(ckptMagic) + 32 + 1 // magic, identity, finished
	_, n := binary.Varint(body[at:])
	_, n2 := binary.Varint(body[at+n:])
	nb := append(append(append([]byte(nil), body[:at]...), binary.AppendVarint(binary.AppendVarint(nil, offset), line)...), body[at+n+n2:]...)
	nb = binary.LittleEndian.AppendUint32(nb, crc32.ChecksumIEEE(nb))
	if err := os.WriteFile(p, nb, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint with a valid CRC whose input offset cannot be a position
// of the run (negative, or past the end of the input) is refused, with the
// state dir named; it was accepted (a finished run's), or sought to.
func TestResumeRefusesCraftedOffsets(t *testing.T) {
	in, _ := tooLongCSV()
	in = in[:200] // the first records only
	in = in[:strings.LastIndexByte(in, '\n')+1]
	dir := t.TempDir()
	sql := writeFile(t, "q.sql", tooLongSQL)
	input := filepath.Join(dir, "in.csv")
	os.WriteFile(input, []byte(in), 0o644)
	for _, c := range []struct {
		offset int64
		finish bool
		want   string
	}{{-7, true, "is corrupt (a negative offset"}, {int64(len(in)) + 100, false, "the input is not the one the run read"}} {
		state := filepath.Join(t.TempDir(), "state")
		args := []string{"run", sql, "--input", input, "--output", filepath.Join(dir, "out.tsv"), "--no-progress", "--state-dir", state}
		ctx := context.Background()
		if !c.finish {
			sc := &stopAtPoll{Context: ctx}
			sc.left.Store(0) // stop at the first poll: a checkpoint that is not final
			env, _, _ := runTestEnv("")
			Main(sc, env, args)
		} else {
			env, _, errb := runTestEnv("")
			if code := Main(ctx, env, args); code != 0 {
				t.Fatalf("exit %d: %s", code, errb)
			}
		}
		rewriteCkptHeader(t, state, c.offset, 3)
		env, _, errb := runTestEnv("")
		if code := Main(ctx, env, args); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("offset %d: exit %d, %s; want a refusal with %q", c.offset, code, errb, c.want)
		}
	}
}
