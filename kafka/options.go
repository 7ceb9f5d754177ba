package kafka

import (
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ubiksql/ubik"
	"github.com/ubiksql/ubik/internal/drive"
	"github.com/ubiksql/ubik/internal/sql/plan"
)

// Options configure a Pipeline. Query, Source and Sink are required; every other field has a documented default.
type Options struct {
	// Query is the compiled query. Its Name names the consumer groups
	// (Name+"-in" for the repartitioning stage, Name for the aggregating
	// stage) and the internal topics (Name+"-repartition", Name+"-state"):
	// processes running the same query name form one group and share work.
	Query *plan.Query
	// Plan, if set, is the compiled query as the root package gives it
	// (ubik.Program.Queries): it takes the place of Query.
	Plan *ubik.Plan
	// Source is the input topic (RoleSource options apply).
	Source Endpoint
	// Sink is the changelog topic (RoleSink options apply). It may be on
	// another cluster only if it is the same cluster: a transaction spans
	// one cluster, so Sink.Config must reach the source's cluster.
	Sink Endpoint
	// Table, for a Query with a temporal join (JOIN t FOR SYSTEM_TIME AS
	// OF), is the versioned table's topic (RoleSource options apply;
	// From must be earliest: every version counts), read in full by
	// every partition of the aggregating stage (see join.go). Its Config
	// defaults to the Source's, whose cluster it must be on. Unused
	// otherwise (an error if set).
	Table Endpoint
	// JoinSource, for a Query that joins two views over two declared
	// sources (viewjoin.go), is the second source's topic, the right
	// view's (RoleSource options apply; its Config defaults to the
	// Source's, whose cluster it must be on). Unused otherwise (an error
	// if set).
	JoinSource Endpoint
	// JoinBuffer bounds, per partition of the aggregating stage, the
	// events of a temporal join that wait for the table's watermark.
	// Crossing it stops the pipeline with drive.ErrJoinBuffer (the
	// events behind it are in the same partition as the table rows that
	// would release them, so waiting cannot help): the table is too far
	// behind the stream. Default plan.DefaultJoinBuffer. For a join of
	// two views it bounds the rows the join holds per partition of the
	// join stage (ErrViewJoinState); default DefaultViewJoinRows.
	JoinBuffer int
	// ViewSinks, for a Query that reads views (FROM a windowed EMIT
	// FINAL view, see graph.go), give each view of its chain its own
	// changelog topic, by view name: every view must have one, on the
	// Sink's cluster, and no two queries may share a topic. Each view's
	// records are produced there in the transactions that produce the
	// Query's. Unused otherwise.
	ViewSinks map[string]Endpoint
	// InstanceID names this process in the group. It must be stable across
	// restarts of the same process (it is the transactional id suffix and
	// the static group membership id, so a restarted process fences its
	// crashed predecessor at once) and distinct between processes running
	// at the same time. Default: the host name.
	InstanceID string
	// Logger receives diagnostics; secrets are never logged. Default: discard.
	Logger *slog.Logger
	// Now is the processing-time clock (EMIT EARLY, idle timeout). Default time.Now.
	Now func() time.Time
	// CommitInterval is how long a transaction takes input: every stage
	// keeps polling and processing in one transaction until the interval
	// has passed since its first poll began, then ends it, so commits
	// come about once per interval plus the time the end takes, which is
	// also the output latency floor. A transaction ends early at a stop,
	// at CommitRecords, and when an UntilCaughtUp run reaches the end of
	// its input. Default DefaultCommitInterval; at most
	// MaxCommitInterval(TransactionTimeout).
	CommitInterval time.Duration
	// CommitRecords, if set, also ends a transaction once it has taken
	// this many input records (it takes whole polls, so up to
	// MaxPollRecords - 1 more): it bounds a transaction's size when the
	// input comes faster than the interval. Default 0: the interval
	// alone ends it.
	CommitRecords int
	// MaxPollRecords bounds the input records of one poll (and so the
	// records processed between two looks at the clock). Default 10000.
	MaxPollRecords int
	// SessionTimeout is the group session timeout: how long a dead process
	// that does not come back holds its partitions. Default 10s.
	SessionTimeout time.Duration
	// TransactionTimeout is how long the broker keeps a transaction of a
	// dead process open before aborting it. Default 30s.
	TransactionTimeout time.Duration
	// GiveUpAfter bounds how long a stage rides out failures that may
	// heal (a broker down or out of reach, a transaction end of unknown
	// outcome) by starting new sessions: once it has committed no
	// transaction for this long, Run returns the last error. Default
	// DefaultGiveUpAfter.
	GiveUpAfter time.Duration
	// AllowDataLoss lets Run go on when records of the source were
	// deleted (retention, DeleteRecords) below the query's committed
	// offsets before it read them; they are counted in Stats.DataLost
	// and logged. Default false: Run refuses to start with ErrDataLoss,
	// naming the partitions and the records lost.
	AllowDataLoss bool
	// RepartitionPartitions is the partition count of the repartition and
	// state topics. Default: the source topic's.
	RepartitionPartitions int
	// OnLate, if set, receives every late event, with LateEvent.Event the
	// source record's value (the row and the value are valid only during
	// the call). Late events are counted either way.
	OnLate func(*drive.LateEvent)
	// OnViewLate, if set, receives the late events of the views a Query
	// over views reads, with the view's name (only the view reading the
	// source can meet one: a view's rows are never late at its reader).
	// Unset, they go to OnLate.
	OnViewLate func(query string, ev *drive.LateEvent)
	// OnLateEvent, if set, takes the place of OnLate and OnViewLate: it
	// receives the late events of the query and of the views it reads,
	// with the name of the query that met it, as the root package hands
	// one to its host (valid only during the call; one call at a time).
	OnLateEvent func(query string, ev *ubik.LateEvent)
	// OnBadEvent, if set, receives every input record that was not applied
	// (malformed, or a runtime evaluation error). They are counted either way.
	// It and the late hooks are called once the transaction that read the
	// record commits (one that aborts reads it again), each record once.
	OnBadEvent func(*BadEvent)
	// ClientOpts are appended to every franz-go client (hooks, a logger).
	ClientOpts []kgo.Opt
	// UntilCaughtUp makes Run stop by itself once the input is consumed
	// up to where it ended when Run started: Run records the end (last
	// stable) offset of every source partition; once every partition is
	// consumed up to it, every open window finalizes (the watermark moves
	// to the latest window end, not to +infinity), the transaction
	// carrying the finals commits and Run returns nil (Stats.CaughtUp is
	// then true). Records appended after the start may still be consumed
	// before the stop; one for a window already final is late, as always.
	// A restart with the same query name resumes from the committed
	// offsets and state: it consumes what was appended since (an event for
	// a window finalized earlier is late, one for a later window produces
	// records), so a query stopped earlier (SIGTERM) can be finished this
	// way, and a caught-up query can be caught up again. Meant for one
	// process: with several, each stops once the partitions it owns are
	// done. Default false: run until canceled.
	UntilCaughtUp bool
	// ResetState discards what the query name owns before the run: the
	// consumer groups with their committed offsets, and the internal
	// topics (repartition and state), so the run starts over as a new
	// query would, reading the input from Source.From. The sink topic is
	// kept (its consumers then see revisions start again at 1). Without
	// it, a query name whose state topic records other inputs (query
	// text, source columns, source topic or partition count, sink topic)
	// is refused with ErrBindingMismatch. Default false.
	ResetState bool

	// queryLate, set in a side of a join of two views, is the late hook
	// of the query the join is run for: an interval join's late right
	// rows in the side go to it, as in a file run, where they are the
	// query's (its OnLateTable), not the side's view's.
	queryLate func(*drive.LateEvent)
	// sides, set by the query's outermost join of two views, are the
	// sides its joins made (newSide).
	sides sideSet
}
