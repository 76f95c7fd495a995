package sink

import (
	"debug/elf"
	"encoding/binary"
	"fmt"

	"pagepipe/bitmap"
	"pagepipe/chunk"
)

// ELF dump (-E) geometry and makedumpfile's constants for it. The headers
// are debug/elf's elf.Header64, elf.Prog64 and elf.Section64, encoded
// little-endian; these are their sizes (checked by TestELFHeaderSizes).
const (
	ehdrSize = 64 // elf.Header64
	phdrSize = 56 // elf.Prog64
	shdrSize = 64 // elf.Section64
	// pnXnum is e_phnum's escape to extended numbering (elf(5)'s
	// PN_XNUM), which debug/elf does not declare.
	pnXnum = 0xffff

	// ELFMinExcludedRun is the shortest run of excluded pages that an ELF
	// dump leaves out of the file (makedumpfile's PFN_EXCLUDED). Shorter
	// runs are written with their real contents: splitting a PT_LOAD
	// costs a 56-byte program header, which is not worth it for less.
	ELFMinExcludedRun = 256

	// elfBlockOrder makes the size of makedumpfile's two write caches:
	// the page size shifted by the default block order (-b 4), 64 KiB
	// with 4 KiB pages. Program headers and page data go out in pieces of
	// exactly that size, so a flattened (-F) ELF stream has the same
	// records as makedumpfile's.
	elfBlockOrder = 4
)

// ELFSegment is one PT_LOAD of the input, as the layout walks it.
type ELFSegment struct {
	Paddr, Vaddr uint64
	MemSize      uint64
	Flags        uint32
	Align        uint64
}

// ELFLoad is one PT_LOAD of the dump.
type ELFLoad struct {
	Paddr, Vaddr      uint64
	Offset            uint64 // p_offset
	FileSize, MemSize uint64
	Flags             uint32
	Align             uint64
}

// ELFLayout is where everything goes in an ELF dump:
//
//	0                      ELF header (the input's, e_phnum changed)
//	64                     program headers: PT_NOTE, then the PT_LOADs
//	64+56*PhNum            section header 0, only with extended numbering
//	NoteOffset             the input's notes, not aligned
//	DataOffset             each PT_LOAD's file bytes, in order, packed
//
// The PT_LOADs come from walking every input PT_LOAD page by page against
// the 2nd bitmap (keep). A run of at least ELFMinExcludedRun excluded pages
// followed by a kept page ends the current PT_LOAD: its p_memsz covers the
// run, its p_filesz does not, and the next PT_LOAD starts at the kept page
// (p_paddr and p_vaddr advanced by the p_memsz before). Shorter runs are
// kept in the file. Excluded pages at the end of an input PT_LOAD only
// count in p_memsz. A partial first page is always kept and a partial
// last page counts with its real size. A PT_LOAD that ends in the middle of
// an input segment without file bytes gets p_offset 0; the last one of a
// segment gets the file cursor even when empty. This is makedumpfile's
// layout, checked against makedumpfile 1.7.2's output.
type ELFLayout struct {
	// PageSize is the input's page size: the unit the layout walks the
	// bitmap and cuts PT_LOADs in.
	PageSize uint64
	Ehdr     [ehdrSize]byte // the dump's ELF header
	NotePhdr [phdrSize]byte // the dump's PT_NOTE program header
	// PhNum is the number of program headers: 1 + len(Loads). From
	// PN_XNUM (0xffff) on, e_phnum is PN_XNUM and section header 0 holds
	// the count (Xnum).
	PhNum      uint64
	Xnum       bool
	NoteOffset uint64
	NoteSize   uint64
	DataOffset uint64
	Loads      []ELFLoad
	// ExcludedPages counts the pages that are only in p_memsz: those of
	// runs that ended a PT_LOAD and those at the end of an input segment
	// (makedumpfile's "Excluded pages in ELF format").
	ExcludedPages uint64
	// Size is the length of the file.
	Size uint64
}

