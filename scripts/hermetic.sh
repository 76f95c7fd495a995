#!/bin/bash
# scripts/hermetic.sh [--cold] [GO TEST ARGS...]
#
# Proves that plain `go test ./...` (no build tags) is hermetic: it runs it
# on a copy of this working tree as an unprivileged user, with none of the
# peers on PATH (makedumpfile, crash, drgn, python3, qemu-*, busybox, dpkg,
# apt), no network, no fixture cache and modules only from a local proxy,
# and prints the wall time. docs/testing.md records the measured figure.
#
# Run as root (as make test's machines are), it creates the user
# pagepipe-hermetic if needed and runs the tests in new mount and network
# namespaces (unshare) in which the peers' files are hidden even from
# absolute paths (/usr/bin/python3 is covered by /dev/null, the fixture
# cache by an empty tmpfs) and there is no network interface but a down
# loopback. Run as any other user, it runs the tests as that user with the
# same PATH and environment, but cannot hide absolute paths or the network.
#
# Modules come from a copy of the caller's module download cache served as
# GOPROXY=file://, so the run needs no network: run `go mod download` first
# on a machine that has never built pagepipe. The copy, the user's GOCACHE
# and GOMODCACHE live in $PAGEPIPE_HERMETIC_DIR (default
# ${TMPDIR:-/tmp}/pagepipe-hermetic) and are kept between runs; --cold
# empties them first, so that the time includes building everything, as a
# developer's first `go test ./...` does.
#
# GO TEST ARGS default to `-count=1 ./...`.
set -euo pipefail

die() { echo "hermetic.sh: $*" >&2; exit 1; }

cold=0
if [[ ${1:-} == --cold ]]; then
	cold=1
	shift
fi
(($#)) || set -- -count=1 ./...

# The peers a hermetic test must not reach: PATH names (globs) and, as
# root, every file of those names in the system's bin directories.
peers=(makedumpfile 'crash' 'crash-*' drgn 'python3' 'python3.*' 'python' 'qemu-*' busybox 'dpkg' 'dpkg-*' 'apt' 'apt-*' debootstrap)
sysdirs=(/usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin)
user=pagepipe-hermetic

src=$(cd "$(dirname "$0")/.." && pwd)
[[ -f $src/go.mod ]] || die "no go.mod in $src"
gobin=$(command -v go) || die "no go on PATH"
goroot=$("$gobin" env GOROOT)
modcache=$("$gobin" env GOMODCACHE)
[[ -d $modcache/cache/download ]] || die "no module download cache in $modcache: run go mod download first"

base=${PAGEPIPE_HERMETIC_DIR:-${TMPDIR:-/tmp}/pagepipe-hermetic}
mkdir -p "$base"
base=$(cd "$base" && pwd)
if ((cold)); then
	rm -rf "$base/gocache" "$base/gomodcache"
fi
# The tree, the temp dir and the home are fresh for every run.
rm -rf "$base/src" "$base/tmp" "$base/home" "$base/bin" "$base/proxy"
mkdir -p "$base/src" "$base/tmp" "$base/home" "$base/bin" "$base/gocache" "$base/gomodcache"

# The working tree as it is: tracked files and untracked ones git does not
# ignore, without .git (as a tarball of the source would be).
(cd "$src" && git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [[ -e $f ]] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -C "$base/src" -xf -
cp -r "$modcache/cache/download" "$base/proxy"

# PATH: a directory of links to every command of the system's bin
# directories except the peers (first of a name wins, as on PATH).
is_peer() {
	local p
	for p in "${peers[@]}"; do
		# shellcheck disable=SC2053 # p is a glob
		[[ $1 == $p ]] && return 0
	done
	return 1
}
for d in "${sysdirs[@]}"; do
	[[ -d $d ]] || continue
	for f in "$d"/*; do
		n=${f##*/}
		[[ -x $f && ! -d $f && ! -e $base/bin/$n ]] || continue
		is_peer "$n" || ln -s "$f" "$base/bin/$n"
	done
done
ln -sf "$goroot/bin/go" "$base/bin/go"
ln -sf "$goroot/bin/gofmt" "$base/bin/gofmt"

env_args=(
	HOME="$base/home" PATH="$base/bin" TMPDIR="$base/tmp" LANG=C.UTF-8
	GOROOT="$goroot" GOCACHE="$base/gocache" GOMODCACHE="$base/gomodcache"
	GOPROXY="file://$base/proxy" GOSUMDB=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly
	GOTELEMETRY=off
)

hide=""
if ((EUID == 0)); then
	id "$user" >/dev/null 2>&1 ||
		useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user" ||
		die "cannot create the user $user"
	chown -R "$user:" "$base"
	# The peers' files, hidden in the namespace by /dev/null bound over each.
	for d in "${sysdirs[@]}"; do
		[[ -d $d ]] || continue
		for f in "$d"/*; do
			is_peer "${f##*/}" && [[ -e $f ]] && hide+=" $(printf %q "$(readlink -f "$f")")"
		done
	done
	fixtures=${PAGEPIPE_FIXTURES:-/tmp/pagepipe-fixtures}
	setup="set -e; for f in $hide; do mount --bind /dev/null \"\$f\"; done"
	if [[ -d $fixtures ]]; then
		setup+="; mount -t tmpfs -o size=1m,ro none $(printf %q "$fixtures")"
	fi
	run=(unshare --mount --net --fork --propagation private -- bash -c
		"$setup; exec setpriv --reuid=$user --regid=$user --init-groups --inh-caps=-all -- env -i \"\$@\"" hermetic)
	who="$user (uid $(id -u "$user")), in mount and network namespaces"
else
	run=(env -i)
	who="$(id -un) (uid $EUID); absolute paths and the network not hidden (not root)"
fi

# Before the tests, in their environment: no peer on PATH, none runnable
# by its absolute path (as root), no network interface up.
check='for p in makedumpfile crash drgn python3 qemu-system-x86_64 qemu-aarch64-static busybox dpkg-query; do
	if command -v "$p" >/dev/null; then echo "hermetic.sh: $p is on PATH: $(command -v "$p")"; exit 1; fi
done
for f in $HERMETIC_HIDDEN; do
	if [ -x "$f" ]; then echo "hermetic.sh: $f can be run"; exit 1; fi
done
if [ -n "$HERMETIC_NONET" ] && grep -qv "^ *lo:\|^Inter\|^ face" /proc/net/dev; then echo "hermetic.sh: a network interface is there"; exit 1; fi
exec "$@"'
env_args+=(HERMETIC_HIDDEN="$hide" HERMETIC_NONET=$( ((EUID == 0)) && echo 1))

echo "hermetic.sh: go test $* as $who; $(nproc) CPUs; $( ((cold)) && echo cold caches || echo caches kept in "$base")"
start=$(date +%s.%N)
set +e
(cd "$base/src" && "${run[@]}" "${env_args[@]}" bash -c "$check" check go test "$@")
rc=$?
set -e
end=$(date +%s.%N)
secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
if ((rc == 0)); then
	echo "hermetic.sh: passed in ${secs} s"
else
	echo "hermetic.sh: FAILED (exit $rc) after ${secs} s"
fi
exit $rc
