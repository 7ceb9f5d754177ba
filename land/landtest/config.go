package landtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ubiksql/ubik/changelog"
	"github.com/ubiksql/ubik/land"
)

// ConfigStop is the bound on how long land.Run may take to stop on a store
// configuration error: well under the first retries of an outage's backoff
// ladder reaching its 5 s ceiling, so a retry loop cannot pass.
const ConfigStop = 3 * time.Second

// RequireConfigStop runs land.Run over a few records into l, which the test
// has set up to fail for its configuration (a missing table, grant or
// credentials), and checks that the run stops within ConfigStop with an
// error wrapping land.ErrConfig that holds every one of want (the store's
// reason and what to check), that no record is set aside, and that nothing
// is committed. It returns the error.
func RequireConfigStop(t testing.TB, l land.Lander, want ...string) error {
	t.Helper()
	recs := make([]changelog.Record, 0, 4)
	for i, g := range []string{"a", "b", "c", "d"} {
		recs = append(recs, Record(l.Mode(), "q", g, Base(), uint64(i+1), false))
	}
	src := land.NewSliceSource(recs[:2], recs[2:])
	var c land.Counters
	// The run's own bound is far past ConfigStop: a lander that retries
	// shows as a slow stop, not a hung test.
	ctx, cancel := context.WithTimeout(context.Background(), 4*ConfigStop)
	defer cancel()
	start := time.Now()
	err := land.Run(ctx, src, l, land.RunOptions{Counters: &c, MaxBackoff: 500 * time.Millisecond,
		OnBadRecord: func(b land.BadRecord) error {
			t.Errorf("record %d set aside for a configuration error: %v", b.Index, b.Err)
			return nil
		}})
	took := time.Since(start)
	switch {
	case err == nil:
		t.Fatalf("Run landed into a misconfigured store")
	case !errors.Is(err, land.ErrConfig):
		t.Fatalf("Run = %v after %v, want a configuration error (land.ErrConfig)", err, took.Round(time.Millisecond))
	case took > ConfigStop:
		t.Fatalf("Run took %v to stop on %v (bound %v)", took.Round(time.Millisecond), err, ConfigStop)
	}
	for _, w := range append(want, "check: ") {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not name %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "%!") {
		t.Errorf("error %q is misformatted", err)
	}
	if src.Committed() != 0 || c.Rejected.Load() != 0 || c.Retried.Load() != 0 || c.StoreErrors.Load() != 0 {
		t.Errorf("committed %d, rejected %d, retried %d, store errors %d; want none", src.Committed(),
			c.Rejected.Load(), c.Retried.Load(), c.StoreErrors.Load())
	}
	t.Logf("stopped in %v: %v", took.Round(time.Millisecond), err)
	return err
}
