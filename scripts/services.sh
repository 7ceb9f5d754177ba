#!/usr/bin/env bash
# services.sh: bring up, tear down and describe the real servers ubik's tests
# use (Redis, PostgreSQL, ClickHouse, DynamoDB via dynalite, Kafka via
# cmd/ubik-broker), idempotently.
#
#   scripts/services.sh up [redis|postgres|clickhouse|dynamodb|kafka|all]...
#   scripts/services.sh down [service]...   stops only what this script started,
#                                           and only once no other user holds a lease
#   scripts/services.sh env                 prints the UBIK_* export lines
#   scripts/services.sh status
#
# "up" reuses a server that already answers on its port, installs what is
# missing (Debian packages, npm ci in scripts/dynalite) and starts the rest,
# each with a pidfile under $UBIK_SERVICES_STATE/run; "down" stops exactly
# the processes recorded there. Nothing else is ever stopped.
#
# Leases: "up" records a lease for the calling process ($PPID, or
# UBIK_SERVICES_LEASE) under $UBIK_SERVICES_STATE/leases; "down" drops the
# caller's lease and stops nothing while another live process holds one, so
# two test runs sharing the servers cannot stop them under each other.
#
# Settings (environment, with defaults):
#   UBIK_SERVICES_STATE=/tmp/ubik-services   state dir: pidfiles, data, logs
#   UBIK_SERVICES_TIMEOUT=180                seconds to wait for readiness
#   UBIK_REDIS_PORT=6379  UBIK_PG_PORT=5432  UBIK_DYNAMODB_PORT=8000
#   UBIK_CLICKHOUSE_HTTP_PORT=8123  UBIK_CLICKHOUSE_TCP_PORT=9000
#   UBIK_KAFKA_PORT=9092  UBIK_KAFKA_DATA_DIR=  (empty: the broker keeps
#   its log in memory)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=${UBIK_SERVICES_STATE:-/tmp/ubik-services}
TIMEOUT=${UBIK_SERVICES_TIMEOUT:-180}
HOST=127.0.0.1
REDIS_PORT=${UBIK_REDIS_PORT:-6379}
PG_PORT=${UBIK_PG_PORT:-5432}
CH_HTTP_PORT=${UBIK_CLICKHOUSE_HTTP_PORT:-8123}
CH_TCP_PORT=${UBIK_CLICKHOUSE_TCP_PORT:-9000}
DYNAMO_PORT=${UBIK_DYNAMODB_PORT:-8000}
KAFKA_PORT=${UBIK_KAFKA_PORT:-9092}
KAFKA_DATA_DIR=${UBIK_KAFKA_DATA_DIR:-}
RUN=$STATE/run
LEASES=$STATE/leases
LEASE=${UBIK_SERVICES_LEASE:-$PPID}
ALL=(redis postgres clickhouse dynamodb kafka)

log() { printf 'services.sh: %s\n' "$*" >&2; }
die() { printf 'services.sh: error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- helpers

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_pkgs PKG...: apt-get install the missing ones; apt-get update only
# when something is missing.
ensure_pkgs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	log "installing ${missing[*]}"
	as_root apt-get -o DPkg::Lock::Timeout=120 update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 \
		install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# wait_until NAME LOGFILE CHECK...: poll CHECK until it succeeds, or fail
# naming the service and its log.
wait_until() {
	local name=$1 logfile=$2
	shift 2
	local deadline=$((SECONDS + TIMEOUT))
	until "$@"; do
		if [ $SECONDS -ge $deadline ]; then
			log "$name did not become ready within ${TIMEOUT}s; its log is $logfile"
			[ -f "$logfile" ] && tail -n 20 "$logfile" >&2
			exit 1
		fi
		sleep 0.2
	done
}

# alive PID: the process exists and is not a zombie (a dead child can
# answer kill -0 for a while).
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[ -n "$st" ] && [[ $st != Z* ]]
}

# record NAME PID: remember that this script started NAME as PID.
record() { mkdir -p "$RUN" && echo "$2" >"$RUN/$1.pid"; }

started() { [ -f "$RUN/$1.pid" ]; }

# stop_pid NAME PID: SIGTERM, wait, then SIGKILL.
stop_pid() {
	local name=$1 pid=$2 i
	alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 1 100); do
		alive "$pid" || return 0
		sleep 0.2
	done
	log "$name (pid $pid) ignored SIGTERM for 20s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
}

