package redislander

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/internal/testenv"
	"github.com/ubiksql/ubik/land"
	"github.com/ubiksql/ubik/land/landtest"
)

// TestAbortFallsBack: a watched key written between the read and EXEC
// aborts the transaction; the chunk is read again, and after MaxAborts
// aborts it goes through the function, which counts against what the other
// writer left.
func TestAbortFallsBack(t *testing.T) {
	ctx := context.Background()
	c := client(t, testenv.RequireRedis(t))
	ns := landtest.NS("abort")
	l := openWith(t, Options{Client: c, Mode: land.Latest, Prefix: ns + "/", Optimistic: true, MaxAborts: 2})
	other := openWith(t, Options{Client: c, Mode: land.Latest, Prefix: ns + "/"})
	rec := func(g string, rev uint64) changelog.Record {
		return landtest.Record(land.Latest, "q", g, landtest.Base(), rev, false)
	}
	// Another writer moves "a" forward on every try: two aborts, then the
	// function finds "a" past the record (superseded) and lands "b".
	var rev atomic.Uint64
	rev.Store(10)
	l.beforeExec = func([]string) {
		if _, err := other.Land(ctx, []changelog.Record{rec("a", rev.Add(1))}); err != nil {
			t.Error(err)
		}
	}
	res, err := l.Land(ctx, []changelog.Record{rec("a", 5), rec("b", 5)})
	if err != nil {
		t.Fatal(err)
	}
	if want := (land.Result{Landed: 1, Superseded: 1}); res != want {
		t.Fatalf("Land = %+v, want %+v", res, want)
	}
	if a, f := l.aborts.Load(), l.fallbacks.Load(); a != 2 || f != 1 {
		t.Fatalf("%d aborts and %d fallbacks, want 2 and 1", a, f)
	}
	for g, want := range map[string]uint64{"a": 12, "b": 5} {
		st, err := l.Get(ctx, land.Ref{Query: "q", Group: []byte(`["` + g + `"]`)})
		if err != nil || st.Version.Revision != want {
			t.Fatalf("%s: revision %d (%v), want %d", g, st.Version.Revision, err, want)
		}
	}
	// One abort, then the second try lands: no fallback.
	tries := 0
	l.beforeExec = func([]string) {
		if tries++; tries == 1 {
			if _, err := other.Land(ctx, []changelog.Record{rec("b", 6)}); err != nil {
				t.Error(err)
			}
		}
	}
	res, err = l.Land(ctx, []changelog.Record{rec("a", 20), rec("b", 6)})
	if err != nil {
		t.Fatal(err)
	}
	if want := (land.Result{Landed: 1, Duplicate: 1}); res != want {
		t.Fatalf("Land = %+v, want %+v", res, want)
	}
	if a, f := l.aborts.Load(), l.fallbacks.Load(); a != 3 || f != 1 {
		t.Fatalf("%d aborts and %d fallbacks, want 3 and 1", a, f)
	}
	// A chunk with nothing to write leaves no watch on the connection: a
	// later transaction on it does not abort for a key of the earlier one.
	l.beforeExec = nil
	if res, err := l.Land(ctx, []changelog.Record{rec("a", 1)}); err != nil || res.Superseded != 1 {
		t.Fatalf("Land = %+v, %v", res, err)
	}
	if _, err := other.Land(ctx, []changelog.Record{rec("a", 30)}); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Land(ctx, []changelog.Record{rec("c", 1)}); err != nil || res.Landed != 1 {
		t.Fatalf("Land = %+v, %v", res, err)
	}
	if a := l.aborts.Load(); a != 3 {
		t.Fatalf("%d aborts, want 3 (a watch was left on a connection)", a)
	}
}

