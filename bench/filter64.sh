#!/usr/bin/env bash
# filter64.sh: the page scan on a generated 64 GiB machine (6.1 profile),
# pagepipe with one worker against makedumpfile, both pinned to one CPU,
# RUNS runs each. Prints the median of pagepipe's
# "STEP [Excluding unnecessary pages]" and of makedumpfile's, which prints
# that STEP twice (it scans mem_map once to count the dumpable pages and once
# more while writing), summed per run.
#
# usage: bench/filter64.sh [RUNS]        (make bench-filter)
set -euo pipefail

runs=${1:-5}
bin=${PAGEPIPE:-bin/pagepipe}
benchbin=${PAGEPIPE_BENCH:-bin/pagepipe-bench}
dir=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pagepipe-filter64.XXXXXX")
trap 'rm -rf "$dir"' EXIT

"$benchbin" gen-vmcore --profile 6.1 --size 65536 "$dir/vmcore" >&2

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
step() { awk -F': ' '/STEP \[Excluding unnecessary pages\]/ {s += $2} END {printf "%.6f\n", s}'; }

p=() m=() m1=()
for _ in $(seq "$runs"); do
	p+=("$(taskset -c 0 "$bin" -f -d 31 --num-threads 1 --message-level 16 "$dir/vmcore" "$dir/p" 2>&1 | step)")
	out=$(taskset -c 0 makedumpfile -f -d 31 --message-level 16 "$dir/vmcore" "$dir/m" 2>&1)
	m+=("$(echo "$out" | step)")
	m1+=("$(echo "$out" | awk -F': ' '/STEP \[Excluding unnecessary pages\]/ {print $2; exit}' | awk '{print $1}')")
done
pm=$(printf '%s\n' "${p[@]}" | median)
mm=$(printf '%s\n' "${m[@]}" | median)
m1m=$(printf '%s\n' "${m1[@]}" | median)
cmp -s "$dir/p" "$dir/m" && same=yes || same=no
echo "| | seconds (median of $runs) |"
echo "|---|---|"
printf '| pagepipe, 1 worker | %.3f |\n' "$pm"
printf '| makedumpfile, both scans | %.3f |\n' "$mm"
printf '| makedumpfile, first scan only | %.3f |\n' "$m1m"
printf '| ratio to both scans | %.2f |\n' "$(echo "$pm / $mm" | bc -l)"
printf '| ratio to one scan | %.2f |\n' "$(echo "$pm / $m1m" | bc -l)"
printf '| dumps byte-identical (-d 31) | %s |\n' "$same"
