#!/bin/bash
# scripts/disk-check.sh: make test's first step. It says in one line how
# much disk the suite needs and fails when the fixture cache's file system
# cannot hold it: free space there plus what the cache already holds (which
# the suite reuses rather than rewrites) must reach the need. Without it a
# short disk shows as dozens of "no space left on device" failures an hour
# into the run.
#
# The cache is $PAGEPIPE_FIXTURES, or ${TMPDIR:-/tmp}/pagepipe-fixtures
# (internal/fixture, fixtures/lib.sh). PAGEPIPE_DISK_NEED_GIB overrides the
# need (the test of this script asks for an absurd one).
set -euo pipefail

# The suite's peak disk use in GiB: fixture cache, e2e dumps, Debian
# packages and Go's caches together, measured from a cold cache on
# 2026-12-07 (24 GiB above the machine's start, the fixture cache 18.7 GiB
# of it; docs/testing.md, "Disk"), rounded up.
SUITE_DISK_NEED_GIB=26

need_gib=${PAGEPIPE_DISK_NEED_GIB:-$SUITE_DISK_NEED_GIB}
[[ $need_gib =~ ^[0-9]+$ ]] || { echo "disk-check: PAGEPIPE_DISK_NEED_GIB=$need_gib is not a whole number of GiB" >&2; exit 2; }
cache=${PAGEPIPE_FIXTURES:-${TMPDIR:-/tmp}/pagepipe-fixtures}

# df needs an existing path: the cache, or the nearest directory above it
# (the cache is made there on first use).
at=$cache
while [[ ! -e $at ]]; do at=$(dirname "$at"); done
free=$(df --output=avail -B1 "$at" | tail -n 1 | tr -d ' ')
cached=0
if [[ -d $cache ]]; then
	# Blocks in use, not apparent sizes: the fixtures are sparse.
	cached=$(du -s -B1 "$cache" 2>/dev/null | cut -f1) || cached=0
fi

gib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1073741824 }'; }
need=$((need_gib << 30))
if ((free + cached < need)); then
	echo "make test needs ${need_gib} GiB for fixtures and dumps under $cache: $(gib "$free") GiB free there + $(gib "$cached") GiB already cached; free $(gib $((need - free - cached))) GiB more or set PAGEPIPE_FIXTURES to a larger disk" >&2
	exit 1
fi
echo "disk: make test needs ${need_gib} GiB under $cache; $(gib "$free") GiB free + $(gib "$cached") GiB cached"
