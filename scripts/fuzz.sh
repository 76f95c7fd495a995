#!/usr/bin/env bash
# Runs one fuzz target for a while and checks that it kept fuzzing:
#
#	scripts/fuzz.sh PKG TARGET FUZZTIME
#
# It fails when `go test -fuzz` fails, and when the execution count that
# go test prints every 3 s stays the same across more than FUZZ_MAX_STALL
# seconds (default 10): a target that stops executing has stopped fuzzing
# even when it does not fail. The longest such stretch is printed for every
# target. (One call of the fuzz function cannot take 10 s unseen either: Go
# stops the worker then and reports the input as a crash.)
#
# Two things about Go 1.26's fuzzer are handled here:
#   - Minimising is off (-fuzzminimizetime FUZZ_MINIMIZE_TIME, default 0).
#     A worker minimising an input, one that found new coverage or a
#     failing one, runs the target for up to 60 s by default, and all of it
#     for a large input (it tries removing each byte, then each range), but
#     the count go test prints leaves those runs out: the count stands still
#     and the time goes to shrinking inputs rather than to fuzzing. A failing
#     input is saved as found, and can be minimised by fuzzing again with
#     FUZZ_MINIMIZE_TIME=60s.
#   - The coordinator can fail a run that found nothing with a bare
#     "context deadline exceeded" as -fuzztime ends (golang/go#75804, a race
#     between the deadline and its own check, fixed in Go 1.27). Only the
#     -fuzztime deadline gives that error, so such a run fuzzed for all its
#     time: when it wrote no failing input and reported no crash, it passes,
#     with a note.
#
# GO (default go), FUZZ_PARALLEL (default: go test's, GOMAXPROCS) and
# FUZZ_TAGS (default lzo2) are passed on.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 PKG TARGET FUZZTIME" >&2; exit 2; }
pkg=$1 target=$2 fuzztime=$3
go=${GO:-go}
max_stall=${FUZZ_MAX_STALL:-10}
args=(-tags "${FUZZ_TAGS:-lzo2}" -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime"
	-fuzzminimizetime "${FUZZ_MINIMIZE_TIME:-0}")
[ -z "${FUZZ_PARALLEL:-}" ] || args+=(-parallel "$FUZZ_PARALLEL")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

fuzz() {
	set +e
	"$go" test "${args[@]}" "./$pkg/" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	set -e
}

# deadline_race: the run failed only by golang/go#75804: its one failure
# message is the coordinator's "context deadline exceeded", and it wrote no
# failing input and reported no crash or hung worker.
deadline_race() {
	grep -A1 -- "^--- FAIL: $target " "$log" | tail -n 1 | grep -qx '    context deadline exceeded' &&
		! grep -q -e 'Failing input written to' -e '^panic:' -e 'fuzzing process hung' "$log"
}

fuzz
if [ "$rc" -ne 0 ] && deadline_race; then
	echo "fuzz $pkg $target: ran its $fuzztime and found nothing; go test failed only by golang/go#75804 (the fuzzer's own deadline race)"
	rc=0
fi
[ "$rc" -eq 0 ] || { echo "fuzz $pkg $target: go test failed (exit $rc)"; exit "$rc"; }

# The progress lines: "fuzz: elapsed: 1m3s, execs: 20913 (390/sec), ..."
# while fuzzing, "fuzz: elapsed: 0s, gathering baseline coverage: 3/10
# completed" while running the corpus first.
awk -v max="$max_stall" -v name="$pkg $target" '
function seconds(s,   t, u) {
	t = 0
	while (match(s, /^[0-9]+[hms]/)) {
		u = substr(s, RLENGTH, 1)
		t += substr(s, 1, RLENGTH - 1) * (u == "h" ? 3600 : u == "m" ? 60 : 1)
		s = substr(s, RLENGTH + 1)
	}
	return t
}
/^fuzz: elapsed: / {
	e = $3; sub(/,$/, "", e); t = seconds(e)
	if ($4 == "execs:") count = "execs " $5
	else if ($4 == "gathering" || $4 == "testing") count = "corpus " $7
	else count = $4
	if (count != last) { last = count; since = t }
	else if (t - since > worst) { worst = t - since; from = since; what = count }
	lines++
}
END {
	if (lines == 0) { printf "fuzz %s: no progress lines to check\n", name; exit 1 }
	printf "fuzz %s: longest stretch with no new execution: %ds", name, worst
	if (worst > 0) printf " (%s, from %ds)", what, from
	printf "\n"
	if (worst > max) { printf "fuzz %s: stalled for more than %ds\n", name, max; exit 1 }
}' "$log"
