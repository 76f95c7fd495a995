package main

import (
	"testing"

	"pagepipe/internal/synth"
	"pagepipe/kernel"
)

// riscvMachines are the generated riscv64 kernel machines (Debian 13's
// 6.12 on QEMU's virt board) dumped below: one per translation mode, Sv57
// (what QEMU's rv64 gives, so the real fixture's), Sv48 and Sv39. shapes
// marks the one every output shape and codec is checked on.
var riscvMachines = []struct {
	name   string
	vaBits int
	mib    int
	levels []string
	shapes bool
}{
	{"sv57", 57, 128, allLevels, true},
	{"sv48", 48, 96, []string{"1", "31", "11"}, false},
	{"sv39", 39, 96, allLevels, false},
}

func riscvMachine(vaBits, mib int) synth.Spec {
	return synth.NewRISCV64Machine(synth.KernelSpec{Profile: "6.12", VABits: vaBits}, mib)
}

// The generated machines' tables are what the kernel's would be: every
// struct page of the vmemmap, the linear map and the image translate
// through pagepipe's walk to where the generator put them, in the
// superpage sizes it chose (1 GiB and 2 MiB leaves in the linear map,
// 2 MiB ones in the vmemmap, 4 KiB pages for the image's first 2 MiB).
func TestRISCV64GeneratedTables(t *testing.T) {
	for _, m := range riscvMachines {
		t.Run(m.name, func(t *testing.T) {
			s := riscvMachine(m.vaBits, 1100)
			info := vi(t, s)
			tr, err := kernel.RISCV64.NewTranslator(specPhys{s}, info)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[int]int{39: 3, 48: 4, 57: 5}[m.vaBits]; tr.Levels() != want {
				t.Fatalf("%d levels", tr.Levels())
			}
			po, _ := info.NumberUnsigned("PAGE_OFFSET")
			link, _ := info.NumberUnsigned("KERNEL_LINK_ADDR")
			off, _ := info.NumberUnsigned("va_kernel_pa_offset")
			for _, c := range []struct {
				va, pa, size uint64
			}{
				{po + 0x1234, 0x80001234, 1 << 30},
				{po + 1<<30 + 0x5678, 0xc0005678, 1 << 21}, // 1100 MiB: the second GiB is not whole
				{link + 0x10, link + 0x10 - off, 1 << 12},
				{link + 4<<20, link + 4<<20 - off, 1 << 21},
			} {
				m, err := tr.Lookup(c.va)
				if err != nil || m.Paddr != c.pa || m.PageSize != c.size {
					t.Errorf("Lookup(%#x) = %#x/%#x, %v; want %#x/%#x", c.va, m.Paddr, m.PageSize, err, c.pa, c.size)
				}
			}
			vs, _ := info.NumberUnsigned("VMEMMAP_START")
			if m, err := tr.Lookup(vs); err != nil || m.PageSize != 1<<21 {
				t.Errorf("vmemmap: %#x/%#x, %v", m.Paddr, m.PageSize, err)
			}
		})
	}
}

// specPhys reads a generated machine's physical memory straight from the
// generator.
type specPhys struct{ s synth.Spec }

func (p specPhys) ReadPhys(paddr uint64, b []byte) error {
	pg := make([]byte, 4096)
	for len(b) > 0 {
		synth.Page(p.s, paddr/4096, pg)
		n := copy(b, pg[paddr%4096:])
		b, paddr = b[n:], paddr+uint64(n)
	}
	return nil
}
