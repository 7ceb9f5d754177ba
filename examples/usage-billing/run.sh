#!/usr/bin/env bash
# examples/usage-billing/run.sh: hourly usage billing, end to end, with the
# ubik commands (see README.md in this folder for the story):
#
#   1. generate usage events for 1,000 customers over 6 hours, about 1%
#      retried copies (same event_id and payload, arriving later) and
#      bounded disorder (usage-billing gen, deterministic by seed);
#   2. write every event, copies included, to the usage log on PostgreSQL
#      and on ClickHouse (ubik usage write), and to a Kafka topic, streamed
#      in chunks while the query runs (ubik produce);
#   3. ubik run computes hourly totals per customer from the topic, with
#      early emission and dedup_key = 'event_id' (hourly_usage.sql), into a
#      compacted changelog topic; ubik land --mode history puts every
#      (customer, hour) into Redis as it is published;
#   4. checks, for every (customer, hour), that the final total in Redis
#      equals the usage log's Aggregate([hour, hour + 1h)) exactly, on both
#      backends (ubik usage aggregate --group-by customer --window 1h, the
#      1h windows being [hour, hour + 1h)); and, from a read_committed
#      consumer that follows the changelog topic while the stream runs
#      (usage-billing watch), that every provisional total was at most the
#      final one;
#   5. ubik run computes the hourly charge from the events file: each event
#      at the price its plan had at the event's time (a temporal join with
#      the versioned table prices.jsonl, whose prices change mid-hour), and
#      checks every (customer, hour) charge against the usage log's sums
#      per price interval times the interval's price, exactly, on both
#      backends (usage-billing intervals, ubik usage aggregate --group-by
#      customer --group-by plan, usage-billing check-charge);
#   6. runs the same hourly charge over Kafka (the price versions in a
#      topic), killed with SIGKILL once and resumed, lands it in Redis, and
#      checks every landed charge is the file run's value, byte for byte.
#
# Servers: Kafka ($UBIK_KAFKA_BROKERS), Redis ($UBIK_REDIS_ADDR, database
# $UBIK_USAGE_BILLING_DB, default 14), PostgreSQL ($UBIK_PG_DSN) and
# ClickHouse ($UBIK_CLICKHOUSE_URL), as scripts/services.sh starts them:
#
#   bash scripts/services.sh up redis postgres clickhouse kafka
#   eval "$(bash scripts/services.sh env)"
#   bash examples/usage-billing/run.sh
#
# Every name (query, topics, groups, tables, Redis keys) is unique to the
# run and removed at the end. On failure the work directory is kept.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
NAME=usage-billing
fail() { echo "$NAME: FAIL: $*" >&2; exit 1; }
say() { echo "$NAME: $*"; }

