package cli

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/kafkasrc"
	"github.com/ubiksql/ubik/land/landtest"
	"github.com/ubiksql/ubik/land/pglander"
	"github.com/ubiksql/ubik/land/redislander"
)

func testEnv() (*Env, *bytes.Buffer) {
	var errb bytes.Buffer
	return &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &errb, Getenv: func(string) string { return "" }}, &errb
}

func TestLandUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--from", "kafka://x:1/t", "--to", "redis://x:1/0"},
		{"--from", "http://x/t", "--to", "redis://x:1/0", "--mode", "latest"},
		{"--from", "kafka://x:1/", "--to", "redis://x:1/0", "--mode", "latest"},
		{"--from", "kafka://x:1/t", "--to", "ftp://x/y", "--mode", "latest"},
		{"--from", "kafka://x:1/t", "--to", "redis://x:1/0", "--mode", "newest"},
		{"--from", "kafka://x:1/t", "--to", "redis://x:1/0", "--mode", "latest", "--batch", "0"},
		{"--from", "kafka://x:1/t", "--to", "dynamodb://x:1/", "--mode", "latest"},
		{"--from", "kafka://x:1/t", "--to", "redis://x:1/0", "--mode", "latest", "extra"},
		{"--from", "kafka://x:1/t", "--to", "redis://x:1/0", "--mode", "latest", "--metrics-addr", ":9465"},
		{"--from", "kafka://x:1/t", "--to", "redis://x:1/0", "--mode", "latest", "--metrics-addr", "localhost"},
	} {
		env, errb := testEnv()
		if code := Main(context.Background(), env, append([]string{"land"}, args...)); code != 2 {
			t.Errorf("ubik land %q: exit %d, want 2 (%s)", args, code, errb)
		}
	}
}

func TestRedactURL(t *testing.T) {
	got := redactURL("postgres://u:s3cret@h:5432/db?password=other&table=t")
	if strings.Contains(got, "s3cret") || strings.Contains(got, "other") {
		t.Fatalf("redactURL kept a secret: %s", got)
	}
}

// TestLandKafkaToStores: ubik land moves a topic into Redis and Postgres,
// to the oracle's state, and exits with --until-caught-up; a second run in
// the same group finds nothing to do.
func TestLandKafkaToStores(t *testing.T) {
	redisAddr := testenv.RequireRedis(t)
	dsn := testenv.RequirePostgres(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateTopic("merchant_totals", 3, nil); err != nil {
		t.Fatal(err)
	}
	seed := landtest.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	gen := landtest.Gen{Mode: land.Latest, Queries: []string{"merchant_totals"}, Groups: 3, Windows: 3, Revisions: 3}
	var all []changelog.Record
	for trial := range 200 {
		all = append(all, gen.Changelog(r, trial)...)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var krs []*kgo.Record
	for _, rec := range landtest.Deliver(r, all, 2) {
		krs = append(krs, kafkasrc.ToKafka("merchant_totals", rec))
	}
	if err := cl.ProduceSync(context.Background(), krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	oracle := landtest.NewMemory(land.Latest, "")
	oracle.Land(context.Background(), all)
	from := "kafka://" + strings.Join(c.ListenAddrs(), ",") + "/merchant_totals"
	prefix := testenv.Name(t, "cli") + "/"
	table := testenv.Name(t, "cli")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, to := range []string{"redis://" + redisAddr + "/0?prefix=" + prefix, dsn + "&table=" + table} {
		for run := 0; run < 2; run++ {
			env, errb := testEnv()
			code := Main(ctx, env, []string{"land", "--from", from, "--to", to, "--mode", "latest", "--until-caught-up", "--batch", "100"})
			if code != 0 {
				t.Fatalf("ubik land --to %s: exit %d: %s", to, code, errb)
			}
			if run == 1 && !strings.Contains(errb.String(), "already landed") {
				t.Fatalf("second run did not find the group caught up: %s", errb)
			}
		}
	}

	rc := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rc.Close()
	rl, err := redislander.New(ctx, redislander.Options{Client: rc, Mode: land.Latest, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	landtest.Check(t, landtest.Harness{ExactValue: true}, rl, oracle)

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pl, err := pglander.New(ctx, pglander.Options{Pool: pool, Mode: land.Latest, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Exec(ctx, "DROP TABLE IF EXISTS "+pl.Table())
	landtest.Check(t, landtest.Harness{}, pl, oracle)
}

func TestLandMissingTopic(t *testing.T) {
	testenv.RequireRedis(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env, errb := testEnv()
	code := Main(context.Background(), env, []string{"land", "--from", "kafka://" + c.ListenAddrs()[0] + "/nope",
		"--to", "redis://" + testenv.RedisAddr() + "/0", "--mode", "latest"})
	if code != 1 || !strings.Contains(errb.String(), "topic nope does not exist") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}
