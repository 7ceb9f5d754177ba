#!/usr/bin/env bash
# dual_landing_broker.sh: one query over one input, landed into Redis twice,
# must give byte-identical stores (the key contract: in process or through a broker, the same key bytes):
#
#   A. in process: the Python binding over libubik.so (the C ABI) runs the
#      query and lands every record of ubik_next_keyed into Redis db A;
#   B. through Kafka: the input is loaded into a topic with `ubik produce`,
#      `ubik run --source kafka://... --sink kafka://...` runs the query to
#      a compacted changelog topic, and `ubik land --mode latest|continuous`
#      lands that topic into Redis db B.
#
# It asserts that the topic's records equal the in-process records, record
# for record (key bytes, value bytes, final, revision, window start), and
# that db A equals db B byte for byte (every key, every hash field). It does
# so for a windowed query landed latest-per-group, and for a continuous
# view with HAVING landed by its key.
#
# Why the comparison means something:
# - Both landings write through the same code: the Redis function
#   `ubik_land_v2` that land/redislander loads (here by `e2etool
#   redis-function`, which constructs a redislander.Lander, exactly what
#   `ubik land` does at start). Path A calls it with FCALL per record, with
#   the lander's identity (query ":" group key, the group key from the C
#   ABI's ubik_meta.group_key) and its arguments; path B's lander derives
#   the identity itself from the topic's key and headers (land.Prepare).
#   So a difference in the stores can only come from the bytes and metadata
#   each path delivers: the key, the group key, the value, window start,
#   revision, final. Those are what is under test.
# - The windowed query emits early (EMIT EARLY, with IS_FINAL() and
#   REVISION() in the value) and the data makes the guard matter: a
#   merchant's next minute is published before its previous minute's final
#   record, so a landing without the (window_start, revision) guard would
#   move that merchant back to the previous minute. The script asserts that
#   there are early records, corrections (revision > 1), and guard
#   rejections on both paths; and that replaying the whole topic into db B
#   again (a new consumer group) lands nothing and changes no byte. Two late
#   events are counted, not applied, on both paths.
# - Early emission runs on processing time, so the two paths agree record
#   for record only if they publish at the same points. Path A publishes
#   after every event (push, then flush). Path B is driven in lockstep: the
#   events are produced one at a time to a running `ubik run`, and the next
#   is produced only once the changelog topic holds exactly the records
#   path A produced up to this event (more fails at once). Then `ubik run`
#   is stopped (SIGTERM, a clean stop) and run again with
#   --until-caught-up, which resumes from the committed state and finalizes
#   every window, as path A's close does.
# - The changelog topic is a plain (delete-policy) topic, created with
#   `ubik produce`, and `ubik run` is told --allow-uncompacted-sink: the
#   test reads every record of it, and on a compacted topic (the broker of
#   scripts/services.sh compacts every second) a superseded early record
#   disappears, which is the point of compaction but leaves nothing to
#   compare record for record. The lander does not depend on it.
#
# Servers: Redis ($UBIK_REDIS_ADDR) and the shared broker from
# scripts/services.sh ($UBIK_KAFKA_BROKERS). Every topic, consumer group and
# query name is unique to the run, and deleted at the end; Redis dbs 12 and
# 13 (UBIK_DUAL_DB_A, UBIK_DUAL_DB_B; no Go test uses them) are emptied at
# the start of each case and at the end. On failure the work directory is
# kept and named.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
NAME=dual_landing_broker
fail() { echo "$NAME: FAIL: $*" >&2; exit 1; }
say() { echo "$NAME: $*"; }

BROKERS=${UBIK_KAFKA_BROKERS:-127.0.0.1:9092}
REDIS=${UBIK_REDIS_ADDR:-127.0.0.1:6379}
DB_A=${UBIK_DUAL_DB_A:-12}
DB_B=${UBIK_DUAL_DB_B:-13}
[ "$DB_A" != "$DB_B" ] || fail "UBIK_DUAL_DB_A and UBIK_DUAL_DB_B are both $DB_A"
RUN_ID=$(date +%s)_$$
TMP=$(mktemp -d /tmp/ubik-dual-XXXXXX)
PIDS=()
TOPICS=()
KGROUPS=()
HELPER=test/e2e/dual_landing.py

