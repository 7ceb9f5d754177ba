package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DefaultGiveUpAfter is Options.GiveUpAfter's default: how long a stage
// keeps starting new sessions after failures that may heal (a transaction
// end whose outcome is unknown, a broker that cannot be reached) without
// committing one transaction in between. It is the default of Kafka
// Streams' task.timeout.ms, which bounds the same recovery there.
const DefaultGiveUpAfter = 5 * time.Minute

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

// transient wraps err in a *redoError when it may heal by itself: the
// broker cannot be reached or answered late (a restart, an outage, a
// network cut), or answered with an error Kafka marks retriable (a
// coordinator or leader moving). Any request of a stage's loop (its
// session, offsets, metadata, restore) failing so starts a new session,
// as a failed transaction end does, so one outage is one bound: no
// commit for Options.GiveUpAfter. Anything else is returned as it is.
func transient(err error) error {
	if err == nil || isRedo(err) || errors.Is(err, ErrFenced) || isFatal(err) {
		return err
	}
	var ne net.Error
	var se *os.SyscallError
	switch {
	case errors.As(err, &ne), errors.As(err, &se), kerr.IsRetriable(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, errWaitedOut):
		return &redoError{err}
	}
	return err
}

// redo runs a stage's sessions: a session that ends with a *redoError is
// followed by a new one, after a short pause, until one has committed
// nothing for Options.GiveUpAfter (the error is then returned). Every
// other end of a session (a stop, a fatal error, caught up) is the
// stage's.
func (p *Pipeline) redo(ctx context.Context, name, group string, session func(context.Context, *time.Time) error) error {
	committedAt := time.Now()
	pause := 250 * time.Millisecond
	for {
		before := committedAt
		err := transient(session(ctx, &committedAt))
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
		if time.Since(committedAt) > p.opts.GiveUpAfter {
			return fmt.Errorf("%w (no transaction committed for %s, giving up)", err, p.opts.GiveUpAfter)
		}
		p.c.redos.Add(1)
		p.log.Warn("kafka: the stage's session failed in a way that may heal (a transaction end of unknown outcome, a broker out of reach): starting a new session that resumes from what the broker committed",
			"stage", name, "err", err, "pause", pause, "gives_up_after", p.opts.GiveUpAfter-time.Since(committedAt))
		select {
		case <-ctx.Done():
			p.leave(group)
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}
