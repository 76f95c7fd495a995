package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// VirtReader reads kernel virtual memory; *Translator is one.
type VirtReader interface {
	ReadVirt(vaddr uint64, p []byte) error
}

// Section is a run of pfns whose struct pages lie contiguously in kernel
// virtual memory: one memory section under SPARSEMEM, the whole machine
// under FLATMEM.
type Section struct {
	StartPFN, EndPFN uint64
	MemMap           uint64 // virtual address of the struct page of StartPFN
}

// MemMap is where the kernel keeps its struct page array, section by
// section, in pfn order. Sections without a mem_map are left out.
type MemMap struct {
	Sections []Section
	PageSize uint64 // SIZE(page)
}

// MaxPFN is one past the highest pfn that has a struct page: makedumpfile
// lowers max_mapnr to it, so memory beyond (a BIOS ROM below 4 GiB, say) is
// not dumped once the mem_map is known.
func (m *MemMap) MaxPFN() uint64 {
	if len(m.Sections) == 0 {
		return 0
	}
	return m.Sections[len(m.Sections)-1].EndPFN
}

// Section-map flag bits (include/linux/mmzone.h): the low bits of
// section_mem_map are flags, the rest the encoded mem_map address.
const (
	sectionMarkedPresent = 1 << 0
	sectionMapMask       = ^uint64(1<<5 - 1)
	// maxSections bounds how many sections a hostile VMCOREINFO can make us
	// visit: 2^22 sections of 128 MiB is 512 TiB.
	maxSections = 1 << 22
	// maxSectionSize bounds SIZE(mem_section), and with maxSections what
	// the decoder reads (256 MiB at most). An x86_64 struct mem_section is
	// 16 or 32 bytes: section_mem_map, the usage (before 5.3 the
	// pageblock_flags) pointer, and with CONFIG_PAGE_EXTENSION page_ext and
	// a pad.
	maxSectionSize = 64
)

// ErrNoMemMap is returned when VMCOREINFO describes no memory model we know.
var ErrNoMemMap = errors.New("no mem_map: VMCOREINFO has neither SYMBOL(mem_section) nor SYMBOL(mem_map)")

