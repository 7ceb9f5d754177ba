package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// redoWithin bounds how long a stage keeps starting new sessions after
// failed transaction ends without committing one in between: the default
// of Kafka Streams' task.timeout.ms, which bounds the same recovery there.
const redoWithin = 5 * time.Minute

// redoError ends a stage's session whose last transaction could not be
// ended: End (or the Begin after it) failed with a transient error (a
// deadline under CPU starvation, a broker that paused or moved its
// coordinator). The outcome of that transaction is unknown: the broker
// may have committed it after the client stopped waiting, or aborted it.
// Nothing the session holds can be trusted then (kgo rewinds its offsets
// to what it last saw committed, which is wrong if the commit went
// through), so the stage starts a new session, as a restarted process
// would: its InitProducerID waits for the old transaction to complete and
// fences it (an open one is aborted), the group's stable offset fetch and
// the state restore then read the committed outcome, whichever it was.
// This is what Kafka Streams does with a TimeoutException on commit
// (the task is closed dirty and revived from its changelog).
type redoError struct{ err error }

func (e *redoError) Error() string { return e.err.Error() }
func (e *redoError) Unwrap() error { return e.err }

func isRedo(err error) bool {
	var r *redoError
	return errors.As(err, &r)
}

// endFailed wraps an error of End: fencing ends the process (another
// process owns the transactional id, or the broker aborted the
// transaction), anything else starts a new session.
func endFailed(err error) error {
	err = fmt.Errorf("kafka: ending transaction: %w", err)
	if errors.Is(err, ErrFenced) {
		return err
	}
	return &redoError{err}
}

// beginFailed wraps an error of Begin: kgo refuses to begin after an end
// whose outcome it could not confirm and could not heal.
func beginFailed(err error) error {
	err = fmt.Errorf("kafka: begin transaction: %w", err)
	if errors.Is(err, ErrFenced) {
		return err
	}
	return &redoError{err}
}

// redo runs a stage's sessions: a session that ends with a *redoError is
// followed by a new one, after a short pause, until one has committed
// nothing for redoWithin (the error is then returned). Every other end
// of a session (a stop, a fatal error, caught up) is the stage's.
func (p *Pipeline) redo(ctx context.Context, name, group string, session func(context.Context, *time.Time) error) error {
	committedAt := time.Now()
	pause := 250 * time.Millisecond
	for {
		before := committedAt
		err := session(ctx, &committedAt)
		if !isRedo(err) {
			return err
		}
		if ctx.Err() != nil {
			p.leave(group) // a clean stop: the session that ended kept the membership
			return nil
		}
		if committedAt != before {
			pause = 250 * time.Millisecond // it made progress since the last redo
		}
		if time.Since(committedAt) > redoWithin {
			return fmt.Errorf("%w (no transaction committed for %s, giving up)", err, redoWithin)
		}
		p.c.redos.Add(1)
		p.log.Warn("kafka: a transaction's end failed, its outcome is unknown: starting a new session that resumes from what the broker committed",
			"stage", name, "err", err, "pause", pause)
		select {
		case <-ctx.Done():
			p.leave(group)
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}
