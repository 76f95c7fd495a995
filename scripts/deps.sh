#!/usr/bin/env bash
# Installs the Debian packages pagepipe's tests use, when they are missing:
# the real peers that judge its dumps (makedumpfile, crash, libkdumpfile,
# drgn), liblzo2 for the LZO cross-checks, what the real-kernel fixture
# maker boots (QEMU, Debian's kernel, busybox; kexec-tools, whose kexec -p
# loads the capture kernel in fixtures/make-capture.sh), Debian's kdump-tools,
# whose kdump-config e2e/distro_test.go runs against the fixture, and what
# packaging/ builds and checks pagepipe's packages with: debootstrap (the
# minimal Debian system they are installed into), lintian, and rpm (for
# rpmbuild), and qemu-user-static, which runs the arm64 pagepipe binary
# in the tests (issue 19), qemu-system-ppc, which boots the ppc64le
# fixture (issue 23), and qemu-system-misc (qemu-system-riscv64) with
# qemu-system-data (OpenSBI), which boot the riscv64 capture fixture
# (issue 36).
set -euo pipefail

pkgs=(
	makedumpfile crash python3-libkdumpfile python3-drgn
	liblzo2-dev zlib1g-dev libsnappy-dev libzstd-dev gcc
	qemu-system-x86 linux-image-amd64 busybox-static cpio e2fsprogs kmod
	kdump-tools kexec-tools
	debootstrap lintian rpm
	qemu-user-static qemu-system-arm qemu-system-ppc qemu-system-misc qemu-system-data
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if [[ " ${missing[*]} " == *" kexec-tools "* ]]; then
	# kexec -p is run inside the fixtures' guests only: the package must not
	# load a kexec kernel on this machine at reboot.
	echo 'kexec-tools kexec-tools/load_kexec boolean false' | debconf-set-selections
fi
if [[ " ${missing[*]} " == *" kdump-tools "* ]]; then
	# The tests only need kdump-config; installing kdump-tools must not arm
	# kdump on this machine:
	# - answer its debconf question "enable kdump?" with no (USE_KDUMP=0);
	# - divert its GRUB snippet (crashkernel=384M-:128M), so that the
	#   update-grub its postinst runs where GRUB is installed changes nothing;
	# - while installing, a policy-rc.d that forbids starting services
	#   (invoke-rc.d and deb-systemd-invoke honour it), unless one is there.
	# Its initramfs hook makes dpkg regenerate the initramfs once (minutes).
	echo 'kdump-tools kdump-tools/use_kdump boolean false' | debconf-set-selections
	dpkg-divert --quiet --local --rename --divert /etc/default/grub.d/kdump-tools.cfg.pagepipe-disabled \
		--add /etc/default/grub.d/kdump-tools.cfg
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
