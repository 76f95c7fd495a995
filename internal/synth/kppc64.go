package synth

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// A ppc64le kernel machine (Spec.Arch PPC64LE with a Kernel) is laid out as
// Debian 13's default powerpc64le kernel (6.12, 4 KiB pages) lays itself out
// on QEMU's pseries board, radix MMU or hash (KernelSpec.HashMMU, the
// kernel's disable_radix), after the kernel's asm/book3s/64 headers and a
// real vmcore of it (fixtures/make-vmcore-ppc64le.sh --suite trixie):
// RAM from physical 0; no KASLR: the image at physical 0 and in the linear
// map at PAGE_OFFSET 0xc000000000000000, so that every kernel address of
// RAM is PAGE_OFFSET + pa; 16 MiB sections; struct pages in the vmemmap at
// 0xc00c000000000000 (radix) or 0xc0003f0000000000 (hash); big-endian page
// tables from swapper_pg_dir in the image.
//
// Radix (6.6+, whose vmemmap_list is empty) maps in its tables the linear
// map (1 GiB leaves where a whole GiB is RAM, 2 MiB leaves where 2 MiB is,
// pages elsewhere), the vmemmap (a 2 MiB leaf where eight sections' struct
// pages are one 2 MiB block, pages elsewhere) and a few vmalloc pages; its
// top table has 8192 entries, 64 KiB, so that the vmemmap's entry lies past
// the table's first page. Hash maps only the vmalloc pages in its tables
// (the linear map and vmemmap live in the hashed page table): the vmemmap
// is known from vmemmap_list alone, one entry per page of struct pages,
// pushed at the list's head as the kernel populates it.

// ppc64Layout is a ppc64le machine's MMU and the kernel's records of it.
type ppc64Layout struct {
	hash bool
	// bits are the tables' index bits, PGD to PTE (asm/book3s/64
	// radix-4k.h and hash-4k.h).
	bits [4]uint
}

// ppc64 page-table entry bits (asm/book3s/64/pgtable.h): entries are
// big-endian; a kernel data page is present, a leaf, privileged,
// accessed, dirty, readable and writable.
const (
	ppcPresent  = 1 << 63
	ppcLeaf     = 1 << 62
	ppcKernelRW = 0x8 | 0x100 | 0x80 | 0x4 | 0x2
)

// The ppc64 kernel's addresses with 4 KiB pages.
const (
	ppcPageOffset    = 0xc000000000000000
	ppcRadixVmalloc  = 0xc008000000000000
	ppcRadixVmemmap  = 0xc00c000000000000
	ppcHashVmalloc   = 0xc0003d0000000000
	ppcHashVmemmap   = 0xc0003f0000000000
	ppcSectionBits   = 24 // arch/powerpc/include/asm/sparsemem.h
	ppcPhysBits      = 51 // MAX_PHYSMEM_BITS (the hash MMU maps 46 bits of it)
	ppcFreeAreaOrder = 13 // CONFIG_ARCH_FORCE_MAX_ORDER 12: NR_PAGE_ORDERS
	ppcNodes         = 256
	// mmu_psize_defs: enum mmu_psize's indexes (asm/mmu.h) and
	// sizeof(struct mmu_psize_def).
	ppcPsize4K, ppcPsize2M = 0, 7
	ppcPsizeDefSize        = 96
	ppcBackingSize         = 24 // sizeof(struct vmemmap_backing)
	ppcMMUFtrRadix         = 0x40
	ppcCPUSpecMMUFeatures  = 32 // offsetof(struct cpu_spec, mmu_features)
	ppcCPUSpecCPUFeatures  = 16
)

