#!/usr/bin/env bash
# fresh-fixtures.sh: run e2e tests on N freshly booted real fixtures in a
# row, to show that they do not depend on what one boot left in memory.
#
# usage: scripts/fresh-fixtures.sh N REGEX [go test flags...]
#   e.g. scripts/fresh-fixtures.sh 5 '^TestRealJudgesCatchADamagedDump$'
#
# Each run points PAGEPIPE_FIXTURES (the fixture cache) at a new empty
# directory, so fixtures/make-vmcore.sh boots the guest again (about a
# minute of CPU for the default 1 GiB fixture; KASLR, the random data and
# the allocator's choices differ each time), runs
# `go test -count=1 -tags lzo2 -v ./e2e -run REGEX`, and deletes the
# directory. It prints one line a run and exits 1 if any run failed; the
# logs stay in a directory it names.
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: scripts/fresh-fixtures.sh N REGEX [go test flags...]" >&2; exit 2; }
n=$1
regex=$2
shift 2
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "fresh-fixtures: N must be a positive whole number (got '$n')" >&2; exit 2; }

root=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
go_cmd=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
logs=$(mktemp -d "${TMPDIR:-/tmp}/pagepipe-fresh-fixtures.XXXXXX")
cache=
trap '[ -z "$cache" ] || rm -rf "$cache"' EXIT

failed=0
for i in $(seq 1 "$n"); do
	cache=$(mktemp -d "${TMPDIR:-/tmp}/pagepipe-fresh-cache.XXXXXX")
	log=$logs/run-$i.log
	rc=0
	(cd "$root" && PAGEPIPE_FIXTURES=$cache "$go_cmd" test -count=1 -tags lzo2 -v ./e2e -run "$regex" "$@") >"$log" 2>&1 || rc=$?
	# What made this boot differ from the others: where KASLR put the
	# direct map, and when the guest booted.
	info=$(cat "$cache"/vmcore-*/info 2>/dev/null || true)
	po=$(sed -n 's/^page_offset=//p' <<<"$info")
	made=$(sed -n 's/^made=//p' <<<"$info")
	verdict=PASS
	[ "$rc" -eq 0 ] || { verdict="FAIL (exit $rc)"; failed=1; }
	echo "run $i: $verdict; fixture page_offset=${po:-?} made=${made:-?}; $(grep -c -- '^--- PASS' "$log" || true) passed, $(grep -c -- '--- FAIL' "$log" || true) failed"
	rm -rf "$cache"
	cache=
done
echo "logs: $logs"
exit "$failed"
