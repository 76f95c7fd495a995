package synth

import (
	"encoding/binary"
	"fmt"
)

// A riscv64 kernel machine (Spec.Arch RISCV64 with a Kernel) is laid out
// as Debian 13's 6.12 riscv64 kernel on QEMU's virt board lays itself out
// (arch/riscv/include/asm/pgtable.h and page.h, 6.12;
// Documentation/arch/riscv/vm-layout.rst), for each translation mode the
// hart may offer (KernelSpec.VABits 39, 48 or 57: Sv39, Sv48, Sv57): RAM
// from 0x80000000 (phys_ram_base); the linear map at PAGE_OFFSET (the
// mode's), pa - phys_ram_base + PAGE_OFFSET; vmalloc below it, the vmemmap
// below vmalloc, struct pages at VMEMMAP_START - (phys_ram_base >>
// PAGE_SHIFT) * 64; the image linked at KERNEL_LINK_ADDR
// 0xffffffff80000000 and loaded 2 MiB into RAM (OpenSBI's below it), pa =
// va - va_kernel_pa_offset; the modules in the 2 GiB below the image's end.
// No KASLR (Debian's config has none).
//
// swapper_pg_dir, in the image, maps the image in 4 KiB pages for its
// first 2 MiB and 2 MiB superpages after; the linear map in 1 GiB
// superpages where a whole GiB is RAM, 2 MiB ones where not, pages at
// the ends; the vmemmap in 2 MiB superpages (in pages with
// KernelSpec.VmemmapPages). Entries carry the PPN from
// bit 10 and the kernel's bits: tables V alone, leaves V R W (X for
// text) A D G.

// riscvLayout is a riscv64 machine's mode and kernel addresses.
type riscvLayout struct {
	vaBits        uint
	levels        int
	physRAMBase   uint64
	vmallocEnd    uint64
	vmemmapStart  uint64
	vmemmapEnd    uint64
	modulesVaddr  uint64
	modulesEnd    uint64
	vaKernelPAOff uint64
}

// riscv64 constants (6.12).
const (
	rvKernelLinkAddr = 0xffffffff80000000
	rvImageOffset    = 2 << 20 // the image's load address above RAM's start
	rvMaxPhysmemBits = 56
	// Entry bits (asm/pgtable-bits.h).
	rvV, rvR, rvW, rvX, rvG, rvA, rvD = 1, 2, 4, 8, 32, 64, 128
	rvPFNShift                        = 10
)

// rvPageOffset is PAGE_OFFSET_L3/L4/L5: where each mode's linear map starts.
var rvPageOffset = map[uint]uint64{39: 0xffffffd600000000, 48: 0xffffaf8000000000, 57: 0xff60000000000000}

func newRISCVLayout(ks KernelSpec, shift uint) (*riscvLayout, error) {
	if shift != 12 {
		return nil, fmt.Errorf("synth: riscv64 has 4 KiB pages, not %d bytes", 1<<shift)
	}
	r := &riscvLayout{vaBits: uint(ks.VABits)}
	if r.vaBits == 0 {
		r.vaBits = 57 // QEMU's rv64 offers Sv57, the kernel takes the most it can
	}
	switch r.vaBits {
	case 39:
		r.levels = 3
	case 48:
		r.levels = 4
	case 57:
		r.levels = 5
	default:
		return nil, fmt.Errorf("synth: riscv64 translates 39, 48 or 57 bits (Sv39/48/57), not %d", r.vaBits)
	}
	if ks.VABitsActual != 0 || ks.PA52 || ks.KASLR {
		return nil, fmt.Errorf("synth: a riscv64 machine takes no VABitsActual, PA52 or KASLR")
	}
	return r, nil
}

// levelShift is the lowest VA bit a level's entries index (0: the top).
func (r *riscvLayout) levelShift(level int) uint { return uint(12 + 9*(r.levels-1-level)) }

// virtualLayoutRISCV64 picks the kernel's addresses.
func (k *kmem) virtualLayoutRISCV64() {
	r := k.rv
	r.physRAMBase = k.ram[0].lo * k.ps
	k.pageOffset = rvPageOffset[r.vaBits]
	// KERN_VIRT_SIZE is a quarter of the mode's space; vmalloc takes half
	// of it below the linear map, the vmemmap (VA_BITS - PAGE_SHIFT - 1 +
	// STRUCT_PAGE_MAX_SHIFT bits) sits below vmalloc.
	k.vmallocStart = k.pageOffset - uint64(1)<<(r.vaBits-3)
	r.vmallocEnd = k.pageOffset // VMALLOC_END is PAGE_OFFSET (the real 6.12 vmcore says so)
	r.vmemmapEnd = k.vmallocStart
	r.vmemmapStart = k.vmallocStart - uint64(1)<<(r.vaBits-12-1+6)
	k.vmemmap = r.vmemmapStart - r.physRAMBase/k.ps*structPageSize
}

// placeRISCV64 puts the image 2 MiB above the RAM base and sizes the
// boot allocations' room for the tables.
func (k *kmem) placeRISCV64(mbFixed uint64) (imgLo, mbPages uint64) {
	dmGiB := (k.endPFN*k.ps-k.ram[0].lo*k.ps)/bigPage1G + 2
	vmGiB := (k.nsec*k.backPages*k.ps+bigPage1G-1)/bigPage1G + 1
	// A table per level for each region's start, a PMD table per GiB of
	// the linear map and the vmemmap, PTE tables for the unaligned ends.
	tables := uint64(3*k.rv.levels) + 2*dmGiB + vmGiB + 4*uint64(len(k.ram)) + 8
	if k.ks.VmemmapPages {
		tables += k.nsec * (k.backPages/512 + 1)
	}
	return k.ram[0].lo + rvImageOffset/k.ps, mbFixed + tables
}

