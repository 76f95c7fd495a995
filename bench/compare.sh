#!/usr/bin/env bash
# compare.sh: pagepipe against makedumpfile on the same vmcore, both pinned to
# one CPU (taskset -c 0, as a capture kernel with nr_cpus=1), RUNS runs each
# (alternating, input warm in the page cache), output on tmpfs. Prints a
# markdown table of median wall times and output sizes, and the ratios.
#
# usage: bench/compare.sh VMCORE [RUNS]        (make bench-compare)
set -euo pipefail

vmcore=$1
runs=${2:-5}
bin=${PAGEPIPE:-bin/pagepipe}
out=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pagepipe-compare.XXXXXX")
trap 'rm -rf "$out"' EXIT

cat "$vmcore" > /dev/null # warm the page cache

# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# wall seconds of one run of a command
wall() {
	local t0 t1
	t0=$(date +%s.%N)
	"$@" > /dev/null 2>&1
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

echo "| args | makedumpfile (s) | pagepipe (s) | time ratio | makedumpfile bytes | pagepipe bytes | size ratio |"
echo "|---|---|---|---|---|---|---|"
for args in "-c -d 31" "-l -d 31" "-d 31" "-c -d 1"; do
	m=() p=()
	for _ in $(seq "$runs"); do
		m+=("$(wall taskset -c 0 makedumpfile -f $args "$vmcore" "$out/m")")
		p+=("$(wall taskset -c 0 "$bin" -f $args "$vmcore" "$out/p")")
	done
	mm=$(printf '%s\n' "${m[@]}" | median)
	pm=$(printf '%s\n' "${p[@]}" | median)
	ms=$(stat -c %s "$out/m")
	ps=$(stat -c %s "$out/p")
	printf '| `%s` | %.3f | %.3f | %.2f | %d | %d | %.3f |\n' "$args" "$mm" "$pm" "$(echo "$pm / $mm" | bc -l)" "$ms" "$ps" "$(echo "$ps / $ms" | bc -l)"
done
