package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
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
	pteSize      = 8
	ptEntries    = 512
	tableSize    = ptEntries * pteSize
	ptePresent   = 1 << 0
	ptePSE       = 1 << 7 // page size: a leaf at PUD (1 GiB) or PMD (2 MiB) level
	pteAddrMask  = 0x000ffffffffff000
	pageSize4K   = 1 << 12
	pageSize2M   = 1 << 21
	pageSize1G   = 1 << 30
	tableCacheSz = 16

	// maxPageOffsetProbes bounds FindPageOffset's work (16 TiB of 1 GiB
	// probes through present entries).
	maxPageOffsetProbes = 1 << 14
)

// PhysReader reads physical memory of the dumped machine. ReadPhys must fill
// all of p or return an error; in particular an address the dump does not
// hold must be an error, which is how a page table pointing outside memory
// is caught.
type PhysReader interface {
	ReadPhys(paddr uint64, p []byte) error
}

// ErrNotPresent is wrapped by a TranslationError when a page-table entry on
// the walk lacks its present bit: the address is simply not mapped.
var ErrNotPresent = errors.New("not present")

// ErrNonCanonical is wrapped by a TranslationError for an address whose high
// bits are not a sign extension of the top translated bit; no page table can
// map such an address.
var ErrNonCanonical = errors.New("non-canonical address")

// TranslationError describes a failed virtual-to-physical translation. Its
// message reads like "vtop 0xffffffff81000000: PMD entry not present".
type TranslationError struct {
	Vaddr uint64
	// Level names the table whose entry stopped the walk: "PGD", "P4D",
	// "PUD", "PMD" or "PTE"; empty for a non-canonical address.
	Level string
	// Entry is the offending entry's value, when it could be read.
	Entry uint64
	// Span is the size of the virtual range the stopping entry covers (512
	// GiB for a 4-level PGD entry, 2 MiB for a PMD entry, ...). A scanner
	// that meets ErrNotPresent may skip Span bytes from the aligned start,
	// since the whole range is unmapped.
	Span uint64
	Err  error
}

func (e *TranslationError) Error() string {
	switch {
	case e.Level == "":
		return fmt.Sprintf("vtop %#x: %v", e.Vaddr, e.Err)
	case errors.Is(e.Err, ErrNotPresent):
		return fmt.Sprintf("vtop %#x: %s entry not present", e.Vaddr, e.Level)
	default:
		return fmt.Sprintf("vtop %#x: %s entry %#x: %v", e.Vaddr, e.Level, e.Entry, e.Err)
	}
}

func (e *TranslationError) Unwrap() error { return e.Err }

// Translator walks the kernel's own page tables (init_top_pgt, the tables
// swapper uses) to translate kernel virtual addresses, as makedumpfile's
// vtop4_x86_64 does. There is deliberately no direct-map shortcut: the walk
// is the ground truth and works for vmalloc, vmemmap and the kernel text
// alike.
//
// A Translator caches a few recently read tables; it is safe for concurrent
// use.
type Translator struct {
	r       PhysReader
	top     uint64 // physical address of the top-level table
	levels  int    // 4 or 5
	smeMask uint64 // AMD SME/SEV encryption bit(s), cleared from addresses

	mu    sync.Mutex
	cache [tableCacheSz]cachedTable
	next  int // round-robin replacement cursor
}

type cachedTable struct {
	paddr uint64
	valid bool
	ent   [ptEntries]uint64
}

// NewTranslator builds a Translator from VMCOREINFO: the top table is at
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
	return &Translator{r: r, top: topPaddr, levels: levels, smeMask: smeMask}, nil
}

// TopTable is the physical address of the top-level page table.
func (t *Translator) TopTable() uint64 { return t.top }

// Levels is the paging depth, 4 or 5.
func (t *Translator) Levels() int { return t.levels }

// Mapping is one successful translation.
type Mapping struct {
	Paddr uint64 // physical address of the translated byte
	// PageSize is the size of the page that maps it: 4 KiB, 2 MiB or 1 GiB.
	PageSize uint64
}

