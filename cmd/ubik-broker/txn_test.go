package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// These tests hold the broker to Apache Kafka's rules for transactions and
// log compaction: the cleaner works only below the last stable offset, never
// on the last batch, drops aborted records, keeps the latest committed value
// of a key, and keeps a tombstone for delete.retention.ms; a new producer
// with an open transaction's transactional id aborts that transaction at
// once and fences the old producer.

// testBroker starts the cluster cmd/ubik-broker runs, with its default
// configs plus the extra command-line arguments.
func testBroker(t *testing.T, args ...string) (*kfake.Cluster, string) {
	t.Helper()
	o, err := parse(append([]string{"--port", strconv.Itoa(freePort(t))}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := clusterOpts(o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// txnClient is a transactional producer; every record goes in its own batch.
func txnClient(t *testing.T, addr, txid string, opts ...kgo.Opt) *kgo.Client {
	return newClient(t, addr, append([]kgo.Opt{
		kgo.TransactionalID(txid),
		kgo.TransactionTimeout(60 * time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	}, opts...)...)
}

func createTopic(t *testing.T, ctx context.Context, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	resp, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

func compactedTopic(t *testing.T, ctx context.Context, addr, topic string, extra ...string) {
	t.Helper()
	cfg := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i]] = kadm.StringPtr(extra[i+1])
	}
	createTopic(t, ctx, addr, topic, 1, cfg)
}

// produce writes one record per key=value pair ("K=" with no value is a
// tombstone) to partition 0, each in its own batch, and returns the offsets.
func produce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, kvs ...string) []int64 {
	t.Helper()
	var offs []int64
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(k)}
		if v != "" {
			r.Value = []byte(v)
		}
		res := cl.ProduceSync(ctx, r)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("producing %s to %s: %v", kv, topic, err)
		}
		offs = append(offs, res[0].Record.Offset)
	}
	return offs
}

func inTxn(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, commit bool, kvs ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, cl, topic, kvs...)
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("ending transaction (commit %v): %v", commit, err)
	}
}

// snapshot reads partition 0 of topic from its start to its current end (the
// high watermark, or the last stable offset for read_committed) with raw
// fetches, so the answer depends on no timing. Each record is "K=v" ("K=" for
// a tombstone). It also returns the fetch's last stable offset.
func snapshot(t *testing.T, ctx context.Context, addr, topic string, committed bool) ([]string, int64) {
	t.Helper()
	// Kafka 3.0's fetch (v12) names topics, not topic IDs.
	cl := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0()))
	iso := kgo.ReadUncommitted()
	var level int8
	if committed {
		iso, level = kgo.ReadCommitted(), 1
	}
	var out []string
	for offset := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxBytes = 64 << 20
		req.IsolationLevel = level
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = 64 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetching %s at %d: %v", topic, offset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch of %s: %d topics in the response", topic, len(resp.Topics))
		}
		p := &resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("fetching %s at %d: %v", topic, offset, err)
		}
		end := p.HighWatermark
		if committed {
			end = p.LastStableOffset
		}
		if offset >= end {
			return out, p.LastStableOffset
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: offset, IsolationLevel: iso, Topic: topic}, p, nil, nil)
		if fp.Err != nil {
			t.Fatalf("decoding %s at %d: %v", topic, offset, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset >= end {
				t.Fatalf("fetch of %s returned offset %d past its end %d (committed=%v)", topic, r.Offset, end, committed)
			}
			out = append(out, string(r.Key)+"="+string(r.Value))
		}
		if next <= offset {
			t.Fatalf("fetch of %s at %d made no progress (end %d)", topic, offset, end)
		}
		offset = next
	}
}

func wantRecords(t *testing.T, ctx context.Context, addr, topic string, committed bool, want ...string) {
	t.Helper()
	got, _ := snapshot(t, ctx, addr, topic, committed)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s read with committed=%v: got %q, want %q", topic, committed, got, want)
	}
}

// TestCompactionKeepsCommittedValueUnderOpenTxn is the outside reproduction:
// a compaction that runs while a transaction rewriting K is open must not
// remove K's committed value, which a later abort would then leave missing.
func TestCompactionKeepsCommittedValueUnderOpenTxn(t *testing.T) {
	c, addr := testBroker(t)
	ctx := testCtx(t)
	compactedTopic(t, ctx, addr, "s")
	p := txnClient(t, addr, "p")
	inTxn(t, ctx, p, "s", true, "K=v1")

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, p, "s", "K=v2", "J=j1")
	c.Compact()
	// While the transaction is open, a read_committed reader sees K=v1 and a
	// read_uncommitted one sees everything.
	wantRecords(t, ctx, addr, "s", true, "K=v1")
	wantRecords(t, ctx, addr, "s", false, "K=v1", "K=v2", "J=j1")
	if err := p.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	plain := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, ctx, plain, "s", "end=x")
	wantRecords(t, ctx, addr, "s", true, "K=v1", "end=x")
	c.Compact()
	// The cleaner now drops the aborted records; K=v1 is still K's value.
	wantRecords(t, ctx, addr, "s", true, "K=v1", "end=x")
	wantRecords(t, ctx, addr, "s", false, "K=v1", "end=x")
}