// TestRacingOnSameKeys: two optimistic landers and one on the function
// land interleaved revisions of the same keys at once, each in its own
// order with stale repeats; a sampler reads the hashes meanwhile. No
// stored pair ever goes backwards, every hash is whole (its value is its
// revision's), and the end state is every key's greatest revision.
func TestRacingOnSameKeys(t *testing.T) {
	ctx := context.Background()
	c := client(t, testenv.RequireRedis(t))
	ns := landtest.NS("samekeys")
	const keys, revs = 40, 150
	// Small chunks and one abort before the fallback: the landers collide
	// and every path runs.
	opts := Options{Client: c, Mode: land.Latest, Prefix: ns + "/", KeysPerCall: 4, CallsPerPipeline: 2, Optimistic: true, MaxAborts: 1}
	a, b := openWith(t, opts), openWith(t, opts)
	opts.Optimistic = false
	f := openWith(t, opts)
	group := func(k int) string { return "g" + strconv.Itoa(k) }
	seed := landtest.Seed(t)
	// Lander i lands the revisions r with r%3 == i, ascending, and after
	// each batch repeats a few older records.
	stream := func(i int) [][]changelog.Record {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		var all []changelog.Record
		for rev := uint64(1); rev <= revs; rev++ {
			if int(rev%3) != i {
				continue
			}
			for k := range keys {
				all = append(all, landtest.Record(land.Latest, "q", group(k), landtest.Base(), rev, false))
			}
		}
		var out [][]changelog.Record
		for lo := 0; lo < len(all); {
			hi := min(len(all), lo+1+r.IntN(60))
			batch := append([]changelog.Record(nil), all[lo:hi]...)
			for range r.IntN(4) {
				batch = append(batch, all[r.IntN(hi)])
			}
			out = append(out, batch)
			lo = hi
		}
		return out
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total land.Result
		sent  int
		errs  = make(chan error, 4)
		done  = make(chan struct{})
		reads atomic.Int64
	)
	for i, l := range []*Lander{a, b, f} {
		batches := stream(i)
		for _, bt := range batches {
			sent += len(bt)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, bt := range batches {
				res, err := l.Land(ctx, bt)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				total = total.Add(res)
				mu.Unlock()
			}
		}()
	}
	// The sampler: every stored pair only moves forward, and value, key
	// and revision are of one record.
	var sw sync.WaitGroup
	sw.Add(1)
	go func() {
		defer sw.Done()
		last := make([]uint64, keys)
		for {
			select {
			case <-done:
				return
			default:
			}
			pipe := c.Pipeline()
			cmds := make([]interface{ Val() []any }, keys)
			for k := range keys {
				cmds[k] = pipe.HMGet(ctx, a.Key(land.Ref{Query: "q", Group: []byte(`["` + group(k) + `"]`)}), "window_start", "revision", "value", "key")
			}
			if _, err := pipe.Exec(ctx); err != nil {
				errs <- err
				return
			}
			for k := range keys {
				v := cmds[k].Val()
				if v[1] == nil {
					if last[k] != 0 {
						errs <- fmt.Errorf("key %d vanished after revision %d", k, last[k])
						return
					}
					continue
				}
				rev, err := strconv.ParseUint(v[1].(string), 10, 64)
				if err != nil {
					errs <- err
					return
				}
				if rev < last[k] {
					errs <- fmt.Errorf("key %d went back from revision %d to %d", k, last[k], rev)
					return
				}
				last[k] = rev
				want := landtest.Record(land.Latest, "q", group(k), landtest.Base(), rev, false)
				if v[0] != strconv.FormatInt(want.Meta.WindowStart, 10) || v[2] != string(want.Value) || v[3] != string(want.Key) {
					errs <- fmt.Errorf("key %d at revision %d is not one record's hash: %q", k, rev, v)
					return
				}
			}
			reads.Add(1)
		}
	}()
	wg.Wait()
	close(done)
	sw.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if total.Total() != sent {
		t.Fatalf("counted %d records of %d: %+v", total.Total(), sent, total)
	}
	for k := range keys {
		st, err := f.Get(ctx, land.Ref{Query: "q", Group: []byte(`["` + group(k) + `"]`)})
		if err != nil || st.Version.Revision != revs {
			t.Fatalf("key %d: revision %d (%v), want %d", k, st.Version.Revision, err, revs)
		}
	}
	t.Logf("%+v; %d samples; aborts %d and %d, fallbacks %d and %d", total, reads.Load(),
		a.aborts.Load(), b.aborts.Load(), a.fallbacks.Load(), b.fallbacks.Load())
}