# --------------------------------------------------------------- redis

redis_ok() {
	local reply
	reply=$( (exec 3<>"/dev/tcp/$HOST/$REDIS_PORT" && printf 'PING\r\n' >&3 && IFS= read -r -t 2 line <&3 && printf '%s' "$line") 2>/dev/null) || return 1
	[[ $reply == +PONG* ]]
}

up_redis() {
	if redis_ok; then log "redis: reusing $HOST:$REDIS_PORT"; return; fi
	port_open "$REDIS_PORT" && die "redis: port $REDIS_PORT is taken by something that does not answer PING"
	ensure_pkgs redis-server
	local dir=$STATE/redis
	mkdir -p "$dir"
	rm -f "$dir/pid"
	redis-server --daemonize yes --bind "$HOST" --port "$REDIS_PORT" --dir "$dir" \
		--pidfile "$dir/pid" --logfile "$dir/log" --save '' --appendonly no
	wait_until redis "$dir/log" redis_ok
	wait_until redis "$dir/log" test -s "$dir/pid"
	record redis "$(cat "$dir/pid")"
	log "redis: started on $HOST:$REDIS_PORT (log $dir/log)"
}

# ------------------------------------------------------------ postgres

pg_bin() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] && printf '%s' "$d"
}

pg_ok() {
	local bin
	bin=$(pg_bin) || return 1
	"$bin/pg_isready" -q -h "$HOST" -p "$PG_PORT" -t 2 2>/dev/null
}

up_postgres() {
	if pg_ok; then log "postgres: reusing $HOST:$PG_PORT"; return; fi
	port_open "$PG_PORT" && die "postgres: port $PG_PORT is taken by something that does not answer pg_isready"
	[ -n "$(pg_bin)" ] || ensure_pkgs postgresql
	local bin dir=$STATE/postgres
	bin=$(pg_bin) || die "postgres: no server binaries under /usr/lib/postgresql/*/bin"
	id postgres >/dev/null 2>&1 || die "postgres: no 'postgres' OS user (initdb refuses to run as root)"
	mkdir -p "$dir"
	chown postgres: "$dir"
	chmod 700 "$dir"
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		rm -rf "$dir/data"
		runuser -u postgres -- "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 ||
			{ tail -n 20 "$dir/initdb.log" >&2; die "postgres: initdb failed; its log is $dir/initdb.log"; }
	fi
	runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t "$TIMEOUT" \
		-o "-c listen_addresses=$HOST -p $PG_PORT -k $dir -c fsync=off" start >/dev/null ||
		{ tail -n 20 "$dir/log" >&2; die "postgres: pg_ctl start failed; its log is $dir/log"; }
	wait_until postgres "$dir/log" pg_ok
	record postgres "$(head -n 1 "$dir/data/postmaster.pid")"
	log "postgres: started on $HOST:$PG_PORT (log $dir/log)"
}

down_postgres() {
	local bin dir=$STATE/postgres
	bin=$(pg_bin) || true
	if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
		runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	stop_pid postgres "$(cat "$RUN/postgres.pid")"
}

# ---------------------------------------------------------- clickhouse

