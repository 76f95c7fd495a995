#!/usr/bin/env bash
# rss.sh: pagepipe's peak RSS at 4 workers (-c -d 31) on generated 6.1
# machines, with the default bitmap budget and with --cyclic-buffer 8192,
# and the page scan's wall time beside makedumpfile's on the same machine
# (Debian's 1.7.2, and sid's 1.7.8 when fixtures/peer.sh can fetch it),
# makedumpfile with its default cyclic buffer. RUNS rounds (default 3),
# alternating the programs; medians.
#
# Peak RSS is pagepipe's VmHWM as it finishes (--stats-file, as the bench
# reads it): not GNU time's or wait4's ru_maxrss, which counts a resident
# set the child shares with its parent until exec. The scan's time is
# every cycle's scan, each time a cycle is made (pagepipe scans a cycle in
# its count, for the headers and in the copy pass: stats scan_wall_s);
# makedumpfile's is the sum of its "STEP [Excluding unnecessary pages]"
# lines (two scans per cycle). GOMAXPROCS=4: the chunk pool is sized by
# min(workers, usable CPUs), so this is what a capture kernel with 4 CPUs
# holds, whatever this machine has.
#
# Machines above 256 GiB are Lean (internal/synth: zero struct pages for
# free blocks' tails, written as holes): a 4 TiB machine is a 4 TiB sparse
# file holding about 5 GiB, made in about two minutes.
#
# MDF=0 leaves makedumpfile out altogether (its columns say "not run"), for
# re-measuring pagepipe alone.
#
# usage: bench/rss.sh [MIB ...]   (make bench-rss: 1024 65536 1048576 4194304)
set -euo pipefail
bin=${PAGEPIPE:-bin/pagepipe}
benchbin=${PAGEPIPE_BENCH:-bin/pagepipe-bench}
runs=${RUNS:-3}
dir=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pagepipe-rss.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# SID=0 leaves sid's makedumpfile out (its two scans of a 4 TiB machine
# take a quarter of an hour on a loaded 2-CPU machine).
sid=
if [ "${SID:-1}" != 0 ] && [ "${MDF:-1}" != 0 ]; then
	sid=$(fixtures/peer.sh makedumpfile-sid 2> /dev/null | tail -n 1) || sid=
	[ -x "$sid" ] && "$sid" -v > /dev/null 2>&1 || sid=
fi

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
steps() { awk -F': ' '/STEP \[Excluding unnecessary pages\]/ {s += $2} END {printf "%.2f\n", s}'; }
# pp ARGS...: one pagepipe run; prints "rss_kib cycles scan_wall_s"
pp() {
	GOMAXPROCS=4 "$bin" -f -c -d 31 --num-threads 4 --message-level 0 --stats-file "$dir/stats" "$@" "$dir/vmcore" "$dir/dump"
	rm -f "$dir/dump"
	jq -r '"\(.max_rss_kib) \(.cycles) \(.scan_wall_s)"' "$dir/stats"
}
mdf() {
	"$1" -f -d 31 --message-level 16 "$dir/vmcore" "$dir/mdump" 2>&1 | steps
	rm -f "$dir/mdump"
}

echo "| machine | pfns | 2nd bitmap whole | default budget: cycles, peak RSS | --cyclic-buffer 8192: cycles, peak RSS | pagepipe scan (s) | makedumpfile 1.7.2 scan (s) | makedumpfile 1.7.8 scan (s) |"
echo "|---|---|---|---|---|---|---|---|"
grep MemAvailable /proc/meminfo >&2
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1024 65536 1048576 4194304)
for mib in "${sizes[@]}"; do
	"$benchbin" gen-vmcore --profile 6.1 --size "$mib" "$dir/vmcore" > /dev/null
	d=() e=() s=() m=() n=()
	for _ in $(seq "$runs"); do
		read -r rss cyc scan <<< "$(pp)"
		d+=("$rss") s+=("$scan") dc=$cyc
		read -r rss cyc _ <<< "$(pp --cyclic-buffer 8192)"
		e+=("$rss") ec=$cyc
		# Each figure as it comes, on stderr: a run cut short keeps them.
		echo "$mib MiB: pagepipe default $dc cycles ${d[-1]} KiB scan ${s[-1]} s; --cyclic-buffer 8192 $ec cycles $rss KiB" >&2
		[ "${MDF:-1}" = 0 ] && continue
		m+=("$(mdf makedumpfile)")
		echo "$mib MiB: makedumpfile 1.7.2 scan ${m[-1]} s" >&2
		[ -z "$sid" ] || { n+=("$(mdf "$sid")") && echo "$mib MiB: makedumpfile 1.7.8 scan ${n[-1]} s" >&2; }
	done
	pfns=$((mib * 256))
	kib() { printf '%.1f MiB' "$(echo "$1 / 1024" | bc -l)"; }
	printf '| %s | %d | %.2f MiB | %d, %s | %d, %s | %.2f | %s | %s |\n' \
		"$(if [ "$mib" -ge 1048576 ]; then echo "$((mib / 1048576)) TiB"; else echo "$((mib / 1024)) GiB"; fi)" "$pfns" \
		"$(echo "$pfns / 8 / 1048576" | bc -l)" \
		"$dc" "$(kib "$(printf '%s\n' "${d[@]}" | median)")" "$ec" "$(kib "$(printf '%s\n' "${e[@]}" | median)")" \
		"$(printf '%s\n' "${s[@]}" | median)" "$(if [ ${#m[@]} -gt 0 ]; then printf '%s\n' "${m[@]}" | median; else echo "not run"; fi)" \
		"$(if [ -n "$sid" ]; then printf '%s\n' "${n[@]}" | median; else echo "not run"; fi)"
	rm -f "$dir/vmcore"
done
