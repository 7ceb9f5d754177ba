package kafka

// This file holds the package's sentinel error values and its error types.

import (
	"errors"
	"fmt"
)

// ErrBindingMismatch is returned (wrapped) when a query name's state topic
// records other inputs than the run's: another query text, source topic,
// source partition count or sink topic.
var ErrBindingMismatch = errors.New("kafka: the query name is bound to other inputs")

// The error vocabulary of the package.
var (
	ErrConfig        = errors.New("kafka: bad configuration")
	ErrNotCompacted  = errors.New("kafka: sink topic is not compacted")
	ErrTopicMismatch = errors.New("kafka: topic layout does not match")
	ErrNullValue     = errors.New("kafka: refusing to produce a record with a null value")
	ErrClosed        = errors.New("kafka: pipeline closed")
	// ErrFenced: the broker refused this process's transactional
	// producer because its epoch is no longer current (another process
	// took its transactional id, or the broker aborted its transaction
	// at the transaction timeout while it was paused). Nothing of the
	// refused transaction is committed; the process must restart.
	ErrFenced = errors.New("kafka: transactional producer fenced")
	// ErrOldState: the state topic holds state of an earlier ubik
	// version that this one cannot continue (a watermark of +infinity,
	// written at the end of an until-caught-up run before the drain
	// stopped at the last window's end). Nothing is read or written.
	ErrOldState = errors.New("kafka: state written by an earlier ubik version cannot be continued")
	// ErrNewerState: the state topic was written by a newer ubik, in a
	// layout of the internal topics this one does not read. Nothing is
	// read or written.
	ErrNewerState = errors.New("kafka: state written by a newer ubik version")
	// ErrDataLoss: records of the source were deleted (retention,
	// DeleteRecords) between the query's committed offsets and the log
	// start, before the query read them (see Options.AllowDataLoss).
	ErrDataLoss = errors.New("kafka: source records lost")
	// ErrSourceChanged: the source topic changed under a running query
	// in a way it cannot follow (partitions added, the topic deleted or
	// created again); the query stopped without committing what it read
	// since. The message says what to do.
	ErrSourceChanged = errors.New("kafka: the source topic changed")
	// ErrSharedTopic: two uses of a run are one topic (two sinks, a sink
	// and an input, or either and one of the run's internal topics);
	// New refuses the run, naming both. It is an ErrConfig.
	ErrSharedTopic = fmt.Errorf("%w: one topic for two uses", ErrConfig)
	// ErrUnsupported: the query has a shape the pipeline does not run
	// (the message says which shapes it does).
	ErrUnsupported = errors.New("kafka: not supported")
	// ErrUnknownInput: a record of an internal topic names, in its
	// header ubik.in, an input the stage reading it does not have (another
	// query text's stage wrote it). It is counted as malformed, reported
	// to OnBadEvent with its position, and not applied.
	ErrUnknownInput = errors.New("kafka: a record for an input the stage does not read")
)

// errWaitedOut marks a wait of the loop that ran out of time (a state
// partition's open transaction, a restore): after an outage it can be the
// broker's, so it is transient.
var errWaitedOut = errors.New("waited too long")

// ErrViewJoinState stops a join of two views whose held rows pass their
// bound (Options.JoinBuffer): the sides' watermarks are too far apart (one view is behind the
// other) for the rows of one partition to be kept.
var ErrViewJoinState = errors.New("kafka: a join of two views holds more rows than it may")

var errBadWatermark = errors.New("kafka: bad watermark encoding")

// BadEvent is an input record that was not applied.
type BadEvent struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error
}

func (e *BadEvent) Error() string {
	return fmt.Sprintf("kafka: topic %s partition %d offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

func (e *BadEvent) Unwrap() error { return e.Err }

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

// errBadRow is a row of a join's second input that did not decode or
// place, in a routing stage: reported, counted, and skipped.
var errBadRow = errors.New("kafka: a bad row")
