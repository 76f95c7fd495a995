# lib.sh: what packaging/deb.sh and packaging/rpm.sh share; sourced, not run.
#
# Both package the same program: ./cmd/pagepipe built static (no cgo) for
# Linux on a given GOARCH, its version read from cmd/pagepipe/version.go.

repo_root=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)

die() {
	printf '%s: error: %s\n' "$prog" "$*" >&2
	exit 1
}

log() {
	printf '%s: %s\n' "$prog" "$*" >&2
}

# pp_version prints pagepipe's version: the one `const version = "..."`
# line of cmd/pagepipe/version.go, which `pagepipe -v` prints.
pp_version() {
	local f=$repo_root/cmd/pagepipe/version.go v
	v=$(sed -n 's/^const version = "\([^"]*\)"$/\1/p' "$f")
	[[ $v =~ ^[0-9][0-9A-Za-z.+~]*$ ]] ||
		die "$f: no line 'const version = \"X.Y.Z\"' with a version a package can carry (got '$v')"
	printf '%s\n' "$v"
}

# pp_source_date_epoch prints the time the packages carry (file times, the
# changelog's date), so that the same source makes the same packages: when
# the version line last changed in git, else version.go's modification
# time. SOURCE_DATE_EPOCH, when set, wins.
pp_source_date_epoch() {
	local f=cmd/pagepipe/version.go t=
	if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		t=$SOURCE_DATE_EPOCH
	elif git -C "$repo_root" rev-parse --git-dir >/dev/null 2>&1; then
		t=$(git -C "$repo_root" log -1 --format=%ct -- "$f" 2>/dev/null || true)
	fi
	[ -n "$t" ] || t=$(stat -c %Y "$repo_root/$f")
	[[ $t =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH must be seconds since 1970 (got '$t')"
	printf '%s\n' "$t"
}

# pp_go prints the go command: GO, else go on PATH, else /usr/local/go's.
pp_go() {
	if [ -n "${GO:-}" ]; then
		printf '%s\n' "$GO"
	elif command -v go >/dev/null; then
		command -v go
	elif [ -x /usr/local/go/bin/go ]; then
		printf '%s\n' /usr/local/go/bin/go
	else
		die "no go command: set GO or put go on PATH"
	fi
}

# pp_build GOARCH OUT builds the capture-kernel binary for linux/GOARCH at
# OUT: static (CGO_ENABLED=0), stripped (-s -w), and reproducible (no build
# id, no VCS stamp, no local paths).
pp_build() {
	local goarch=$1 out=$2
	case $goarch in
	amd64 | arm64) ;;
	*) die "unsupported architecture '$goarch': amd64 or arm64" ;;
	esac
	(cd "$repo_root" && CGO_ENABLED=0 GOOS=linux GOARCH=$goarch "$(pp_go)" build -trimpath -buildvcs=false \
		-ldflags='-s -w -buildid=' -o "$out" ./cmd/pagepipe) ||
		die "go build ./cmd/pagepipe for $goarch failed"
}

# pp_args DEFAULT_OUT ARG... parses the command line both scripts take,
# [--out DIR] [ARCH...], into out (made, and absolute) and arches (amd64
# and arm64 when none is named); -h prints the caller's usage.
pp_args() {
	out=$1
	shift
	arches=()
	while [ $# -gt 0 ]; do
		case $1 in
		--out) out=${2:?--out needs a directory}; shift 2 ;;
		--out=*) out=${1#*=}; shift ;;
		-h | --help) usage; exit 0 ;;
		-*) usage >&2; die "unknown option: $1" ;;
		*) arches+=("$1"); shift ;;
		esac
	done
	[ ${#arches[@]} -gt 0 ] || arches=(amd64 arm64)
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
}

# pp_work KIND sets umask 022 (the packages' modes come from the staged
# files) and work, a directory removed when the script exits.
pp_work() {
	umask 022
	work=$(mktemp -d "${TMPDIR:-/tmp}/pagepipe-$1.XXXXXX")
	trap 'rm -rf "$work"' EXIT
}
