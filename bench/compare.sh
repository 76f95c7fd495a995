#!/usr/bin/env bash
# compare.sh: pagepipe against makedumpfile on the same vmcore, both pinned to
# one CPU (taskset -c 0, as a capture kernel with nr_cpus=1), RUNS runs each
# (alternating, input warm in the page cache), output on tmpfs. Prints a
# markdown table of median wall, user and system times and output sizes, and
# the ratios: of wall times, and of CPU times (user + system, the median of
# each run's sum), which waiting for a loaded CPU does not inflate.
#
# The makedumpfile is $MAKEDUMPFILE, by default sid's 1.7.8 (lzo and zstd on)
# from fixtures/peer.sh: the newest one Debian ships, the one to beat.
#
# usage: bench/compare.sh VMCORE [RUNS]        (make bench-compare)
set -euo pipefail

vmcore=$1
runs=${2:-5}
bin=${PAGEPIPE:-bin/pagepipe}
mdf=${MAKEDUMPFILE:-$(fixtures/peer.sh makedumpfile-sid | tail -n 1)}
out=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pagepipe-compare.XXXXXX")
trap 'rm -rf "$out"' EXIT

cat "$vmcore" > /dev/null # warm the page cache

# median of the numbers on stdin
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# one run of a command: "wall user sys" in seconds
run() {
	local TIMEFORMAT='%R %U %S'
	{ time "$@" > /dev/null 2>&1; } 2>&1
}

echo "makedumpfile: $("$mdf" -v 2>&1 | head -n 1)"
echo
echo "| args | makedumpfile wall / user / sys (s) | pagepipe wall / user / sys (s) | wall ratio | CPU ratio | makedumpfile bytes | pagepipe bytes | size ratio |"
echo "|---|---|---|---|---|---|---|---|"
# COMPARE_ARGS: the command lines, comma-separated.
list=("-l -d 31" "-z -d 31" "-c -d 31" "-d 31" "-E -d 31")
[ -z "${COMPARE_ARGS:-}" ] || IFS=, read -ra list <<<"$COMPARE_ARGS"
for args in "${list[@]}"; do
	m=() p=()
	for _ in $(seq "$runs"); do
		m+=("$(run taskset -c 0 "$mdf" -f $args "$vmcore" "$out/m")")
		p+=("$(run taskset -c 0 "$bin" -f $args "$vmcore" "$out/p")")
	done
	med() { printf '%s\n' "${@:2}" | awk -v f="$1" '{print $f}' | median; }
	mw=$(med 1 "${m[@]}") mu=$(med 2 "${m[@]}") msy=$(med 3 "${m[@]}")
	pw=$(med 1 "${p[@]}") pu=$(med 2 "${p[@]}") psy=$(med 3 "${p[@]}")
	mc=$(printf '%s\n' "${m[@]}" | awk '{print $2 + $3}' | median)
	pc=$(printf '%s\n' "${p[@]}" | awk '{print $2 + $3}' | median)
	ms=$(stat -c %s "$out/m")
	ps=$(stat -c %s "$out/p")
	printf '| `%s` | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.2f | %.2f | %d | %d | %.3f |\n' "$args" \
		"$mw" "$mu" "$msy" "$pw" "$pu" "$psy" "$(echo "$pw / $mw" | bc -l)" "$(echo "$pc / $mc" | bc -l)" \
		"$ms" "$ps" "$(echo "$ps / $ms" | bc -l)"
done
