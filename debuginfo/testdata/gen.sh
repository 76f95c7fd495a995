#!/bin/sh
# Rebuilds types.o and types.elf from types.c (gcc 12, DWARF 5).
set -e
cd "$(dirname "$0")"
gcc -g -fdebug-prefix-map=$PWD=. -gdwarf-5 -O0 -fno-pie -c -o types.o types.c
gcc -g -fdebug-prefix-map=$PWD=. -gdwarf-5 -O0 -fno-pie -no-pie -nostdlib -static -Wl,--entry=0 -Wl,--build-id=none -o types.elf types.c
# types.btf: the BTF pahole (dwarves 1.24, Debian 12's, as the 6.1
# kernel's) makes of types.elf's DWARF.
cp types.elf types.btf.elf
pahole -J types.btf.elf
objcopy --dump-section .BTF=types.btf types.btf.elf
rm types.btf.elf
