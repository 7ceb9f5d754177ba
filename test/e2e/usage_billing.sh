#!/usr/bin/env bash
# usage_billing.sh: runs the usage-billing example end to end:
# examples/usage-billing/run.sh generates the events, writes them to the
# usage log (PostgreSQL and ClickHouse) and to Kafka, runs the hourly query
# with early emission and dedup, lands it into Redis in history mode, and
# checks every (customer, hour) against the usage log exactly. It fails
# with the example's own message.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../../examples/usage-billing/run.sh"
