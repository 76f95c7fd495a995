package synth

import (
	"encoding/binary"
	"fmt"
)

// An arm64 kernel machine (Spec.Arch AArch64 with a Kernel) is laid out as
// Debian's 6.1 arm64 kernel on QEMU's virt board lays itself out (facts from
// a real vmcore: the shared notes' arm64.md), for 4 KiB pages and the kernel
// VA sizes of arch/arm64/Kconfig: RAM from 0x40000000; the linear map at
// PAGE_OFFSET = -(1 << vabits_actual) with a KASLR'd PHYS_OFFSET (RAM base
// lowered by a random number of GiB, so above 2^63); the image in the
// vmalloc area at KIMAGE_VADDR + KERNELOFFSET, pa = va - kimage_voffset;
// struct pages in the vmemmap at VMEMMAP_START - (PHYS_OFFSET >> 12) * 64;
// page tables from swapper_pg_dir in the image, 3 to 5 levels.
//
// The tables mix every descriptor kind the walk decodes: the image's first
// 2 MiB in 4 KiB pages and the rest in 2 MiB blocks; the linear map in
// 1 GiB blocks where a whole GiB is RAM (unless DirectMap2M), 2 MiB blocks
// elsewhere, and 4 KiB pages around the boot allocations (as
// rodata_full splits it); the vmemmap in 2 MiB blocks.

