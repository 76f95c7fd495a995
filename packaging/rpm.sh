#!/usr/bin/env bash
# rpm.sh: build pagepipe's RPM packages (packaging/pagepipe.spec) for each
# architecture asked (Go's names: amd64, arm64; default both) into OUT
# (default bin/rpm): pagepipe-VERSION-1.ARCH.rpm for each, and
# pagepipe-as-makedumpfile-VERSION-1.noarch.rpm. The binary is the one
# packaging/deb.sh puts in the Debian package (the same build), handed to
# rpmbuild -bb as a source; VERSION is cmd/pagepipe/version.go's. Debian's
# rpm package provides rpmbuild. Nothing here installs an RPM.
set -euo pipefail

prog=${0##*/}
# shellcheck source=packaging/lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"

usage() {
	cat <<EOF
usage: $prog [--out DIR] [ARCH...]

Builds pagepipe's RPMs for each ARCH (amd64, arm64; default both) into DIR
(default bin/rpm), and prints their paths.
EOF
}

pp_args "$repo_root/bin/rpm" "$@"
command -v rpmbuild >/dev/null || die "no rpmbuild: run scripts/deps.sh (Debian's rpm package provides it)"

version=$(pp_version)
SOURCE_DATE_EPOCH=$(pp_source_date_epoch)
export SOURCE_DATE_EPOCH

pp_work rpm
declare -A listed=()

for arch in "${arches[@]}"; do
	case $arch in
	amd64) target=x86_64 ;;
	arm64) target=aarch64 ;;
	*) die "unsupported architecture '$arch': amd64 or arm64" ;;
	esac
	log "building $version for $target"
	src=$work/$arch/SOURCES
	install -d "$src"
	pp_build "$arch" "$src/pagepipe"
	install -m 0644 "$repo_root/docs/pagepipe.8" "$src/pagepipe.8"
	install -m 0644 "$repo_root/packaging/debian/copyright" "$src/copyright"
	install -m 0644 "$repo_root/packaging/pagepipe.conf" "$src/pagepipe.conf"
	# The packages' times are SOURCE_DATE_EPOCH's, not the build's. No
	# post-install scripts: the binary is stripped and the manual page
	# compressed already, and this machine's (Debian's rpm) would run its
	# own strip over a foreign architecture's binary.
	rpmbuild -bb --quiet --target "$target" --define "__os_install_post %{nil}" \
		--define "_topdir $work/$arch" --define "_sourcedir $src" --define "_rpmdir $work/$arch/RPMS" \
		--define "pp_version $version" \
		--define "use_source_date_epoch_as_buildtime 1" --define "clamp_mtime_to_source_date_epoch 1" \
		--define "_buildhost pagepipe" \
		"$repo_root/packaging/pagepipe.spec" >"$work/$arch/rpmbuild.log" 2>&1 ||
		die "rpmbuild -bb --target $target failed: $(tail -n 20 "$work/$arch/rpmbuild.log")"
	while IFS= read -r -d '' f; do
		cp "$f" "$out/"
		# The noarch package comes out of every target's build: name it once.
		[ -n "${listed[${f##*/}]:-}" ] || echo "$out/${f##*/}"
		listed[${f##*/}]=1
	done < <(find "$work/$arch/RPMS" -name '*.rpm' -print0 | LC_ALL=C sort -z)
done
