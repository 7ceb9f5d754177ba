package pgusage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The retry bound: a deadlock every time gives up after maxWriteAttempts
// tries with the server's error; a permanent error is not retried; a
// deadlock that clears is retried to success.
func TestRetryBound(t *testing.T) {
	ctx := context.Background()
	calls := 0
	deadlock := &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
	_, err := retry(ctx, maxWriteAttempts, func() (int, error) { calls++; return 0, deadlock })
	if calls != maxWriteAttempts || !errors.Is(err, deadlock) || !strings.Contains(err.Error(), "gave up after 6 attempts") {
		t.Fatalf("always deadlocked: %d calls, %v", calls, err)
	}
	calls = 0
	unique := &pgconn.PgError{Code: "23505"}
	if _, err := retry(ctx, maxWriteAttempts, func() (int, error) { calls++; return 0, unique }); calls != 1 || !errors.Is(err, unique) {
		t.Fatalf("permanent error: %d calls, %v", calls, err)
	}
	calls = 0
	n, err := retry(ctx, maxWriteAttempts, func() (int, error) {
		calls++
		if calls < 3 {
			return 0, &pgconn.PgError{Code: "40001"}
		}
		return 7, nil
	})
	if n != 7 || err != nil || calls != 3 {
		t.Fatalf("cleared after two serialization failures: %d, %v after %d calls", n, err, calls)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := retry(cctx, maxWriteAttempts, func() (int, error) { return 0, deadlock }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while retrying: %v", err)
	}
}
