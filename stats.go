package ubik

import (
	"github.com/ubiksql/ubik/internal/exec"
)

// Stats are a query's counters.
type Stats struct {
	Rows             int64 // rows that reached the query's windows (pushed, decoded, joined)
	Filtered         int64 // rows rejected by WHERE
	EvalErrors       int64 // rows rejected by a runtime evaluation error, at a join or at the windows
	Late             int64 // events handed to OnLate: behind a final window, or late at a join
	Duplicates       int64 // rows dropped as copies of a key seen within the dedup horizon
	DedupLate        int64 // rows beyond the dedup horizon (a retry can no longer be told from a new event)
	DedupKeys        int64 // keys remembered for deduplication now
	DedupBytes       int64 // estimated bytes of the dedup state
	RecordsOut       int64 // records emitted
	HavingSuppressed int64 // emissions skipped because HAVING was false
	// UnchangedSuppressed counts change records not emitted because their
	// value equals the last one emitted for their key.
	UnchangedSuppressed int64
	WindowsFinalized    int64 // (group, window) pairs closed
	LiveGroups          int64 // live (group, window) states now
	LiveGroupsPeak      int64
	StateBytes          int64 // estimated bytes of live state now
	StateBytesPeak      int64
	Watermark           int64   // µs; math.MinInt64 before the first event
	MaxEventTime        int64   // µs
	LatencyP50          float64 // emission latency, ns
	LatencyP99          float64
	LatencyMax          float64
	LatencyCount        uint64

	EventsIn  int64 // events pushed
	Malformed int64 // events that could not be decoded
	Pending   int   // rendered records buffered for Next (at most MaxPendingRecords)
	Queued    bool  // finalized windows or flushes wait, unrendered, for Next
	// Join holds a temporal join's counters and state sizes, and Table
	// the versioned table input's (zero without a join).
	Join  JoinStats
	Table TableStats
	// Interval holds an interval join's counters and state sizes (zero
	// without one); Table is then its right input's counters.
	Interval IntervalStats
}

// JoinStats are a temporal join's counters and state sizes.
type JoinStats struct {
	Events        int64 // events pushed to the join (late ones included)
	LateEvents    int64 // events behind the stream watermark less the allowed lateness: not joined
	Joined        int64 // events joined with a version
	Unmatched     int64 // events with no version (a NULL join key included): dropped by JOIN, NULL-extended by LEFT JOIN
	NullKeys      int64 // events whose join key has a NULL (they never match)
	TableRows     int64 // table rows applied as versions
	LateTableRows int64 // table rows behind the table watermark: not applied
	BadTableRows  int64 // table rows with a NULL primary key cell: not applied
	Buffered      int64 // events waiting for the table watermark now
	BufferedPeak  int64
	Versions      int64 // versions held now
	VersionsPeak  int64
	Keys          int64 // keys with at least one version
	Dropped       int64 // versions dropped as no waiting or future event can need them
	TableWM       int64 // the table's watermark (µs); math.MinInt64 before its first row
	StreamWM      int64 // the stream's watermark as the join sees it
}

// IntervalStats are an interval join's counters and state sizes.
type IntervalStats struct {
	LeftRows, RightRows int64 // rows pushed to each input (late ones included)
	LateLeft, LateRight int64 // rows behind their input's watermark less the allowed lateness: not joined
	NullKeys            int64 // rows whose join key has a NULL (they never match)
	Matches             int64 // joined rows produced
	LeftHeld, RightHeld int64 // rows held now
	LeftPeak, RightPeak int64
	Dropped             int64 // rows dropped once the other input's watermark made a match impossible
	LeftWM, RightWM     int64 // the inputs' watermarks (µs); math.MinInt64 before their first row
	OutWM               int64 // the joined stream's watermark
}

// operatorStats copies the operator's counters into the root's Stats.
func operatorStats(s exec.Stats) Stats {
	return Stats{
		Rows: s.Rows, Filtered: s.Filtered, EvalErrors: s.EvalErrors, Late: s.Late,
		Duplicates: s.Duplicates, DedupLate: s.DedupLate, DedupKeys: s.DedupKeys, DedupBytes: s.DedupBytes,
		RecordsOut: s.RecordsOut, HavingSuppressed: s.HavingSuppressed, UnchangedSuppressed: s.UnchangedSuppressed,
		WindowsFinalized: s.WindowsFinalized,
		LiveGroups:       s.LiveGroups, LiveGroupsPeak: s.LiveGroupsPeak, StateBytes: s.StateBytes, StateBytesPeak: s.StateBytesPeak,
		Watermark: s.Watermark, MaxEventTime: s.MaxEventTime,
		LatencyP50: s.LatencyP50, LatencyP99: s.LatencyP99, LatencyMax: s.LatencyMax, LatencyCount: s.LatencyCount,
	}
}

func joinStats(j exec.JoinStats) JoinStats { return JoinStats(j) }

func intervalStats(i exec.IntervalStats) IntervalStats { return IntervalStats(i) }
