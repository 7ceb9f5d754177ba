package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik/internal/drive"
)

// readState reads a state topic with read_committed up to the end
// offsets it has when called and returns each partition's latest value
// of each entry key (a tombstone deletes), without the binding record,
// as a restore sees it.
func readState(t testing.TB, addrs []string, topic string) map[int32]map[string][]byte {
	t.Helper()
	ends, err := kadm.NewClient(client(t, addrs)).ListEndOffsets(context.Background(), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl := client(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	out := map[int32]map[string][]byte{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: partitions %v not read to their end offsets", topic, left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() || string(r.Key) == bindingKey {
				return
			}
			m := out[r.Partition]
			if m == nil {
				m = map[string][]byte{}
				out[r.Partition] = m
			}
			if r.Value == nil {
				delete(m, string(r.Key))
			} else {
				m[string(r.Key)] = r.Value
			}
		})
	}
	return out
}

// joinStateShape sums a join stage's state: its held rows' entries and
// their bytes, and the largest join header entry.
type joinStateShape struct {
	rows, rowBytes, header, maxPartBytes int
}

func shapeOf(state map[int32]map[string][]byte) joinStateShape {
	var s joinStateShape
	for _, m := range state {
		part := 0
		for k, v := range m {
			ek := nodeEntry(k)
			switch {
			case drive.IsIntervalEntry(ek):
				s.rows++
				s.rowBytes += len(v)
				part += len(v)
			case string(ek) == drive.JoinStateKey:
				s.header = max(s.header, len(v))
			}
		}
		s.maxPartBytes = max(s.maxPartBytes, part)
	}
	return s
}

// nodeEntry is the entry key of a join stage's state key k: past its
// partition, its graph node's query name (drive.Graph's key: the name's
// length as a uvarint, then the name).
func nodeEntry(k string) []byte {
	b := []byte(k[4:])
	n, w := binary.Uvarint(b)
	if w <= 0 || int(n) > len(b)-w {
		return b
	}
	return b[w+int(n):]
}

// TestRunKafkaViewJoinState: the join stage keeps an entry per held row.
// Persons first, no auction yet: every final row of new_persons waits in
// the join (new_sellers' watermark has not moved), each row its own state
// entry. Then half the auctions, streaming, stopped once its state is
// committed, then the rest until caught up, each run restoring the state
// the previous one left: q8's finals equal the in-process run's. "large": more than a megabyte of rows held in one
// partition, which one state record could not hold (the earlier version
// stopped there). "one entry": between the first and the second run the
// state topic is rewritten as the earlier version wrote it (the join one
// entry with every held row); the second run reads it and writes each
// row's entry, so the third, restoring those, still has the rows the
// second did not drop.
func TestRunKafkaViewJoinState(t *testing.T) {
	t.Parallel()
	q := q8Query(t)
	for _, c := range []struct {
		name              string
		persons, auctions int
		parts             int
	}{
		{"large", 40000, 12000, 1},
		{"two partitions", 8000, 12000, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			persons, auctions := nexmark(t, "person", c.persons, 12), nexmark(t, "auction", c.auctions, 12)
			want := q8InProcess(t, q, persons, auctions)
			addrs := cluster(t).ListenAddrs()
			mkTopic(t, addrs, "person", c.parts, nil)
			mkTopic(t, addrs, "auction", c.parts, nil)
			o := q8Options(q, addrs)
			o.UntilCaughtUp, o.Logger = true, testLogger(t)
			o.OnLate = func(ev *drive.LateEvent) { t.Errorf("late at the join: %s", ev.Event) }
			// run runs the pipeline until caught up, or (stream) until it
			// has consumed events and its state topic has a join header
			// this binary wrote (small: the rows are entries of their
			// own), then stops it: a caught-up run closes every open
			// window, which would make the next run's first auctions late.
			run := func(what string, events int, stream bool) {
				t.Helper()
				o := o
				o.UntilCaughtUp = !stream
				pl, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				done := make(chan error, 1)
				began := time.Now()
				go func() { done <- pl.Run(ctx) }()
				if stream {
					for ctx.Err() == nil && pl.Stats().EventsIn < int64(events) {
						time.Sleep(100 * time.Millisecond)
					}
					for ctx.Err() == nil {
						if s := shapeOf(readState(t, addrs, q.Name+"-state")); s.header > 0 && s.header <= 200 {
							break
						}
						time.Sleep(200 * time.Millisecond)
					}
					t.Logf("%s: stopping at %v", what, time.Since(began))
					cancel()
				}
				if err := <-done; err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				t.Logf("%s: %v", what, time.Since(began))
				if st := pl.Stats(); st.CaughtUp == stream || st.Late != 0 || st.EventsIn != int64(events) || st.Malformed != 0 {
					t.Fatalf("%s: stats %+v", what, st)
				}
			}
			produceValues(t, addrs, "person", c.parts, persons, nil)
			run("persons", len(persons), false)
			state := readState(t, addrs, q.Name+"-state")
			s := shapeOf(state)
			t.Logf("persons only: %d rows held in %d bytes of entries (most in one partition %d), header %d bytes", s.rows, s.rowBytes, s.maxPartBytes, s.header)
			if s.rows < len(want["new_persons"])/2 || s.header == 0 || s.header > 200 {
				t.Fatalf("persons only: %d row entries (%d new persons), a header of %d bytes: want an entry per held row and a small header", s.rows, len(want["new_persons"]), s.header)
			}
			if c.name == "large" && s.maxPartBytes <= 1_000_000 {
				t.Fatalf("one partition's held rows are %d bytes: the test means to hold more than one record could", s.maxPartBytes)
			}
			produceValues(t, addrs, "auction", c.parts, auctions[:len(auctions)/2], nil)
			run("half the auctions", len(auctions)/2, true)
			mid := shapeOf(readState(t, addrs, q.Name+"-state"))
			t.Logf("half the auctions: %d rows held in %d bytes of entries, header %d bytes", mid.rows, mid.rowBytes, mid.header)
			if mid.rows == 0 || mid.header > 200 {
				t.Fatalf("half the auctions: %d row entries, a header of %d bytes: want the rows still held as entries", mid.rows, mid.header)
			}
			produceValues(t, addrs, "auction", c.parts, auctions[len(auctions)/2:], nil)
			run("the rest", len(auctions)-len(auctions)/2, false)
			compareQ8(t, addrs, want)
		})
	}
}

// TestViewJoinStateBadEntry: a held row's entry that does not decode
// stops the restore, naming the topic and partition.
func TestViewJoinStateBadEntry(t *testing.T) {
	t.Parallel()
	o := q8OnePartition(t, 2000, 13)
	q, addrs := o.Query, o.Source.Config.Brokers
	runOnce := func() error {
		pl, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return pl.Run(ctx)
	}
	if err := runOnce(); err != nil {
		t.Fatal(err)
	}
	state := readState(t, addrs, q.Name+"-state")
	var key []byte
	for k := range state[0] {
		if drive.IsIntervalEntry(nodeEntry(k)) {
			key = []byte(k)
			break
		}
	}
	if key == nil {
		t.Fatal("no held row's entry")
	}
	cl := client(t, addrs, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	bad := binary.AppendUvarint(nil, 200) // a key longer than the value
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: q.Name + "-state", Partition: 0, Key: key, Value: bad}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	err := runOnce()
	if !errors.Is(err, drive.ErrBadState) || !strings.Contains(err.Error(), "state topic q8-state partition 0") || !strings.Contains(err.Error(), "interval join entry") {
		t.Fatalf("a bad row entry: %v", err)
	}
}