// NewELFLayout lays out an ELF dump of the input segments, of pageSize-byte
// pages, keeping the pfns set in keep (pfns past keep.Len() are excluded).
// ehdr is the input's ELF
// header, notePhdr its PT_NOTE program header (all zero when it has none)
// and noteSize the length of the notes the dump carries.
//
// Two corner cases that real vmcores never have are laid out sanely where
// makedumpfile 1.7.2 does not: a segment that lies inside one page (its
// partial "first page" is counted as reaching the page's end there), and a
// PT_LOAD that starts at a segment's partial last page (counted as a whole
// page there).
func NewELFLayout(pageSize uint64, ehdr [ehdrSize]byte, notePhdr [phdrSize]byte, noteSize uint64, segs []ELFSegment, keep *bitmap.Bitmap) *ELFLayout {
	l := &ELFLayout{PageSize: pageSize, NoteSize: noteSize}
	type pending struct {
		ELFLoad
		last bool // the last PT_LOAD of its segment: keeps the cursor when empty
	}
	var loads []pending
	for _, s := range segs {
		excluded := walkSegment(s, pageSize, keep, func(ld ELFLoad, last bool) {
			loads = append(loads, pending{ld, last})
		})
		l.ExcludedPages += excluded
	}

	l.PhNum = 1 + uint64(len(loads))
	l.Xnum = l.PhNum >= pnXnum
	l.NoteOffset = ehdrSize + phdrSize*l.PhNum
	if l.Xnum {
		l.NoteOffset += shdrSize
	}
	l.DataOffset = l.NoteOffset + noteSize
	cursor := l.DataOffset
	l.Loads = make([]ELFLoad, len(loads))
	for i, p := range loads {
		ld := p.ELFLoad
		if ld.FileSize > 0 || p.last {
			ld.Offset = cursor
		}
		cursor += ld.FileSize
		l.Loads[i] = ld
	}
	l.Size = cursor

	h := decodeELF[elf.Header64](ehdr[:])
	h.Phoff = ehdrSize
	if l.Xnum {
		h.Shoff = ehdrSize + phdrSize*l.PhNum
		h.Phnum, h.Shentsize, h.Shnum, h.Shstrndx = pnXnum, shdrSize, 1, 0
	} else {
		// The input's section headers (QEMU's, or section 0 of an input
		// with extended numbering) are not in the dump. (makedumpfile
		// copies e_shoff and e_shnum regardless.)
		h.Shoff = 0
		h.Phnum, h.Shnum, h.Shstrndx = uint16(l.PhNum), 0, 0
	}
	encodeELF(l.Ehdr[:], h)

	note := decodeELF[elf.Prog64](notePhdr[:])
	if elf.ProgType(note.Type) != elf.PT_NOTE {
		note = elf.Prog64{Type: uint32(elf.PT_NOTE)}
	}
	// p_memsz keeps whatever the input had beyond its p_filesz.
	memsz := noteSize
	if note.Memsz > note.Filesz {
		memsz += note.Memsz - note.Filesz
	}
	note.Off, note.Filesz, note.Memsz = l.NoteOffset, noteSize, memsz
	encodeELF(l.NotePhdr[:], note)
	return l
}