// TestCompactionOpenTxnThenCommit: a committed record is superseded only
// once the transaction that rewrites its key commits.
func TestCompactionOpenTxnThenCommit(t *testing.T) {
	c, addr := testBroker(t)
	ctx := testCtx(t)
	compactedTopic(t, ctx, addr, "s")
	p := txnClient(t, addr, "p")
	plain := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	inTxn(t, ctx, p, "s", true, "K=v1", "A=a1")

	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, p, "s", "K=v2")
	// Plain writes after the open transaction's first record are past the
	// last stable offset: not cleanable, not read_committed visible yet.
	produce(t, ctx, plain, "s", "A=a2", "B=b1", "B=b2")
	c.Compact()
	got, lso := snapshot(t, ctx, addr, "s", true)
	// Offsets: K=v1 0, A=a1 1, commit marker 2, K=v2 3.
	if strings.Join(got, " ") != "K=v1 A=a1" || lso != 3 {
		t.Errorf("read_committed during the open transaction: %q up to %d, want [K=v1 A=a1] up to 3", got, lso)
	}
	wantRecords(t, ctx, addr, "s", false, "K=v1", "A=a1", "K=v2", "A=a2", "B=b1", "B=b2")

	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, plain, "s", "end=x")
	c.Compact()
	wantRecords(t, ctx, addr, "s", true, "K=v2", "A=a2", "B=b2", "end=x")
	wantRecords(t, ctx, addr, "s", false, "K=v2", "A=a2", "B=b2", "end=x")
}

// TestCompactionDropsAbortedRecords: aborted records never come back, in
// either isolation level, and never shadow the committed value of their key.
func TestCompactionDropsAbortedRecords(t *testing.T) {
	c, addr := testBroker(t)
	ctx := testCtx(t)
	compactedTopic(t, ctx, addr, "s")
	p := txnClient(t, addr, "p")
	plain := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	inTxn(t, ctx, p, "s", true, "K=a")
	inTxn(t, ctx, p, "s", false, "K=b", "X=x")
	produce(t, ctx, plain, "s", "Y=y")
	inTxn(t, ctx, p, "s", false, "Y=z", "K=c")
	produce(t, ctx, plain, "s", "end=x")

	wantRecords(t, ctx, addr, "s", true, "K=a", "Y=y", "end=x")
	wantRecords(t, ctx, addr, "s", false, "K=a", "K=b", "X=x", "Y=y", "Y=z", "K=c", "end=x")
	for range 2 {
		c.Compact()
		wantRecords(t, ctx, addr, "s", true, "K=a", "Y=y", "end=x")
		wantRecords(t, ctx, addr, "s", false, "K=a", "Y=y", "end=x")
	}
}

// TestCompactionDroppedAbortMarker: once the cleaner removes an aborted
// transaction and its ABORT marker, the producer's later committed records
// stay readable (a fetch must not list an aborted transaction whose marker is
// gone: a read_committed client would drop every later batch of that
// producer).
func TestCompactionDroppedAbortMarker(t *testing.T) {
	c, addr := testBroker(t)
	ctx := testCtx(t)
	compactedTopic(t, ctx, addr, "s")
	p := txnClient(t, addr, "p")
	plain := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	inTxn(t, ctx, p, "s", false, "A=1")
	produce(t, ctx, plain, "s", "B=1", "B=2")
	c.Compact()
	inTxn(t, ctx, p, "s", true, "C=1")
	produce(t, ctx, plain, "s", "D=1")
	wantRecords(t, ctx, addr, "s", true, "B=1", "B=2", "C=1", "D=1")
	c.Compact()
	wantRecords(t, ctx, addr, "s", true, "B=2", "C=1", "D=1")
	wantRecords(t, ctx, addr, "s", false, "B=2", "C=1", "D=1")
}