// FindMemMap locates the struct page array for pfns below maxMapnr, from
// VMCOREINFO and kernel memory, in makedumpfile's order of preference:
// SPARSEMEM (EXTREME or not; VMEMMAP needs nothing more), then FLATMEM.
func FindMemMap(vi *VMCOREINFO, r VirtReader, maxMapnr uint64) (*MemMap, error) {
	size, err := vi.RequireSize("page")
	if err != nil {
		return nil, fmt.Errorf("mem_map: %w", err)
	}
	if size <= 0 || size > 1024 {
		return nil, fmt.Errorf("mem_map: SIZE(page)=%d is not plausible", size)
	}
	m := &MemMap{PageSize: uint64(size)}
	switch {
	case vi.Has(symbolKey("mem_section")) && vi.Has("SIZE(mem_section)") && vi.Has("OFFSET(mem_section.section_mem_map)"):
		err = m.sparse(vi, r, maxMapnr)
	case vi.Has(symbolKey("mem_map")):
		err = m.flat(vi, r, maxMapnr)
	default:
		err = ErrNoMemMap
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (m *MemMap) flat(vi *VMCOREINFO, r VirtReader, maxMapnr uint64) error {
	sym, _ := vi.Symbol("mem_map")
	var b [8]byte
	if err := r.ReadVirt(sym, b[:]); err != nil {
		return fmt.Errorf("mem_map: read SYMBOL(mem_map) %#x: %w", sym, err)
	}
	mm := binary.LittleEndian.Uint64(b[:])
	if mm < lowestKernelAddr(r) {
		return fmt.Errorf("mem_map: FLATMEM mem_map %#x is not a kernel address", mm)
	}
	m.Sections = []Section{{StartPFN: 0, EndPFN: maxMapnr, MemMap: mm}}
	return nil
}

// kernelSpaceStart is the lowest x86_64 kernel address: a decoded mem_map
// below it is garbage.
const kernelSpaceStart = 0xff00000000000000

// lowestKernelAddr is where r's kernel address space starts: the
// architecture's when r is a page-table walk (*Translator), else x86_64's.
func lowestKernelAddr(r VirtReader) uint64 {
	if k, ok := r.(interface{ KernelSpaceStart() uint64 }); ok {
		return k.KernelSpaceStart()
	}
	return kernelSpaceStart
}

func (m *MemMap) sparse(vi *VMCOREINFO, r VirtReader, maxMapnr uint64) error {
	sym, _ := vi.Symbol("mem_section")
	msSize, _ := vi.Size("mem_section")
	mapOff, _ := vi.Offset("mem_section.section_mem_map")
	// Without the keys (kernels before 5.13 and 5.9), makedumpfile's
	// per-architecture defaults.
	arch := ArchOf(vi)
	arm64 := arch == ARM64
	sectionBits, ok := vi.Number("SECTION_SIZE_BITS")
	if !ok {
		sectionBits = 27
		if arm64 {
			sectionBits = 30
		}
	}
	physBits, ok := vi.Number("MAX_PHYSMEM_BITS")
	if !ok {
		physBits = 46
		if l5, _ := vi.Number("pgtable_l5_enabled"); l5 != 0 {
			physBits = 52
		}
		if arm64 {
			physBits = 48
			if vb, _ := vi.Number("VA_BITS"); vb == 52 {
				physBits = 52
			}
		}
		if arch == RISCV64 {
			physBits = 56
		}
	}
	pageShift := int64(bits.TrailingZeros64(uint64(vi.PageSize())))
	switch {
	case msSize <= 0 || msSize > maxSectionSize || mapOff < 0 || mapOff+8 > msSize:
		return fmt.Errorf("mem_section: SIZE %d and OFFSET(section_mem_map) %d are not plausible", msSize, mapOff)
	case sectionBits < 20 || sectionBits > 40 || physBits < sectionBits || physBits > 56:
		return fmt.Errorf("mem_section: SECTION_SIZE_BITS %d and MAX_PHYSMEM_BITS %d are not plausible", sectionBits, physBits)
	}
	pfnsPerSection := uint64(1) << (sectionBits - pageShift)
	nrMemSections := uint64(1) << (physBits - sectionBits)
	numSections := min((maxMapnr+pfnsPerSection-1)/pfnsPerSection, nrMemSections)
	if numSections > maxSections {
		return fmt.Errorf("mem_section: %d sections is too many", numSections)
	}
	perRoot := uint64(vi.PageSize()) / uint64(msSize) // SECTIONS_PER_ROOT: a page of mem_sections
	nrRoots := (nrMemSections + perRoot - 1) / perRoot
	extreme := true
	if l, ok := vi.Length("mem_section"); ok && uint64(l) != nrRoots {
		extreme = false
	}

	var roots []uint64
	if extreme {
		usedRoots := (numSections + perRoot - 1) / perRoot
		buf := make([]byte, usedRoots*8)
		if err := r.ReadVirt(sym, buf); err != nil {
			return fmt.Errorf("mem_section: read %d roots at %#x: %w", usedRoots, sym, err)
		}
		roots = make([]uint64, usedRoots)
		for i := range roots {
			roots[i] = binary.LittleEndian.Uint64(buf[i*8:])
		}
	}
	kstart := lowestKernelAddr(r)
	// Read a root's worth of mem_section structs at a time.
	chunk := make([]byte, perRoot*uint64(msSize))
	for nr := uint64(0); nr < numSections; nr += perRoot {
		var base uint64
		n := min(perRoot, numSections-nr)
		if extreme {
			base = roots[nr/perRoot]
			if base == 0 {
				continue // no sections under this root
			}
		} else {
			base = sym + nr*uint64(msSize)
		}
		if err := r.ReadVirt(base, chunk[:n*uint64(msSize)]); err != nil {
			return fmt.Errorf("mem_section: read sections %d-%d at %#x: %w", nr, nr+n-1, base, err)
		}
		for i := range n {
			v := binary.LittleEndian.Uint64(chunk[i*uint64(msSize)+uint64(mapOff):])
			if v&sectionMarkedPresent == 0 {
				continue
			}
			start := (nr + i) * pfnsPerSection
			mm := (v & sectionMapMask) + start*m.PageSize
			if mm < kstart {
				continue // not a kernel address: makedumpfile treats it as absent
			}
			m.Sections = append(m.Sections, Section{StartPFN: start, EndPFN: min(start+pfnsPerSection, maxMapnr), MemMap: mm})
		}
	}
	if len(m.Sections) == 0 {
		return errors.New("mem_section: no present section")
	}
	return nil
}
