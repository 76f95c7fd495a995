#!/usr/bin/env bash
# alternate.sh: time two commands in alternating runs (A B A B ...), with
# each finished process's own accounting (wait4), and print each one's
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
# "cpu wall peak_kib" to FILE: the child's own rusage from wait4 (user +
# system to the microsecond, where GNU time prints hundredths), a monotonic
# wall clock, and its peak RSS (posix_spawn's child starts as a view of
# python's memory: a peak below python's own, about 13 MiB, reads as that).
once() {
	# shellcheck disable=SC2086
	python3 -c '
import os, sys, time
null = [(os.POSIX_SPAWN_OPEN, fd, "/dev/null", os.O_RDWR, 0) for fd in (0, 1, 2)]
start = time.monotonic()
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ, file_actions=null)
_, status, r = os.wait4(pid, 0)
wall = time.monotonic() - start
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit("exit %d" % os.waitstatus_to_exitcode(status))
print("%.4f %.4f %d" % (r.ru_utime + r.ru_stime, wall, r.ru_maxrss))
' $1 >>"$2" || {
		echo "${0##*/}: '$1' failed" >&2
		exit 1
	}
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