// TestCompactionKeepsActiveBatch: the last batch stands for Kafka's active
// segment: it is never cleaned, and the keys in it do not supersede earlier
// records until a later batch makes it cleanable.
func TestCompactionKeepsActiveBatch(t *testing.T) {
	c, addr := testBroker(t)
	ctx := testCtx(t)
	compactedTopic(t, ctx, addr, "s")
	plain := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(t, ctx, plain, "s", "K=a")
	c.Compact() // a single batch: nothing to clean
	wantRecords(t, ctx, addr, "s", false, "K=a")
	produce(t, ctx, plain, "s", "K=b")
	c.Compact() // K=a is the only cleanable batch and the latest K in it
	wantRecords(t, ctx, addr, "s", false, "K=a", "K=b")
	produce(t, ctx, plain, "s", "K=c")
	c.Compact() // K=b supersedes K=a; K=c is the active batch
	wantRecords(t, ctx, addr, "s", false, "K=b", "K=c")

	// An aborted rewrite of K never supersedes K=c.
	p := txnClient(t, addr, "p")
	inTxn(t, ctx, p, "s", false, "K=d")
	c.Compact()
	wantRecords(t, ctx, addr, "s", true, "K=c")
}

// TestCompactionTombstoneRetention: a tombstone survives compaction for
// delete.retention.ms and is removed after it.
func TestCompactionTombstoneRetention(t *testing.T) {
	c, addr := testBroker(t)
	ctx := testCtx(t)
	const retention = time.Second
	compactedTopic(t, ctx, addr, "keep")
	compactedTopic(t, ctx, addr, "short", "delete.retention.ms", strconv.Itoa(int(retention.Milliseconds())))
	plain := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	p := txnClient(t, addr, "p")
	written := time.Now()
	for _, topic := range []string{"keep", "short"} {
		produce(t, ctx, plain, topic, "K=a", "K=", "J=j")
		inTxn(t, ctx, p, topic, true, "T=t", "T=")
		produce(t, ctx, plain, topic, "end=x")
	}
	c.Compact()
	cleaned := time.Now()
	if cleaned.Sub(written) < retention {
		// Within delete.retention.ms of the writes: both tombstones stay.
		wantRecords(t, ctx, addr, "short", true, "K=", "J=j", "T=", "end=x")
	}
	time.Sleep(time.Until(cleaned.Add(retention + 100*time.Millisecond)))
	c.Compact()
	wantRecords(t, ctx, addr, "keep", true, "K=", "J=j", "T=", "end=x")
	wantRecords(t, ctx, addr, "short", true, "J=j", "end=x")
	wantRecords(t, ctx, addr, "short", false, "J=j", "end=x")
}

// TestInitProducerIDAbortsOpenTxn: a new producer with the transactional id
// of one that died inside a transaction aborts that transaction at once (not
// after the transaction timeout) and fences the old producer.
func TestInitProducerIDAbortsOpenTxn(t *testing.T) {
	_, addr := testBroker(t)
	ctx := testCtx(t)
	createTopic(t, ctx, addr, "s", 1, nil)
	old := txnClient(t, addr, "same", kgo.TransactionTimeout(5*time.Minute))
	plain := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	inTxn(t, ctx, old, "s", true, "K=v1")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, old, "s", "K=v2")
	produce(t, ctx, plain, "s", "P=p")
	oldID, oldEpoch, err := old.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A read_committed consumer is held at the open transaction (offsets:
	// K=v1 0, commit marker 1, K=v2 2, P=p 3).
	if got, lso := snapshot(t, ctx, addr, "s", true); lso != 2 || strings.Join(got, " ") != "K=v1" {
		t.Fatalf("read_committed before the new producer: %q up to %d, want [K=v1] up to 2", got, lso)
	}
	consumer := newClient(t, addr, kgo.ConsumeTopics("s"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))

	start := time.Now()
	fresh := txnClient(t, addr, "same")
	if _, _, err := fresh.ProducerID(ctx); err != nil {
		t.Fatalf("initializing the new producer: %v", err)
	}
	// The old transaction is aborted by the time InitProducerID returns.
	got, lso := snapshot(t, ctx, addr, "s", true)
	if strings.Join(got, " ") != "K=v1 P=p" {
		t.Fatalf("read_committed right after the new producer's init: %q up to %d, want [K=v1 P=p]", got, lso)
	}
	var seen []string
	for len(seen) < 2 {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consuming: %v (seen %q)", err, seen)
		}
		fs.EachRecord(func(r *kgo.Record) { seen = append(seen, string(r.Key)+"="+string(r.Value)) })
	}
	if strings.Join(seen, " ") != "K=v1 P=p" {
		t.Fatalf("read_committed consumer: %q, want [K=v1 P=p]", seen)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("read_committed consumer unblocked after %v, want at once (the timeout is 5m)", d)
	}

	// The old producer is fenced: its next write and its commit both fail.
	perr := old.ProduceSync(ctx, &kgo.Record{Topic: "s", Partition: 0, Key: []byte("K"), Value: []byte("zombie")}).FirstErr()
	if !fencedErr(perr) {
		t.Errorf("the fenced producer's produce: %v, want a fencing error", perr)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Errorf("the fenced producer's commit succeeded")
	}

	// Nor can it take its epoch back: an InitProducerID that names the old
	// producer id and epoch (how a client recovers after a transaction
	// timeout) is refused once a new instance has taken the transactional
	// id, and leaves the new producer's open transaction alone. (kgo itself
	// gives up on the fencing error, so this request is sent by hand.)
	if err := fresh.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, fresh, "s", "K=v3")
	if err := old.EndTransaction(ctx, kgo.TryAbort); !fencedErr(err) {
		t.Errorf("the fenced producer's abort: %v, want a fencing error", err)
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID = kmsg.StringPtr("same")
	init.TransactionTimeoutMillis = 60000
	init.ProducerID, init.ProducerEpoch = oldID, oldEpoch
	iresp, err := init.RequestWith(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(iresp.ErrorCode); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("InitProducerID with the fenced producer's id %d and epoch %d: %v (epoch %d), want PRODUCER_FENCED", oldID, oldEpoch, err, iresp.ProducerEpoch)
	}
	if err := fresh.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the new producer's commit after the old one tried to recover: %v", err)
	}
	wantRecords(t, ctx, addr, "s", true, "K=v1", "P=p", "K=v3")
}

