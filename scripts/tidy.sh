#!/usr/bin/env bash
# scripts/tidy.sh [--check]: `go mod tidy` in every module that go.work uses,
# each on its own (GOWORK=off), as a user of that module would see it.
# With --check it changes nothing and fails if any module is not tidy
# (go mod tidy -diff prints what would change).
#
# cmd/ubik's go.mod carries no replace directives, because `go install
# github.com/ubiksql/ubik/cmd/ubik@VERSION` refuses a module that has any;
# inside the repository its requirements on the other modules (v0.0.0)
# resolve through go.work. `go mod tidy` ignores go.work, so for such a
# module this script adds a replace to the checkout for each repository
# module it requires and does not replace, tidies, and takes them out again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case ":$PATH:" in *:/usr/local/go/bin:*) ;; *) export PATH="$PATH:/usr/local/go/bin" ;; esac

check=0
case "${1:-}" in
--check) check=1 ;;
"") ;;
*) echo "usage: scripts/tidy.sh [--check]" >&2; exit 2 ;;
esac

root=$PWD
# Every module of the workspace: "path dir" lines.
mapfile -t mods < <(GOWORK="$root/go.work" go list -m -f '{{.Path}} {{.Dir}}')

# reqs_and_replaces FILE prints "req PATH" and "rep PATH" for go.mod FILE.
reqs_and_replaces() {
	go mod edit -print "$1" | awk '
		/^require \(/ { inreq = 1; next }
		/^replace \(/ { inrep = 1; next }
		/^\)/ { inreq = 0; inrep = 0; next }
		/^require / { print "req", $2; next }
		/^replace / { print "rep", $2; next }
		inreq && NF { print "req", $1 }
		inrep && NF { print "rep", $1 }'
}

tidy_one() { # path dir
	local path=$1 dir=$2 gomod=$2/go.mod backup added=() m p d
	local listed
	listed=$(reqs_and_replaces "$gomod")
	for m in "${mods[@]}"; do
		p=${m%% *} d=${m#* }
		[ "$p" = "$path" ] && continue
		if grep -qx "req $p" <<<"$listed" && ! grep -qx "rep $p" <<<"$listed"; then
			added+=("$p=$d")
		fi
	done
	backup=$(mktemp)
	cp "$gomod" "$backup"
	local r rc=0
	for r in "${added[@]}"; do go mod edit -replace="$r" "$gomod"; done
	if [ "$check" = 1 ]; then
		(cd "$dir" && GOWORK=off go mod tidy -diff) || rc=$?
		cp "$backup" "$gomod"
	else
		(cd "$dir" && GOWORK=off go mod tidy) || rc=$?
		for r in "${added[@]}"; do go mod edit -dropreplace="${r%%=*}" "$gomod"; done
	fi
	rm -f "$backup"
	return $rc
}

failed=()
passes=2 # a module's tidy reads its siblings' go.mod files: a second pass settles
[ "$check" = 1 ] && passes=1
for ((pass = 1; pass <= passes; pass++)); do
	failed=()
	for m in "${mods[@]}"; do
		path=${m%% *} dir=${m#* }
		rel=${dir#"$root"/}; [ "$dir" = "$root" ] && rel=.
		if ! out=$(tidy_one "$path" "$dir" 2>&1); then
			failed+=("$rel")
			echo "== $rel: not tidy"
			echo "$out"
		elif [ "$pass" = "$passes" ]; then
			echo "== $rel: tidy"
		fi
	done
done
if [ ${#failed[@]} -gt 0 ]; then
	if [ "$check" = 1 ]; then
		echo "scripts/tidy.sh: not tidy: ${failed[*]} (run bash scripts/tidy.sh)" >&2
	else
		echo "scripts/tidy.sh: go mod tidy failed in: ${failed[*]}" >&2
	fi
	exit 1
fi
