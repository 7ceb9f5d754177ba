package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRunKafkaDataLoss: records deleted (DeleteRecords, as retention
// does) below a stopped query's committed offsets make the restart exit
// 1 naming the partitions and the count; --allow-data-loss goes on and
// the summary counts them.
func TestRunKafkaDataLoss(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	dir := t.TempDir()
	sql := filepath.Join(dir, "totals.sql")
	if err := os.WriteFile(sql, []byte(restartSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	events := func(from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, `{"merchant":"m%d","amount":%d,"event_time":"2026-07-18 10:%02d:00"}`+"\n", i%5, i, i)
		}
		return b.String()
	}
	to := "kafka://" + addr + "/events"
	if code, errs := kafkaCLI(t, events(0, 10), "produce", "--to", to, "--partitions", "2"); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	run := []string{"run", sql, "--source", to, "--sink", "kafka://" + addr + "/totals", "--instance-id", "a", "--until-caught-up", "--log-level", "error"}
	if code, errs := kafkaCLI(t, "", run...); code != 0 || !strings.Contains(errs, "10 events consumed") {
		t.Fatalf("first run: exit %d:\n%s", code, errs)
	}
	if code, errs := kafkaCLI(t, events(10, 20), "produce", "--to", to); code != 0 {
		t.Fatalf("produce: exit %d: %s", code, errs)
	}
	// Delete everything produced since on partition 0.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	ends, err := adm.ListEndOffsets(ctx, "events")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsetsForTopics(ctx, "totals-in", "events")
	if err != nil {
		t.Fatal(err)
	}
	e0, _ := ends.Lookup("events", 0)
	c0, _ := committed.Lookup("events", 0)
	lost := e0.Offset - c0.At
	if lost <= 0 || lost >= 20 {
		t.Fatalf("partition 0: committed %d, end %d: want some of the 20 new records there, not all", c0.At, e0.Offset)
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "events", Partition: 0, At: e0.Offset})
	if resp, err := adm.DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, resp.Error())
	}

	code, errs := kafkaCLI(t, "", run...)
	for _, want := range []string{fmt.Sprintf("%d records of source topic events were deleted", lost), "partition 0: offsets", "--allow-data-loss", "Nothing was read"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("restart after records were deleted: exit %d, want 1 and %q:\n%s", code, want, errs)
		}
	}
	code, errs = kafkaCLI(t, "", append(run, "--allow-data-loss")...)
	if want := fmt.Sprintf("%d events consumed", 20-lost); code != 0 || !strings.Contains(errs, want) ||
		!strings.Contains(errs, fmt.Sprintf("%d source records lost", lost)) {
		t.Errorf("--allow-data-loss: exit %d, want 0, %q and %d source records lost:\n%s", code, want, lost, errs)
	}
	t.Logf("%d records lost on partition 0:\n%s", lost, errs)
}

// TestKafkaLostMetric: the records lost are a Prometheus counter.
func TestKafkaLostMetric(t *testing.T) {
	pm := newPartitionMetrics("q")
	pm.publish(nil, nil)
	pm.lost.Store(7)
	reg := prometheus.NewRegistry()
	reg.MustRegister(pm)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ubik_kafka_source_records_lost_total" {
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v != 7 {
				t.Errorf("ubik_kafka_source_records_lost_total = %v, want 7", v)
			}
			return
		}
	}
	t.Error("no ubik_kafka_source_records_lost_total")
}

// TestRunKafkaGiveUpAfterBounds: --give-up-after must be positive.
func TestRunKafkaGiveUpAfterBounds(t *testing.T) {
	dir := t.TempDir()
	sql := filepath.Join(dir, "totals.sql")
	if err := os.WriteFile(sql, []byte(restartSQL), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"0s", "-1m"} {
		code, errs := kafkaCLI(t, "", "run", sql, "--source", "kafka://127.0.0.1:1/events", "--sink", "kafka://127.0.0.1:1/out", "--give-up-after", v)
		if code != 2 || !strings.Contains(errs, "--give-up-after") || !strings.Contains(errs, "must be positive") {
			t.Errorf("--give-up-after %s: exit %d, want 2 and a usage error:\n%s", v, code, errs)
		}
	}
}