func fencedErr(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// TestTxnOffsetCommit: offsets committed in a transaction become visible at
// its commit and are discarded at its abort.
func TestTxnOffsetCommit(t *testing.T) {
	_, addr := testBroker(t)
	ctx := testCtx(t)
	createTopic(t, ctx, addr, "in", 1, nil)
	createTopic(t, ctx, addr, "out", 1, nil)
	// Kafka 3.0's TxnOffsetCommit (v3) names topics, not topic IDs.
	p := txnClient(t, addr, "p", kgo.MaxVersions(kversion.V3_0_0()))
	adm := kadm.NewClient(newClient(t, addr))

	committed := func() int64 {
		t.Helper()
		resp, err := adm.FetchOffsets(ctx, "g")
		if errors.Is(err, kerr.GroupIDNotFound) {
			return -1 // before the first commit
		}
		if err != nil {
			t.Fatal(err)
		}
		o, ok := resp.Lookup("in", 0)
		if !ok {
			return -1
		}
		if o.Err != nil {
			t.Fatalf("fetching g's offset: %v", o.Err)
		}
		return o.At
	}
	txnCommit := func(at int64) {
		t.Helper()
		id, epoch, err := p.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "p", id, epoch, "g"
		aresp, err := add.RequestWith(ctx, p)
		if err == nil {
			err = kerr.ErrorForCode(aresp.ErrorCode)
		}
		if err != nil {
			t.Fatalf("AddOffsetsToTxn: %v", err)
		}
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = "p", "g", id, epoch
		req.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "in"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, at, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, p)
		if err == nil {
			err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
		}
		if err != nil {
			t.Fatalf("TxnOffsetCommit: %v", err)
		}
	}
	// unstable asks for g's offset of in/0 with RequireStable, which Kafka
	// answers with UNSTABLE_OFFSET_COMMIT while a transaction holds a
	// pending offset for it.
	unstable := func() error {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.RequireStable = true
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = "g"
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = "in", []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Groups) != 1 {
			t.Fatalf("OffsetFetch: %d groups in the response", len(resp.Groups))
		}
		g := resp.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return err
		}
		if len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 1 {
			t.Fatalf("OffsetFetch: %d topics in the response", len(g.Topics))
		}
		return kerr.ErrorForCode(g.Topics[0].Partitions[0].ErrorCode)
	}

	for i, commit := range []bool{true, false, true} {
		before := committed()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(t, ctx, p, "out", fmt.Sprintf("r=%d", i))
		at := int64(10 * (i + 1))
		txnCommit(at)
		if got := committed(); got != before {
			t.Fatalf("transaction %d: the group's offset is %d before the commit, want %d", i, got, before)
		}
		// (Before the group's first commit the broker knows no group g.)
		if err := unstable(); i > 0 && !errors.Is(err, kerr.UnstableOffsetCommit) {
			t.Errorf("transaction %d: OffsetFetch with RequireStable during the transaction: %v, want UNSTABLE_OFFSET_COMMIT", i, err)
		}
		if err := p.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		want := before
		if commit {
			want = at
		}
		if got := committed(); got != want {
			t.Fatalf("transaction %d (commit %v): the group's offset is %d after it ends, want %d", i, commit, got, want)
		}
		if err := unstable(); err != nil {
			t.Errorf("transaction %d: OffsetFetch with RequireStable after the end: %v", i, err)
		}
	}
}
