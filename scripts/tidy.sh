#!/usr/bin/env bash
# scripts/tidy.sh [--check]: `go mod tidy` in every module that go.work uses,
# each on its own (GOWORK=off), as a user of that module would see it.
# With --check it changes nothing and fails if any module is not tidy
# (go mod tidy -diff prints what would change).
#
# The repository's modules require each other at v0.0.0. `go mod tidy`
# ignores go.work, so for the run this script replaces every other module of
# the workspace with its directory. Afterwards (not with --check) a module
# keeps, for each repository module it now requires, the requirement at
# v0.0.0 and a replace by relative path, so it builds with GOWORK=off too;
# except the modules in no_replace (cmd/ubik): `go install
# github.com/ubiksql/ubik/cmd/ubik@VERSION` refuses a module with any replace
# directive, and inside the repository go.work resolves its requirements.
# So after a merge that adds an import of another repository module, or a
# new dependency, `bash scripts/tidy.sh` is the whole fix.
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

# no_replace: modules (directories) whose go.mod must carry no replace.
no_replace=(cmd/ubik)

# relpath FROM TO: TO relative to FROM, as go.mod wants a local path.
relpath() {
	local r
	r=$(realpath --relative-to="$1" "$2")
	case $r in ../*) echo "$r" ;; *) echo "./$r" ;; esac
}

# seed DIR GOMOD: a module the module's packages or tests now use and its
# go.mod does not list yet is required at the version the workspace
# selects, so that tidy does not pick the newest one and the modules drift
# apart (go.work builds every module with the highest version any requires).
seed() {
	local dir=$1 gomod=$2 listed p v
	listed=$(reqs_and_replaces "$gomod")
	(cd "$dir" && GOWORK="$root/go.work" go list -e -deps -test \
		-f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' ./...) | sort -u |
		while read -r p v; do
			case $p in github.com/ubiksql/ubik | github.com/ubiksql/ubik/*) continue ;; esac
			[ -n "$v" ] && ! grep -qx "req $p" <<<"$listed" || continue
			go mod edit -require="$p@$v" "$gomod"
		done
}

tidy_one() { # path dir
	local path=$1 dir=$2 gomod=$2/go.mod backup added=() m p d listed rc=0 rel keep
	[ "$check" = 1 ] || seed "$dir" "$gomod"
	listed=$(reqs_and_replaces "$gomod")
	backup=$(mktemp)
	cp "$gomod" "$backup"
	for m in "${mods[@]}"; do
		p=${m%% *} d=${m#* }
		[ "$p" = "$path" ] && continue
		if ! grep -qx "rep $p" <<<"$listed"; then
			added+=("$p")
			go mod edit -replace="$p=$d" "$gomod"
		fi
	done
	if [ "$check" = 1 ]; then
		(cd "$dir" && GOWORK=off go mod tidy -diff) || rc=$?
		cp "$backup" "$gomod"
		rm -f "$backup"
		return $rc
	fi
	rm -f "$backup"
	(cd "$dir" && GOWORK=off go mod tidy) || rc=$?
	listed=$(reqs_and_replaces "$gomod")
	rel=${dir#"$root"/}
	keep=1
	for m in "${no_replace[@]}"; do [ "$rel" = "$m" ] && keep=0; done
	[ $rc = 0 ] || return $rc
	for m in "${mods[@]}"; do # a replace of a repository module no longer required goes
		p=${m%% *}
		if [ "$p" != "$path" ] && grep -qx "rep $p" <<<"$listed" && ! grep -qx "req $p" <<<"$listed"; then
			go mod edit -dropreplace="$p" "$gomod"
		fi
	done
	for p in "${added[@]}"; do
		go mod edit -dropreplace="$p" "$gomod"
		grep -qx "req $p" <<<"$listed" || continue
		go mod edit -require="$p@v0.0.0" "$gomod"
		if [ $keep = 1 ]; then
			for m in "${mods[@]}"; do
				[ "${m%% *}" = "$p" ] && go mod edit -replace="$p=$(relpath "$dir" "${m#* }")" "$gomod"
			done
		fi
	done
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
