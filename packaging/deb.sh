#!/usr/bin/env bash
# deb.sh: build pagepipe's two Debian packages into OUT (default bin/deb):
#
#   pagepipe_VERSION_ARCH.deb                 /usr/bin/pagepipe, its manual
#                                             page, /etc/pagepipe/pagepipe.conf
#                                             (where makedumpfile is, for
#                                             the fallback), copyright,
#                                             changelog; for
#                                             each ARCH asked (default amd64
#                                             and arm64), cross-built by Go
#   pagepipe-as-makedumpfile_VERSION_all.deb  diverts Debian's makedumpfile
#                                             and links its names to pagepipe
#                                             (links only: one package for
#                                             every architecture)
#
# VERSION is cmd/pagepipe/version.go's version with Debian revision 1. Each
# package is a tree staged here, from the files in packaging/debian, and
# built with dpkg-deb --root-owner-group: no debhelper, no source package.
# docs/packaging.md says what the packages do.
set -euo pipefail

prog=${0##*/}
# shellcheck source=packaging/lib.sh
. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"

# Debian's revision of the packaging, and the Maintainer: field.
deb_revision=1
maintainer='pagepipe maintainers <maintainers@users.noreply.a-seed-2c52186d.example>'

usage() {
	cat <<EOF
usage: $prog [--out DIR] [ARCH...]

Builds pagepipe_VERSION_ARCH.deb for each ARCH (amd64, arm64; default both)
and pagepipe-as-makedumpfile_VERSION_all.deb into DIR (default bin/deb), and
prints their paths.
EOF
}

pp_args "$repo_root/bin/deb" "$@"
command -v dpkg-deb >/dev/null || die "no dpkg-deb: install dpkg"

upstream=$(pp_version)
version=$upstream-$deb_revision
SOURCE_DATE_EPOCH=$(pp_source_date_epoch)
export SOURCE_DATE_EPOCH
debian=$repo_root/packaging/debian

pp_work deb

# fill FILE: the template with the package's fields put in.
fill() {
	sed -e "s|@VERSION@|$version|g" -e "s|@UPSTREAM@|$upstream|g" -e "s|@ARCH@|$arch|g" \
		-e "s|@MAINTAINER@|$maintainer|g" -e "s|@DATE@|$(date -u -R -d "@$SOURCE_DATE_EPOCH")|g" \
		-e "s|@INSTALLED_SIZE@|${installed_size:-}|g" "$1"
}

# docs ROOT PACKAGE: the copyright file and the gzipped changelog every
# package carries in /usr/share/doc, and its lintian overrides (each says
# why).
docs() {
	local doc=$1/usr/share/doc/$2
	install -d "$doc" "$1/usr/share/lintian/overrides"
	install -m 0644 "$debian/copyright" "$doc/copyright"
	fill "$debian/changelog.in" | gzip -9n >"$doc/changelog.Debian.gz"
	chmod 0644 "$doc/changelog.Debian.gz"
	install -m 0644 "$debian/$2.lintian-overrides" "$1/usr/share/lintian/overrides/$2"
}

# finish ROOT PACKAGE: control (with Installed-Size as dpkg-gencontrol
# counts it: KiB per file, rounded up, and 1 per directory or link),
# md5sums, maintainer scripts, and time stamps; then the .deb.
finish() {
	local root=$1 pkg=$2 s
	installed_size=$(cd "$root" && find . -mindepth 1 ! -path './DEBIAN*' -printf '%y %s\n' |
		awk '$1 == "f" { n += int(($2 + 1023) / 1024); next } { n++ } END { print n + 0 }')
	install -d "$root/DEBIAN"
	fill "$debian/$pkg.control" >"$root/DEBIAN/control"
	# md5sums lists every file but the conffiles (in etc), as
	# dh_md5sums does: dpkg keeps the conffiles' sums itself.
	(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
	chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
	if [ -d "$root/etc" ]; then
		(cd "$root" && find etc -type f -printf '/%p\n' | LC_ALL=C sort) >"$root/DEBIAN/conffiles"
		chmod 0644 "$root/DEBIAN/conffiles"
	fi
	for s in preinst postinst prerm postrm; do
		[ -f "$debian/$pkg.$s" ] || continue
		install -m 0755 "$debian/$pkg.$s" "$root/DEBIAN/$s"
	done
	find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
	dpkg-deb --root-owner-group --build "$root" "$out/${pkg}_${version}_$arch.deb" >/dev/null ||
		die "dpkg-deb --build $pkg for $arch failed"
	echo "$out/${pkg}_${version}_$arch.deb"
}

for arch in "${arches[@]}"; do
	log "building $version for $arch"
	root=$work/$arch/pagepipe
	install -d "$root/usr/bin" "$root/usr/share/man/man8"
	pp_build "$arch" "$root/usr/bin/pagepipe"
	chmod 0755 "$root/usr/bin/pagepipe"
	gzip -9n <"$repo_root/docs/pagepipe.8" >"$root/usr/share/man/man8/pagepipe.8.gz"
	chmod 0644 "$root/usr/share/man/man8/pagepipe.8.gz"
	# Where pagepipe finds makedumpfile to hand over to (a conffile).
	install -D -m 0644 "$repo_root/packaging/pagepipe.conf" "$root/etc/pagepipe/pagepipe.conf"
	docs "$root" pagepipe
	finish "$root" pagepipe
done

# The package of links has no architecture-dependent files: Architecture: all.
arch=all
root=$work/$arch/pagepipe-as-makedumpfile
install -d "$root/usr/bin" "$root/usr/share/man/man8"
ln -s pagepipe "$root/usr/bin/makedumpfile"
ln -s pagepipe.8.gz "$root/usr/share/man/man8/makedumpfile.8.gz"
docs "$root" pagepipe-as-makedumpfile
finish "$root" pagepipe-as-makedumpfile
