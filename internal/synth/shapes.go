package synth

import (
	"fmt"
	"sort"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// ram returns a segment with data over all of [paddr, paddr+n) and the
// direct-map p_vaddr /proc/vmcore gives RAM.
func ram(paddr, n uint64) Segment {
	return Segment{Paddr: paddr, FileSize: n, MemSize: n, Vaddr: directMap + paddr}
}

// Shapes returns the named small specs (a few MiB each) that the
// project's tests run over; each one stresses one thing a reader or
// writer can get wrong. A fresh map is built on every call, so callers
// may change what they get.
//
//	holes         three PT_LOADs with holes between them, like a PC
//	partial-page  segments ending mid-page (mid-file and at the file's end)
//	memsz-tail    a segment with MemSize > FileSize (no data for the tail)
//	unaligned     a segment starting mid-page
//	alias         a kernel-text PT_LOAD overlapping RAM, as kexec-tools writes
//	no-zero       no zero pages at all
//	all-zero      only zero pages
//	cpu1, cpu8    1 and 8 NT_PRSTATUS notes (holes has 2)
//	no-vmcoreinfo no VMCOREINFO note
//	qemu          QEMU's layout, with its "QEMU" notes and a BIOS ROM segment
//	pnxnum        extended program header numbering (e_phnum = 0xffff)
//	high-pfn      a segment at 64 GiB: a big, mostly empty bitmap
//	kexec-0 … -3  /proc/vmcore as kexec-tools lays it out in a capture
//	              kernel: the kernel-text segment first, low RAM ending
//	              mid-page at 0x9fc00, a hole where the crashkernel
//	              reservation is, and max_mapnr ≡ 0, 1, 2, 3 mod 4 (which
//	              decides makedumpfile's bitmap mode, and with it the
//	              partial page)
func Shapes() map[string]Spec {
	base := func(seed uint64, cpus int, segs ...Segment) Spec {
		return Spec{
			Segments:   segs,
			CPUs:       cpus,
			VMCOREINFO: DefaultVMCOREINFO,
			Seed:       seed,
			Mix:        DefaultMix,
		}
	}
	pc := func() []Segment {
		return []Segment{ram(0x1000, 0x9e000), ram(0x100000, 2*mib), ram(4*gib, 1*mib)}
	}
	m := map[string]Spec{}

	m["holes"] = base(1, 2, pc()...)

	// The first range ends at 0x9fc00 as on real PCs (the EBDA follows).
	m["partial-page"] = base(2, 1, ram(0x1000, 0x9fc00-0x1000), ram(0x100000, 2*mib+1234))

	tail := ram(0x100000, 1*mib+512*kib)
	tail.MemSize = 3 * mib
	m["memsz-tail"] = base(3, 2, tail, ram(0x800000, 1*mib))

	m["unaligned"] = base(4, 2, ram(0x1000, 0x9e000), ram(0x100800, 2*mib-0x800+100), ram(0x400000, 1*mib))

	// kexec-tools' kernel-text segment: vaddr in the kernel image region,
	// paddr and contents aliasing RAM that another PT_LOAD also covers.
	// (The kernel normally sits at 16 MiB; 2 MiB keeps the shape small.)
	text := Segment{Paddr: 0x200000, FileSize: 1 * mib, MemSize: 1 * mib, Vaddr: 0xffffffff81000000}
	m["alias"] = base(5, 2, text, ram(0x1000, 0x9e000), ram(0x100000, 3*mib))

	noZero := base(6, 2, pc()...)
	noZero.Mix = Mix{Text: 0.4, Repetitive: 0.3, Random: 0.3}
	m["no-zero"] = noZero

	allZero := base(7, 2, pc()...)
	allZero.Mix = Mix{Zero: 1}
	m["all-zero"] = allZero

	m["cpu1"] = base(8, 1, ram(0x100000, 2*mib))
	m["cpu8"] = base(9, 8, ram(0x1000, 0x9e000), ram(0x100000, 2*mib))

	novmci := base(10, 2, pc()...)
	novmci.VMCOREINFO = ""
	m["no-vmcoreinfo"] = novmci

	// QEMU 7.2 with paging off: p_vaddr 0, RAM from 0 (no kernel-text
	// segment), and the 256 KiB BIOS ROM just below 4 GiB.
	qemu := base(11, 2,
		Segment{Paddr: 0, FileSize: 0xa0000, MemSize: 0xa0000},
		Segment{Paddr: 0x100000, FileSize: 3 * mib, MemSize: 3 * mib},
		Segment{Paddr: 0xfffc0000, FileSize: 256 * kib, MemSize: 256 * kib})
	qemu.Layout = QEMU
	qemu.ExtraNotes = true
	m["qemu"] = qemu

	segs := []Segment{ram(0x1000, 0x9e000)}
	for i := uint64(0); i < 6; i++ {
		segs = append(segs, ram(0x100000+i*mib, 512*kib))
	}
	pnx := base(12, 2, segs...)
	pnx.PNXnum = true
	m["pnxnum"] = pnx

	for r := range uint64(4) {
		m[fmt.Sprintf("kexec-%d", r)] = base(20+r, 2, Kexec(r)...)
	}
	m["high-pfn"] = base(13, 2, ram(0x1000, 0x9e000), ram(0x100000, 1*mib), ram(64*gib, 2*mib))
	return m
}

// ShapeNames returns the names of Shapes, sorted, for stable iteration.
func ShapeNames() []string {
	m := Shapes()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Kexec returns the PT_LOADs of a small capture kernel's /proc/vmcore as
// kexec-tools makes them, with max_mapnr ≡ residue mod 4: the kernel-text
// segment first (aliasing RAM at 2 MiB), low RAM [0x1000, 0x9fc00) whose
// last page is partial, RAM from 1 MiB up to the crashkernel reservation
// (6 MiB here), none over the reservation, and RAM from 8 MiB to 12 MiB
// plus residue pages.
func Kexec(residue uint64) []Segment {
	text := Segment{Paddr: 0x200000, FileSize: 1 * mib, MemSize: 1 * mib, Vaddr: 0xffffffff81000000}
	return []Segment{text, ram(0x1000, 0x9fc00-0x1000), ram(0x100000, 5*mib), ram(8*mib, 4*mib+residue%4*PageSize)}
}
