package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestLandRefusedRecord is a string holding NUL, which ubik run accepts in
// JSON input, beside a good one, through ubik run to Kafka and ubik land to
// PostgreSQL (whose jsonb cannot hold \u0000). Without --skip-bad-records
// the lander exits at once naming the record's topic, partition and
// offset; with it, the good record lands, the other is written to the dead
// letter with the reason and counted, and --until-caught-up exits.
func TestLandRefusedRecord(t *testing.T) {
	dsn := testenv.RequirePostgres(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	in := `{"k":"x\u0000y","n":1,"ts":"2026-07-18 10:00:00"}` + "\n" + `{"k":"ok","n":1,"ts":"2026-07-18 10:00:00"}` + "\n"
	if code, errs := kafkaCLI(t, in, "produce", "--to", "kafka://"+addr+"/in"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	sql := writeFile(t, "nul.sql", `CREATE SOURCE ev (k VARCHAR, n BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (format = 'json');
CREATE VIEW nul AS SELECT k, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS window_start, sum(n) AS n
  FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);
`)
	if code, errs := kafkaCLI(t, "", "run", sql, "--source", "kafka://"+addr+"/in", "--sink", "kafka://"+addr+"/out",
		"--instance-id", "a", "--until-caught-up", "--log-level", "warn"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	table := testenv.Name(t, "nul")
	runLander := func(group string, extra ...string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		env, errb := testEnv()
		args := append([]string{"land", "--from", "kafka://" + addr + "/out", "--to", dsn + "&table=" + table,
			"--mode", "history", "--until-caught-up", "--group", group, "--stats-interval", "0"}, extra...)
		code := Main(ctx, env, args)
		if ctx.Err() != nil {
			t.Fatalf("ubik land %q did not exit within 30s: %s", extra, errb)
		}
		return code, errb.String()
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	defer pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)

	code, errs := runLander("stop")
	where := regexp.MustCompile(`topic out partition \d+ offset \d+: .*\\u0000`)
	if code != 1 || !where.MatchString(errs) {
		t.Fatalf("without --skip-bad-records: exit %d, want 1 with an error naming the record and \\u0000:\n%s", code, errs)
	}

	// A record that is not a changelog record, and one whose query name
	// holds ":", join it in the dead letter.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "out", Key: []byte("\xff"), Value: []byte(`{}`)},
		kafkasrc.ToKafka("out", landtest.Record(land.History, "a:b", "g", landtest.Base(), 1, false))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(t.TempDir(), "dead.jsonl")
	code, errs = runLander("skip", "--skip-bad-records", "--dead-letter", dead)
	if code != 0 || !strings.Contains(errs, "landed 1, duplicate 0, superseded 0, bad 1, rejected 2") {
		t.Fatalf("with --skip-bad-records: exit %d, want 0 with 1 landed and 1 rejected:\n%s", code, errs)
	}
	var keys []string
	rows, err := pool.Query(context.Background(), "SELECT key FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		rows.Scan(&k)
		keys = append(keys, k)
	}
	if rows.Err() != nil || len(keys) != 1 || keys[0] != `["ok", "2026-07-18 10:00:00"]` {
		t.Fatalf("the table holds %q (%v), want the good record only", keys, rows.Err())
	}
	b, err := os.ReadFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("dead letter %q: want 3 lines", b)
	}
	var refused, garbled, colon deadLine
	for _, l := range lines {
		var d deadLine
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("dead letter line %q: %v", l, err)
		}
		switch {
		case d.Headers == nil:
			garbled = d
		case d.Headers["ubik.query"] == "a:b":
			colon = d
		default:
			refused = d
		}
	}
	if !strings.Contains(colon.Reason, `contains ":"`) {
		t.Errorf("dead letter of the query name with a colon: %+v", colon)
	}
	if refused.Topic != "out" || refused.Key == nil || !strings.Contains(*refused.Key, `x\u0000y`) ||
		!strings.Contains(refused.Reason, "jsonb") || refused.Headers["ubik.query"] != "nul" {
		t.Errorf("dead letter of the refused record: %+v", refused)
	}
	if garbled.Topic != "out" || garbled.KeyBase64 == nil || *garbled.KeyBase64 != "/w==" || !strings.Contains(garbled.Reason, "header") {
		t.Errorf("dead letter of the record that is not a changelog record: %+v", garbled)
	}

	// --dead-letter is where --skip-bad-records puts records.
	if code, errs := runLander("usage", "--dead-letter", dead); code != 2 || !strings.Contains(errs, "--skip-bad-records") {
		t.Errorf("--dead-letter alone: exit %d: %s", code, errs)
	}
}
