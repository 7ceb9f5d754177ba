package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRunKafkaRefusesSharedTopics: ubik run over Kafka refuses, as a
// usage error, before it reaches the cluster or opens --late-output, a
// run two of whose sinks are one topic (two CREATE SINKs, a sink and
// another query's CREATE SINK, a view's default topic and one), a sink
// that is the source, and a sink that is one of ubik's internal topics;
// each message names both uses and the topic. A sink whose topic name
// another query's CREATE SINK has on another cluster runs.
func TestRunKafkaRefusesSharedTopics(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	if code, errs := kafkaCLI(t, `{"k":"a","v":1,"ts":"2026-07-18 10:00:01"}`+"\n", "produce", "--to", "kafka://"+addr+"/ev"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	base := `CREATE SOURCE ev (k VARCHAR, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH (connector = 'kafka', topic = 'ev', brokers = '` + addr + `');
CREATE VIEW m AS SELECT k, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, sum(v) AS v FROM ev GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);
CREATE VIEW h AS SELECT k, TUMBLE_START(ws, INTERVAL '1' HOUR) AS hs, sum(v) AS v FROM m GROUP BY k, TUMBLE(ws, INTERVAL '1' HOUR);
CREATE VIEW other AS SELECT k, count(*) AS n FROM ev GROUP BY k;
`
	sink := func(name, from, topic, brokers string) string {
		return fmt.Sprintf("CREATE SINK %s FROM %s WITH (connector = 'kafka', topic = '%s', brokers = '%s');\n", name, from, topic, brokers)
	}
	late := filepath.Join(t.TempDir(), "late.jsonl")
	for _, c := range []struct {
		name, sinks, flag, want string
	}{
		{"two CREATE SINKs", sink("sm", "m", "t", addr) + sink("sh", "h", "t", addr), "",
			"query h's sink and view m's sink are both topic t (on brokers=" + addr + "): two changelogs in one compacted topic would overwrite each other's keys; give each sink a topic of its own"},
		{"the sink is the source", "", "ev", "source ev's topic and query h's sink are both topic ev (on brokers=" + addr + "): the query would read its own output; give the sink a topic of its own"},
		{"a view's sink is the source", sink("sm", "m", "ev", addr), "t", "source ev's topic and view m's sink are both topic ev"},
		{"an internal topic", "", "h-state", "query h's sink is topic h-state, an internal topic of h: ubik writes its own records there and --reset-state (Options.ResetState) deletes it"},
		{"another query's CREATE SINK", sink("so", "other", "t", addr), "t",
			"--sink (query h) and CREATE SINK so (query other) are both topic t (on brokers=" + addr + "): ubik run --query other would write its changelog there too"},
		{"a view's default topic", sink("so", "other", "t-m", addr), "t",
			"the sink of view m (the run's sink topic, a dash and its name) and CREATE SINK so (query other) are both topic t-m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sql := writeFile(t, "q.sql", base+c.sinks)
			args := []string{"run", sql, "--query", "h", "--until-caught-up", "--late-output", late}
			if c.flag != "" {
				args = append(args, "--sink", "kafka://"+addr+"/"+c.flag)
			}
			_, errb, code := runArgs(t, "", args...)
			if code != ExitUsage || !strings.Contains(errb, c.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, ExitUsage, c.want, errb)
			}
			if _, err := os.Stat(late); !os.IsNotExist(err) {
				t.Errorf("the refused run created %s (%v)", late, err)
			}
		})
	}
	if got := topics(t, addr); !slices.Equal(got, []string{"ev"}) {
		t.Fatalf("after the refused runs the cluster holds topics %q, want the source alone", got)
	}
	// The same topic name on another cluster is another topic.
	sql := writeFile(t, "q.sql", base+sink("so", "other", "t", "elsewhere:9092"))
	_, errb, code := runArgs(t, "", "run", sql, "--query", "h", "--sink", "kafka://"+addr+"/t", "--until-caught-up", "--late-output", late, "--log-level", "warn")
	if code != 0 || !strings.Contains(errb, "1 events consumed") || !strings.Contains(errb, "caught up") {
		t.Fatalf("a legal run: exit %d, want 1 event consumed, caught up: %s", code, errb)
	}
	if got := topics(t, addr); !slices.Contains(got, "t") || !slices.Contains(got, "t-m") {
		t.Errorf("after the run the cluster holds topics %q, want t and t-m among them", got)
	}
}

// topics lists the cluster's topics, sorted, without the broker's own.
func topics(t *testing.T, addr string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	tds, err := kadm.NewClient(cl).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tds.Names()
}
