package kernel

import (
	"errors"
	"fmt"
)

// x86_64 kernel address-space constants (arch/x86/include/asm/page_64_types.h
// and Documentation/arch/x86/x86_64/mm.rst).
const (
	// StartKernelMap is __START_KERNEL_map: the kernel image is mapped at
	// StartKernelMap + (physical address - phys_base).
	StartKernelMap uint64 = 0xffffffff80000000

	// PageOffsetBaseL4 and PageOffsetBaseL5 are the direct map's start
	// without KASLR (__PAGE_OFFSET_BASE_L4/L5). With RANDOMIZE_MEMORY the
	// direct map starts at or above them, in 1 GiB steps.
	PageOffsetBaseL4 uint64 = 0xffff888000000000
	PageOffsetBaseL5 uint64 = 0xff11000000000000
)

// Page-table entry bits and sizes.
const (
	pteSize     = 8
	ptEntries   = 512
	tableSize   = ptEntries * pteSize
	ptePresent  = 1 << 0
	ptePSE      = 1 << 7 // page size: a leaf at PUD (1 GiB) or PMD (2 MiB) level
	pteAddrMask = 0x000ffffffffff000
	pageSize4K  = 1 << 12
	pageSize2M  = 1 << 21
	pageSize1G  = 1 << 30

	// maxPageOffsetProbes bounds FindPageOffset's work (16 TiB of 1 GiB
	// probes through present entries).
	maxPageOffsetProbes = 1 << 14
)

// x86 is the Linux x86_64 kernel.
type x86 struct{}

// X86_64 is the x86_64 kernel.
var X86_64 Arch = x86{}

func (x86) Name() string            { return "x86_64" }
func (x86) ELFMachine() uint16      { return 62 }  // EM_X86_64
func (x86) PrstatusSize() int       { return 336 } // struct elf_prstatus
func (x86) DefaultPageSize() uint64 { return pageSize4K }
func (x86) FallbackUtsname() bool   { return true }

// Check refuses a VMCOREINFO that says other pages than 4 KiB: x86_64 has
// no others, and its page-table walk and mem_map arithmetic would be wrong.
func (x86) Check(vi *VMCOREINFO) error {
	if vi != nil && vi.PageSize() != pageSize4K {
		return fmt.Errorf("x86_64 vmcore: VMCOREINFO says %d-byte pages; x86_64 kernels have 4096-byte pages", vi.PageSize())
	}
	return nil
}

func (x86) NewTranslator(r PhysReader, vi *VMCOREINFO) (*Translator, error) {
	return NewTranslator(r, vi)
}

// PhysBase is NUMBER(phys_base), else taken from the kernel-text PT_LOAD
// as makedumpfile takes it: p_paddr - (p_vaddr - __START_KERNEL_map).
func (x86) PhysBase(vi *VMCOREINFO, loads []Load) (uint64, string, bool) {
	if vi != nil {
		if n, ok := vi.Number("phys_base"); ok {
			return uint64(n), "vmcoreinfo", true
		}
	}
	for _, l := range loads {
		if l.Vaddr >= StartKernelMap {
			return l.Paddr - (l.Vaddr - StartKernelMap), "pt_load", true
		}
	}
	return 0, "", false
}

// NewTranslator builds an x86_64 Translator from VMCOREINFO: the top table is at
// SYMBOL(init_top_pgt) - __START_KERNEL_map + NUMBER(phys_base), using
// init_level4_pgt instead when present (kernels before 4.13 call it that);
// paging is 5-level when NUMBER(pgtable_l5_enabled) is non-zero; and
// NUMBER(sme_mask), when present, is cleared from every entry.
//
// phys_base may be negative: with KASLR the physical and virtual slides are
// independent, and the 6.1 guest in pagepipe's fixtures reports -12582912.
// The arithmetic is therefore done modulo 2^64, as the kernel does it.
func NewTranslator(r PhysReader, vi *VMCOREINFO) (*Translator, error) {
	name := "init_top_pgt"
	if vi.Has(symbolKey("init_level4_pgt")) {
		name = "init_level4_pgt"
	}
	sym, err := vi.RequireSymbol(name)
	if err != nil {
		return nil, fmt.Errorf("x86_64 page tables: %w", err)
	}
	if sym < StartKernelMap {
		return nil, fmt.Errorf("x86_64 page tables: SYMBOL(%s)=%#x is below the kernel text mapping %#x", name, sym, StartKernelMap)
	}
	physBase, err := vi.RequireNumber("phys_base")
	if err != nil {
		return nil, fmt.Errorf("x86_64 page tables: %w", err)
	}
	levels := 4
	if l5, ok := vi.Number("pgtable_l5_enabled"); ok && l5 != 0 {
		levels = 5
	}
	var sme uint64
	if m, ok := vi.Number("sme_mask"); ok {
		sme = uint64(m)
	}
	top := sym - StartKernelMap + uint64(physBase)
	t, err := NewTranslatorAt(r, top, levels, sme)
	if err != nil {
		return nil, fmt.Errorf("x86_64 page tables from SYMBOL(%s)=%#x, phys_base %d: %w", name, sym, physBase, err)
	}
	return t, nil
}

