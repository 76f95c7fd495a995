#!/usr/bin/env bash
# Installs the Debian packages pagepipe's tests use, when they are missing:
# the real peers that judge its dumps (makedumpfile, crash, libkdumpfile,
# drgn), liblzo2 for the LZO cross-checks, and what the real-kernel fixture
# maker boots (QEMU, Debian's kernel, busybox).
set -euo pipefail

pkgs=(
	makedumpfile crash python3-libkdumpfile python3-drgn
	liblzo2-dev zlib1g-dev libsnappy-dev libzstd-dev gcc
	qemu-system-x86 linux-image-amd64 busybox-static cpio e2fsprogs kmod
)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
