#!/bin/sh
# Rebuilds types.o and types.elf from types.c (gcc 12, DWARF 5).
set -e
cd "$(dirname "$0")"
gcc -g -fdebug-prefix-map=$PWD=. -gdwarf-5 -O0 -fno-pie -c -o types.o types.c
gcc -g -fdebug-prefix-map=$PWD=. -gdwarf-5 -O0 -fno-pie -no-pie -nostdlib -static -Wl,--entry=0 -Wl,--build-id=none -o types.elf types.c
