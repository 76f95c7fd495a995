package main

import (
	"fmt"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
	"pagepipe/kernel"
	"pagepipe/source"
)

// arm64Machines are the generated arm64 kernel machines dumped below: every
// VA size arm64 Linux has with 4 KiB pages (48 is Debian's), a 52-bit
// kernel on hardware without 52-bit VAs, and 52-bit physical addresses
// (LPA2 descriptors); then every VA size with 16 KiB pages (47, 48) and
// with 64 KiB pages (42, 48, 52, and 52-bit PAs: FEAT_LPA descriptors).
// shapes marks the machines every output shape and codec is checked on;
// readers those that libkdumpfile and drgn read back.
var arm64Machines = []struct {
	name   string
	ks     synth.KernelSpec
	mib    int
	page   uint64 // 0: 4 KiB
	levels []string
	shapes bool
}{
	{"va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 128, 0, allLevels, true},
	{"va39", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 39}, 96, 0, []string{"1", "31", "11"}, false},
	{"va52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52}, 96, 0, []string{"1", "31", "11"}, false},
	{"va52-on-48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, VABitsActual: 48}, 96, 0, []string{"1", "31"}, false},
	{"va52-pa52", synth.KernelSpec{Profile: "6.12", KASLR: true, VABits: 52, PA52: true}, 96, 0, []string{"1", "31"}, false},
	{"16k-va47", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 47}, 128, 16 << 10, allLevels, true},
	{"16k-va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 96, 16 << 10, []string{"1", "31", "11"}, false},
	{"64k-va42", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 42}, 128, 64 << 10, allLevels, true},
	{"64k-va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 96, 64 << 10, []string{"1", "31", "11"}, false},
	{"64k-va52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52}, 96, 64 << 10, []string{"1", "31", "11"}, false},
	{"64k-va52-on-48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, VABitsActual: 48}, 96, 64 << 10, []string{"1", "31"}, false},
	{"64k-va52-pa52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, PA52: true}, 96, 64 << 10, []string{"1", "31"}, false},
	{"64k-va48-pa52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48, PA52: true}, 96, 64 << 10, []string{"1", "31"}, false},
}

// allLevels are the dump levels issue 19 names.
var allLevels = []string{"0", "1", "2", "4", "8", "16", "31", "11", "27"}

// arm64Machine is the spec of one of arm64Machines.
func arm64Machine(ks synth.KernelSpec, mib int, page uint64) synth.Spec {
	s := synth.NewARM64Machine(ks, mib)
	s.PageSize = page
	return s
}

// wantTruth is what a dump of kernel machine s at level must hold: the generator's
// pages of the pfns its truth keeps.
func wantTruth(t *testing.T, s synth.Spec, level string) (judge.Pages, []byte) {
	t.Helper()
	var l int
	fmt.Sscan(level, &l)
	bits, _, err := synth.ExpectedFilter(s, l)
	if err != nil {
		t.Fatal(err)
	}
	m := bitmap.FromBytes(bits, uint64(len(bits))*8)
	want := judge.Pages{}
	buf := make([]byte, s.PageBytes())
	for pfn := m.NextSet(0); pfn < m.Len(); pfn = m.NextSet(pfn + 1) {
		synth.Page(s, pfn, buf)
		want[pfn] = judge.Hash(buf)
	}
	return want, bits
}

// vi is the VMCOREINFO of the kernel machine s.
func vi(t *testing.T, s synth.Spec) *kernel.VMCOREINFO {
	t.Helper()
	text, err := synth.KernelVMCOREINFO(s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := kernel.ParseVMCOREINFO([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// elfPages hashes every page the ELF dump v holds, read through
// pagepipe's own reader.
func elfPages(t *testing.T, v *source.Vmcore) judge.Pages {
	t.Helper()
	ps := v.PageSize()
	buf := make([]byte, ps)
	_, has := v.Bitmaps(v.MaxMapnr, source.PartialPages{})
	got := judge.Pages{}
	for pfn := has.NextSet(0); pfn < has.Len(); pfn = has.NextSet(pfn + 1) {
		if err := v.ReadPhys(pfn*ps, buf); err != nil {
			t.Fatal(err)
		}
		got[pfn] = judge.Hash(buf)
	}
	return got
}