// newPPC64Layout checks the spec for a ppc64le machine.
func newPPC64Layout(ks KernelSpec, prof *profile, pageSize uint64) (*ppc64Layout, error) {
	if pageSize != 4096 {
		return nil, fmt.Errorf("synth: a generated ppc64le machine has 4 KiB pages, not %d", pageSize)
	}
	if ks.Lean || ks.Gigantic > 0 || ks.VABits != 0 || ks.PA52 {
		return nil, fmt.Errorf("synth: a ppc64le machine takes no Lean, Gigantic, VABits or PA52")
	}
	if !ks.HashMMU && !prof.atLeast(6, 6) {
		return nil, fmt.Errorf("synth: a radix ppc64le machine is 6.6+ (before, radix vmemmap_list entries describe 2 MiB pages), not %s", prof.name)
	}
	if ks.HashMMU {
		return &ppc64Layout{hash: true, bits: [4]uint{9, 9, 7, 9}}, nil
	}
	return &ppc64Layout{bits: [4]uint{13, 9, 9, 9}}, nil
}

// shift is the lowest address bit a level's (0 PGD .. 3 PTE) index uses.
func (p *ppc64Layout) shift(level int) uint {
	s := uint(12)
	for l := 3; l > level; l-- {
		s += p.bits[l]
	}
	return s
}

// setupPPC64 is buildKernel's part for a ppc64le machine: its layout,
// sections and the era's flags as ppc64 numbers them.
func (k *kmem) setupPPC64() error {
	var err error
	if k.ppc, err = newPPC64Layout(k.ks, k.prof, k.ps); err != nil {
		return err
	}
	k.sectionBits = ppcSectionBits
	// ppc64 has no PG_uncached (x86's PAT flag, gone in 6.12): before
	// 6.12 the flags after it are one lower, as on arm64.
	p := *k.prof
	if !p.atLeast(6, 12) {
		p.pg.hwpoison--
	}
	p.osrelease = strings.Replace(p.osrelease, "-amd64", "-powerpc64le", 1)
	k.prof = &p
	return nil
}

// virtualLayoutPPC64 picks the kernel's addresses: fixed, no KASLR.
func (k *kmem) virtualLayoutPPC64() {
	k.pageOffset, k.vmallocStart, k.vmemmap = ppcPageOffset, ppcRadixVmalloc, ppcRadixVmemmap
	if k.ppc.hash {
		k.vmallocStart, k.vmemmap = ppcHashVmalloc, ppcHashVmemmap
	}
}

// placePPC64 puts the image at physical 0 (pseries loads the kernel
// there) and sizes the boot allocations: the tables, and under hash the
// vmemmap_list's entries.
func (k *kmem) placePPC64(mbFixed, nPresent uint64) (imgLo, mbPages uint64) {
	dmGiB := (k.endPFN*k.ps + bigPage1G - 1) / bigPage1G
	vmPages := nPresent * k.backPages
	tables := 3*(dmGiB/512+2) + dmGiB + 2 + vmPages/512 + nPresent + 8
	if k.ppc.hash {
		tables = 8
		tables += vmPages/(k.ps/ppcBackingSize) + 1
	}
	return 0, mbFixed + tables
}

// ppcPT builds ppc64 page tables: the top table in the image, the others
// a page each from the boot allocations.
type ppcPT struct {
	k      *kmem
	top    uint64
	tables map[uint64][]uint64
}

func (b *ppcPT) table(pa uint64, level int) []uint64 {
	t := b.tables[pa]
	if t == nil {
		t = make([]uint64, 1<<b.k.ppc.bits[level])
		b.tables[pa] = t
	}
	return t
}

// mapAt maps va to pa with a leaf at level leaf (1 PUD: 1 GiB, 2 PMD:
// 2 MiB, 3 PTE: a page). The walk ignores the address's top nibble.
func (b *ppcPT) mapAt(va, pa uint64, leaf int) {
	p := b.k.ppc
	t := b.table(b.top, 0)
	for level := 0; ; level++ {
		i := va >> p.shift(level) & (1<<p.bits[level] - 1)
		if level == leaf {
			t[i] = pa | ppcPresent | ppcLeaf | ppcKernelRW
			return
		}
		if t[i] == 0 {
			next := b.k.allocPages(1) * b.k.ps
			// Radix entries carry the next level's index size (NLS).
			nls := uint64(0)
			if !p.hash {
				nls = uint64(p.bits[level+1])
			}
			t[i] = ppcPresent | next | nls
		}
		t = b.table(t[i]&0x0fffffffffffff00, level+1)
	}
}

