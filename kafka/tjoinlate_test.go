package kafka

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/types"
)

// TestRunKafkaTemporalJoinLateTableRows: a table row behind the rows
// before it in its own table partition is late over Kafka exactly as in
// the in-process run (counted, not applied), though one poll of the
// table stage brings it with the rows that make it late (the stage's
// marker goes before it) and whatever the other table partitions' watermarks
// (the join's table watermark, their minimum, may be far behind). The
// table topic is keyed by the primary key (tiers -0.0 and 0.0 are one
// key, in one partition), as it must be.
func TestRunKafkaTemporalJoinLateTableRows(t *testing.T) {
	t.Parallel()
	q := kjoinQuery(t)
	events, _ := kjoinData(11, 800)
	versions, parts, nLate := lateTableData()
	// The in-process answer: the whole table, then the events.
	want := map[string]string{}
	d, err := drive.New(q, drive.Config{Emit: func(rec *changelog.Record) error {
		if rec.Meta.Final {
			want[string(rec.Key)] = string(rec.Value)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range versions {
		if err := d.PushInput(1, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range events {
		if err := d.Push(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if st := d.JoinStats(); st.LateTableRows != int64(nLate) || nLate == 0 || st.Joined == 0 {
		t.Fatalf("in process: %d late table rows, %d made late: %+v", st.LateTableRows, nLate, st)
	}
	for _, tbl := range []int{1, 2} {
		t.Run(fmt.Sprintf("table%d", tbl), func(t *testing.T) {
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "usage", 2, nil)
			mkTopic(t, addrs, "prices", tbl, nil)
			produceTable(t, addrs, tbl, versions, parts)
			produceValues(t, addrs, "usage", 2, events, nil)
			o := kjoinOptions(q, addrs)
			o.Logger = testLogger(t)
			if st := runToEnd(t, o, 2*time.Minute); st.TableLate != int64(nLate) || st.TableRows != int64(len(versions)) {
				t.Errorf("%d late table rows of %d, want %d late", st.TableLate, st.TableRows, nLate)
			}
			compareFinals(t, readFinals(t, addrs, "charges"), want)
		})
	}
}

// lateTableData is a table of four tiers over two table partitions
// (keyed by the tier) in which about one row in five is 4 to 6 s behind
// its own key's newest row (the table's delay is 3 s): late in any
// partitioning by the key. parts holds each row's table partition of two.
func lateTableData() (versions [][]byte, parts []int32, nLate int) {
	r := rand.New(rand.NewPCG(11, 5))
	ts := func(us int64) string { return string(changelog.AppendCell(nil, types.TS(us))) }
	tiers := []string{`-0.0`, `0.0`, `1.5`, `2.5`}
	part := []int32{0, 0, 1, 0} // a tier's table partition of two (-0.0 and 0.0: one key)
	for at := int64(-5_000_000); at < 800*100_000+10_000_000; at += 400_000 {
		i := r.IntN(len(tiers))
		versions = append(versions, fmt.Appendf(nil, `{"tier":%s,"price":"%d.%06d","label":"L%d","valid_from":%s}`,
			tiers[i], r.IntN(5), r.IntN(1_000_000), r.IntN(9), ts(baseTS+at)))
		parts = append(parts, part[i])
		if r.IntN(4) == 0 {
			// 4 to 6 s behind its own key's newest row (the table's delay
			// is 3 s): late in any partitioning by the key.
			versions = append(versions, fmt.Appendf(nil, `{"tier":%s,"price":"9.%06d","label":"LATE","valid_from":%s}`,
				tiers[i], r.IntN(1_000_000), ts(baseTS+at-4_000_000-r.Int64N(2_000_000))))
			parts = append(parts, part[i])
			nLate++
		}
	}
	return versions, parts, nLate
}

// produceTable produces versions to the table topic of tbl partitions,
// each to its partition in parts (mod tbl), all at once: the table
// stage's polls bring many rows each.
func produceTable(t testing.TB, addrs []string, tbl int, versions [][]byte, parts []int32) {
	t.Helper()
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, len(versions))
	for i, v := range versions {
		recs[i] = &kgo.Record{Topic: "prices", Partition: parts[i] % int32(tbl), Value: v}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