ch_ok() { [ "$(curl -fsS -m 2 "http://$HOST:$CH_HTTP_PORT/ping" 2>/dev/null)" = "Ok." ]; }

up_clickhouse() {
	ensure_pkgs curl
	if ch_ok; then log "clickhouse: reusing $HOST:$CH_HTTP_PORT"; return; fi
	port_open "$CH_HTTP_PORT" && die "clickhouse: port $CH_HTTP_PORT is taken by something that does not answer /ping"
	port_open "$CH_TCP_PORT" && die "clickhouse: tcp port $CH_TCP_PORT is taken (set UBIK_CLICKHOUSE_TCP_PORT)"
	ensure_pkgs clickhouse-server clickhouse-client
	local dir=$STATE/clickhouse
	# The log directory must exist before --daemon, or the server exits 78
	# without a word.
	mkdir -p "$dir/log" "$dir/data/user_files" "$dir/tmp"
	cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$dir/log/server.log</log><errorlog>$dir/log/error.log</errorlog></logger>
  <listen_host>$HOST</listen_host>
  <http_port>$CH_HTTP_PORT</http_port>
  <tcp_port>$CH_TCP_PORT</tcp_port>
  <path>$dir/data/</path>
  <tmp_path>$dir/tmp/</tmp_path>
  <user_files_path>$dir/data/user_files/</user_files_path>
  <format_schema_path>$dir/data/format_schemas/</format_schema_path>
  <mark_cache_size>536870912</mark_cache_size>
  <users_config>$dir/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
</yandex>
EOF
	cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
EOF
	rm -f "$dir/pid"
	clickhouse-server --config-file="$dir/config.xml" --pid-file="$dir/pid" --daemon >>"$dir/log/stdout.log" 2>&1 ||
		{ tail -n 20 "$dir/log/error.log" >&2 2>/dev/null; die "clickhouse: clickhouse-server --daemon failed; its log is $dir/log/error.log"; }
	wait_until clickhouse "$dir/log/error.log" ch_ok
	wait_until clickhouse "$dir/log/error.log" test -s "$dir/pid"
	record clickhouse "$(cat "$dir/pid")"
	log "clickhouse: started on $HOST:$CH_HTTP_PORT (log $dir/log)"
}

# ------------------------------------------------------------ dynamodb

# dynalite answers any HTTP request; an unauthenticated one gets a
# DynamoDB-shaped error, which is what identifies it.
dynamo_ok() {
	curl -sS -m 2 -X POST -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
		-H 'Content-Type: application/x-amz-json-1.0' -d '{}' \
		"http://$HOST:$DYNAMO_PORT/" 2>/dev/null | grep -q '"__type"\|"TableNames"'
}

up_dynamodb() {
	ensure_pkgs curl
	if dynamo_ok; then log "dynamodb: reusing $HOST:$DYNAMO_PORT"; return; fi
	port_open "$DYNAMO_PORT" && die "dynamodb: port $DYNAMO_PORT is taken by something that does not speak DynamoDB"
	command -v node >/dev/null && command -v npm >/dev/null || ensure_pkgs nodejs npm
	local pkg=$ROOT/scripts/dynalite dir=$STATE/dynamodb
	if ! grep -q '"version": "4.0.0"' "$pkg/node_modules/dynalite/package.json" 2>/dev/null; then
		log "dynamodb: npm ci in $pkg"
		(cd "$pkg" && npm ci --no-audit --no-fund --loglevel=error >&2) || die "dynamodb: npm ci in $pkg failed"
	fi
	mkdir -p "$dir"
	(cd "$pkg" && exec setsid nohup node server.js --host "$HOST" --port "$DYNAMO_PORT" \
		--createTableMs 0 --deleteTableMs 0 --updateTableMs 0 </dev/null >"$dir/log" 2>&1) &
	local pid=$!
	record dynamodb "$pid"
	wait_until dynamodb "$dir/log" dynamo_ok
	log "dynamodb: started dynalite on $HOST:$DYNAMO_PORT (log $dir/log)"
}

# --------------------------------------------------------------- kafka

# kafka_ok: the port answers a Kafka ApiVersions request (v0: size, api key
# 18, version 0, correlation id 1, client id "ubik"); the reply echoes the
# correlation id.
kafka_ok() {
	local reply
	reply=$( (exec 3<>"/dev/tcp/$HOST/$KAFKA_PORT" &&
		printf '\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04ubik' >&3 &&
		head -c 8 <&3 | od -An -tx1 | tr -d ' \n') 2>/dev/null) || return 1
	[[ $reply == ????????00000001 ]]
}

up_kafka() {
	if kafka_ok; then log "kafka: reusing $HOST:$KAFKA_PORT"; return; fi
	port_open "$KAFKA_PORT" && die "kafka: port $KAFKA_PORT is taken by something that does not speak Kafka"
	ensure_pkgs kcat
	command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || die "kafka: no Go toolchain to build cmd/ubik-broker"
	local gobin dir=$STATE/kafka
	gobin=$(command -v go || echo /usr/local/go/bin/go)
	mkdir -p "$dir"
	(cd "$ROOT" && "$gobin" build -o "$STATE/ubik-broker" ./cmd/ubik-broker) || die "kafka: go build ./cmd/ubik-broker failed"
	local args=(--port "$KAFKA_PORT")
	[ -n "$KAFKA_DATA_DIR" ] && args+=(--data-dir "$KAFKA_DATA_DIR")
	setsid nohup "$STATE/ubik-broker" "${args[@]}" </dev/null >"$dir/stdout" 2>"$dir/log" &
	local pid=$!
	record kafka "$pid"
	wait_until kafka "$dir/log" grep -qx ready "$dir/stdout"
	wait_until kafka "$dir/log" kafka_ok
	log "kafka: started ubik-broker on $HOST:$KAFKA_PORT (log $dir/log)"
}

# ------------------------------------------------------------ commands

# live_lease: prints the pid of another live lease holder (and drops the
# leases of processes that are gone); fails when there is none.
live_lease() {
	local f pid
	for f in "$LEASES"/*; do
		[ -e "$f" ] || continue
		pid=${f##*/}
		if [ "$pid" != "$LEASE" ] && kill -0 "$pid" 2>/dev/null; then
			echo "$pid"
			return 0
		fi
		rm -f "$f"
	done
	return 1
}

# cmd_pattern NAME: a word in the command line of the server NAME.
cmd_pattern() {
	case $1 in
	redis) echo redis-server ;;
	postgres) echo postgres ;;
	clickhouse) echo clickhouse ;;
	dynamodb) echo "server.js\|dynalite" ;;
	kafka) echo ubik-broker ;;
	esac
}

