#!/usr/bin/env bash
# priority.sh: the copy pass's cost of --priority (issue 21). pagepipe
# dumps VMCORE RUNS times with --priority=off and RUNS times with
# --priority, alternating, pinned to one CPU (taskset -c 0, one worker),
# input warm in the page cache, output on tmpfs, and reads each run's copy
# pass from --stats-file: its CPU time (user + system of the process over
# the pass, which waiting for a loaded CPU does not inflate) and wall time.
# Prints a markdown table of the medians and their ratios, and the whole
# process's median CPU time (the priority set's discovery runs before the
# copy pass, so only there).
#
# usage: bench/priority.sh VMCORE [RUNS] [ARGS]   (ARGS default "-l -d 31")
set -euo pipefail

vmcore=$1
runs=${2:-7}
args=${3:--l -d 31}
bin=${PAGEPIPE:-bin/pagepipe}
out=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pagepipe-priority.XXXXXX")
trap 'rm -rf "$out"' EXIT

cat "$vmcore" > /dev/null # warm the page cache

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
stat_of() { sed -n "s/.*\"$1\": \([0-9.e-]*\).*/\1/p" "$2"; }

# one run: "copy_cpu copy_wall process_cpu"
run() {
	local TIMEFORMAT='%U %S'
	local t
	t=$( { time taskset -c 0 "$bin" -f --num-threads 1 $args "$@" --stats-file "$out/s.json" "$vmcore" "$out/d" > /dev/null 2>&1; } 2>&1)
	echo "$(stat_of copy_cpu_s "$out/s.json") $(stat_of copy_wall_s "$out/s.json") $(echo "$t" | awk '{print $1 + $2}')"
}

off=() on=()
for _ in $(seq "$runs"); do
	off+=("$(run --priority=off)")
	on+=("$(run --priority)")
done
med() { printf '%s\n' "${@:2}" | awk -v f="$1" '{print $f}' | median; }
oc=$(med 1 "${off[@]}") ow=$(med 2 "${off[@]}") op=$(med 3 "${off[@]}")
pc=$(med 1 "${on[@]}") pw=$(med 2 "${on[@]}") pp=$(med 3 "${on[@]}")
echo "| \`$args\`, $runs runs each | copy pass CPU (s) | copy pass wall (s) | process CPU (s) |"
echo "|---|---|---|---|"
printf '| `--priority=off` | %.3f | %.3f | %.3f |\n' "$oc" "$ow" "$op"
printf '| `--priority` | %.3f | %.3f | %.3f |\n' "$pc" "$pw" "$pp"
printf '| ratio | %.3f | %.3f | %.3f |\n' "$(echo "$pc / $oc" | bc -l)" "$(echo "$pw / $ow" | bc -l)" "$(echo "$pp / $op" | bc -l)"
