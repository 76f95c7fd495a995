package main

import (
	"pagepipe/internal/synth"
)

// ppc64Machines are the generated ppc64le kernel machines with 4 KiB pages
// (Debian 13's default powerpc64le flavour) dumped below: radix, whose
// vmemmap is found by the walk through the top table's 13th page, and
// hash, whose vmemmap is vmemmap_list's alone and whose vmalloc is at
// 0xc0003d0000000000. Each is dumped at every level and in every shape
// and codec.
var ppc64Machines = []struct {
	name string
	ks   synth.KernelSpec
	mib  int
}{
	{"radix", synth.KernelSpec{Profile: "6.12"}, 130},
	{"hash", synth.KernelSpec{Profile: "6.12", HashMMU: true}, 130},
}
