// Package kernel holds what pagepipe knows about the crashed Linux kernel
// itself, as opposed to the dump file that carries its memory: the
// VMCOREINFO text the kernel exports about its own layout, and each
// architecture's page-table walk (x86_64, arm64, ppc64le, riscv64: Arch)
// that turns kernel virtual addresses into physical ones.
//
// Everything here reads memory through the small PhysReader interface, so the
// same code serves /proc/vmcore-shaped ELF files, QEMU's ELF dumps and
// synthetic memory images in tests. Input comes from a crashed (and possibly
// corrupted) kernel, so every value read from it is treated as hostile: bad
// data produces a wrapped error naming what was being read, never a panic or
// an unbounded loop or allocation.
package kernel