// walkSegment cuts one input segment into PT_LOADs (without p_offset), in
// pages of ps bytes, and returns how many of its pages are only in p_memsz.
func walkSegment(s ELFSegment, ps uint64, keep *bitmap.Bitmap, emit func(ld ELFLoad, last bool)) (excluded uint64) {
	start, end := s.Paddr, s.Paddr+s.MemSize
	cur := ELFLoad{Paddr: start, Vaddr: s.Vaddr, Flags: s.Flags, Align: s.Align}
	pfn, endPfn := start/ps, (end+ps-1)/ps
	if head := start % ps; head != 0 {
		// The partial first page is written whatever the bitmap says.
		n := min(ps-head, s.MemSize)
		cur.MemSize, cur.FileSize = n, n
		pfn++
	}
	// span is the length of pages [lo, hi) inside the segment (lo is past
	// any partial first page).
	span := func(lo, hi uint64) uint64 { return min(hi*ps, end) - lo*ps }
	var run uint64 // excluded pages since the last kept one
	for pfn < endPfn {
		next := endPfn
		if n := keep.NextSet(pfn); n < keep.Len() {
			next = min(n, endPfn)
		}
		if next > pfn {
			run += next - pfn
			cur.MemSize += span(pfn, next)
			pfn = next
			if pfn == endPfn {
				break
			}
		}
		if run >= ELFMinExcludedRun {
			emit(cur, false)
			excluded += run
			cur = ELFLoad{Paddr: cur.Paddr + cur.MemSize, Vaddr: cur.Vaddr + cur.MemSize, Flags: s.Flags, Align: s.Align}
		} else if run > 0 {
			cur.FileSize += run * ps // kept with their contents
		}
		run = 0
		// The run of kept pages from pfn on.
		hi := pfn + 1
		for hi < endPfn && keep.Test(hi) {
			hi++
		}
		n := span(pfn, hi)
		cur.MemSize += n
		cur.FileSize += n
		pfn = hi
	}
	emit(cur, true)
	return excluded + run
}

// ELFPageRun is Pages pages from Pfn on: one PT_LOAD's file bytes, once
// clipped to its p_paddr and p_filesz.
type ELFPageRun struct{ Pfn, Pages uint64 }

// PageRuns lists, in file order, the pages the data area is made of: one run
// per PT_LOAD with file bytes. The ELF writer takes exactly these pages, in
// this order. A pfn appears once per PT_LOAD that holds it: pages that two
// input segments both map (the kernel-text alias of RAM) are written twice,
// as makedumpfile does.
func (l *ELFLayout) PageRuns() []ELFPageRun {
	var runs []ELFPageRun
	for _, ld := range l.Loads {
		if ld.FileSize == 0 {
			continue
		}
		first := ld.Paddr / l.PageSize
		last := (ld.Paddr + ld.FileSize - 1) / l.PageSize
		runs = append(runs, ELFPageRun{Pfn: first, Pages: last - first + 1})
	}
	return runs
}

// phdr encodes the load's program header.
func (ld ELFLoad) phdr() []byte {
	b := make([]byte, phdrSize)
	encodeELF(b, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: ld.Flags, Off: ld.Offset, Vaddr: ld.Vaddr, Paddr: ld.Paddr,
		Filesz: ld.FileSize, Memsz: ld.MemSize, Align: ld.Align})
	return b
}

// decodeELF reads one of debug/elf's 64-bit header structs from b.
func decodeELF[T elf.Header64 | elf.Prog64 | elf.Section64](b []byte) (v T) {
	if _, err := binary.Decode(b, binary.LittleEndian, &v); err != nil {
		panic(err) // b is the struct's fixed size
	}
	return v
}

// encodeELF writes one of debug/elf's 64-bit header structs into b.
func encodeELF[T elf.Header64 | elf.Prog64 | elf.Section64](b []byte, v T) {
	if _, err := binary.Encode(b, binary.LittleEndian, v); err != nil {
		panic(err) // b is the struct's fixed size
	}
}

// ELF writes an ELF dump laid out by an ELFLayout. NewELF writes the
// headers and notes; WriteChunk takes the pages of PageRuns in order, raw
// (as the pipeline hands them over with no codec); Close writes the program
// headers and the rest.
//
// The writes come in makedumpfile's order and sizes: the program header
// area reserved with zeros, section header 0 (extended numbering only), the
// ELF header, the notes; then the page data and program headers through two
// 64 KiB caches, each PT_LOAD's header before its data. A flattened stream
// of the dump is therefore record for record makedumpfile's.
type ELF struct {
	posWriter
	l *ELFLayout

	hdr      []byte // program header cache
	hdrNext  uint64 // file offset of hdr[0]
	phdrs    int    // PT_LOAD headers cached so far
	data     []byte // page data cache
	dataNext uint64
	cacheLen int // the size of each cache's writes

	load int    // the PT_LOAD whose bytes come next
	done uint64 // bytes of it written
}