down_one() {
	local name=$1 pid
	started "$name" || return 0
	pid=$(cat "$RUN/$name.pid")
	# A stale pidfile (after a reboot) may name a recycled pid: stop only a
	# process that still looks like the server this script started.
	if alive "$pid" && ! tr "\0" " " <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$(cmd_pattern "$name")"; then
		log "$name: pid $pid is no longer ours; not stopping it"
		rm -f "$RUN/$name.pid"
		return 0
	fi
	case $name in
	postgres) down_postgres ;;
	*) stop_pid "$name" "$pid" ;;
	esac
	rm -f "$RUN/$name.pid"
	log "$name: stopped (pid $pid)"
}

# pick SERVICE...: sets SVC to the named services ("all" or none: all).
pick() {
	local s
	SVC=()
	[ $# -eq 0 ] && set -- all
	for s in "$@"; do
		case $s in
		all) SVC+=("${ALL[@]}") ;;
		redis | postgres | clickhouse | dynamodb | kafka) SVC+=("$s") ;;
		*) die "unknown service '$s' (redis, postgres, clickhouse, dynamodb, kafka, all)" ;;
		esac
	done
}

print_env() {
	cat <<EOF
export UBIK_REDIS_ADDR=$HOST:$REDIS_PORT
export UBIK_PG_DSN='postgres://postgres@$HOST:$PG_PORT/postgres?sslmode=disable'
export UBIK_CLICKHOUSE_URL=http://$HOST:$CH_HTTP_PORT
export UBIK_DYNAMODB_ENDPOINT=http://$HOST:$DYNAMO_PORT
export UBIK_KAFKA_BROKERS=$HOST:$KAFKA_PORT
EOF
}

status() {
	local s
	for s in "${ALL[@]}"; do
		local ok=down
		case $s in
		redis) redis_ok && ok=up ;;
		postgres) pg_ok && ok=up ;;
		clickhouse) ch_ok && ok=up ;;
		dynamodb) dynamo_ok && ok=up ;;
		kafka) kafka_ok && ok=up ;;
		esac
		local who=
		started "$s" && who=" (started by services.sh, pid $(cat "$RUN/$s.pid"))"
		printf '%-10s %s%s\n' "$s" "$ok" "$who"
	done
}

main() {
	local cmd=${1:-}
	[ $# -gt 0 ] && shift
	case $cmd in
	up)
		pick "$@"
		mkdir -p "$STATE" "$LEASES"
		echo "$LEASE" >"$LEASES/$LEASE"
		local s
		for s in "${SVC[@]}"; do "up_$s"; done
		;;
	down)
		local i holder
		pick "$@"
		rm -f "$LEASES/$LEASE"
		if holder=$(live_lease); then
			log "not stopping anything: pid $holder still holds a lease"
			return 0
		fi
		for ((i = ${#SVC[@]} - 1; i >= 0; i--)); do down_one "${SVC[i]}"; done
		;;
	env) print_env ;;
	status) status ;;
	*)
		sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
		[ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2
		;;
	esac
}

main "$@"
