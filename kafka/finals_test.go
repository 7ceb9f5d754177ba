package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ubiksql/ubik/changelog"
)

// readFinalsWithin bounds how long readFinals takes to read a topic to
// its end before it reports the partitions it could not.
const readFinalsWithin = 2 * time.Minute

// readFinals reads the sink with read_committed to its end and checks the
// changelog invariants: one final per key, revisions increasing, nothing
// after a final. The end is each partition's last stable offset when the
// read starts: the run that wrote the topic has ended, so every
// transaction on it has ended too. A pause is no end: a fresh consumer
// may fetch one partition a fetch after the others (its first fetch can
// leave out a partition whose start offset it is still setting), and on
// a loaded machine that next fetch can take more than a second.
func readFinals(t testing.TB, addrs []string, topic string) map[string]string {
	t.Helper()
	ends := stableEnds(t, addrs, topic)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c := newFinalsCheck(t)
	pos := map[int32]int64{} // next offset to read, per partition
	ctx, cancel := context.WithTimeout(context.Background(), readFinalsWithin)
	defer cancel()
	for !reachedEnds(pos, ends) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("%s: read to offsets %v of %v (partition: offset) in %s", topic, pos, ends, readFinalsWithin)
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				c.record(r)
			}
		})
	}
	return c.finals
}

// finalsCheck collects a sink's finals, checking the changelog
// invariants record by record.
type finalsCheck struct {
	t      testing.TB
	finals map[string]string
	rev    map[string]uint64
	done   map[string]bool
}

func newFinalsCheck(t testing.TB) *finalsCheck {
	return &finalsCheck{t: t, finals: map[string]string{}, rev: map[string]uint64{}, done: map[string]bool{}}
}

func (c *finalsCheck) record(r *kgo.Record) {
	kr, err := changelog.DecodeHeaders(r.Key, r.Value, r.Headers)
	if err != nil {
		c.t.Errorf("sink record: %v", err)
		return
	}
	k := string(r.Key)
	switch {
	case c.done[k]:
		c.t.Errorf("key %s: revision %d after its final", k, kr.Meta.Revision)
	case kr.Meta.Revision <= c.rev[k]:
		c.t.Errorf("key %s: revision %d after %d", k, kr.Meta.Revision, c.rev[k])
	}
	c.rev[k] = kr.Meta.Revision
	if kr.Meta.Final {
		c.done[k] = true
		c.finals[k] = string(r.Value)
	}
}

// stableEnds returns the last stable offset of each partition of topic
// that holds records (the end a read_committed consumer reaches).
func stableEnds(t testing.TB, addrs []string, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("start offsets of %s: %v", topic, err)
	}
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		t.Fatalf("stable offsets of %s: %v", topic, err)
	}
	ends := map[int32]int64{}
	lso.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(topic, o.Partition); ok && o.Offset > s.Offset {
			ends[o.Partition] = o.Offset
		}
	})
	return ends
}

// reachedEnds reports whether every partition's position reached its end.
func reachedEnds(pos, ends map[int32]int64) bool {
	for p, e := range ends {
		if pos[p] < e {
			return false
		}
	}
	return true
}

// TestReadFinalsSlowPartition: readFinals reads every partition to its
// end when one partition's records come more than a second after
// another's, as a fetch can on a loaded machine. It took a quiet second
// after the first records for the end of the topic, so it returned
// without that partition's finals.
func TestReadFinalsSlowPartition(t *testing.T) {
	c := cluster(t, kfake.NumBrokers(2))
	addrs := c.ListenAddrs()
	mkTopic(t, addrs, "out", 2, nil)
	fast := c.LeaderFor("out", 0)
	slow := int32(1)
	if fast == 1 {
		slow = 0
	}
	if err := c.MoveTopicPartition("out", 1, slow); err != nil {
		t.Fatal(err)
	}
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		m := changelog.Meta{Query: "q", Final: true, Revision: 1}
		r := &kgo.Record{Topic: "out", Partition: p, Key: []byte(fmt.Sprintf(`["k%d"]`, p)), Value: []byte(`{"n": 1}`),
			Headers: changelog.AppendHeaders([]kgo.RecordHeader(nil), m)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Every fetch the leader of partition 1 answers takes 1.5 s more.
	c.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		if c.CurrentNode() == slow {
			c.SleepControl(func() { time.Sleep(1500 * time.Millisecond) })
		}
		return nil, nil, false
	})
	if got := readFinals(t, addrs, "out"); len(got) != 2 {
		t.Errorf("read %d finals of 2: %v", len(got), got)
	}
}
