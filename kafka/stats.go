package kafka

import "sync/atomic"

// Stats are a pipeline's counters. The counts of input records (events,
// applied, malformed, headers, evaluation errors, late, table rows) and
// RecordsOut count committed transactions' records, each once: an aborted
// transaction's records are read and counted again, so its own counts are
// dropped; one whose end failed with its outcome unknown is counted if the
// group's committed offsets show it committed. The other counters count
// attempts. OnLate, OnViewLate and OnBadEvent likewise receive a
// transaction's records once it commits.
type Stats struct {
	EventsIn        int64 // input records consumed by the first stage (or by the only stage)
	EventsApplied   int64 // events handed to an operator
	Malformed       int64
	HeadersSkipped  int64 // CSV header records skipped (format csv, header = 'true')
	EvalErrors      int64
	Late            int64
	RecordsOut      int64 // changelog records produced
	StateEntriesOut int64 // state-topic records produced
	MarkersOut      int64 // watermark markers produced
	Commits         int64 // transactions committed (both stages)
	Aborts          int64 // transactions aborted (both stages); an end with nothing in it (no record, no offset) is none
	Restores        int64 // operators restored from the state topic
	RestoredEntries int64
	Redos           int64 // stage sessions started again after a transaction end failed (its outcome unknown)
	DataLost        int64 // source records deleted before the query read them (Options.AllowDataLoss)
	CaughtUp        bool  // UntilCaughtUp: the input was consumed to its end and every window finalized
	// A temporal join's table input (an interval join's right stream):
	// rows consumed by the table stage, rows that did not decode
	// (reported to OnBadEvent), rows behind the table watermark (not
	// applied; handed to OnLate), as of this process's last look. A join
	// of two views counts its sides' in EventsIn, Malformed and Late: each
	// of its inputs is a stream.
	TableRows, TableMalformed, TableLate int64
	// A temporal join's gauges over the partitions this process owns, as
	// of the last transaction: events joined and unmatched (running
	// totals that move with their partitions), events waiting for the
	// table's watermark, versions and keys held (each partition holds
	// its own copy of the table's versions, so these add up copies).
	JoinJoined, JoinUnmatched, JoinWaiting, JoinVersions, JoinKeys int64
	// Gauges over the operators this process owns, as of the last
	// transaction: live (group, window) states and their estimated bytes,
	// and the input-dedup state. Duplicates and DedupLate are the owned
	// operators' running totals (they move with their partitions).
	LiveGroups, StateBytes, Duplicates, DedupLate, DedupKeys, DedupBytes int64
	// UnchangedSuppressed is the owned operators' running total of change
	// records not produced because their value equals the last one
	// produced for the key.
	UnchangedSuppressed int64
	// The source partitions this process reads, as of its last poll:
	// IdlePartitions are quiet for the idle timeout and no longer hold
	// the watermark back; SilentPartitions delivered no event in this run
	// and are not idle yet, so they hold it back (no window finalizes)
	// until the idle timeout passes. Sorted.
	IdlePartitions, SilentPartitions []int32
}

type counters struct {
	eventsIn, applied, malformed, headers, evalErrors, late, recordsOut, stateOut, markersOut,
	commits, aborts, restores, restoredEntries, redos, dataLost atomic.Int64
	liveGroups, stateBytes, unchanged                              atomic.Int64
	tableRows, tableMalformed, tableLate                           atomic.Int64
	joinJoined, joinUnmatched, joinWaiting, joinVersions, joinKeys atomic.Int64
	// dedup is the first stream's dedup (its dedup stage's, or the
	// graph's); dedup2 a join of two views' second source's dedup stage.
	dedup, dedup2 dedupGauges
}

// dedupGauges are what one dedup holds and dropped, as of its last
// transaction.
type dedupGauges struct {
	duplicates, late, keys, bytes atomic.Int64
}

// store sets the gauges.
func (g *dedupGauges) store(dups, late, keys, bytes int64) {
	g.duplicates.Store(dups)
	g.late.Store(late)
	g.keys.Store(keys)
	g.bytes.Store(bytes)
}
