package synth

import (
	"encoding/binary"
	"fmt"
)

// An arm64 kernel machine (Spec.Arch AArch64 with a Kernel) is laid out as
// Debian's 6.1 arm64 kernel on QEMU's virt board lays itself out (facts from
// a real vmcore: the shared notes' arm64.md), for the granules (4, 16 and
// 64 KiB pages: Spec.PageSize) and kernel VA sizes of arch/arm64/Kconfig:
// RAM from 0x40000000; the linear map at PAGE_OFFSET = -(1 << vabits_actual)
// with a KASLR'd PHYS_OFFSET (RAM base lowered by a random multiple of
// ARM64_MEMSTART_ALIGN, so above 2^63); the image in the vmalloc area at
// KIMAGE_VADDR + KERNELOFFSET, pa = va - kimage_voffset; struct pages in the
// vmemmap at VMEMMAP_START - (PHYS_OFFSET >> PAGE_SHIFT) * 64; page tables
// from swapper_pg_dir in the image, 2 to 5 levels of PAGE_SIZE / 8 entries.
//
// The tables mix every descriptor kind the walk decodes: the image's first
// 2 MiB in pages and the rest in level-2 blocks (2, 32 or 512 MiB) where
// one fits; the linear map in 1 GiB blocks where a whole GiB is RAM (4 KiB
// pages, unless DirectMap2M), level-2 blocks elsewhere, and pages around
// the boot allocations (as rodata_full splits it) and where no block fits;
// the vmemmap in 2 MiB blocks with 4 KiB pages, in pages with 16 and
// 64 KiB ones (vmemmap_populate maps PMDs only with 4 KiB pages).

// arm64Layout is an arm64 machine's geometry and kernel addresses.
type arm64Layout struct {
	shift            uint // PAGE_SHIFT: 12, 14 or 16
	vaBits, vaActual uint // VA_BITS and 64 - TCR_EL1_T1SZ
	pa52             bool // MAX_PHYSMEM_BITS 52
	levels           int
	// pgdBits is the VA size the top table is indexed with: VA_BITS
	// when the kernel runs at vabits_actual with its own depth (a 52-bit
	// 64 KiB kernel on 48-bit hardware keeps its 1024-entry PGD, the
	// 48-bit addresses in its last 64 entries), else vabits_actual.
	pgdBits uint

	physOffset    uint64 // memstart_addr
	kimageVoffset uint64
	modulesVaddr  uint64
	modulesEnd    uint64 // = KIMAGE_VADDR = VMALLOC_START
	vmallocEnd    uint64
	vmemmapStart  uint64
	vmemmapEnd    uint64
}

// ARM64 descriptor bits (arch/arm64/include/asm/pgtable-hwdef.h).
const (
	armValid  = 1 << 0
	armTable  = 3 // table (above the last level) or page (at it)
	armBlock  = 1
	armAttrNm = 4 << 2 // AttrIndx: MT_NORMAL
	armSH     = 3 << 8 // inner shareable (not in LPA2 descriptors: PA[51:50] live there)
	armAF     = 1 << 10
	armPXN    = 1 << 53
	armUXN    = 1 << 54
)

// arm64Geometries are the kernel VA sizes arch/arm64/Kconfig (6.1) offers
// for each granule (PAGE_SHIFT), with the paging depth at each VA size
// the kernel runs with (kernel/arm64.go's arm64Levels).
var arm64Geometries = map[uint]map[uint]int{
	12: {39: 3, 48: 4, 52: 5},
	14: {47: 3, 48: 4},
	16: {42: 2, 48: 3, 52: 3},
}

