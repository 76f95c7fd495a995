#!/usr/bin/env bash
# rss.sh: pagepipe's peak RSS (GNU time's %M, median of 5 runs) at 4 workers, -c -d 31, on
# generated 6.1 machines of 1, 4, 16 and 64 GiB (sparse, on tmpfs): memory must
# not grow with the machine beyond the two bitmaps (2 bits per page).
# GOMAXPROCS=4: the chunk pool is sized by min(workers, usable CPUs), so this
# measures what a capture kernel with 4 CPUs holds, whatever this machine has.
#
# usage: bench/rss.sh [MIB ...]   (make bench-rss: 1024 4096 16384 65536)
# A 256 GiB machine (262144) needs about 8 GiB of tmpfs for its struct pages.
set -euo pipefail
bin=${PAGEPIPE:-bin/pagepipe}
benchbin=${PAGEPIPE_BENCH:-bin/pagepipe-bench}
dir=$(mktemp -d "${BENCH_TMP:-/dev/shm}/pagepipe-rss.XXXXXX")
trap 'rm -rf "$dir"' EXIT
first= last= firstbm= lastbm= firstgib= lastgib=
echo "| machine | pfns | bitmaps (2 bits/page) | peak RSS | wall |"
echo "|---|---|---|---|---|"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1024 4096 16384 65536)
for mib in "${sizes[@]}"; do
	"$benchbin" gen-vmcore --profile 6.1 --size "$mib" "$dir/vmcore" > /dev/null
	# The median of 5 runs: the Go runtime's heap growth makes single
	# runs vary by a MiB or two.
	out=$(for _ in 1 2 3 4 5; do
		{ GOMAXPROCS=4 /usr/bin/time -f "%M %e" "$bin" -f -c -d 31 --num-threads 4 --message-level 0 "$dir/vmcore" "$dir/dump"; } 2>&1 | tail -n 1
	done | sort -n | sed -n 3p)
	read -r rss wall <<< "$out"
	pfns=$((mib * 256))
	printf '| %d GiB | %d | %.1f MiB | %.1f MiB | %s s |\n' $((mib / 1024)) "$pfns" "$(echo "$pfns / 4 / 1048576" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$wall"
	rm -f "$dir/vmcore" "$dir/dump"
	bm=$((pfns / 4)) # bytes
	first=${first:-$rss} firstbm=${firstbm:-$bm} firstgib=${firstgib:-$((mib / 1024))}
	last=$rss lastbm=$bm lastgib=$((mib / 1024))
done
printf '\nFrom %d to %d GiB peak RSS grew by %.1f MiB; the bitmaps by %.1f MiB.\n' "$firstgib" "$lastgib" \
	"$(echo "($last - $first) / 1024" | bc -l)" "$(echo "($lastbm - $firstbm) / 1048576" | bc -l)"
