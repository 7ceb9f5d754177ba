package redislander

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// testDB is the logical database these tests land into on the shared
// server. Their cleanup SCANs for its namespace's keys, and a SCAN walks
// the whole database: in database 0, beside the 2 million keys a benchmark
// or another host can leave there, the package took 155 s instead of 10 s.
// No other test or tool of the repository uses database 13.
const testDB = 13

func client(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DB: testDB, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

func openOn(t testing.TB, c redis.UniversalClient, mode land.Mode, ns string) land.Lander {
	t.Helper()
	return openWith(t, Options{Client: c, Mode: mode, Prefix: ns + "/"})
}

// openWith opens a lander with opts (Prefix: the namespace and "/") and
// deletes its keys at the end.
func openWith(t testing.TB, opts Options) *Lander {
	t.Helper()
	c := opts.Client
	l, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanup(c, opts.Prefix) })
	return l
}

// cleanup deletes the test's keys from the shared server.
func cleanup(c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	it := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
		if len(keys) == 1000 {
			c.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Unlink(ctx, keys...)
	}
}

func TestConformance(t *testing.T) {
	c := client(t, testenv.RequireRedis(t))
	landtest.Run(t, landtest.Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			return openOn(t, c, mode, ns)
		},
		ExactValue:  true,
		Restartable: privateServer,
	})
}

// TestOptimistic runs the suite through WATCH/MULTI/EXEC.
func TestOptimistic(t *testing.T) {
	c := client(t, testenv.RequireRedis(t))
	landtest.Run(t, landtest.Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			l := openWith(t, Options{Client: c, Mode: mode, Prefix: ns + "/", Optimistic: true})
			if l.single == nil {
				t.Fatal("Optimistic lander does not use WATCH/MULTI/EXEC")
			}
			return l
		},
		ExactValue: true,
		Trials:     10000,
	})
}

// TestScriptFallback runs the suite through EVALSHA, as on Redis < 7.
func TestScriptFallback(t *testing.T) {
	c := client(t, testenv.RequireRedis(t))
	landtest.Run(t, landtest.Harness{
		Open: func(t testing.TB, mode land.Mode, ns string) land.Lander {
			l := openWith(t, Options{Client: c, Mode: mode, Prefix: ns + "/"})
			sha, err := c.ScriptLoad(context.Background(), script).Result()
			if err != nil {
				t.Fatal(err)
			}
			l.sha = sha
			l.useFn.Store(false)
			return l
		},
		ExactValue: true,
		Trials:     10000,
	})
}

// TestLargeNumbers: window starts and revisions past 2^53 (where a Lua
// double loses integers) and negative window starts compare exactly.
func TestLargeNumbers(t *testing.T) {
	ctx := context.Background()
	c := client(t, testenv.RequireRedis(t))
	ns := landtest.NS("big")
	l := openOn(t, c, land.Latest, ns)
	rec := func(ws int64, rev uint64) land.Item {
		r := landtest.Record(land.Latest, "q", "g", time.UnixMicro(0), rev, false)
		r.Meta.WindowStart, r.Meta.WindowEnd = ws, ws
		it, err := land.Prepare(land.Latest, "", r)
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	const p53 = 1 << 53
	steps := []struct {
		ws   int64
		rev  uint64
		want int // 1 landed, 0 duplicate, -1 superseded
	}{
		{-5, 1, 1}, {-12, 9, -1}, {-3, 1, 1}, {p53, p53, 1}, {p53, p53 + 1, 1}, {p53, p53, -1},
		{p53 + 1, 1, 1}, {p53, 1 << 63, -1}, {p53 + 1, 1<<64 - 1, 1}, {p53 + 1, 1<<64 - 2, -1},
		{p53 + 1, 1<<64 - 1, 0}, {1<<63 - 1, 2, 1}, {1<<63 - 2, 3, -1},
	}
	for i, s := range steps {
		it := rec(s.ws, s.rev)
		r, err := l.(*Lander).write(ctx, []land.Item{it})
		if err != nil {
			t.Fatal(err)
		}
		got := map[land.Result]int{{Landed: 1}: 1, {Duplicate: 1}: 0, {Superseded: 1}: -1}[r]
		if got != s.want {
			t.Fatalf("step %d (ws %d, rev %d): %+v, want code %d", i, s.ws, s.rev, r, s.want)
		}
	}
	st, err := l.Get(ctx, land.Ref{Query: "q", Group: []byte(`["g"]`)})
	if err != nil || st.Version != (land.Version{WindowStart: 1<<63 - 1, Revision: 2}) {
		t.Fatalf("Get = %+v, %v", st.Version, err)
	}
}

// privateServer starts a redis-server of the test's own (no persistence)
// on a free port, and returns a restart that kills it and starts it again
// empty.
func privateServer(t *testing.T) (func(testing.TB, land.Mode, string) land.Lander, func(testing.TB)) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (scripts/services.sh up redis installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	var cmd *exec.Cmd
	start := func(t testing.TB) {
		cmd = exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "log"))
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
		defer c.Close()
		for i := 0; ; i++ {
			if c.Ping(context.Background()).Err() == nil {
				return
			}
			if i == 100 {
				log, _ := os.ReadFile(filepath.Join(dir, "log"))
				t.Fatalf("private redis-server on %d did not answer: %s", port, log)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	start(t)
	t.Cleanup(stop)
	c := client(t, fmt.Sprintf("127.0.0.1:%d", port))
	open := func(t testing.TB, mode land.Mode, ns string) land.Lander {
		return openOn(t, c, mode, ns)
	}
	restart := func(t testing.TB) {
		stop()
		time.Sleep(200 * time.Millisecond) // an outage the lander must wait out
		start(t)
	}
	return open, restart
}