// newARM64Layout checks the spec's geometry for pages of 1 << shift bytes.
func newARM64Layout(ks KernelSpec, shift uint) (*arm64Layout, error) {
	a := &arm64Layout{shift: shift, vaBits: uint(ks.VABits), vaActual: uint(ks.VABitsActual), pa52: ks.PA52}
	if a.vaBits == 0 {
		a.vaBits = 48
	}
	if a.vaActual == 0 {
		a.vaActual = a.vaBits
	}
	geo, ok := arm64Geometries[shift]
	if !ok {
		return nil, fmt.Errorf("synth: arm64 has 4, 16 or 64 KiB pages, not %d bytes", 1<<shift)
	}
	switch _, ok := geo[a.vaBits]; {
	case !ok:
		return nil, fmt.Errorf("synth: arm64 with %d KiB pages has no %d-bit VA kernel", 1<<shift>>10, a.vaBits)
	case a.vaActual != a.vaBits && !(a.vaBits == 52 && a.vaActual == 48):
		return nil, fmt.Errorf("synth: a %d-bit arm64 kernel runs with %d-bit VAs, not %d", a.vaBits, a.vaBits, a.vaActual)
	case a.pa52 && shift == 12 && a.vaBits != 52:
		return nil, fmt.Errorf("synth: 52-bit PAs with 4 KiB pages need the 52-bit VA kernel (LPA2), not %d-bit", a.vaBits)
	case a.pa52 && shift == 14:
		return nil, fmt.Errorf("synth: 6.1 has no 52-bit PAs with 16 KiB pages")
	}
	a.levels = geo[a.vaActual]
	a.pgdBits = a.vaActual
	if geo[a.vaBits] == a.levels {
		a.pgdBits = a.vaBits
	}
	return a, nil
}

// levelShift is the lowest VA bit a level's entries index
// (ARM64_HW_PGTABLE_LEVEL_SHIFT); a level-n block or page spans
// 1 << levelShift(n).
func (a *arm64Layout) levelShift(level int) uint { return (a.shift-3)*uint(4-level) + 3 }

// entries is the number of descriptors in a table: one page of them.
func (a *arm64Layout) entries() uint64 { return 1 << (a.shift - 3) }

// memstartShift is log2 ARM64_MEMSTART_ALIGN, the step of the linear
// map's randomisation (asm/kernel-pgtable.h: PUD_SHIFT with 4 KiB pages,
// CONT_PMD_SHIFT with 16 KiB ones, PMD_SHIFT with 64 KiB ones, none
// below SECTION_SIZE_BITS).
func (a *arm64Layout) memstartShift() uint {
	switch a.shift {
	case 14:
		return 30
	case 16:
		return 29
	}
	return 30
}

func (a *arm64Layout) physBits() int {
	if a.pa52 {
		return 52
	}
	return 48
}

// lpa2 reports whether descriptors use FEAT_LPA2's layout: 52-bit PAs
// with 52-bit VAs in use (TCR_EL1.DS set), 4 KiB pages.
func (a *arm64Layout) lpa2() bool { return a.pa52 && a.vaActual == 52 && a.shift != 16 }

// lpa reports whether descriptors use FEAT_LPA's layout: 52-bit PAs with
// 64 KiB pages, PA[51:48] in bits [15:12].
func (a *arm64Layout) lpa() bool { return a.pa52 && a.shift == 16 }

// encode places a physical address in a descriptor.
func (a *arm64Layout) encode(pa uint64) uint64 {
	switch {
	case a.lpa2():
		return pa&(1<<50-1) | (pa>>50&3)<<8
	case a.lpa():
		return pa&(1<<48-1) | (pa>>48&0xf)<<12
	}
	return pa
}

// decode is encode's inverse for a descriptor of a page-aligned address.
func (a *arm64Layout) decode(d uint64) uint64 {
	low := uint64(1)<<a.shift - 1
	switch {
	case a.lpa2():
		return d&(1<<50-1)&^low | (d>>8&3)<<50
	case a.lpa():
		return d&(1<<48-1)&^low | (d>>12&0xf)<<48
	}
	return d & (1<<48 - 1) &^ low
}

// attrs are a kernel data mapping's attributes.
func (a *arm64Layout) attrs() uint64 {
	x := uint64(armAttrNm | armAF | armPXN | armUXN)
	if !a.lpa2() {
		x |= armSH
	}
	return x
}

