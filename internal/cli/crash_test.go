package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/internal/crashtest"
)

// crashInput writes n events (with a few malformed and late ones) and
// returns the path.
func crashInput(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	r := rand.New(rand.NewPCG(5, 6))
	base := int64(36000000)
	for i := 0; i < n; i++ {
		ms := base + int64(i)/2 - r.Int64N(3000)
		if i%5000 == 4999 {
			ms -= 120_000 // late: two minutes behind
		}
		if i%7919 == 0 {
			fmt.Fprintf(w, "{\"merchant\":\"m%d\",\"amount\":\"oops\"}\n", i%100)
			continue
		}
		fmt.Fprintf(w, `{"merchant":"m%d","amount":%d.%02d,"ts":"2026-07-18 %02d:%02d:%02d.%03d"}`+"\n",
			r.IntN(300), r.IntN(1000), r.IntN(100), ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

const crashSQLFinal = `CREATE SOURCE ev (merchant VARCHAR, amount DOUBLE, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (format = 'jsonl');
SELECT merchant, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, count(*) AS n, sum(amount) AS total, max(amount) AS hi, REVISION() AS rev
FROM ev GROUP BY merchant, TUMBLE(ts, INTERVAL '10' SECOND)`

const crashSQLEarly = crashSQLFinal + ` EMIT EARLY EVERY INTERVAL '10' MILLISECOND`

// TestKill9Resume kills `ubik run --state-dir` with SIGKILL at several
// random points, reruns the same command each time, and checks that the
// final changelog equals an uninterrupted run's: byte for byte for EMIT
// FINAL; for EMIT EARLY the final records are equal, revisions continue
// (+1 per record of a key) and no window is finalized twice.
func TestKill9Resume(t *testing.T) {
	bin := buildUbik(t)
	input := crashInput(t, 400_000)
	for _, tc := range []struct {
		name, sql string
		early     bool
	}{{"final", crashSQLFinal, false}, {"early", crashSQLEarly, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sql := filepath.Join(dir, "q.sql")
			os.WriteFile(sql, []byte(tc.sql), 0o644)
			args := func(out, state string) []string {
				a := []string{"run", sql, "--input", input, "--output", out, "--format", "jsonl", "--no-progress",
					"--dead-letter", out + ".dead", "--late-output", out + ".late"}
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
			for _, ext := range []string{".dead", ".late"} {
				a, _ := os.ReadFile(ref + ext)
				b, _ := os.ReadFile(got + ext)
				if !bytes.Equal(a, b) || len(a) == 0 {
					t.Errorf("%s output differs after %d kills (%d vs %d bytes)", ext, kills, len(a), len(b))
				}
			}
			if !tc.early {
				if !bytes.Equal(refB, gotB) {
					t.Fatalf("after %d kills the changelog differs from the uninterrupted run (%d vs %d bytes)", kills, len(refB), len(gotB))
				}
				return
			}
			refFinal := finalsOf(t, refB)
			gotFinal := finalsOf(t, gotB)
			if len(refFinal) == 0 || len(refFinal) != len(gotFinal) {
				t.Fatalf("final records: %d vs %d", len(refFinal), len(gotFinal))
			}
			for k, v := range refFinal {
				if gotFinal[k] != v {
					t.Fatalf("key %s: final %s, uninterrupted %s", k, gotFinal[k], v)
				}
			}
		})
	}
}

// finalsOf checks revision continuity and single finals in a jsonl
// changelog, and returns each key's final value (without the rev column,
// which legitimately differs when early emissions differ).
func finalsOf(t *testing.T, b []byte) map[string]string {
	t.Helper()
	rev := map[string]int{}
	finals := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Key      json.RawMessage        `json:"key"`
			Value    map[string]interface{} `json:"value"`
			Final    bool                   `json:"final"`
			Revision int                    `json:"revision"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		k := string(r.Key)
		if _, done := finals[k]; done {
			t.Fatalf("key %s: a record after its final one", k)
		}
		if r.Revision != rev[k]+1 || int(r.Value["rev"].(float64)) != r.Revision {
			t.Fatalf("key %s: revision %d after %d", k, r.Revision, rev[k])
		}
		rev[k] = r.Revision
		if r.Final {
			delete(r.Value, "rev")
			v, _ := json.Marshal(r.Value)
			finals[k] = string(v)
		}
	}
	return finals
}
