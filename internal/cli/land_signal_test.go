package cli

import (
	"context"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/landtest"
)

// TestLandSignalEnd: ubik land stopped by a signal while it waits on the
// store ends as every command does (signalEnd): as a service, exit 0; with
// --until-caught-up, an end not reached, 128 + the signal number.
func TestLandSignalEnd(t *testing.T) {
	dsn := testenv.RequirePostgres(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic("totals", 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	gen := landtest.Gen{Mode: land.Latest, Queries: []string{"totals"}, Groups: 3, Windows: 2, Revisions: 2}
	r := rand.New(rand.NewPCG(1, 2))
	produce := func(trial int) {
		t.Helper()
		var krs []*kgo.Record
		for _, rec := range gen.Changelog(r, trial) {
			krs = append(krs, kafkasrc.ToKafka("totals", rec))
		}
		if err := cl.ProduceSync(context.Background(), krs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	table := testenv.Name(t, "sig")
	args := []string{"land", "--from", "kafka://" + c.ListenAddrs()[0] + "/totals", "--to", dsn + "&table=" + table, "--mode", "latest"}
	produce(0)
	env, errb := testEnv()
	if code := Main(context.Background(), env, append(args, "--until-caught-up")); code != 0 {
		t.Fatalf("first land: exit %d: %s", code, errb)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defer pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+table+`"`)
	for _, tc := range []struct {
		extra []string
		want  int
	}{{nil, 0}, {[]string{"--until-caught-up"}, 143}} {
		produce(1 + len(tc.extra))
		// The table locked: land waits on its first upsert until stopped.
		tx, err := pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(context.Background(), `LOCK TABLE "`+table+`" IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		env, errb := testEnv()
		code := make(chan int, 1)
		go func() { code <- Main(ctx, env, append(args, tc.extra...)) }()
		time.Sleep(2 * time.Second)
		cancel(StopSignal{Signal: syscall.SIGTERM})
		select {
		case got := <-code:
			if got != tc.want {
				t.Errorf("%q: exit %d after SIGTERM, want %d:\n%s", tc.extra, got, tc.want, errb)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%q: no exit 30 s after SIGTERM", tc.extra)
		}
		tx.Rollback(context.Background())
	}
}