// ppcTop is where the image keeps swapper_pg_dir: 64 KiB aligned (radix's
// top table is 64 KiB), away from buildGlobals' pages.
func (k *kmem) ppcTop() uint64 {
	n := k.imgHi - k.imgLo
	return (k.imgLo + n*9/16) &^ (0x10000/k.ps - 1)
}

// ppcData is the image page of the MMU's records: mmu_vmemmap_psize,
// vmemmap_list, cur_cpu_spec and the cpu_spec, mmu_psize_defs.
func (k *kmem) ppcData() uint64 { return k.ppcTop() + 0x10000/k.ps }

// buildTablesPPC64 makes swapper_pg_dir and everything below it, and the
// MMU's records in the image.
func (k *kmem) buildTablesPPC64() {
	ps := k.ps
	top := k.ppcTop()
	k.sym["swapper_pg_dir"] = k.kva(top * ps)
	b := &ppcPT{k: k, top: top * ps, tables: map[uint64][]uint64{}}
	b.table(b.top, 0)
	if !k.ppc.hash {
		for _, x := range k.ram {
			for pa := x.lo * ps; pa < x.hi*ps; {
				switch g, m := pa+bigPage1G, pa+bigPage2M; {
				case pa%bigPage1G == 0 && g <= x.hi*ps:
					b.mapAt(k.va(pa), pa, 1)
					pa = g
				case pa%bigPage2M == 0 && m <= x.hi*ps:
					b.mapAt(k.va(pa), pa, 2)
					pa = m
				default:
					b.mapAt(k.va(pa), pa, 3)
					pa += ps
				}
			}
		}
		// The vmemmap: 2 MiB of struct pages cover eight sections; a
		// leaf maps them where their backing is one aligned 2 MiB block.
		per2M := bigPage2M / ps
		for n := uint64(0); n < k.nsec; n += 8 {
			va := k.pageVA(n * k.pps)
			first := k.secBacking[n]
			whole := k.present[n] && first%per2M == 0 && n+8 <= k.nsec
			for j := uint64(1); whole && j < 8; j++ {
				whole = k.present[n+j] && k.secBacking[n+j] == first+j*k.backPages
			}
			if whole {
				b.mapAt(va, first*ps, 2)
				continue
			}
			for j := n; j < min(n+8, k.nsec); j++ {
				if !k.present[j] {
					continue
				}
				for i := range k.backPages {
					b.mapAt(k.pageVA(j*k.pps)+i*ps, (k.secBacking[j]+i)*ps, 3)
				}
			}
		}
	}
	// A few vmalloc pages (module and vmap space), onto the image.
	for i := range uint64(4) {
		b.mapAt(k.vmallocStart+0x10000+i*ps, (k.imgLo+i)*ps, 3)
	}
	for pa, t := range b.tables {
		raw := make([]byte, len(t)*8)
		for i, e := range t {
			binary.BigEndian.PutUint64(raw[i*8:], e)
		}
		for off := uint64(0); off < uint64(len(raw)); off += ps {
			pg := make([]byte, ps)
			copy(pg, raw[off:])
			k.small[(pa+off)/ps] = pg
		}
	}
	k.buildMMURecords()
}