// NewELF writes the headers and notes of l to out. notes must be
// l.NoteSize bytes.
func NewELF(out Output, l *ELFLayout, notes []byte) (*ELF, error) {
	if uint64(len(notes)) != l.NoteSize {
		return nil, fmt.Errorf("elf dump: %d bytes of notes, layout has %d", len(notes), l.NoteSize)
	}
	cacheLen := int(l.PageSize) << elfBlockOrder
	e := &ELF{
		posWriter: posWriter{out: out}, l: l,
		hdr:      make([]byte, 0, cacheLen+phdrSize),
		hdrNext:  ehdrSize,
		data:     make([]byte, 0, cacheLen+int(l.PageSize)),
		dataNext: l.DataOffset,
		cacheLen: cacheLen,
	}
	phEnd := ehdrSize + phdrSize*l.PhNum
	if err := e.writeAt(make([]byte, phEnd-ehdrSize), ehdrSize); err != nil {
		return nil, err
	}
	if l.Xnum {
		sh := make([]byte, shdrSize)
		// sh_size: e_shnum; sh_info: the real e_phnum.
		encodeELF(sh, elf.Section64{Size: 1, Info: uint32(l.PhNum)})
		if err := e.writeAt(sh, phEnd); err != nil {
			return nil, err
		}
	}
	if err := e.writeAt(l.Ehdr[:], 0); err != nil {
		return nil, err
	}
	if err := e.writeAt(notes, l.NoteOffset); err != nil {
		return nil, err
	}
	e.hdr = append(e.hdr, l.NotePhdr[:]...)
	return e, nil
}

// Written returns the number of bytes written so far.
func (e *ELF) Written() uint64 { return e.n.Load() }

// cache appends p to a cache and writes out each full piece of the cache's
// size.
func (e *ELF) cache(buf *[]byte, next *uint64, p []byte) error {
	*buf = append(*buf, p...)
	for len(*buf) >= e.cacheLen {
		if err := e.writeAt((*buf)[:e.cacheLen], *next); err != nil {
			return err
		}
		*next += uint64(e.cacheLen)
		*buf = (*buf)[:copy(*buf, (*buf)[e.cacheLen:])]
	}
	return nil
}

// cachePhdrs caches the program headers of the PT_LOADs before n.
func (e *ELF) cachePhdrs(n int) error {
	for ; e.phdrs < n; e.phdrs++ {
		if err := e.cache(&e.hdr, &e.hdrNext, e.l.Loads[e.phdrs].phdr()); err != nil {
			return err
		}
	}
	return nil
}

// WriteChunk takes the next pages of the data area, each raw and whole.
func (e *ELF) WriteChunk(c chunk.Chunk) error {
	ps, data := e.l.PageSize, c.Data
	for _, p := range c.Pages {
		if p.Zero || p.Flags != 0 || uint64(p.Size) != ps || uint64(len(data)) < ps {
			return fmt.Errorf("elf dump: page of %d bytes (flags %#x, zero %v): want raw whole pages", p.Size, p.Flags, p.Zero)
		}
		page := data[:ps]
		data = data[ps:]
		e.skipFilled()
		if e.load == len(e.l.Loads) {
			return fmt.Errorf("elf dump: more pages than the layout's %d bytes of data", e.l.Size-e.l.DataOffset)
		}
		ld := e.l.Loads[e.load]
		if e.done == 0 {
			if err := e.cachePhdrs(e.load + 1); err != nil {
				return err
			}
			page = page[ld.Paddr%ps:] // a partial first page
		}
		page = page[:min(uint64(len(page)), ld.FileSize-e.done)]
		if err := e.cache(&e.data, &e.dataNext, page); err != nil {
			return err
		}
		e.done += uint64(len(page))
	}
	return nil
}

