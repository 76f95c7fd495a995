#!/usr/bin/env bash
# serial-ab.sh: the serial part of pagepipe's CPU (docs/scaling.md, study 3)
# for two or more pagepipe binaries, in alternating runs on one CPU, so that
# a change to the fixed cost is measured under the same load: RUNS rounds,
# each running every binary once on VMCORE with ARGS (plus -f, the stats
# file, output on tmpfs); medians.
#
# Columns (CPU seconds; user + system from bash's time, the stages from
# --stats-file, as bench/runner.go computes them): cpu, the process; other,
# cpu less the filter and the copy pass's stages; in copy, the part of other
# inside the copy pass (the runtime: its monitor, scheduler, collector);
# outside, the part outside both passes (start, setup, headers, exit);
# serial, other + reorder + write + the filter's serial part, and its share
# of cpu; faults, the process's minor page faults and the copy pass's (0: a binary
# older than the count).
#
# usage: bench/serial-ab.sh VMCORE RUNS "ARGS" BIN...
set -euo pipefail
# One CPU for the runs; the children inherit it (no taskset in their rusage).
[ "$(taskset -p $$ | sed 's/.*: //')" = 1 ] || exec taskset -c 0 "$0" "$@"
vmcore=$1 runs=$2 args=$3
shift 3
out=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pagepipe-serial-ab.XXXXXX")
trap 'rm -rf "$out"' EXIT
cat "$vmcore" > /dev/null # warm the page cache

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A rows
for _ in $(seq "$runs"); do
	for i in $(seq 0 $(($# - 1))); do
		bin=${*:$((i + 1)):1}
		rm -f "$out/d"
		TIMEFORMAT='%U %S'
		# shellcheck disable=SC2086 # ARGS are words
		t=$({ time "$bin" -f $args --message-level 4 --stats-file "$out/s.json" "$vmcore" "$out/d" > /dev/null 2>&1; } 2>&1)
		rows[$i]+=$(jq -r --arg t "$t" '($t | split(" ") | map(tonumber) | add) as $cpu
			| (.read_cpu_s + .compress_cpu_s + .reorder_cpu_s + .write_cpu_s + .store_cpu_s) as $st
			| ($cpu - .filter_cpu_s - $st) as $other
			| ($other + .reorder_cpu_s + .write_cpu_s + .filter_cpu_s - .filter_scan_cpu_s) as $serial
			| "\($cpu) \($other) \(.copy_cpu_s - $st) \($cpu - .filter_cpu_s - .copy_cpu_s) \($serial) \(100 * $serial / $cpu) \(.minor_faults // 0) \(.copy_faults // 0)"' "$out/s.json")$'\n'
	done
done
echo "| binary | cpu | other | in copy | outside | serial | serial % | faults | copy faults |"
echo "|---|---|---|---|---|---|---|---|---|"
for i in $(seq 0 $(($# - 1))); do
	line="| $(basename "${*:$((i + 1)):1}")"
	for f in 1 2 3 4 5 6 7 8; do
		line+=$(printf ' | %.4g' "$(printf '%s' "${rows[$i]}" | awk -v f="$f" 'NF {print $f}' | median)")
	done
	echo "$line |"
done