// virtualLayoutARM64 picks the kernel's addresses (arch/arm64/include/asm/memory.h, 6.1).
func (k *kmem) virtualLayoutARM64() {
	a := k.arm
	minVA := min(a.vaBits, 48)
	k.pageOffset = ^uint64(0) << a.vaActual
	a.modulesVaddr = ^uint64(0) << (minVA - 1) // _PAGE_END(VA_BITS_MIN)
	a.modulesEnd = a.modulesVaddr + 128<<20
	k.vmallocStart = a.modulesEnd
	vmemmapShift := a.shift - 6 // VMEMMAP_SHIFT = PAGE_SHIFT - STRUCT_PAGE_MAX_SHIFT
	a.vmemmapStart = ^uint64(0) << (a.vaBits - vmemmapShift)
	a.vmemmapEnd = a.vmemmapStart + (uint64(1)<<a.vaBits-uint64(1)<<(minVA-1))>>vmemmapShift
	a.vmallocEnd = a.vmemmapStart - 256<<20
	ramBase := k.ram[0].lo * k.ps &^ (bigPage1G - 1)
	var lower uint64
	if k.ks.KASLR {
		// memstart_addr -= ARM64_MEMSTART_ALIGN * random: the linear map
		// moves up in those steps, within its half of the VA space.
		ms := a.memstartShift()
		room := (uint64(1)<<(a.vaActual-1) - (k.endPFN*k.ps - ramBase)) >> ms
		lower = k.draw(drawPageOffset) % min(room, 1<<16) << ms
		span := (a.vmallocEnd - a.modulesEnd) / 2 / bigPage2M
		k.kaslrOffset = (1 + k.draw(drawVirtSlide)%min(span, 1<<24)) * bigPage2M
	}
	a.physOffset = ramBase - lower
	// memstart_addr is an s64: the shift is arithmetic (the arm64 6.1
	// vmcore's pfn 0x40000 has its struct page at 0xfffffd3979000000 with
	// PHYS_OFFSET 0xffffb1a200000000).
	k.vmemmap = a.vmemmapStart - uint64(int64(a.physOffset)>>a.shift)*structPageSize
}

// placeARM64 puts the image 2 MiB above the RAM base, where the EFI-less
// kernel on virt lands (no physical randomisation), and sizes the boot
// allocations' room for the tables.
func (k *kmem) placeARM64(img, mbFixed, nPresent uint64) (imgLo, mbPages uint64) {
	dmGiB := (k.endPFN*k.ps-k.ram[0].lo*k.ps)/bigPage1G + 2
	vmGiB := (k.nsec*k.backPages*k.ps+bigPage1G-1)/bigPage1G + 1
	tables := 3*(dmGiB/512+2) + dmGiB + uint64(len(k.ram)) + vmGiB + 12 + 2*uint64(len(k.ram))
	if k.ps != 4096 {
		// Page-mapped vmemmap and image: a last-level table per
		// PAGE_SIZE/8 pages of them, and per table above.
		n := nPresent*k.backPages + img/k.ps
		tables += 2 * (n/k.arm.entries() + 2)
	}
	mbPages = mbFixed + tables
	mbPages += mbPages/512 + 4 // page tables for the linear map around them
	return k.ram[0].lo + bigPage2M/k.ps, mbPages
}

// armPT builds arm64 page tables of the machine's granule.
type armPT struct {
	k      *kmem
	top    uint64
	tables map[uint64][]uint64
}

func (b *armPT) table(pa uint64) []uint64 {
	t := b.tables[pa]
	if t == nil {
		t = make([]uint64, b.k.arm.entries())
		b.tables[pa] = t
	}
	return t
}

// mapAt maps va to pa with a descriptor at leaf (3: a page, 2: a level-2
// block, 1: a level-1 block), allocating missing tables from the boot
// allocations.
func (b *armPT) mapAt(va, pa uint64, leaf int) {
	a := b.k.arm
	first := 4 - a.levels
	t := b.table(b.top)
	for level := first; ; level++ {
		s := a.levelShift(level)
		i := va >> s & (a.entries() - 1)
		if level == first {
			i = va >> s & (1<<(a.pgdBits-s) - 1)
		}
		if level == leaf {
			typ := uint64(armBlock)
			if leaf == 3 {
				typ = armTable
			}
			t[i] = a.encode(pa) | typ | a.attrs()
			return
		}
		if t[i]&armValid == 0 {
			t[i] = a.encode(b.k.allocPages(1)*b.k.ps) | armTable
		}
		t = b.table(a.decode(t[i]))
	}
}

