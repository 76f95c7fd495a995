#!/bin/bash
# scripts/ab-identity.sh BASE NEW VMCORE...
#
# Proves that two pagepipe binaries write the same bytes: for each VMCORE,
# every output shape is written by BASE and by NEW with the same options
# and compared with cmp (and the exit codes too). The shapes: kdump with
# each codec (-l, -z, -c, -p, none), several dump levels, one and two
# workers; ELF (-E); a flattened stream (-F); --split into three; with
# --priority on and off (file, stream, split); cyclic bitmaps (a small
# --cyclic-buffer, --work-dir); a dump cut short by -L (placed and
# prioritised files: the incomplete dump's bytes; -L with --split is
# refused); -R rebuilding the base's
# stream, whole and cut short; --reassemble of the base's split files.
#
# A refactoring that says "no behaviour change" runs this with the binary
# of the commit before it as BASE. It prints one line per case and a
# summary, and exits non-zero if any case differs or the base's exit code
# is not the one the case expects (0, or 1 for a dump cut short), so that
# two binaries that fail alike prove nothing silently. A vmcore needs
# struct pages in VMCOREINFO (-d 31): a real one, or a generated kernel
# machine (pagepipe-bench gen-vmcore --profile 6.1). Outputs are written
# under ${TMPDIR:-/tmp} and removed case by case.
set -uo pipefail

die() { echo "ab-identity.sh: $*" >&2; exit 2; }
[ $# -ge 3 ] || die "usage: $0 BASE NEW VMCORE..."
base=$(realpath "$1") new=$(realpath "$2")
shift 2
[ -x "$base" ] || die "$base is not executable"
[ -x "$new" ] || die "$new is not executable"

work=$(mktemp -d "${TMPDIR:-/tmp}/ab-identity.XXXXXX")
trap 'rm -rf "$work"' EXIT
same=0 differ=0

# run BIN DIR ARGS...: runs BIN in DIR (its outputs are named there),
# keeping its exit code in DIR/rc and its stdout in DIR/stdout.
run() {
	local bin=$1 dir=$2
	shift 2
	rm -rf "$dir" && mkdir -p "$dir/wd"
	(cd "$dir" && "$bin" "$@" >stdout 2>stderr; echo $? >rc)
}

# compare NAME: compares every file the two runs left (but stderr, whose
# timings differ) and reports.
compare() {
	local name=$1 why=""
	for f in $(cd "$work/a" && find . -type f ! -name stderr | sort); do
		if [ ! -f "$work/b/$f" ]; then
			why+=" $f:missing"
		elif ! cmp -s "$work/a/$f" "$work/b/$f"; then
			why+=" $f:$(cmp "$work/a/$f" "$work/b/$f" 2>&1 | head -c 120)"
		fi
	done
	if [ "$(cat "$work/a/rc")" != "$want" ]; then
		why+=" the base's exit code $(cat "$work/a/rc"), not $want: $(tail -n1 "$work/a/stderr" | head -c 160)"
	fi
	if [ -z "$why" ]; then
		same=$((same + 1))
		printf 'same    %-44s rc %s, %s bytes\n' "$name" "$(cat "$work/a/rc")" "$(du -cb "$work/a" | tail -n1 | cut -f1)"
	else
		differ=$((differ + 1))
		printf 'DIFFER  %-44s%s\n' "$name" "$why"
	fi
}

# case NAME ARGS...: both binaries with ARGS (@V is the vmcore); the
# base's exit code must be $want (0, or 1 for a dump cut short).
want=0
case_() {
	local name=$1
	shift
	local args=("${@//@V/$vmcore}")
	run "$base" "$work/a" "${args[@]}"
	run "$new" "$work/b" "${args[@]}"
	compare "$name"
}

for vmcore in "$@"; do
	vmcore=$(realpath "$vmcore")
	[ -r "$vmcore" ] || die "$vmcore is not readable"
	echo "== $vmcore"
	for codec in -l -z -c -p ""; do
		case_ "kdump ${codec:-raw} -d 31" $codec -d 31 @V dump
	done
	case_ "kdump -l -d 1" -l -d 1 @V dump
	case_ "kdump -c -d 0" -c -d 0 @V dump
	case_ "kdump -l -d 31, 1 worker" -l -d 31 --num-threads 1 @V dump
	case_ "kdump -l -d 31, 2 workers" -l -d 31 --num-threads 2 @V dump
	case_ "kdump -l -d 31 --priority=on" -l -d 31 --priority=on @V dump
	case_ "kdump -l -d 31 --priority=off" -l -d 31 --priority=off @V dump
	case_ "kdump -l --cyclic-buffer 64" -l -d 31 --cyclic-buffer 64 @V dump
	case_ "kdump -z --work-dir" -z -d 31 --work-dir wd @V dump
	want=1
	case_ "kdump -l -L 8M (incomplete)" -l -d 31 -L 8M @V dump
	case_ "kdump -l -L 8M --priority=on" -l -d 31 -L 8M --priority=on @V dump
	case_ "kdump -l -L 8M --priority=off" -l -d 31 -L 8M --priority=off @V dump
	want=0
	case_ "ELF -E -d 31" -E -d 31 @V dump
	case_ "ELF -E -d 1 --cyclic-buffer 64" -E -d 1 --cyclic-buffer 64 @V dump
	case_ "flattened -F -l -d 31" -F -l -d 31 @V
	case_ "flattened -F -z --priority=on" -F -z -d 31 --priority=on @V
	case_ "flattened -F -E -d 31" -F -E -d 31 @V
	case_ "split -l -d 31 (3)" --split -l -d 31 @V p1 p2 p3
	case_ "split -z --priority=on (3)" --split -z -d 31 --priority=on @V p1 p2 p3

	# -R and --reassemble from the base's stream and split files.
	mkdir -p "$work/in"
	(cd "$work/in" && "$base" -F -l -d 31 "$vmcore" >stream 2>/dev/null &&
		"$base" -F -l -d 31 --priority=on "$vmcore" >pstream 2>/dev/null &&
		"$base" --split -c -d 31 "$vmcore" s1 s2 s3 >/dev/null 2>&1) || die "the base binary failed on $vmcore"
	half=$(($(stat -c %s "$work/in/stream") / 2))
	head -c "$half" "$work/in/stream" >"$work/in/cut"
	head -c "$(($(stat -c %s "$work/in/pstream") / 2))" "$work/in/pstream" >"$work/in/pcut"
	for s in stream pstream cut pcut; do
		want=0
		case $s in *cut) want=1 ;; esac
		run "$base" "$work/a" -R dump <"$work/in/$s"
		run "$new" "$work/b" -R dump <"$work/in/$s"
		compare "-R from $s"
	done
	want=0
	case_ "--reassemble (3)" --reassemble "$work/in/s1" "$work/in/s2" "$work/in/s3" dump
	rm -rf "$work/in" "$work/a" "$work/b"
done
echo "ab-identity: $same same, $differ differ (base $base, new $new)"
[ "$differ" -eq 0 ]
