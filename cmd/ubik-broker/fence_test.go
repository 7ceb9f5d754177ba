package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// endTxn sends EndTxn by hand (kgo refuses to after a fencing error) and
// returns its error and the epoch the broker answers with.
func endTxn(t *testing.T, ctx context.Context, cl *kgo.Client, txid string, id int64, epoch int16, commit bool) (error, int16) {
	t.Helper()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txid, id, epoch, commit
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Version < 5 {
		t.Fatalf("EndTxn v%d: the broker must support v5 (KIP-890: an epoch bump per transaction)", resp.Version)
	}
	return kerr.ErrorForCode(resp.ErrorCode), resp.ProducerEpoch
}

// initPID sends InitProducerID naming a producer id and epoch by hand (a
// client recovering its producer, KIP-360).
func initPID(t *testing.T, ctx context.Context, cl *kgo.Client, txid string, id int64, epoch int16) (error, int16) {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr(txid)
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = id, epoch
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return kerr.ErrorForCode(resp.ErrorCode), resp.ProducerEpoch
}

// TestTimedOutTxnFencesProducer: when the broker aborts a transaction at
// its timeout (a process frozen by SIGSTOP, a long pause), the producer's
// epoch is fenced for good, as on Kafka (the coordinator bumps the epoch
// and forgets the last one): its EndTxn, commit or abort, is refused
// (it must not get the bumped epoch back, as a retry of a completed
// EndTxn would), its InitProducerID with that epoch is refused, and its
// late produce is refused without opening a transaction that would hold
// the partition's last stable offset. A completed EndTxn or
// InitProducerID retried at the epoch it was sent at still gets the
// current epoch back (positive controls).
func TestTimedOutTxnFencesProducer(t *testing.T) {
	_, addr := testBroker(t)
	ctx := testCtx(t)
	createTopic(t, ctx, addr, "s", 1, nil)
	raw := newClient(t, addr)
	adm := kadm.NewClient(raw)

	// Positive controls on a healthy producer.
	ok := txnClient(t, addr, "ok")
	if err := ok.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, ok, "s", "A=a")
	id, before, err := ok.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	_, now, _ := ok.ProducerID(ctx)
	if now != before+1 {
		t.Fatalf("a committed transaction took epoch %d to %d, want one bump (KIP-890)", before, now)
	}
	if err, e := endTxn(t, ctx, raw, "ok", id, before, true); err != nil || e != now {
		t.Errorf("retried EndTxn commit at epoch %d: %v, epoch %d; want success and epoch %d", before, err, e, now)
	}
	if err, _ := endTxn(t, ctx, raw, "ok", id, before, false); !errors.Is(err, kerr.InvalidTxnState) {
		t.Errorf("EndTxn abort retrying a commit at epoch %d: %v, want INVALID_TXN_STATE", before, err)
	}
	if err, e := initPID(t, ctx, raw, "ok", id, now); err != nil || e != now+1 {
		t.Errorf("InitProducerID at the current epoch %d: %v, epoch %d; want epoch %d", now, err, e, now+1)
	}
	if err, e := initPID(t, ctx, raw, "ok", id, now); err != nil || e != now+1 {
		t.Errorf("InitProducerID retried at epoch %d: %v, epoch %d; want epoch %d again", now, err, e, now+1)
	}
	if err, _ := initPID(t, ctx, raw, "ok", id, before); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("InitProducerID at the older epoch %d: %v, want PRODUCER_FENCED", before, err)
	}

	// Producers whose transactions time out: z then produces, y ends its
	// transaction and re-initializes by hand.
	timedOut := func(txid string) (*kgo.Client, int64, int16) {
		t.Helper()
		cl := txnClient(t, addr, txid, kgo.TransactionTimeout(time.Second))
		inTxn(t, ctx, cl, "s", true, txid+"=v1")
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(t, ctx, cl, "s", txid+"=v2")
		id, e, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			dt, err := adm.DescribeTransactions(ctx, txid)
			if err != nil {
				t.Fatal(err)
			}
			if d := dt[txid]; d.Err == nil && d.State != "Ongoing" {
				return cl, id, e
			}
			if time.Now().After(deadline) {
				t.Fatal("the broker did not abort the transaction within 30 s of its 1 s timeout")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	z, _, _ := timedOut("z")
	_, zid, ze := timedOut("y")
	perr := z.ProduceSync(ctx, &kgo.Record{Topic: "s", Partition: 0, Key: []byte("K"), Value: []byte("zombie")}).FirstErr()
	if !fencedErr(perr) {
		t.Errorf("the timed-out producer's produce: %v, want a fencing error", perr)
	}
	dt, err := adm.DescribeTransactions(ctx, "z")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := dt["z"]; !ok || d.State == "Ongoing" {
		t.Errorf("after the timed-out producer's refused produce, transactional id z is %q: the refused batch opened a transaction", d.State)
	}
	for _, commit := range []bool{false, true} {
		if err, e := endTxn(t, ctx, raw, "y", zid, ze, commit); !errors.Is(err, kerr.ProducerFenced) {
			t.Errorf("EndTxn (commit %v) of the timed-out transaction at epoch %d: %v (epoch %d), want PRODUCER_FENCED", commit, ze, err, e)
		}
	}
	if err, e := initPID(t, ctx, raw, "y", zid, ze); !errors.Is(err, kerr.ProducerFenced) {
		t.Errorf("InitProducerID with the timed-out producer's epoch %d: %v (epoch %d), want PRODUCER_FENCED", ze, err, e)
	}
	got, lso := snapshot(t, ctx, addr, "s", true)
	ends, err := adm.ListEndOffsets(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("s", 0); lso != o.Offset {
		t.Errorf("the last stable offset is %d, the end %d: a transaction is open", lso, o.Offset)
	}
	if want := "A=a z=v1 y=v1"; strings.Join(got, " ") != want {
		t.Errorf("read_committed: %q, want %q", got, want)
	}
}