// rvPT builds riscv64 page tables.
type rvPT struct {
	k      *kmem
	top    uint64
	tables map[uint64]*[512]uint64
}

func (b *rvPT) table(pa uint64) *[512]uint64 {
	t := b.tables[pa]
	if t == nil {
		t = new([512]uint64)
		b.tables[pa] = t
	}
	return t
}

// mapAt maps va to pa with a leaf at level (0 the top, levels-1 the last)
// carrying flags, allocating missing tables from the boot allocations.
func (b *rvPT) mapAt(va, pa uint64, leaf int, flags uint64) {
	r := b.k.rv
	t := b.table(b.top)
	for level := 0; ; level++ {
		i := va >> r.levelShift(level) & 511
		if level == leaf {
			t[i] = pa>>12<<rvPFNShift | flags
			return
		}
		if t[i]&rvV == 0 {
			t[i] = b.k.allocPages(1)<<rvPFNShift | rvV
		}
		t = b.table(t[i] >> rvPFNShift << 12)
	}
}

// buildTablesRISCV64 makes swapper_pg_dir and everything below it.
func (k *kmem) buildTablesRISCV64() {
	r, ps := k.rv, k.ps
	const data = rvV | rvR | rvW | rvA | rvD | rvG
	top := k.imgLo + (k.imgHi-k.imgLo)*5/8
	k.sym["swapper_pg_dir"] = k.kva(top * ps)
	b := &rvPT{k: k, top: top * ps, tables: map[uint64]*[512]uint64{}}
	b.table(b.top)
	pmd, pud := r.levels-2, r.levels-3
	for pa, end := k.imgLo*ps, k.imgHi*ps; pa < end; {
		if pa >= k.imgLo*ps+bigPage2M && pa%bigPage2M == 0 && pa+bigPage2M <= end {
			b.mapAt(k.kva(pa), pa, pmd, rvV|rvR|rvX|rvA|rvG)
			pa += bigPage2M
		} else {
			b.mapAt(k.kva(pa), pa, r.levels-1, rvV|rvR|rvX|rvA|rvG)
			pa += ps
		}
	}
	for _, x := range k.ram {
		for pa := x.lo * ps; pa < x.hi*ps; {
			switch {
			case pa%bigPage1G == 0 && pa+bigPage1G <= x.hi*ps:
				b.mapAt(k.va(pa), pa, pud, data)
				pa += bigPage1G
			case pa%bigPage2M == 0 && pa+bigPage2M <= x.hi*ps:
				b.mapAt(k.va(pa), pa, pmd, data)
				pa += bigPage2M
			default:
				b.mapAt(k.va(pa), pa, r.levels-1, data)
				pa += ps
			}
		}
	}
	for n, p := range k.present {
		switch {
		case !p:
		case k.ks.VmemmapPages:
			for j := range k.backPages {
				b.mapAt(k.pageVA(uint64(n)*k.pps)+j*ps, (k.secBacking[n]+j)*ps, r.levels-1, data)
			}
		default:
			b.mapAt(k.pageVA(uint64(n)*k.pps), k.secBacking[n]*ps, pmd, data)
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

// archRISCV64 is arch_crash_save_vmcoreinfo (arch/riscv/kernel/
// vmcore_info.c, 6.12): phys_ram_base and VA_BITS with VMCOREINFO_NUMBER
// ("%ld"), the rest "0x%lx".
func archRISCV64(k *kmem) []kv {
	r := k.rv
	hex := func(name string, v uint64) kv { return kv{"NUMBER(" + name + ")", fmt.Sprintf("0x%x", v)} }
	return []kv{
		viNum("phys_ram_base", int64(r.physRAMBase)),
		hex("PAGE_OFFSET", k.pageOffset),
		hex("VMALLOC_START", k.vmallocStart), hex("VMALLOC_END", r.vmallocEnd),
		viNum("VA_BITS", int64(r.vaBits)),
		hex("VMEMMAP_START", r.vmemmapStart), hex("VMEMMAP_END", r.vmemmapEnd),
		hex("MODULES_VADDR", r.modulesVaddr), hex("MODULES_END", r.modulesEnd),
		hex("KERNEL_LINK_ADDR", rvKernelLinkAddr),
		hex("va_kernel_pa_offset", r.vaKernelPAOff),
	}
}

// NewRISCV64Machine returns a riscv64 kernel machine laid out as QEMU's
// virt board with Debian 13's kernel: sizeMiB MiB of RAM (at least 64) in
// one range from 0x80000000, 2 CPUs (4 from 512 MiB). ks.VABits chooses
// the mode (0: Sv57, what QEMU's rv64 gives).
func NewRISCV64Machine(ks KernelSpec, sizeMiB int) Spec {
	sizeMiB = max(sizeMiB, 64)
	s := Spec{
		Arch:     RISCV64,
		Segments: []Segment{ram(archs[RISCV64].ramBase, uint64(sizeMiB)<<20)},
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