// buildMMURecords writes the image's page of MMU records and, under hash,
// the vmemmap_list: an entry (vmemmap_backing: list, phys, virt_addr) per
// page of struct pages, in pages of entries from the boot allocations,
// each pushed at the head so that the list runs from the highest address
// down.
func (k *kmem) buildMMURecords() {
	le := binary.LittleEndian
	ps := k.ps
	data := k.ppcData()
	pg := make([]byte, ps)
	k.small[data] = pg
	base := k.kva(data * ps)
	const (
		psizeOff, listOff, specPtrOff, specOff, defsOff = 0x0, 0x8, 0x10, 0x100, 0x400
	)
	k.sym["mmu_vmemmap_psize"] = base + psizeOff
	k.sym["vmemmap_list"] = base + listOff
	k.sym["cur_cpu_spec"] = base + specPtrOff
	k.sym["mmu_psize_defs"] = base + defsOff
	psize := uint32(ppcPsize2M)
	if k.ppc.hash {
		psize = ppcPsize4K
	}
	le.PutUint32(pg[psizeOff:], psize)
	le.PutUint64(pg[specPtrOff:], base+specOff)
	features := uint32(0x3c006041) // MMU_FTR_* of a POWER9 without the radix bit
	if !k.ppc.hash {
		features |= ppcMMUFtrRadix
	}
	le.PutUint64(pg[specOff+ppcCPUSpecCPUFeatures:], 0x000c00eb8f5f9187)
	le.PutUint32(pg[specOff+ppcCPUSpecMMUFeatures:], features)
	for i, shift := range map[int]uint32{0: 12, 2: 16, 7: 21, 10: 24, 13: 30} {
		le.PutUint32(pg[defsOff+i*ppcPsizeDefSize:], shift)
	}
	if !k.ppc.hash {
		return // radix 6.6+: an empty list, the tables map the vmemmap
	}
	perPage := ps / ppcBackingSize
	var head uint64
	var cur []byte
	var curPA uint64
	n := uint64(0)
	for sec, p := range k.present {
		if !p {
			continue
		}
		for i := range k.backPages {
			if n%perPage == 0 {
				curPA = k.allocPages(1) * ps
				cur = make([]byte, ps)
				k.small[curPA/ps] = cur
			}
			e := cur[n%perPage*ppcBackingSize:]
			le.PutUint64(e[0:], head)
			le.PutUint64(e[8:], (k.secBacking[sec]+i)*ps)
			le.PutUint64(e[16:], k.pageVA(uint64(sec)*k.pps)+i*ps)
			head = k.va(curPA + n%perPage*ppcBackingSize)
			n++
		}
	}
	le.PutUint64(pg[listOff:], head)
}

// archPPC64 is arch_crash_save_vmcoreinfo (arch/powerpc/kexec/
// vmcore_info.c, 6.12): node_data, the vmemmap_list and mmu_psize_defs,
// cur_cpu_spec and, from 6.6 on, the MMU and KERNELOFFSET.
func archPPC64(k *kmem) []kv {
	l := []kv{
		viSym("node_data", k.sym["node_data"]), viLen("node_data", ppcNodes),
		viSym("vmemmap_list", k.sym["vmemmap_list"]),
		viSym("mmu_vmemmap_psize", k.sym["mmu_vmemmap_psize"]),
		viSym("mmu_psize_defs", k.sym["mmu_psize_defs"]),
		viSize("vmemmap_backing", ppcBackingSize),
		viOff("vmemmap_backing.list", 0), viOff("vmemmap_backing.phys", 8), viOff("vmemmap_backing.virt_addr", 16),
		viSize("mmu_psize_def", ppcPsizeDefSize), viOff("mmu_psize_def.shift", 0),
	}
	if k.prof.atLeast(6, 6) {
		radix := int64(1)
		if k.ppc.hash {
			radix = 0
		}
		l = append(l, viSym("cur_cpu_spec", k.sym["cur_cpu_spec"]),
			viOff("cpu_spec.cpu_features", ppcCPUSpecCPUFeatures), viOff("cpu_spec.mmu_features", ppcCPUSpecMMUFeatures),
			viNum("RADIX_MMU", radix))
	}
	return append(l, kv{"KERNELOFFSET", "0"})
}

// NewPPC64Machine returns a ppc64le kernel machine laid out as QEMU's
// pseries board: sizeMiB MiB of RAM (at least 64) in one range from
// physical 0, 2 CPUs (4 from 512 MiB), 4 KiB pages; ks.HashMMU picks the
// hash MMU.
func NewPPC64Machine(ks KernelSpec, sizeMiB int) Spec {
	sizeMiB = max(sizeMiB, 64)
	s := Spec{
		Arch:     PPC64LE,
		PageSize: 4096,
		Segments: []Segment{ram(0, uint64(sizeMiB)<<20)},
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
