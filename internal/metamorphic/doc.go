// Package metamorphic is a metamorphic test harness of the whole engine,
// after Pebble's: one generated history is run under many configurations
// and hosts, and every run's final changelog must be byte-identical.
//
// A case (Generate, by seed) is a query over one schema (Source) and a
// history of events whose cells are adversarial: 0.0 and -0.0 in several
// spellings, NaN and ±Infinity in every spelling the decoder accepts (NaN,
// -NaN, Infinity, -inf, 1e400, ...), NULL and missing fields, invalid
// UTF-8 bytes, JSON values with different escapes and whitespace (a
// string "Bo\u00e9" and "Boé", an object with spaces and tabs), field
// order shuffled, duplicates of recent events (the source's dedup_key),
// and disorder within the watermark delay. The query is one of TUMBLE,
// HOP, SESSION or a continuous view; grouped by g and optionally by x and
// payload->'k'; over count, sum, min/max, avg, count DISTINCT and
// approx_count_distinct; EMIT FINAL or EMIT EARLY; sometimes HAVING.
// A view case (GenerateView) reads the generated query, made a TUMBLE or
// HOP with EMIT FINAL, through a second query that groups the view's
// final rows again by the same cells (a query over a view). An
// interval-join case (GenerateIntervalJoin) joins that view with a
// second view of the source on g, their window starts within a bound,
// and regroups the joined rows by the left view's cells over either
// side's window start. Both take every path below, Kafka included
// (TestViewPaths, TestIntervalJoinPaths; in process TestViewInProcess,
// TestIntervalJoinInProcess): over Kafka a view case runs as a chain in
// each partition, an interval-join case as a join of two views (each
// side a pipeline of its own, the join stage over their repartition
// topic; its GROUP BY names the join column a.g). Each view publishes
// its changelog to a topic of its own (the sink's name, a dash and the
// view's), and every view's finals are compared too, with the view run
// alone in process (Case.ViewCase). A regroup case
// (GenerateViewRegroup) is a view case whose reader groups by a strict
// subset of the view's cells, down to none: over Kafka the chain is cut
// at the reader (a view repartition by the reader's key).
//
// Join cases have a second input (Case.Second, SecondLines, and
// SecondAt: where each of its rows is pushed among the events in
// process): a temporal join (GenerateTemporalJoin: JOIN or LEFT JOIN of
// a versioned table with random versions per key, keys spelled as the
// stream's g is, some rows late, the table ahead of the stream or behind
// it so that events wait for its watermark; grouped by the join key or
// by a table column) and an interval join of two streams
// (GenerateStreamJoin: grouped by the join key, x or payload->'k'). In
// process the rows are interleaved with the events as SecondAt says
// (batches, bounds, restores and crashes as for any case); the C ABI and
// Python hosts push them with ubik_push_input / push_input between
// batches; the file run reads them from the declaration's path, the
// table first; Kafka from a second topic keyed by g (a table topic by
// its primary key) on another partition count than the source's. A late
// table row is at least 1.5 s behind its own key's newest row and every
// other row of the table or the right stream is within 0.8 s of its
// input's newest (the delays are 1 s); every event of the stream is
// within 1.8 s of the newest event before it (the delay is 2 s; a
// join's source has no dedup key, so a retry is an event again, and a
// retry further behind is left out). So what is late is the same in
// every order and partitioning the paths read, and the reference must
// count no late stream row at the join (asserted on every case). A
// direct Kafka run of a join is refused by ubik run (the second input
// reaches the partitions through the repartition topic) and asserted to
// be, with its words.
//
// A temporal-join view case (GenerateTemporalJoinView) reads the
// temporal join through a view the same way (10-second EMIT FINAL view,
// 30-second reader by the view's cell or by none); over Kafka the
// chain's root keeps the table stage, and a view grouped by a table
// column has its joined rows repartitioned (TestTemporalJoinViewInProcess,
// TestJoinPaths/temporalview).
//
// A stream-join view case (GenerateStreamJoinView) reads the interval
// join of two streams through a view: the join, counted in 10-second
// windows with EMIT FINAL, is the view, and the query regroups its final
// rows in 30-second windows by the view's cell or by none. The graph's
// root is then the join, fed by both inputs on every path; over Kafka
// the chain's root is the join of the two topics
// (TestStreamJoinViewInProcess, TestJoinPaths/streamview).
//
// A two-source view-join case (GenerateViewJoinSources) is an
// interval-join case whose right view reads a second source with a dedup
// key (each row an id, some sent twice), pushed as a join's second input
// is. Over Kafka its left view, grouped by g alone, runs in the join's
// stage with the right one (both sources deduplicated there, the second
// through its own dedup stage), else as a side; read by key, it runs too.
//
// A shape Kafka refuses (kafka.CheckQuery) skips the Kafka path, and only
// such a shape: ubik run must refuse it with CheckQuery's words; the
// tests count the cases that took the Kafka path and fail when none did.
//
// The same case runs:
//   - in process through the root API (RunInProcess): unbatched with a
//     callback (the reference), batch sizes 1, 7 and 1000 pulled with Next
//     under random MaxPendingRecords bounds, and runs that checkpoint, drop
//     the query, start a new one and restore it at random events (full and
//     incremental checkpoints); and on 2 to 4 threads (QueryOptions.Threads,
//     restores starting the query on another count), pushed with Push or
//     fed with Feed in blocks of 1, 7, 4096 or a random number of events
//     that the threads decode (QueryOptions.BlockEvents), each compared
//     record by record with the same configuration on one thread
//     (SameChangelog);
//   - through the C ABI (testdata/capi_host.c against libubik.so built with
//     -buildmode=c-shared; ubik_push and ubik_push_lines) and Python
//     (testdata/py_host.py over python/ubik; byte events and dict events);
//   - with `ubik run --state-dir` killed with SIGKILL at random points of
//     its progress and rerun until it finishes;
//   - over Kafka: `ubik run --source kafka://... --sink kafka://...`
//     against the broker of scripts/services.sh with 1, 3 and 4 source
//     partitions, repartitioned and direct (--partitioned-by-key over a
//     topic keyed by the engine's group key of g), killed with SIGKILL
//     and run again with --until-caught-up; the sink (a delete-policy
//     topic, so compaction removes nothing) is read back read_committed.
//
// On every path each key's revisions go 1, 2, 3, ..., no record follows a
// key's final one, each (group, window) has exactly one final record, and
// (without HAVING) a key's count never goes down; the final records (a
// continuous view: the last record per key) must equal the reference's,
// key bytes and value bytes, and so must the malformed and duplicate
// counts where the path reports them. The batch oracle (PostgreSQL) checks
// the reference itself: TestMetamorphicOracle in the root package loads
// the generated events' values into it. That two rows share a group
// exactly when their key bytes are equal is exec's
// TestGroupIdentityProperty.
//
// A failure names the seed and the path. Replay a seed through every path:
//
//	UBIK_METAMORPHIC_SEED=123 go test -run TestPaths ./internal/metamorphic/
//
// which replays the case of the kind the long run draws for the seed
// (generateKind: by its last digit, 0-4 plain, 5 view, 6 regroup, 7
// interval join of views, 8 temporal join, 9 interval join of two
// streams; 4 with an odd tens digit a view of an interval join of two
// streams). -run TestViewPaths, TestIntervalJoinPaths or
// TestJoinPaths/temporal (/stream, /regroup, /streamview) replays the
// seed as that kind, all six Kafka runs.
//
// The short version runs with `go test` (scripts/test.sh, which starts the
// broker; an unreachable broker fails the test). The long version
// generates cases of every kind for a while, minimizes each failure on
// the path that failed (a join case's events and second input's rows
// alike) and writes it to a directory:
//
//	eval "$(bash scripts/services.sh env)"
//	UBIK_METAMORPHIC=long UBIK_METAMORPHIC_DURATION=30m UBIK_METAMORPHIC_FOUND=/tmp/found \
//	  go test -v -timeout 90m -run TestPaths ./internal/metamorphic/
//
// A found case goes into testdata/corpus/ (the file format is ReadCase's);
// every CI run replays the corpus.
package metamorphic
