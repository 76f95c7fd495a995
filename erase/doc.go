// Package erase erases sensitive data from a dump as makedumpfile's
// --config does (makedumpfile.conf(5)): it reads a filter config (Parse),
// resolves its commands against the crashed kernel's types and symbols
// and its memory into the byte ranges to overwrite (Resolve), and applies
// them to the pages as the copy pass writes them, recording what was
// erased as makedumpfile's ERASEINFO text.
//
// The resolution follows makedumpfile's erase_info.c step for step, so
// that the same config erases the same bytes and records the same
// ERASEINFO: sizes come from the final type of a symbol or member (a
// pointer's target, an array's element), a char * erases the string it
// points at (up to 1024 bytes), loops walk arrays, `via` lists and
// list_heads, and a range is erased only where its first page is dumped.
// The types and symbols come from a debuginfo.Resolver: the vmlinux's
// DWARF (-x) or the kernel's own BTF and kallsyms inside the vmcore.
package erase