BROKERS=${UBIK_KAFKA_BROKERS:-127.0.0.1:9092}
REDIS=${UBIK_REDIS_ADDR:-127.0.0.1:6379}
REDIS_DB=${UBIK_USAGE_BILLING_DB:-14}
PG_DSN=${UBIK_PG_DSN:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
CH_URL=${UBIK_CLICKHOUSE_URL:-http://127.0.0.1:8123}
CH_STORE=clickhouse://${CH_URL#*://}/default
CUSTOMERS=1000
HOURS=6
FROM=2026-07-18T00:00:00Z
TO=2026-07-18T06:00:00Z
CHUNKS=24

RUN_ID=$(date +%s)_$$
Q=hourly_usage_$RUN_ID
IN_TOPIC=$Q-events
OUT_TOPIC=$Q-totals
LAND_GROUP=$Q-land
QC=hourly_charge_$RUN_ID
PRICE_TOPIC=$QC-prices
CHARGE_TOPIC=$QC-charges
TABLE=usage_$RUN_ID
TMP=$(mktemp -d /tmp/ubik-usage-billing-XXXXXX)
PIDS=()

cleanup() {
	local rc=$? p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ -x "$TMP/usage-billing" ]; then
		"$TMP/usage-billing" cleanup --redis "$REDIS" --db "$REDIS_DB" --query "$Q" \
			--pg "$PG_DSN" --ch "$CH_URL" --table "$TABLE" --brokers "$BROKERS" \
			--topics "$IN_TOPIC,$OUT_TOPIC,$Q-repartition,$Q-state" --groups "$Q,$Q-in,$LAND_GROUP" ||
			echo "$NAME: warning: cleanup was incomplete (see above)" >&2
		"$TMP/usage-billing" cleanup --redis "$REDIS" --db "$REDIS_DB" --query "$QC" --brokers "$BROKERS" --prefix "$QC" ||
			echo "$NAME: warning: cleanup of $QC was incomplete (see above)" >&2
	fi
	if [ $rc -eq 0 ]; then rm -rf "$TMP"; else echo "$NAME: work directory kept: $TMP" >&2; fi
}
trap cleanup EXIT

started=$SECONDS
go build -o "$TMP/ubik" ./cmd/ubik
go build -o "$TMP/usage-billing" ./examples/usage-billing
UBIK=$TMP/ubik
HELP=$TMP/usage-billing

# json_field NAME: the integer field NAME of the JSON object on stdin.
json_field() { grep -oE "\"$1\":[0-9]+" | head -n 1 | cut -d: -f2; }

# 1. The events.
"$HELP" gen --out "$TMP" --customers "$CUSTOMERS" --hours "$HOURS" --seed 1 | sed "s/^/$NAME: /"
distinct=$(cut -d, -f1 "$TMP/events.jsonl" | sort -u | wc -l)
copies=$(($(wc -l <"$TMP/events.jsonl") - distinct))
[ "$copies" -gt 0 ] || fail "the generator made no retried copies"

# 2a. The usage log: every event, copies included, on both backends. The
# log's deduplication key is the event_id (the "key" field).
for store in "postgres:$PG_DSN" "clickhouse:$CH_STORE"; do
	backend=${store%%:*}
	"$UBIK" usage write --store "${store#*:}" --table "$TABLE" --input "$TMP/usage.jsonl" >"$TMP/write.$backend.json" ||
		fail "ubik usage write to $backend: $(cat "$TMP/write.$backend.json")"
	ins=$(json_field inserted <"$TMP/write.$backend.json")
	dup=$(json_field duplicates <"$TMP/write.$backend.json")
	[ "$ins" -eq "$distinct" ] && [ "$dup" -eq "$copies" ] ||
		fail "usage log on $backend: inserted $ins, duplicates $dup; want $distinct and $copies"
	say "usage log ($backend, table $TABLE): $ins events inserted, $dup retried copies recognized as duplicates"
done

# 2b and 3. The stream. The query gets this run's name (it names the
# consumer groups, the internal topics and the Redis keys).
sed "s/^CREATE VIEW hourly_usage AS/CREATE VIEW $Q AS/" examples/usage-billing/hourly_usage.sql >"$TMP/query.sql"
grep -q "CREATE VIEW $Q AS" "$TMP/query.sql" || fail "hourly_usage.sql no longer says CREATE VIEW hourly_usage AS"
"$UBIK" produce --to "kafka://$BROKERS/$IN_TOPIC" --partitions 4 </dev/null 2>"$TMP/produce.log" ||
	fail "ubik produce could not create $IN_TOPIC on $BROKERS: $(cat "$TMP/produce.log")"

"$UBIK" run "$TMP/query.sql" --query "$Q" --source "kafka://$BROKERS/$IN_TOPIC" --sink "kafka://$BROKERS/$OUT_TOPIC" \
	--instance-id "$Q" --log-level warn 2>"$TMP/run.log" &
RUN_PID=$!
PIDS+=("$RUN_PID")
"$HELP" wait-topic --brokers "$BROKERS" --topic "$OUT_TOPIC" || fail "ubik run did not create $OUT_TOPIC: $(cat "$TMP/run.log")"
# A consumer of the changelog, reading every committed record as it comes.
"$HELP" watch --brokers "$BROKERS" --topic "$OUT_TOPIC" --expect $((CUSTOMERS * HOURS)) >"$TMP/watch.out" 2>&1 &
WATCH_PID=$!
PIDS+=("$WATCH_PID")
# The lander, upserting (customer, hour) rows into Redis as they are published.
"$UBIK" land --from "kafka://$BROKERS/$OUT_TOPIC" --to "redis://$REDIS/$REDIS_DB" --mode history \
	--group "$LAND_GROUP" --stats-interval 0 2>"$TMP/land.log" &
LAND_PID=$!
PIDS+=("$LAND_PID")

# The events arrive over a few seconds, in 24 chunks of about 15 minutes
# of event time each, so hours are published early and corrected while
# they are open.
split -n "l/$CHUNKS" -d "$TMP/events.jsonl" "$TMP/chunk."
for chunk in "$TMP"/chunk.*; do
	"$UBIK" produce --to "kafka://$BROKERS/$IN_TOPIC" --key-field customer <"$chunk" 2>>"$TMP/produce.log" ||
		fail "ubik produce: $(tail -n 3 "$TMP/produce.log")"
	kill -0 "$RUN_PID" 2>/dev/null || fail "ubik run stopped: $(tail -n 5 "$TMP/run.log")"
	sleep 0.4
done
say "streamed $(wc -l <"$TMP/events.jsonl") events to $IN_TOPIC in $CHUNKS chunks"

# The last hours stay open until the watermark passes them. In production
# the stream keeps running and the next hours close them; here the stream
# is stopped (SIGTERM: a clean stop) and finished with --until-caught-up,
# which resumes from the committed state, consumes the rest, and finalizes
# every hour.
sleep 1
kill -TERM "$RUN_PID"
# A Kafka run is a service: a clean stop by SIGTERM exits 0 with a
# "stopped" summary.
rc=0
wait "$RUN_PID" || rc=$?
[ "$rc" -eq 0 ] && grep -q 'stopped (terminated by SIGTERM)' "$TMP/run.log" ||
	fail "ubik run did not stop cleanly (exit $rc): $(tail -n 5 "$TMP/run.log")"
timeout 120 "$UBIK" run "$TMP/query.sql" --query "$Q" --source "kafka://$BROKERS/$IN_TOPIC" --sink "kafka://$BROKERS/$OUT_TOPIC" \
	--instance-id "$Q" --log-level warn --until-caught-up 2>"$TMP/run-final.log" ||
	fail "ubik run --until-caught-up failed or did not stop: $(tail -n 5 "$TMP/run-final.log")"
grep -q ', caught up' "$TMP/run-final.log" || fail "ubik run --until-caught-up did not catch up: $(cat "$TMP/run-final.log")"
say "ubik run: $(grep -h 'events consumed' "$TMP/run.log" "$TMP/run-final.log" | sed 's/^ubik: [^:]*: //' | paste -sd ';' | sed 's/;/; then /')"

wait "$WATCH_PID" || fail "the changelog watcher: $(cat "$TMP/watch.out")"
say "$(cat "$TMP/watch.out")"

# Everything is landed once Redis holds the final row of every (customer,
# hour): nothing follows a final record. The lander is then stopped
# (SIGTERM: a clean stop; what landed is committed). (`ubik land
# --until-caught-up` cannot be used to stop it: on a transactional topic,
# which every ubik changelog is, it waits for an offset past the trailing
# commit marker that a consumer never reaches. Reported.)
"$HELP" wait-store --redis "$REDIS" --db "$REDIS_DB" --query "$Q" --expect $((CUSTOMERS * HOURS)) ||
	fail "ubik land did not land every final row: $(tail -n 5 "$TMP/land.log")"
kill -TERM "$LAND_PID"
wait "$LAND_PID" || fail "ubik land: $(tail -n 5 "$TMP/land.log")"
say "ubik land: $(grep 'done:' "$TMP/land.log" | sed 's/.*done: //')"

# 4. The check against the usage log, on both backends.
for store in "postgres:$PG_DSN" "clickhouse:$CH_STORE"; do
	backend=${store%%:*}
	"$UBIK" usage aggregate --store "${store#*:}" --table "$TABLE" --meter gb_processed --from "$FROM" --to "$TO" \
		--group-by customer --window 1h >"$TMP/log.$backend.json" || fail "ubik usage aggregate on $backend failed"
done
"$HELP" check --redis "$REDIS" --db "$REDIS_DB" --query "$Q" --events "$TMP/events.jsonl" \
	--customers "$CUSTOMERS" --hours "$HOURS" --log "$TMP/log.postgres.json" --log "$TMP/log.clickhouse.json" |
	sed "s/^/$NAME: /"

# 5. The hourly charge, from the events file, by a copy of the script in
# the folder of prices.jsonl (the table's path, relative to the script's
# folder). The same dedup key keeps a retried copy from being charged
# twice.
cp examples/usage-billing/hourly_usage.sql "$TMP/hourly_usage.sql"
(cd "$TMP" && "$UBIK" run hourly_usage.sql --query hourly_charge --input events.jsonl \
	--output charge.jsonl --format jsonl 2>"$TMP/charge.log") || fail "ubik run hourly_charge: $(tail -n 5 "$TMP/charge.log")"
say "ubik run hourly_charge: $(sed 's/^ubik: [^:]*: //' "$TMP/charge.log")"
# The batch computation: the usage log's sums per (customer, plan) over
# every piece of an hour in which no price changes.
"$HELP" intervals --prices "$TMP/prices.jsonl" --from "$FROM" --to "$TO" >"$TMP/intervals.txt"
for store in "postgres:$PG_DSN" "clickhouse:$CH_STORE"; do
	backend=${store%%:*}
	: >"$TMP/pieces.$backend.txt"
	i=0
	while read -r a b; do
		f=$TMP/piece.$backend.$i.json
		"$UBIK" usage aggregate --store "${store#*:}" --table "$TABLE" --meter gb_processed --from "$a" --to "$b" \
			--group-by customer --group-by plan >"$f" || fail "ubik usage aggregate [$a, $b) on $backend failed"
		echo "$a $b $f" >>"$TMP/pieces.$backend.txt"
		i=$((i + 1))
	done <"$TMP/intervals.txt"
done

# 6. The same hourly charge over Kafka: the events from the events topic,
# the price versions from a topic keyed by plan (the table declared with
# connector = 'kafka'), exactly once. The first run is killed with SIGKILL
# a moment after it starts; the second resumes from the committed state
# and, with --until-caught-up, consumes the rest and finalizes every hour.
# ubik land puts the charges into Redis.
sed -e "s/^CREATE VIEW hourly_charge AS/CREATE VIEW $QC AS/" \
	-e "s/WITH (format = 'jsonl', path = 'prices.jsonl');/WITH (connector = 'kafka', topic = '$PRICE_TOPIC');/" \
	examples/usage-billing/hourly_usage.sql >"$TMP/charge.sql"
grep -q "CREATE VIEW $QC AS" "$TMP/charge.sql" && grep -q "topic = '$PRICE_TOPIC'" "$TMP/charge.sql" ||
	fail "hourly_usage.sql no longer says CREATE VIEW hourly_charge AS, or the prices table's WITH changed"
"$UBIK" produce --to "kafka://$BROKERS/$PRICE_TOPIC" --partitions 2 --key-field plan <"$TMP/prices.jsonl" 2>"$TMP/produce-prices.log" ||
	fail "ubik produce prices: $(tail -n 3 "$TMP/produce-prices.log")"
"$UBIK" run "$TMP/charge.sql" --query "$QC" --source "kafka://$BROKERS/$IN_TOPIC" --sink "kafka://$BROKERS/$CHARGE_TOPIC" \
	--instance-id "$QC" --log-level warn 2>"$TMP/charge-run.log" &
RUN_PID=$!
PIDS+=("$RUN_PID")
sleep "$((RANDOM % 3 + 1)).$((RANDOM % 10))"
kill -KILL "$RUN_PID" 2>/dev/null || fail "ubik run $QC stopped before it was killed: $(tail -n 5 "$TMP/charge-run.log")"
wait "$RUN_PID" 2>/dev/null || true
timeout 180 "$UBIK" run "$TMP/charge.sql" --query "$QC" --source "kafka://$BROKERS/$IN_TOPIC" --sink "kafka://$BROKERS/$CHARGE_TOPIC" \
	--instance-id "$QC" --log-level warn --until-caught-up 2>"$TMP/charge-run-final.log" ||
	fail "ubik run $QC --until-caught-up failed or did not stop: $(tail -n 5 "$TMP/charge-run-final.log")"
grep -q ', caught up' "$TMP/charge-run-final.log" || fail "ubik run $QC --until-caught-up did not catch up: $(cat "$TMP/charge-run-final.log")"
say "ubik run $QC over Kafka (killed once): $(grep -h 'events consumed' "$TMP/charge-run-final.log" | sed 's/^ubik: [^:]*: //')"
"$UBIK" land --from "kafka://$BROKERS/$CHARGE_TOPIC" --to "redis://$REDIS/$REDIS_DB" --mode history \
	--group "$QC-land" --stats-interval 0 2>"$TMP/charge-land.log" &
LAND_PID=$!
PIDS+=("$LAND_PID")
"$HELP" wait-store --redis "$REDIS" --db "$REDIS_DB" --query "$QC" --expect $((CUSTOMERS * HOURS)) ||
	fail "ubik land did not land every final charge: $(tail -n 5 "$TMP/charge-land.log")"
kill -TERM "$LAND_PID"
wait "$LAND_PID" || fail "ubik land: $(tail -n 5 "$TMP/charge-land.log")"

"$HELP" check-charge --charges "$TMP/charge.jsonl" --redis "$REDIS" --db "$REDIS_DB" --query "$QC" \
	--prices "$TMP/prices.jsonl" --customers "$CUSTOMERS" --hours "$HOURS" \
	--logs "$TMP/pieces.postgres.txt" --logs "$TMP/pieces.clickhouse.txt" | sed "s/^/$NAME: /"
say "ok in $((SECONDS - started))s"
