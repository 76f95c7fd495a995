package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// PhysReader reads physical memory of the dumped machine. ReadPhys must fill
// all of p or return an error; in particular an address the dump does not
// hold must be an error, which is how a page table pointing outside memory
// is caught.
type PhysReader interface {
	ReadPhys(paddr uint64, p []byte) error
}

// ErrNotPresent is wrapped by a TranslationError when a page-table entry on
// the walk lacks its present (valid) bit: the address is simply not mapped.
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

// tableFormat is one architecture's page-table format: how a walk goes
// from the top table to the page, given the Translator's table reader.
// x86_64 (x86_64.go) and arm64 (arm64.go) have one each; another
// architecture adds its own next to its Arch.
type tableFormat interface {
	// lookup walks the tables for vaddr; where it stops, failure says
	// why (err nil: vaddr is mapped).
	lookup(t *Translator, vaddr uint64) (Mapping, failure)
	// tableEntries is the number of 8-byte entries in a full table.
	tableEntries() int
	// kernelStart is the lowest kernel virtual address the format maps:
	// a decoded kernel pointer below it is garbage.
	kernelStart() uint64
}

// Translator walks the kernel's own page tables to translate kernel
// virtual addresses, as makedumpfile's vtop functions do. There is
// deliberately no linear-map shortcut: the walk is the ground truth and
// works for vmalloc, vmemmap and the kernel image alike. The table format
// is the architecture's (Arch.NewTranslator).
//
// A Translator caches a few recently read tables; it is safe for concurrent
// use.
type Translator struct {
	r       PhysReader
	format  tableFormat
	top     uint64 // physical address of the top-level table
	levels  int    // paging depth
	smeMask uint64 // x86_64: AMD SME/SEV encryption bit(s), cleared from addresses
	// bigEndian: the entries are __be64 (ppc64, even on a little-endian
	// kernel).
	bigEndian bool

	// trace, when set (SetTrace), is told each entry a walk reads.
	trace func(level string, entryAddr, entry uint64)

	mu    sync.Mutex
	cache [tableCacheSz]cachedTable
	next  int    // round-robin replacement cursor
	buf   []byte // a table as read, before decoding
}

type cachedTable struct {
	paddr uint64
	valid bool
	ent   []uint64
}

// tableCacheSz tables are kept per Translator.
const tableCacheSz = 16

// TopTable is the physical address of the top-level page table.
func (t *Translator) TopTable() uint64 { return t.top }

// Levels is the paging depth: 4 or 5 on x86_64, 2 to 5 on arm64.
func (t *Translator) Levels() int { return t.levels }

// KernelSpaceStart is the lowest kernel virtual address of the
// architecture and geometry: a mem_map pointer below it is not a kernel
// address.
func (t *Translator) KernelSpaceStart() uint64 { return t.format.kernelStart() }

// Mapping is one successful translation.
type Mapping struct {
	Paddr uint64 // physical address of the translated byte
	// PageSize is the size of the page or block that maps it: 4 KiB,
	// 2 MiB or 1 GiB on x86_64; on arm64 also the 16 KiB and 64 KiB
	// granules' pages and blocks.
	PageSize uint64
}

// SetTrace makes the walks of t tell fn each table entry they read: the
// level's name, the entry's physical address and its value, as
// makedumpfile's --vtop prints them (x86_64; the other formats' walks
// print nothing in makedumpfile and tell nothing here). Set it on a
// Translator of its own, before its first walk.
func (t *Translator) SetTrace(fn func(level string, entryAddr, entry uint64)) { t.trace = fn }

// VtoP translates a kernel virtual address to a physical one.
func (t *Translator) VtoP(vaddr uint64) (uint64, error) {
	m, err := t.Lookup(vaddr)
	return m.Paddr, err
}

// Lookup translates vaddr and also reports the size of the page mapping it,
// so that callers can move through memory a page at a time.
func (t *Translator) Lookup(vaddr uint64) (Mapping, error) {
	m, f := t.format.lookup(t, vaddr)
	if f.err != nil {
		return Mapping{}, f.error(vaddr)
	}
	return m, nil
}

// Step is Lookup for a walk through the address space, entry by entry
// (package priority's walk of the kernel's tables): where vaddr is not
// mapped, or not canonical, it returns ErrNotPresent or ErrNonCanonical
// itself and the span of the entry that is not present (0 for a
// non-canonical address), with nothing allocated — such a walk meets tens
// of thousands of empty entries. Other failures are Lookup's
// *TranslationError.
func (t *Translator) Step(vaddr uint64) (m Mapping, span uint64, err error) {
	m, f := t.format.lookup(t, vaddr)
	switch f.err {
	case nil:
		return m, 0, nil
	case ErrNotPresent, ErrNonCanonical:
		return Mapping{}, f.span, f.err
	}
	return Mapping{}, f.span, f.error(vaddr)
}

// failure is where a format's walk stopped, as a value: a
// TranslationError without its address, made one only where a caller
// gets an error (Lookup).
type failure struct {
	level       string
	entry, span uint64
	err         error
}

func (f failure) error(vaddr uint64) *TranslationError {
	return &TranslationError{Vaddr: vaddr, Level: f.level, Entry: f.entry, Span: f.span, Err: f.err}
}

// entry returns entry idx of the table at physical address paddr, through
// the table cache.
func (t *Translator) entry(paddr, idx uint64) (uint64, error) {
	return t.entryN(paddr, idx, t.format.tableEntries())
}

// entryN is entry for a table of n entries (ppc64's levels differ in
// size).
func (t *Translator) entryN(paddr, idx uint64, n int) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.cache {
		if c := &t.cache[i]; c.valid && c.paddr == paddr && len(c.ent) == n {
			return c.ent[idx], nil
		}
	}
	if len(t.buf) != n*8 {
		t.buf = make([]byte, n*8)
	}
	buf := t.buf
	if err := t.r.ReadPhys(paddr, buf); err != nil {
		return 0, err
	}
	// The top table is used by every walk: keep it in slot 0 for good.
	slot := 0
	if paddr != t.top {
		slot = 1 + t.next
		t.next = (t.next + 1) % (tableCacheSz - 1)
	}
	c := &t.cache[slot]
	if len(c.ent) != n {
		c.ent = make([]uint64, n)
	}
	var order binary.ByteOrder = binary.LittleEndian
	if t.bigEndian {
		order = binary.BigEndian
	}
	for i := range c.ent {
		c.ent[i] = order.Uint64(buf[i*8:])
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