// VtoP translates a kernel virtual address to a physical one.
func (t *Translator) VtoP(vaddr uint64) (uint64, error) {
	m, err := t.Lookup(vaddr)
	return m.Paddr, err
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

// Lookup translates vaddr and also reports the size of the page mapping it,
// so that callers can move through memory a page at a time.
func (t *Translator) Lookup(vaddr uint64) (Mapping, error) {
	// Canonical check: the bits above the top index must copy its top bit.
	topBit := uint(47)
	if t.levels == 5 {
		topBit = 56
	}
	if hi := int64(vaddr) >> topBit; hi != 0 && hi != -1 {
		return Mapping{}, &TranslationError{Vaddr: vaddr, Err: ErrNonCanonical}
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
			return Mapping{}, &TranslationError{Vaddr: vaddr, Level: name, Span: span,
				Err: fmt.Errorf("reading the table at physical %#x: %w", table, err)}
		}
		if ent&ptePresent == 0 {
			return Mapping{}, &TranslationError{Vaddr: vaddr, Level: name, Entry: ent, Span: span, Err: ErrNotPresent}
		}
		addr := ent & pteAddrMask &^ t.smeMask
		switch {
		case lv.shift == 12:
			return Mapping{Paddr: addr | vaddr&(pageSize4K-1), PageSize: pageSize4K}, nil
		case ent&ptePSE != 0 && (lv.shift == 30 || lv.shift == 21):
			// A large page: the low bits of the frame field hold PAT and
			// reserved bits, not address bits.
			return Mapping{Paddr: addr&^(span-1) | vaddr&(span-1), PageSize: span}, nil
		case ent&ptePSE != 0:
			return Mapping{}, &TranslationError{Vaddr: vaddr, Level: name, Entry: ent, Span: span,
				Err: errors.New("page-size bit set at a level that cannot map a page")}
		}
		table = addr
	}
	// Not reached: the PTE level always returns above.
	return Mapping{}, &TranslationError{Vaddr: vaddr, Err: errors.New("page-table walk did not end")}
}

// entry returns entry idx of the table at physical address paddr, through
// the table cache.
func (t *Translator) entry(paddr, idx uint64) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.cache {
		if c := &t.cache[i]; c.valid && c.paddr == paddr {
			return c.ent[idx], nil
		}
	}
	var buf [tableSize]byte
	if err := t.r.ReadPhys(paddr, buf[:]); err != nil {
		return 0, err
	}
	// The top table is used by every walk: keep it in slot 0 for good.
	slot := 0
	if paddr != t.top {
		slot = 1 + t.next
		t.next = (t.next + 1) % (tableCacheSz - 1)
	}
	c := &t.cache[slot]
	for i := range c.ent {
		c.ent[i] = binary.LittleEndian.Uint64(buf[i*pteSize:])
	}
	c.paddr, c.valid = paddr, true
	return c.ent[idx], nil
}

// ReadVirt reads len(p) bytes of kernel virtual memory starting at vaddr,
// translating each page on the way, so the range may cross page boundaries
// and physically discontiguous pages.
func (t *Translator) ReadVirt(vaddr uint64, p []byte) error {
	for done := 0; done < len(p); {
		va := vaddr + uint64(done)
		if va < vaddr {
			return fmt.Errorf("read %d bytes at virtual %#x: address range wraps", len(p), vaddr)
		}
		m, err := t.Lookup(va)
		if err != nil {
			return fmt.Errorf("read %d bytes at virtual %#x: %w", len(p), vaddr, err)
		}
		n := m.PageSize - va&(m.PageSize-1)
		if rest := uint64(len(p) - done); n > rest {
			n = rest
		}
		if err := t.r.ReadPhys(m.Paddr, p[done:done+int(n)]); err != nil {
			return fmt.Errorf("read %d bytes at virtual %#x: physical %#x: %w", len(p), vaddr, m.Paddr, err)
		}
		done += int(n)
	}
	return nil
}

// PhysSlicer serves physical memory without copying when it can (an mmap
// window of the vmcore); the slice is valid until its next call.
type PhysSlicer interface {
	SlicePhys(paddr uint64, n int) ([]byte, error)
}

// SliceVirt returns n bytes of kernel virtual memory at vaddr: a slice
// straight from p when one page mapping (4 KiB, 2 MiB or 1 GiB) covers the
// whole range, as it does for a section's struct pages in the vmemmap;
// otherwise a copy read page by page through p into *buf, which is grown
// to n bytes when it is shorter (callers keep it from call to call, and
// pay for it only when the memory is not contiguous).
func (t *Translator) SliceVirt(p PhysSlicer, vaddr uint64, n int, buf *[]byte) ([]byte, error) {
	m, err := t.Lookup(vaddr)
	if err != nil {
		return nil, fmt.Errorf("read %d bytes at virtual %#x: %w", n, vaddr, err)
	}
	if uint64(n) <= m.PageSize-vaddr&(m.PageSize-1) {
		return p.SlicePhys(m.Paddr, n)
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	dst := (*buf)[:n]
	for done := 0; done < n; {
		va := vaddr + uint64(done)
		if done > 0 {
			if m, err = t.Lookup(va); err != nil {
				return nil, fmt.Errorf("read %d bytes at virtual %#x: %w", n, vaddr, err)
			}
		}
		k := int(min(m.PageSize-va&(m.PageSize-1), uint64(n-done)))
		b, err := p.SlicePhys(m.Paddr, k)
		if err != nil {
			return nil, fmt.Errorf("read %d bytes at virtual %#x: physical %#x: %w", n, vaddr, m.Paddr, err)
		}
		copy(dst[done:], b)
		done += k
	}
	return dst, nil
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
