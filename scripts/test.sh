#!/usr/bin/env bash
# The test command named in README.md. On a fresh machine it installs and
# starts every server the tests use (scripts/services.sh), checks formatting,
# that every module is tidy, and vet, runs every Go test of every module in
# go.work (fuzz targets run their seed corpus), and the end-to-end scripts in
# test/e2e. It stops only the servers it started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CI=${CI:-true}
# Go lives in /usr/local/go on these machines; a bare login shell may lack it.
case ":$PATH:" in *:/usr/local/go/bin:*) ;; *) export PATH="$PATH:/usr/local/go/bin" ;; esac

started=$(date +%s)
bash scripts/services.sh up all
eval "$(bash scripts/services.sh env)"
trap 'bash scripts/services.sh down >/dev/null 2>&1 || true' EXIT

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# The repository is several modules (see DESIGN.md, "Modules"); in
# workspace mode ./... at the root matches the root module only, so every
# module of go.work is named: ./... for the root, ./DIR/... for the others.
# internal/modules_test.go checks that go.work lists every go.mod.
mapfile -t pkgs < <(go list -m -f '{{.Dir}}' | while read -r d; do
  if [ "$d" = "$PWD" ]; then echo ./...; else echo "./${d#"$PWD"/}/..."; fi
done)
echo "== modules: ${pkgs[*]}"

echo "== go mod tidy (every module, as its users see it)"
bash scripts/tidy.sh --check

echo "== go vet"
go vet "${pkgs[@]}"

echo "== go test (bench/duckref builds DuckDB through cgo; the build is cached)"
go test -count=1 -timeout 25m "${pkgs[@]}"

# The patched kfake (third_party/kfake, the broker of the tests and of
# cmd/ubik-broker) is its own module outside go.work, tested on its own.
# TestTxnInitProducerIDStaleEpochRecovery passes on upstream's code and
# fails on this copy by design: it expects a stale epoch to be
# re-initialized, which Kafka (and the patch) refuses
# (third_party/kfake/README.md); it is the one test left out.
echo "== go test third_party/kfake (the patched broker)"
(cd third_party/kfake && GOWORK=off go test -count=1 -timeout 10m -skip '^TestTxnInitProducerIDStaleEpochRecovery$' .)

echo "== example (README's first command)"
go run ./cmd/ubik run examples/merchant_totals.sql --input examples/events.jsonl --no-progress > /tmp/ubik-example.out
test -s /tmp/ubik-example.out

shopt -s nullglob
for e2e in test/e2e/*.sh; do
  echo "== $e2e"
  bash "$e2e"
done

echo "== all tests passed in $(( $(date +%s) - started ))s"
