package usagetest

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ubiksql/ubik/usage"
)

// RunSameKeysRace races writers that each write the same keys, every one
// in its own shuffled order, in one Write call per round (one statement's
// worth of rows), for several rounds of fresh keys. Every Write must
// succeed, and afterwards every key counts once with its one quantity.
// exactCounts says whether the backend's WriteResult is exact under a race
// (PostgreSQL: Inserted sums to the number of keys) or may be optimistic
// (ClickHouse).
func RunSameKeysRace(t *testing.T, l usage.Log, writers, keys, rounds int, exactCounts bool) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewSource(seed))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for round := 0; round < rounds; round++ {
		orders := make([][]usage.Event, writers)
		for w := range orders {
			evs := make([]usage.Event, keys)
			for i := range evs {
				evs[i] = ev(fmt.Sprintf("same-%d-%d", round, i), ms(int64(i)), "same", 1)
			}
			rnd.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
			orders[w] = evs
		}
		results := make([]usage.WriteResult, writers)
		errs := make([]error, writers)
		var start, done sync.WaitGroup
		start.Add(1)
		for w := range orders {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				results[w], errs[w] = l.Write(ctx, orders[w])
			}()
		}
		start.Done()
		done.Wait()
		inserted := 0
		for w, err := range errs {
			if err != nil {
				t.Fatalf("round %d: writer %d of %d: %v", round, w, writers, err)
			}
			inserted += results[w].Inserted
			if results[w].Inserted+results[w].Duplicates != keys {
				t.Fatalf("round %d: writer %d: %+v does not account for its %d events", round, w, results[w], keys)
			}
		}
		if exactCounts && inserted != keys {
			t.Fatalf("round %d: %d inserted across writers, want %d", round, inserted, keys)
		}
	}
	wantTotals(t, "after the races", total(t, l, "same", Base, Base.Add(time.Hour)), strconv.Itoa(keys*rounds), int64(keys*rounds))
}