cleanup() {
	local rc=$? p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ -x "$TMP/e2etool" ] && [ ${#TOPICS[@]} -gt 0 ]; then
		"$TMP/e2etool" delete "$BROKERS" "$(IFS=,; echo "${TOPICS[*]}")" "$(IFS=,; echo "${KGROUPS[*]}")" ||
			echo "$NAME: warning: could not delete the run's topics and groups" >&2
	fi
	python3 "$HELPER" flush "$REDIS" "$DB_A" >/dev/null 2>&1 || true
	python3 "$HELPER" flush "$REDIS" "$DB_B" >/dev/null 2>&1 || true
	if [ $rc -eq 0 ]; then rm -rf "$TMP"; else echo "$NAME: work directory kept: $TMP" >&2; fi
}
trap cleanup EXIT

started=$SECONDS
go build -o "$TMP/ubik" ./cmd/ubik
go build -o "$TMP/e2etool" ./test/e2e/e2etool
UBIK_BUILD_DIR=$TMP/lib bash capi/build.sh >/dev/null
UBIK=$TMP/ubik
TOOL=$TMP/e2etool
export UBIK_LIB=$TMP/lib/libubik.so PYTHONPATH=$ROOT/python

"$TOOL" ping "$BROKERS" || fail "no Kafka broker at $BROKERS"
# The lander's function, loaded as `ubik land` loads it (this also fails
# clearly when Redis is unreachable).
"$TOOL" redis-function "$REDIS" || fail "cannot load the lander's function into Redis at $REDIS"

# wait_count TOPIC WANT PID: wait until TOPIC holds exactly WANT records
# (read_committed). More is a failure at once, as is PID exiting.
wait_count() {
	local topic=$1 want=$2 pid=$3 got=0 i
	for i in $(seq 1 300); do
		got=$("$TOOL" count "$BROKERS" "$topic" 2>/dev/null || echo 0)
		[ "$got" -eq "$want" ] && return 0
		[ "$got" -gt "$want" ] && fail "$topic holds $got records, the in-process run had $want at this point"
		kill -0 "$pid" 2>/dev/null || fail "ubik run exited early: $(tail -n 5 "$RUN_LOG")"
		sleep 0.1
	done
	fail "$topic holds $got records after 30s, the in-process run had $want at this point"
}

# land_topic SINK_URL DB MODE GROUP LOG: `ubik land` the changelog topic
# into Redis db DB and return once everything is landed and committed.
# `ubik land --until-caught-up` alone never returns on a transactional
# topic (every ubik changelog topic is one): it compares the group's
# committed offsets with the end offsets, and the trailing commit marker
# keeps the committed offset one below the end. Until that is fixed, the
# script waits for the group to commit past the last record, then stops the
# lander with SIGTERM (a clean stop: what landed is committed). Once fixed,
# the lander exits by itself and the same code still works.
land_topic() {
	local sink=$1 db=$2 mode=$3 group=$4 log=$5 topic=${1##*/}
	"$UBIK" land --from "$sink" --to "redis://$REDIS/$db" --mode "$mode" --group "$group" \
		--until-caught-up --stats-interval 0 2>"$log" &
	local pid=$!
	PIDS+=("$pid")
	"$TOOL" wait-landed "$BROKERS" "$topic" "$group" || fail "ubik land did not land $topic: $(tail -n 5 "$log")"
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" || fail "ubik land into db $db failed: $(tail -n 5 "$log")"
}

# sum_logs WORD FILE...: the sum of the numbers before WORD in the ubik run
# summaries in FILEs (missing files count as none).
sum_logs() {
	local word=$1 f
	shift
	for f in "$@"; do
		if [ -f "$f" ]; then grep -oE "[0-9]+ $word" "$f" || true; fi
	done | awk '{n += $1} END {print n + 0}'
}

# field NAME TEXT: the number after NAME= (or "NAME ") in TEXT.
field() { grep -oE "$1[= ][0-9]+" <<<"$2" | tail -n 1 | grep -oE '[0-9]+$'; }

# run_case CASE MODE SQL INPUT STREAM: the query in SQL must be named
# dual_CASE_RUNID. STREAM=yes drives path B in lockstep (an EMIT EARLY
# query); no produces the whole input first (EMIT CHANGES needs no clock).
run_case() {
	local case=$1 mode=$2 sql=$3 input=$4 stream=$5
	local q=dual_${case}_${RUN_ID}
	RUN_LOG=$TMP/$case.run.log
	local in_topic=$q-in out_topic=$q-out group=ubik-land.$q-out.redis.$mode
	TOPICS+=("$in_topic" "$out_topic" "$q-repartition" "$q-state")
	KGROUPS+=("$q" "$q-in" "$group" "$group-replay")
	say "== $case ($mode): query $q"
	python3 "$HELPER" flush "$REDIS" "$DB_A"
	python3 "$HELPER" flush "$REDIS" "$DB_B"

	# A: in process.
	local summary
	summary=$(python3 "$HELPER" inprocess "$sql" "$input" "$mode" "$REDIS" "$DB_A" "$TMP/$case.inprocess.tsv" "$TMP/$case.counts") ||
		fail "$case: the in-process run failed"
	local total
	total=$(wc -l <"$TMP/$case.inprocess.tsv")
	[ "$total" -gt 5 ] || fail "$case: only $total records in process"

	# B: through Kafka. One input partition, so the changelog topic has one
	# partition and one order to compare.
	local src=kafka://$BROKERS/$in_topic sink=kafka://$BROKERS/$out_topic
	local t
	for t in "$src" "$sink"; do
		"$UBIK" produce --to "$t" --partitions 1 </dev/null 2>>"$TMP/produce.log" || fail "$case: ubik produce: $(tail -n 3 "$TMP/produce.log")"
	done
	if [ "$stream" = yes ]; then
		"$UBIK" run "$sql" --source "$src" --sink "$sink" --instance-id "$q" --log-level error --allow-uncompacted-sink 2>"$TMP/$case.run.log" &
		local run_pid=$!
		PIDS+=("$run_pid")
		local expected=0 k=0 n line
		while IFS= read -r line; do
			k=$((k + 1))
			n=$(sed -n "${k}p" "$TMP/$case.counts")
			printf '%s\n' "$line" | "$UBIK" produce --to "$src" --partitions 1 2>>"$TMP/produce.log" ||
				fail "$case: ubik produce: $(tail -n 3 "$TMP/produce.log")"
			expected=$((expected + n))
			wait_count "$out_topic" "$expected" "$run_pid"
		done <"$input"
		[ "$k" -gt 0 ] || fail "$case: empty input"
		# Nothing more may come (no early emission without a change).
		sleep 1
		wait_count "$out_topic" "$expected" "$run_pid"
		kill -TERM "$run_pid"
		# A Kafka run is a service: a clean stop by SIGTERM exits 0 with
		# a "stopped" summary.
		rc=0
		wait "$run_pid" || rc=$?
		[ "$rc" -eq 0 ] && grep -q 'stopped (terminated by SIGTERM)' "$TMP/$case.run.log" ||
			fail "$case: ubik run did not stop cleanly on SIGTERM (exit $rc): $(tail -n 5 "$TMP/$case.run.log")"
		say "   streamed $k events in lockstep: $expected records, as in process"
	else
		"$UBIK" produce --to "$src" --partitions 1 <"$input" 2>>"$TMP/produce.log" || fail "$case: ubik produce: $(tail -n 3 "$TMP/produce.log")"
	fi
	timeout 120 "$UBIK" run "$sql" --source "$src" --sink "$sink" --instance-id "$q" --log-level error --allow-uncompacted-sink --until-caught-up \
		2>"$TMP/$case.run-final.log" || fail "$case: ubik run --until-caught-up failed or did not stop: $(tail -n 5 "$TMP/$case.run-final.log")"
	grep -q ', caught up' "$TMP/$case.run-final.log" || fail "$case: ubik run --until-caught-up exited without catching up: $(cat "$TMP/$case.run-final.log")"
	[ "$("$TOOL" count "$BROKERS" "$out_topic")" -eq "$total" ] ||
		fail "$case: $out_topic holds $("$TOOL" count "$BROKERS" "$out_topic") records, the in-process run $total"

	"$TOOL" dump "$BROKERS" "$out_topic" >"$TMP/$case.topic.tsv"
	if ! cmp -s "$TMP/$case.inprocess.tsv" "$TMP/$case.topic.tsv"; then
		diff "$TMP/$case.inprocess.tsv" "$TMP/$case.topic.tsv" | head -n 10 >&2
		fail "$case: the changelog topic differs from the in-process records (key, value, final, revision, window start)"
	fi
	say "   $total records identical in process and on the topic: key, value, final, revision, window start"

	land_topic "$sink" "$DB_B" "$mode" "$group" "$TMP/land.log"
	local landed
	landed=$(grep 'done:' "$TMP/land.log") || fail "$case: ubik land printed no final counters: $(cat "$TMP/land.log")"

	local a b
	a=$(python3 "$HELPER" dump "$REDIS" "$DB_A" "$TMP/$case.A")
	b=$(python3 "$HELPER" dump "$REDIS" "$DB_B" "$TMP/$case.B")
	[ "$(wc -l <"$TMP/$case.A")" -gt 5 ] || fail "$case: db $DB_A holds almost nothing ($a)"
	cmp -s "$TMP/$case.A" "$TMP/$case.B" ||
		fail "$case: Redis db $DB_A (in process, $a) and db $DB_B (Kafka + ubik land, $b) differ (see $TMP/$case.A and .B)"
	say "   Redis db $DB_A (in process) = db $DB_B (Kafka + ubik land): $a, byte for byte"
	say "   in process: $summary"
	say "   ubik land: ${landed#*done: }"

	# A replay of the whole topic (another consumer group) lands nothing:
	# every record is a duplicate or superseded, and no byte changes.
	land_topic "$sink" "$DB_B" "$mode" "$group-replay" "$TMP/replay.log"
	local replay
	replay=$(grep 'done:' "$TMP/replay.log") || fail "$case: ubik land (replay) printed no final counters"
	[ "$(field landed "$replay")" -eq 0 ] || fail "$case: a replay landed records: ${replay#*done: }"
	python3 "$HELPER" dump "$REDIS" "$DB_B" "$TMP/$case.B2" >/dev/null
	cmp -s "$TMP/$case.B" "$TMP/$case.B2" || fail "$case: a replay of the topic changed db $DB_B"
	say "   replayed the topic into db $DB_B: ${replay#*done: }; no byte changed"

	local malformed
	malformed=$(sum_logs malformed "$TMP/$case.run.log" "$TMP/$case.run-final.log")
	[ "$malformed" -eq "$(field malformed "$summary")" ] ||
		fail "$case: ubik run counted $malformed malformed events, the in-process run $(field malformed "$summary")"
	if [ "$mode" = latest ]; then
		local early corr sup lsup late
		early=$(field early "$summary")
		corr=$(field corrections "$summary")
		sup=$(field superseded "$summary")
		lsup=$(field superseded "$landed")
		late=$(sum_logs late "$TMP/$case.run.log" "$TMP/$case.run-final.log")
		[ "$early" -gt 0 ] || fail "$case: no early records: the guard was not exercised"
		[ "$corr" -gt 0 ] || fail "$case: no corrections (revision > 1)"
		[ "$sup" -gt 0 ] || fail "$case: the guard rejected nothing in process"
		[ "$lsup" -gt 0 ] || fail "$case: ubik land superseded nothing"
		[ "$late" -eq 2 ] || fail "$case: ubik run counted $late late events, want 2"
		[ "$(field late "$summary")" -eq 2 ] || fail "$case: the in-process run counted $(field late "$summary") late events, want 2"
	fi
}

python3 "$HELPER" gen "$TMP/windowed.jsonl"
cat >"$TMP/windowed.sql" <<EOF
-- Per-merchant one-minute totals, published early and settled by the watermark.
CREATE SOURCE events (
  event_id VARCHAR, merchant VARCHAR, customer VARCHAR, amount DOUBLE, event_time TIMESTAMP,
  WATERMARK FOR event_time AS event_time - INTERVAL '5' SECOND
) WITH (format = 'jsonl');

CREATE VIEW dual_totals_$RUN_ID AS
SELECT merchant, TUMBLE_START(event_time, INTERVAL '1' MINUTE) AS window_start,
       count(*) AS orders, sum(amount) AS total, max(amount) AS biggest,
       IS_FINAL() AS settled, REVISION() AS revision
FROM events
GROUP BY merchant, TUMBLE(event_time, INTERVAL '1' MINUTE)
EMIT EARLY EVERY INTERVAL '200' MILLISECOND;
EOF
sed "s/CREATE VIEW spenders AS/CREATE VIEW dual_spenders_$RUN_ID AS/" capi/testdata/view_having.sql >"$TMP/continuous.sql"
grep -q "dual_spenders_$RUN_ID" "$TMP/continuous.sql" || fail "capi/testdata/view_having.sql no longer names its view spenders"

run_case totals latest "$TMP/windowed.sql" "$TMP/windowed.jsonl" yes
run_case spenders continuous "$TMP/continuous.sql" examples/events.jsonl no
say "ok in $((SECONDS - started))s"