// buildTablesARM64 makes swapper_pg_dir and everything below it.
func (k *kmem) buildTablesARM64() {
	a, ps := k.arm, k.ps
	top := k.imgLo + (k.imgHi-k.imgLo)*5/8
	k.sym["swapper_pg_dir"] = k.kva(top * ps)
	b := &armPT{k: k, top: top * ps, tables: map[uint64][]uint64{}}
	b.table(b.top)
	blk := uint64(1) << a.levelShift(2) // a level-2 block: 2, 32 or 512 MiB
	for pa, end := k.imgLo*ps, k.imgHi*ps; pa < end; {
		if pa >= k.imgLo*ps+bigPage2M && pa%blk == 0 && pa+blk <= end {
			b.mapAt(k.kva(pa), pa, 2)
			pa += blk
		} else {
			b.mapAt(k.kva(pa), pa, 3)
			pa += ps
		}
	}
	split := func(lo, hi uint64) bool { // the range holds boot allocations
		return overlaps(lo/ps, hi/ps, k.mbLo, k.mbHi)
	}
	for _, x := range k.ram {
		for pa := x.lo * ps; pa < x.hi*ps; {
			switch g, m := pa+bigPage1G, pa+blk; {
			case a.shift == 12 && !k.ks.DirectMap2M && pa%bigPage1G == 0 && g <= x.hi*ps && !split(pa, g):
				b.mapAt(k.va(pa), pa, 1)
				pa = g
			case pa%blk == 0 && m <= x.hi*ps && !split(pa, m):
				b.mapAt(k.va(pa), pa, 2)
				pa = m
			default:
				b.mapAt(k.va(pa), pa, 3)
				pa += ps
			}
		}
	}
	for n, p := range k.present {
		if !p {
			continue
		}
		va, pa := k.pageVA(uint64(n)*k.pps), k.secBacking[n]*ps
		if a.shift == 12 {
			b.mapAt(va, pa, 2) // one 2 MiB block per section
			continue
		}
		for j := range k.backPages {
			b.mapAt(va+j*ps, pa+j*ps, 3)
		}
	}
	for pa, t := range b.tables {
		pg := make([]byte, ps)
		for i, e := range t {
			binary.LittleEndian.PutUint64(pg[i*8:], e)
		}
		k.small[pa/ps] = pg
	}
}

// archARM64 is arch_crash_save_vmcoreinfo (arch/arm64/kernel/crash_core.c,
// 6.1): VA_BITS in decimal, the rest as the kernel prints them ("0x%lx",
// KERNELOFFSET "%lx").
func archARM64(k *kmem) []kv {
	a := k.arm
	hex := func(name string, v uint64) kv { return kv{"NUMBER(" + name + ")", fmt.Sprintf("0x%x", v)} }
	return []kv{
		viNum("VA_BITS", int64(a.vaBits)),
		hex("MODULES_VADDR", a.modulesVaddr), hex("MODULES_END", a.modulesEnd),
		hex("VMALLOC_START", k.vmallocStart), hex("VMALLOC_END", a.vmallocEnd),
		hex("VMEMMAP_START", a.vmemmapStart), hex("VMEMMAP_END", a.vmemmapEnd),
		hex("kimage_voffset", a.kimageVoffset), hex("PHYS_OFFSET", a.physOffset),
		{"KERNELOFFSET", fmt.Sprintf("%x", k.kaslrOffset)},
		hex("KERNELPACMASK", 0), hex("TCR_EL1_T1SZ", uint64(64-a.vaActual)),
	}
}

// NewARM64Machine returns an arm64 kernel machine laid out as QEMU's virt
// board: sizeMiB MiB of RAM (at least 64) in one range from 0x40000000, 2
// CPUs (4 from 512 MiB), 4 KiB pages (set Spec.PageSize for 16 or 64 KiB
// ones). ks.VABits and ks.VABitsActual choose the geometry; KASLR is as ks
// says.
func NewARM64Machine(ks KernelSpec, sizeMiB int) Spec {
	sizeMiB = max(sizeMiB, 64)
	s := Spec{
		Arch:     AArch64,
		Segments: []Segment{ram(archs[AArch64].ramBase, uint64(sizeMiB)<<20)},
		CPUs:     2,
		Seed:     DefaultSeed,
		Mix:      DefaultMix,
		Layout:   ProcVmcore,
		Kernel:   &ks,
	}
	if sizeMiB >= 512 {
		s.CPUs = 4
	}
	return s
}