// arm64Layout is an arm64 machine's geometry and kernel addresses.
type arm64Layout struct {
	vaBits, vaActual uint // VA_BITS and 64 - TCR_EL1_T1SZ
	pa52             bool // MAX_PHYSMEM_BITS 52
	levels           int

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

// newARM64Layout checks the spec's geometry.
func newARM64Layout(ks KernelSpec) (*arm64Layout, error) {
	a := &arm64Layout{vaBits: uint(ks.VABits), vaActual: uint(ks.VABitsActual), pa52: ks.PA52}
	if a.vaBits == 0 {
		a.vaBits = 48
	}
	if a.vaActual == 0 {
		a.vaActual = a.vaBits
	}
	switch {
	case a.vaBits != 39 && a.vaBits != 48 && a.vaBits != 52:
		return nil, fmt.Errorf("synth: arm64 with 4 KiB pages has 39-, 48- or 52-bit VAs, not %d", a.vaBits)
	case a.vaActual != a.vaBits && !(a.vaBits == 52 && a.vaActual == 48):
		return nil, fmt.Errorf("synth: a %d-bit arm64 kernel runs with %d-bit VAs, not %d", a.vaBits, a.vaBits, a.vaActual)
	case a.pa52 && a.vaBits != 52:
		return nil, fmt.Errorf("synth: 52-bit PAs with 4 KiB pages need the 52-bit VA kernel (LPA2), not %d-bit", a.vaBits)
	}
	a.levels = map[uint]int{39: 3, 48: 4, 52: 5}[a.vaActual]
	return a, nil
}

func (a *arm64Layout) physBits() int {
	if a.pa52 {
		return 52
	}
	return 48
}

// lpa2 reports whether descriptors use FEAT_LPA2's layout: 52-bit PAs
// with 52-bit VAs in use (TCR_EL1.DS set).
func (a *arm64Layout) lpa2() bool { return a.pa52 && a.vaActual == 52 }

// encode places a physical address in a descriptor.
func (a *arm64Layout) encode(pa uint64) uint64 {
	if a.lpa2() {
		return pa&(1<<50-1) | (pa>>50&3)<<8
	}
	return pa
}

// decode is encode's inverse for a descriptor of a 4 KiB-aligned address.
func (a *arm64Layout) decode(d uint64) uint64 {
	if a.lpa2() {
		return d&(1<<50-1)&^0xfff | (d>>8&3)<<50
	}
	return d & (1<<48 - 1) &^ 0xfff
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
	a.vmemmapStart = ^uint64(0) << (a.vaBits - 6) // VMEMMAP_SHIFT = PAGE_SHIFT - STRUCT_PAGE_MAX_SHIFT
	a.vmemmapEnd = a.vmemmapStart + (uint64(1)<<a.vaBits-uint64(1)<<(minVA-1))>>6
	a.vmallocEnd = a.vmemmapStart - 256<<20
	ramBase := k.ram[0].lo * PageSize &^ (bigPage1G - 1)
	var lower uint64
	if k.ks.KASLR {
		// memstart_addr -= ARM64_MEMSTART_ALIGN * random: the linear map
		// moves up by whole GiB, within its half of the VA space.
		room := (uint64(1)<<(a.vaActual-1) - (k.endPFN*PageSize - ramBase)) >> 30
		lower = k.draw(drawPageOffset) % min(room, 1<<16) << 30
		span := (a.vmallocEnd - a.modulesEnd) / 2 / bigPage2M
		k.kaslrOffset = (1 + k.draw(drawVirtSlide)%min(span, 1<<24)) * bigPage2M
	}
	a.physOffset = ramBase - lower
	// memstart_addr is an s64: the shift is arithmetic (the arm64 6.1
	// vmcore's pfn 0x40000 has its struct page at 0xfffffd3979000000 with
	// PHYS_OFFSET 0xffffb1a200000000).
	k.vmemmap = a.vmemmapStart - uint64(int64(a.physOffset)>>12)*structPageSize
}

// placeARM64 puts the image 2 MiB above the RAM base, where the EFI-less
// kernel on virt lands (no physical randomisation), and sizes the boot
// allocations' room for the tables.
func (k *kmem) placeARM64(img, mbFixed, nPresent uint64) (imgLo, mbPages uint64) {
	dmGiB := (k.endPFN*PageSize-k.ram[0].lo*PageSize)/bigPage1G + 2
	vmGiB := (k.nsec*bigPage2M+bigPage1G-1)/bigPage1G + 1
	tables := 3*(dmGiB/512+2) + dmGiB + uint64(len(k.ram)) + vmGiB + 12 + 2*uint64(len(k.ram))
	mbPages = mbFixed + tables
	mbPages += mbPages/512 + 4 // 4 KiB-page tables for the linear map around them
	return k.ram[0].lo + bigPage2M/PageSize, mbPages
}

// armPT builds arm64 page tables with 4 KiB granules.
type armPT struct {
	k      *kmem
	top    uint64
	tables map[uint64]*[512]uint64
}

func (b *armPT) table(pa uint64) *[512]uint64 {
	t := b.tables[pa]
	if t == nil {
		t = new([512]uint64)
		b.tables[pa] = t
	}
	return t
}

// mapAt maps va to pa with a descriptor at leaf (3: a 4 KiB page, 2: a
// 2 MiB block, 1: a 1 GiB block), allocating missing tables from the
// boot allocations.
func (b *armPT) mapAt(va, pa uint64, leaf int) {
	a := b.k.arm
	first := 4 - a.levels
	t := b.table(b.top)
	for level := first; ; level++ {
		s := uint(9*(4-level) + 3)
		i := va >> s & 511
		if level == first {
			i = va >> s & (1<<(a.vaActual-s) - 1)
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
			t[i] = a.encode(b.k.allocPages(1)*PageSize) | armTable
		}
		t = b.table(a.decode(t[i]))
	}
}

// buildTablesARM64 makes swapper_pg_dir and everything below it.
func (k *kmem) buildTablesARM64() {
	top := k.imgLo + (k.imgHi-k.imgLo)*5/8
	k.sym["swapper_pg_dir"] = k.kva(top * PageSize)
	b := &armPT{k: k, top: top * PageSize, tables: map[uint64]*[512]uint64{}}
	b.table(b.top)
	for pa := k.imgLo * PageSize; pa < k.imgHi*PageSize; {
		if pa < k.imgLo*PageSize+bigPage2M {
			b.mapAt(k.kva(pa), pa, 3)
			pa += PageSize
		} else {
			b.mapAt(k.kva(pa), pa, 2)
			pa += bigPage2M
		}
	}
	split := func(lo, hi uint64) bool { // the range holds boot allocations
		return overlaps(lo/PageSize, hi/PageSize, k.mbLo, k.mbHi)
	}
	for _, x := range k.ram {
		for pa := x.lo * PageSize; pa < x.hi*PageSize; {
			switch g, m := pa+bigPage1G, pa+bigPage2M; {
			case !k.ks.DirectMap2M && pa%bigPage1G == 0 && g <= x.hi*PageSize && !split(pa, g):
				b.mapAt(k.va(pa), pa, 1)
				pa = g
			case pa%bigPage2M == 0 && m <= x.hi*PageSize && !split(pa, m):
				b.mapAt(k.va(pa), pa, 2)
				pa = m
			default:
				b.mapAt(k.va(pa), pa, 3)
				pa += PageSize
			}
		}
	}
	for n, p := range k.present {
		if p {
			b.mapAt(k.pageVA(uint64(n)*pagesPerSection), k.secBacking[n]*PageSize, 2)
		}
	}
	for pa, t := range b.tables {
		pg := new([PageSize]byte)
		for i, e := range t {
			binary.LittleEndian.PutUint64(pg[i*8:], e)
		}
		k.small[pa/PageSize] = pg
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
// CPUs (4 from 512 MiB). ks.VABits and ks.VABitsActual choose the
// geometry; KASLR is as ks says.
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