// NewTranslatorAt builds a Translator for an explicit top-level table
// physical address, paging depth (4 or 5) and SME mask.
func NewTranslatorAt(r PhysReader, topPaddr uint64, levels int, smeMask uint64) (*Translator, error) {
	if r == nil {
		return nil, errors.New("nil PhysReader")
	}
	if levels != 4 && levels != 5 {
		return nil, fmt.Errorf("unsupported paging depth %d (want 4 or 5)", levels)
	}
	if topPaddr&(tableSize-1) != 0 || topPaddr&^pteAddrMask != 0 {
		return nil, fmt.Errorf("top-level table address %#x is not a page-aligned 52-bit physical address", topPaddr)
	}
	return &Translator{r: r, format: x86Format{}, top: topPaddr, levels: levels, smeMask: smeMask}, nil
}

// levelInfo describes the walk from the top table down: name and the
// position of the 9 index bits.
var levelInfo = [5]struct {
	name  string
	shift uint
}{
	{"PGD", 48}, // 5-level only; with 4 levels the walk starts at index 1
	{"P4D", 39},
	{"PUD", 30},
	{"PMD", 21},
	{"PTE", 12},
}

// x86Format is the x86_64 page-table format (4 or 5 levels of 512
// entries; 2 MiB and 1 GiB pages marked by the PSE bit), walked as
// makedumpfile's vtop4_x86_64 and vtop5_x86_64 walk it.
type x86Format struct{}

func (x86Format) tableEntries() int { return ptEntries }

func (x86Format) kernelStart() uint64 { return kernelSpaceStart }

func (x86Format) lookup(t *Translator, vaddr uint64) (Mapping, failure) {
	// Canonical check: the bits above the top index must copy its top bit.
	topBit := uint(47)
	if t.levels == 5 {
		topBit = 56
	}
	if hi := int64(vaddr) >> topBit; hi != 0 && hi != -1 {
		return Mapping{}, failure{err: ErrNonCanonical}
	}

	first := 5 - t.levels
	table := t.top
	// The loop is bounded by the paging depth: a hostile table cannot make
	// the walk loop, only point at memory that is not there (an error from
	// the PhysReader) or at an unrelated page (a wrong but finite answer).
	for i := first; i < len(levelInfo); i++ {
		lv := levelInfo[i]
		name := lv.name
		if t.levels == 4 && i == 1 {
			name = "PGD" // with 4 levels, the top table is called the PGD
		}
		span := uint64(1) << lv.shift
		idx := (vaddr >> lv.shift) & (ptEntries - 1)
		ent, err := t.entry(table, idx)
		if err != nil {
			return Mapping{}, failure{level: name, span: span, err: fmt.Errorf("reading the table at physical %#x: %w", table, err)}
		}
		if t.trace != nil {
			t.trace(name, table+idx*8, ent)
		}
		if ent&ptePresent == 0 {
			return Mapping{}, failure{level: name, entry: ent, span: span, err: ErrNotPresent}
		}
		addr := ent & pteAddrMask &^ t.smeMask
		switch {
		case lv.shift == 12:
			return Mapping{Paddr: addr | vaddr&(pageSize4K-1), PageSize: pageSize4K}, failure{}
		case ent&ptePSE != 0 && (lv.shift == 30 || lv.shift == 21):
			// A large page: the low bits of the frame field hold PAT and
			// reserved bits, not address bits.
			return Mapping{Paddr: addr&^(span-1) | vaddr&(span-1), PageSize: span}, failure{}
		case ent&ptePSE != 0:
			return Mapping{}, failure{level: name, entry: ent, span: span, err: errors.New("page-size bit set at a level that cannot map a page")}
		}
		table = addr
	}
	// Not reached: the PTE level always returns above.
	return Mapping{}, failure{err: errors.New("page-table walk did not end")}
}

