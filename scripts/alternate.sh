#!/usr/bin/env bash
# alternate.sh: time two commands in alternating runs (A B A B ...), with
# GNU time's accounting of each finished process, and print each one's
# median CPU seconds (user + system), wall seconds and peak RSS, and the
# median of the pairs' A/B CPU ratios (pairing keeps the ratio fair when
# a shared machine's speed drifts). One warm-up run of each is not
# counted. The commands' output is thrown away.
#
#   scripts/alternate.sh RUNS 'COMMAND A' 'COMMAND B'
#
# e.g. (docs/erase.md):
#   scripts/alternate.sh 9 'pagepipe --cpus 1 -l -d 31 -f --config erase.conf vmcore /tmp/out' \
#                          'pagepipe --cpus 1 -l -d 31 -f vmcore /tmp/out'
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: ${0##*/} RUNS 'COMMAND A' 'COMMAND B'" >&2; exit 2; }
runs=$1 a=$2 b=$3
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "${0##*/}: bad RUNS '$runs'" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# once CMD FILE: run CMD (split as the shell splits words) once, appending
# "cpu wall peak_kib" to FILE.
once() {
	local t=$tmp/t
	# shellcheck disable=SC2086
	/usr/bin/time -o "$t" -f '%U %S %e %M' $1 >/dev/null 2>&1 || {
		echo "${0##*/}: '$1' failed" >&2
		exit 1
	}
	awk '{printf "%.3f %.3f %d\n", $1 + $2, $3, $4}' "$t" >>"$2"
}
once "$a" "$tmp/warm"
once "$b" "$tmp/warm"
for _ in $(seq "$runs"); do
	once "$a" "$tmp/a"
	once "$b" "$tmp/b"
done
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for x in a b; do
	printf '%s: cpu %s s, wall %s s, peak %s KiB (medians of %d)\n' "$x" \
		"$(cut -d' ' -f1 "$tmp/$x" | median)" "$(cut -d' ' -f2 "$tmp/$x" | median)" \
		"$(cut -d' ' -f3 "$tmp/$x" | median)" "$runs"
done
printf 'a/b cpu: %s (median of the pairs)\n' \
	"$(paste -d' ' "$tmp/a" "$tmp/b" | awk '$4 > 0 {printf "%.4f\n", $1 / $4}' | median)"
printf 'load average: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
