#!/usr/bin/env bash
# scripts/release.sh VERSION: tag a release of the ubik command.
# scripts/release.sh --proxy DIR VERSION: write it as a module proxy instead.
#
# `go install github.com/ubiksql/ubik/cmd/ubik@VERSION` fetches cmd/ubik and
# every repository module it requires (internal/cli, the root, land,
# land/landprom, usage) at VERSION, so each of those modules is tagged
# (VERSION for the root, DIR/VERSION for the module in DIR), and in the
# tagged tree they require each other at VERSION, where the branch says
# v0.0.0 (go.work resolves both to the directories). The script makes that tree as one commit off the branch (in a
# temporary worktree), tags it for every module, and prints the push
# command; the branch itself is not changed.
#
# With --proxy DIR it commits and tags nothing: it copies the tracked files
# of the working tree, sets the same requirements, and writes the modules
# under DIR in the layout a module proxy serves, so that
# GOPROXY=file://DIR,... go install github.com/ubiksql/ubik/cmd/ubik@VERSION
# installs what the tags would publish (internal/install_test.go does).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case ":$PATH:" in *:/usr/local/go/bin:*) ;; *) export PATH="$PATH:/usr/local/go/bin" ;; esac

usage() { echo "usage: scripts/release.sh [--proxy DIR] VERSION" >&2; exit 2; }
proxy=
if [ "${1:-}" = --proxy ]; then
	[ $# = 3 ] || usage
	proxy=$2
	shift 2
fi
[ $# = 1 ] || usage
version=$1
root=$PWD

# The tool is built once, from this checkout, and run on the copy.
tool=$(mktemp -d)
stage=
cleanup() {
	rm -rf "$tool"
	if [ -n "$stage" ] && [ -z "$proxy" ]; then
		git worktree remove --force "$stage" 2>/dev/null || true
	fi
	[ -z "$stage" ] || rm -rf "$stage"
}
trap cleanup EXIT
go build -o "$tool/release" ./internal/release
mapfile -t dirs < <("$tool/release" modules "$root")
"$tool/release" rewrite "$root" "$version" # checks the version before anything is written

if [ -n "$proxy" ]; then
	stage=$(mktemp -d)
	git ls-files -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$stage"
	"$tool/release" rewrite "$stage" "$version" "${dirs[@]}"
	mkdir -p "$proxy"
	"$tool/release" proxy "$stage" "$version" "$(git log -1 --format=%cI)" "$proxy" "${dirs[@]}"
	echo "scripts/release.sh: ${dirs[*]} at $version written to $proxy"
	exit 0
fi

if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "scripts/release.sh: the working tree has uncommitted changes; a release is of a commit" >&2
	exit 1
fi
tags=()
for d in "${dirs[@]}"; do
	if [ "$d" = . ]; then tags+=("$version"); else tags+=("$d/$version"); fi
done
for t in "${tags[@]}"; do
	if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then
		echo "scripts/release.sh: tag $t exists already" >&2
		exit 1
	fi
done
stage=$(mktemp -d)
rmdir "$stage"
git worktree add -q --detach "$stage" HEAD
"$tool/release" rewrite "$stage" "$version" "${dirs[@]}"
git -C "$stage" commit -q -a -m "release $version: the published modules require each other at $version"
commit=$(git -C "$stage" rev-parse HEAD)
for t in "${tags[@]}"; do
	git tag -a -m "ubik $version" "$t" "$commit"
done
echo "scripts/release.sh: tagged $commit as ${tags[*]}"
echo "publish with: git push origin ${tags[*]}"
