package pgusage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// maxWriteAttempts bounds how often one INSERT statement is tried when the
// server aborts it as a deadlock victim or a serialization failure.
const maxWriteAttempts = 6

// retryable reports whether err aborted the statement as a whole and
// trying it again can succeed: a deadlock (40P01) or a serialization
// failure (40001). The INSERT is idempotent (ON CONFLICT DO NOTHING) and
// the aborted one changed nothing, so a retry counts every row exactly once.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// retry runs op until it succeeds, fails with an error that is not
// retryable, or has been tried attempts times, sleeping a jittered,
// doubling backoff (from 10ms) between tries.
func retry(ctx context.Context, attempts int, op func() (int, error)) (int, error) {
	backoff := 10 * time.Millisecond
	for i := 1; ; i++ {
		n, err := op()
		if err == nil || !retryable(err) {
			return n, err
		}
		if i == attempts {
			return 0, fmt.Errorf("gave up after %d attempts: %w", attempts, err)
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w (while retrying: %v)", ctx.Err(), err)
		case <-t.C:
		}
		backoff *= 2
	}
}