// Close writes the remaining program headers and data. It fails if the
// pages did not fill the layout.
func (e *ELF) Close() error {
	e.skipFilled()
	if e.load != len(e.l.Loads) {
		return fmt.Errorf("elf dump: PT_LOAD %d of %d got %d of its %d bytes", e.load+1, len(e.l.Loads), e.done, e.l.Loads[e.load].FileSize)
	}
	if err := e.cachePhdrs(len(e.l.Loads)); err != nil {
		return err
	}
	if err := e.flush(&e.hdr, &e.hdrNext); err != nil {
		return err
	}
	return e.flush(&e.data, &e.dataNext)
}

// skipFilled moves past the PT_LOADs whose bytes are all written (and
// those with none).
func (e *ELF) skipFilled() {
	for e.load < len(e.l.Loads) && e.done == e.l.Loads[e.load].FileSize {
		e.load++
		e.done = 0
	}
}

// flush writes out what a cache holds.
func (e *ELF) flush(buf *[]byte, next *uint64) error {
	if err := e.writeAt(*buf, *next); err != nil {
		return err
	}
	*next += uint64(len(*buf))
	*buf = (*buf)[:0]
	return nil
}

// DumpELFIncomplete is the e_flags bit that marks an ELF dump cut short
// (makedumpfile's and crash's DUMP_ELF_INCOMPLETE).
const DumpELFIncomplete = 0x1

// Abort finishes an ELF dump that cannot be completed (disk full, -L, a
// signal) so that it stays a valid ELF file whose program headers describe
// only what landed, as makedumpfile marks it:
//
//   - a PT_LOAD whose data all landed keeps its header; one whose data
//     partly landed is cut to the whole pages that did (p_filesz = p_memsz,
//     so the rest is not described: readers find it missing, not zero); one
//     with none of its data is dropped, and e_phnum (or section header 0's
//     sh_info, with extended numbering) counts the rest. A PT_LOAD with no
//     file bytes (excluded pages only) stays: it holds no data to lose;
//   - e_flags gets DUMP_ELF_INCOMPLETE.
//
// The program header area and the ELF header were written first, so
// rewriting them needs no new space. Abort returns the first error that
// stops it.
func (e *ELF) Abort() error {
	ps := e.l.PageSize
	landed := e.dataNext // the data cache goes out in order: all before this is on disk
	var kept []ELFLoad
	for _, ld := range e.l.Loads {
		switch {
		case ld.FileSize == 0 || ld.Offset+ld.FileSize <= landed:
		case ld.Offset >= landed:
			continue
		default:
			end := (ld.Paddr + (landed - ld.Offset)) / ps * ps
			if end <= ld.Paddr {
				continue
			}
			ld.FileSize = end - ld.Paddr
			ld.MemSize = ld.FileSize
		}
		kept = append(kept, ld)
	}
	area := make([]byte, phdrSize*e.l.PhNum)
	copy(area, e.l.NotePhdr[:])
	for i, ld := range kept {
		copy(area[phdrSize*(i+1):], ld.phdr())
	}
	e.hdr = e.hdr[:0]
	e.data = e.data[:0]
	if err := e.writeAt(area, ehdrSize); err != nil {
		return fmt.Errorf("rewrite the program headers: %w", err)
	}
	phnum := 1 + uint64(len(kept))
	if e.l.Xnum {
		// sh_info alone, at its place in section header 0 (elf.Section64).
		var sh [shdrSize]byte
		encodeELF(sh[:], elf.Section64{Size: 1, Info: uint32(phnum)})
		if err := e.writeAt(sh[44:48], ehdrSize+phdrSize*e.l.PhNum+44); err != nil {
			return fmt.Errorf("rewrite sh_info: %w", err)
		}
	}
	h := decodeELF[elf.Header64](e.l.Ehdr[:])
	if !e.l.Xnum {
		h.Phnum = uint16(phnum)
	}
	h.Flags |= DumpELFIncomplete
	var ehdr [ehdrSize]byte
	encodeELF(ehdr[:], h)
	if err := e.writeAt(ehdr[:], 0); err != nil {
		return fmt.Errorf("mark the dump incomplete: %w", err)
	}
	return nil
}