// FindPageOffset finds PAGE_OFFSET, the start of the kernel's direct mapping
// of all physical memory (page_offset_base), by walking the page tables.
//
// Dumps from kdump carry it in their PT_LOAD headers, but other dumps (QEMU's
// dump-guest-memory, for one) have p_vaddr 0, and VMCOREINFO does not export
// page_offset_base. The search rests on three properties of x86_64 Linux:
//   - the direct map starts with physical address 0, and the first 1 MiB
//     (the ISA range) is always mapped, even on machines with holes there;
//   - PAGE_OFFSET is 1 GiB aligned: 0xffff888000000000 (4-level) or
//     0xff11000000000000 (5-level) without KASLR, and randomized in 1 GiB
//     (PUD) steps with it (arch/x86/mm/kaslr.c);
//   - in the kernel half of the address space the direct map comes before
//     vmalloc, vmemmap, the kernel text and the modules, so it is the lowest
//     1 GiB-aligned address that maps physical 0. (The kernel text mapping
//     at 0xffffffff80000000 once mapped physical 0 too, but boot unmaps
//     everything below _text there, and it lies above the direct map in any
//     case.)
//
// The search probes 1 GiB-aligned addresses upwards from the start of the
// kernel half, skipping whole unmapped top-level (and P4D) ranges in one
// probe; on real kernels it takes at most a few hundred probes. Hostile
// tables that map everything could make it probe for ever, so it gives up
// after maxPageOffsetProbes. The result is cross-checked: the direct-map
// address of the top-level table itself must translate back to it.
func (t *Translator) FindPageOffset() (uint64, error) {
	if _, ok := t.format.(x86Format); !ok {
		return 0, errors.New("searching for the direct map: not an x86_64 page table")
	}
	// Kernel half: top-level entries 256..511.
	topShift := uint(39)
	if t.levels == 5 {
		topShift = 48
	}
	probes := 0
	for i := uint64(256); i < ptEntries; i++ {
		base := signExtend(i<<topShift, t.levels)
		step := uint64(pageSize1G)
		for off := uint64(0); off < uint64(1)<<topShift; off += step {
			va := base + off
			if probes++; probes > maxPageOffsetProbes {
				return 0, fmt.Errorf("searching for the direct map: no answer after %d probes, up to %#x", maxPageOffsetProbes, va)
			}
			m, err := t.Lookup(va)
			if err != nil {
				var te *TranslationError
				if errors.As(err, &te) && errors.Is(err, ErrNotPresent) {
					if te.Span > step {
						// A whole P4D/PGD-level range is unmapped: skip it.
						off = off&^(te.Span-1) + te.Span - step
					}
					continue
				}
				return 0, fmt.Errorf("searching for the direct map: %w", err)
			}
			if m.Paddr != 0 {
				continue
			}
			if err := t.checkPageOffset(va); err != nil {
				return 0, err
			}
			return va, nil
		}
	}
	return 0, errors.New("searching for the direct map: no 1 GiB-aligned kernel address maps physical address 0")
}

// checkPageOffset verifies a PAGE_OFFSET candidate against the one physical
// address known to be RAM: the top-level page table.
func (t *Translator) checkPageOffset(po uint64) error {
	va := po + t.top
	pa, err := t.VtoP(va)
	if err != nil {
		return fmt.Errorf("direct map candidate %#x: top-level table at %#x: %w", po, t.top, err)
	}
	if pa != t.top {
		return fmt.Errorf("direct map candidate %#x maps %#x to physical %#x, not %#x", po, va, pa, t.top)
	}
	return nil
}

// signExtend makes a canonical address from a top-level index shifted into
// place.
func signExtend(va uint64, levels int) uint64 {
	shift := uint(64 - 48)
	if levels == 5 {
		shift = 64 - 57
	}
	return uint64(int64(va<<shift) >> shift)
}
