package main

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnLedger records, per transaction, what its producer meant to do and
// whether it has asked to commit yet.
type txnLedger struct {
	mu         sync.Mutex
	commit     map[string]bool // txn -> meant to commit (set before its first record)
	committing map[string]bool // txn -> EndTransaction(commit) called
	records    []ledgerRecord  // every record of a committed transaction
}

type ledgerRecord struct {
	partition int32
	offset    int64
	key, val  string
}

// TestReadCommittedConcurrentTxns runs several transactional producers at
// once, committing and aborting at random, beside a read_committed consumer
// and (for a compacted topic) the cleaner running all the time. The consumer
// must never see a record of an aborted transaction, nor one of a
// transaction that has not been asked to commit (a record past the last
// stable offset); each producer's records arrive in order; in the end the
// non-compacted topic holds exactly the committed records and the compacted
// one exactly the latest committed value of each key.
func TestReadCommittedConcurrentTxns(t *testing.T) {
	for _, compacted := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacted=%v", compacted), func(t *testing.T) { concurrentTxns(t, compacted) })
	}
}

func concurrentTxns(t *testing.T, compacted bool) {
	const producers, txns, keys = 6, 25, 12
	c, addr := testBroker(t)
	ctx := testCtx(t)
	partitions := int32(3)
	var cfg map[string]*string
	if compacted {
		partitions = 1
		cfg = map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	}
	createTopic(t, ctx, addr, "t", partitions, cfg)

	led := &txnLedger{commit: map[string]bool{}, committing: map[string]bool{}}
	consumer := newClient(t, addr, kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))

	pctx, stopConsumer := context.WithCancel(ctx)
	var (
		cmu      sync.Mutex
		consumed []ledgerRecord
		bad      []string
	)
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		last := map[string]string{} // partition/producer -> last "txn/rec" seen
		for pctx.Err() == nil {
			fs := consumer.PollRecords(pctx, 1000)
			cmu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				v := string(r.Value)
				var p, tx, n int
				if _, err := fmt.Sscanf(v, "p%d-t%d-r%d", &p, &tx, &n); err != nil {
					bad = append(bad, "unparsable value "+v)
					return
				}
				txn := fmt.Sprintf("p%d-t%d", p, tx)
				led.mu.Lock()
				meant, known := led.commit[txn]
				asked := led.committing[txn]
				led.mu.Unlock()
				switch {
				case !known || !meant:
					bad = append(bad, fmt.Sprintf("saw %s of an aborted transaction at %d/%d", v, r.Partition, r.Offset))
				case !asked:
					bad = append(bad, fmt.Sprintf("saw %s at %d/%d before its transaction committed (past the LSO)", v, r.Partition, r.Offset))
				}
				k := fmt.Sprintf("%d/p%d", r.Partition, p)
				pos := fmt.Sprintf("%06d/%06d", tx, n)
				if prev := last[k]; pos <= prev {
					bad = append(bad, fmt.Sprintf("producer p%d on partition %d went from %s to %s", p, r.Partition, prev, pos))
				}
				last[k] = pos
				consumed = append(consumed, ledgerRecord{r.Partition, r.Offset, string(r.Key), v})
			})
			cmu.Unlock()
		}
	}()

	stopCleaner := make(chan struct{})
	cleanerDone := make(chan struct{})
	go func() {
		defer close(cleanerDone)
		for {
			select {
			case <-stopCleaner:
				return
			case <-time.After(5 * time.Millisecond):
				c.Compact()
			}
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(p)))
			cl := txnClient(t, addr, fmt.Sprintf("producer-%d", p))
			for tx := range txns {
				txn := fmt.Sprintf("p%d-t%d", p, tx)
				commit := rng.Intn(3) != 0
				led.mu.Lock()
				led.commit[txn] = commit
				led.mu.Unlock()
				if err := cl.BeginTransaction(); err != nil {
					errs <- err
					return
				}
				var recs []ledgerRecord
				for n := range 1 + rng.Intn(4) {
					r := &kgo.Record{Topic: "t", Partition: rng.Int31n(partitions),
						Key: fmt.Appendf(nil, "k%d", rng.Intn(keys)), Value: fmt.Appendf(nil, "%s-r%d", txn, n)}
					if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
						errs <- fmt.Errorf("%s: %w", txn, err)
						return
					}
					recs = append(recs, ledgerRecord{r.Partition, r.Offset, string(r.Key), string(r.Value)})
					if rng.Intn(4) == 0 {
						time.Sleep(time.Millisecond) // let others interleave
					}
				}
				if commit {
					led.mu.Lock()
					led.committing[txn] = true
					led.mu.Unlock()
				}
				if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
					errs <- fmt.Errorf("%s: ending (commit %v): %w", txn, commit, err)
					return
				}
				if commit {
					led.mu.Lock()
					led.records = append(led.records, recs...)
					led.mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	close(stopCleaner)
	<-cleanerDone
	c.Compact()

	led.mu.Lock()
	committed := append([]ledgerRecord(nil), led.records...)
	led.mu.Unlock()
	if !compacted {
		// The consumer must read exactly the committed records.
		deadline := time.Now().Add(30 * time.Second)
		for {
			cmu.Lock()
			n := len(consumed)
			cmu.Unlock()
			if n >= len(committed) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stopConsumer()
	<-consumerDone
	for _, b := range bad {
		t.Error(b)
	}
	key := func(r ledgerRecord) string { return fmt.Sprintf("%d/%d %s=%s", r.partition, r.offset, r.key, r.val) }
	if !compacted {
		var got, want []string
		for _, r := range consumed {
			got = append(got, key(r))
		}
		for _, r := range committed {
			want = append(want, key(r))
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("read_committed consumer read %d records, want the %d committed ones exactly", len(got), len(want))
		}
		return
	}

	// Compacted: the latest committed value of each key survives.
	latest := map[string]ledgerRecord{}
	for _, r := range committed {
		if prev, ok := latest[r.key]; !ok || r.offset > prev.offset {
			latest[r.key] = r
		}
	}
	got, _ := snapshot(t, ctx, addr, "t", true)
	last := map[string]string{}
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	if len(last) != len(latest) {
		t.Errorf("after compaction %d keys, want %d", len(last), len(latest))
	}
	for k, r := range latest {
		if last[k] != r.val {
			t.Errorf("after compaction key %s reads %q, want its latest committed value %q", k, last[k], r.val)
		}
	}
	uncommitted, _ := snapshot(t, ctx, addr, "t", false)
	if strings.Join(uncommitted, " ") != strings.Join(got, " ") {
		t.Errorf("with every transaction ended, read_uncommitted after compaction %q differs from read_committed %q", uncommitted, got)
	}
	t.Logf("%d committed records, %d keys, %d records left after compaction", len(committed), len(latest), len(got))
}
