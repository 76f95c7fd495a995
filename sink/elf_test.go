package sink

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/chunk"
)

const (
	pg           = 4096                // the page size the layouts here are made in
	elfCacheSize = pg << elfBlockOrder // makedumpfile's write caches at that page size
)

// inputEhdr is a /proc/vmcore ELF header: ELF64 LSB core for x86_64,
// program headers at 64, no section headers (e_phnum is filled in by the
// layout).
func inputEhdr() [ehdrSize]byte {
	var h [ehdrSize]byte
	copy(h[:], "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint16(h[16:], uint16(elf.ET_CORE))
	le.PutUint16(h[18:], uint16(elf.EM_X86_64))
	le.PutUint32(h[20:], 1)
	le.PutUint64(h[32:], ehdrSize)
	le.PutUint16(h[52:], ehdrSize)
	le.PutUint16(h[54:], phdrSize)
	le.PutUint16(h[56:], 99)
	return h
}

// notePhdr is an input PT_NOTE of n bytes at offset 0x1000.
func notePhdr(n uint64) [phdrSize]byte {
	var p [phdrSize]byte
	le := binary.LittleEndian
	le.PutUint32(p[0:], uint32(elf.PT_NOTE))
	le.PutUint64(p[8:], 0x1000)
	le.PutUint64(p[32:], n)
	le.PutUint64(p[40:], n)
	return p
}

// keepAllBut returns a bitmap of n pfns with every pfn set except those in
// the [lo, hi) ranges given.
func keepAllBut(n uint64, excluded ...[2]uint64) *bitmap.Bitmap {
	m := bitmap.New(n)
	m.SetRange(0, n)
	for _, r := range excluded {
		m.ClearRange(r[0], r[1])
	}
	return m
}

// load is an expected PT_LOAD; off is its p_offset relative to the data
// area, or -1 for p_offset 0.
type load struct {
	paddr, filesz, memsz uint64
	off                  int64
}

func TestELFLayout(t *testing.T) {
	const vbase = 0xffff888000000000
	seg := func(paddr, memsz uint64) ELFSegment {
		return ELFSegment{Paddr: paddr, Vaddr: vbase + paddr, MemSize: memsz, Flags: 7, Align: 0x1000}
	}
	tests := []struct {
		name     string
		segs     []ELFSegment
		keep     *bitmap.Bitmap
		want     []load
		excluded uint64
	}{{
		// The spec's example, as makedumpfile 1.7.2 writes it: zero pages
		// 100-399 end the first PT_LOAD; a 10-page zero run (500-509)
		// stays in the second.
		name:     "600 pages, zero 100-399 and 500-509",
		segs:     []ELFSegment{seg(0, 600*pg)},
		keep:     keepAllBut(600, [2]uint64{100, 400}, [2]uint64{500, 510}),
		want:     []load{{0, 0x64000, 0x190000, 0}, {0x190000, 0xc8000, 0xc8000, 0x64000}},
		excluded: 300,
	}, {
		name: "255 excluded pages are kept",
		segs: []ELFSegment{seg(0, 600*pg)},
		keep: keepAllBut(600, [2]uint64{100, 355}),
		want: []load{{0, 600 * pg, 600 * pg, 0}},
	}, {
		name:     "256 excluded pages are not",
		segs:     []ELFSegment{seg(0, 600*pg)},
		keep:     keepAllBut(600, [2]uint64{100, 356}),
		want:     []load{{0, 100 * pg, 356 * pg, 0}, {356 * pg, 244 * pg, 244 * pg, 100 * pg}},
		excluded: 256,
	}, {
		name:     "a long run first: an empty PT_LOAD with p_offset 0",
		segs:     []ELFSegment{seg(0x100000, 600*pg)},
		keep:     keepAllBut(0x100+600, [2]uint64{0, 0x100 + 300}),
		want:     []load{{0x100000, 0, 300 * pg, -1}, {0x100000 + 300*pg, 300 * pg, 300 * pg, 0}},
		excluded: 300,
	}, {
		name: "a short run first is kept",
		segs: []ELFSegment{seg(0, 600*pg)},
		keep: keepAllBut(600, [2]uint64{0, 10}),
		want: []load{{0, 600 * pg, 600 * pg, 0}},
	}, {
		name:     "excluded pages at the end only count in p_memsz, however few",
		segs:     []ELFSegment{seg(0, 600*pg), seg(1000*pg, 100*pg)},
		keep:     keepAllBut(1100, [2]uint64{595, 600}, [2]uint64{1000 + 60, 1100}),
		want:     []load{{0, 595 * pg, 600 * pg, 0}, {1000 * pg, 60 * pg, 100 * pg, 595 * pg}},
		excluded: 5 + 40,
	}, {
		name:     "nothing kept: one empty PT_LOAD, at the file cursor",
		segs:     []ELFSegment{seg(0, 300*pg), seg(300*pg, 10*pg)},
		keep:     bitmap.New(310),
		want:     []load{{0, 0, 300 * pg, 0}, {300 * pg, 0, 10 * pg, 0}},
		excluded: 310,
	}, {
		name:     "several splits in one segment",
		segs:     []ELFSegment{seg(0, 2000*pg)},
		keep:     keepAllBut(2000, [2]uint64{10, 300}, [2]uint64{301, 700}, [2]uint64{1000, 1255}, [2]uint64{1700, 2000}),
		want:     []load{{0, 10 * pg, 300 * pg, 0}, {300 * pg, pg, 400 * pg, 10 * pg}, {700 * pg, 1000 * pg, 1300 * pg, 11 * pg}},
		excluded: 290 + 399 + 300,
	}, {
		name: "kernel-text alias: the same pfns in two PT_LOADs",
		segs: []ELFSegment{{Paddr: 0x200000, Vaddr: 0xffffffff81000000, MemSize: 512 * pg, Flags: 7}, seg(0, 0x200000+1024*pg)},
		keep: keepAllBut(0x200+1024, [2]uint64{0x200 + 256, 0x200 + 512}),
		want: []load{
			{0x200000, 256 * pg, 512 * pg, 0},
			{0, 0x200000 + 256*pg, 0x200000 + 512*pg, 256 * pg},
			{0x200000 + 512*pg, 512 * pg, 512 * pg, 256*pg + 0x200000 + 256*pg},
		},
		excluded: 256 + 256,
	}, {
		name: "partial first page kept whatever its bit, partial last page by its bit",
		segs: []ELFSegment{seg(0x800, 10*pg), seg(100*pg+0x800, 10*pg-0x800+0x100)},
		keep: keepAllBut(111, [2]uint64{0, 1}, [2]uint64{110, 111}),
		want: []load{
			{0x800, 10 * pg, 10 * pg, 0},
			{100*pg + 0x800, 10*pg - 0x800, 10*pg - 0x800 + 0x100, 10 * pg},
		},
		excluded: 1, // the partial last page
	}, {
		name: "partial last page kept",
		segs: []ELFSegment{seg(0, 10*pg+0x10)},
		keep: keepAllBut(11),
		want: []load{{0, 10*pg + 0x10, 10*pg + 0x10, 0}},
	}, {
		name: "a segment inside one page",
		segs: []ELFSegment{seg(0x100, 0x200)},
		keep: bitmap.New(1),
		want: []load{{0x100, 0x200, 0x200, 0}},
	}, {
		name: "an empty segment",
		segs: []ELFSegment{seg(0x1000, 0), seg(0x2000, pg)},
		keep: keepAllBut(3),
		want: []load{{0x1000, 0, 0, 0}, {0x2000, pg, pg, 0}},
	}, {
		name:     "pfns past the bitmap are excluded",
		segs:     []ELFSegment{seg(0, 600*pg)},
		keep:     keepAllBut(300),
		want:     []load{{0, 300 * pg, 600 * pg, 0}},
		excluded: 300,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const notes = 0x1348
			l := NewELFLayout(pg, inputEhdr(), notePhdr(notes), notes, tc.segs, tc.keep)
			if l.PhNum != uint64(1+len(tc.want)) || l.Xnum {
				t.Fatalf("PhNum %d (xnum %v), want %d", l.PhNum, l.Xnum, 1+len(tc.want))
			}
			if want := uint64(ehdrSize + phdrSize*l.PhNum); l.NoteOffset != want || l.DataOffset != want+notes {
				t.Errorf("notes at %#x, data at %#x; want %#x, %#x", l.NoteOffset, l.DataOffset, want, want+notes)
			}
			var got []load
			var fileBytes uint64
			vaddr := map[uint64]uint64{}
			for i, ld := range l.Loads {
				off := int64(ld.Offset - l.DataOffset)
				if ld.Offset == 0 {
					off = -1
				}
				got = append(got, load{ld.Paddr, ld.FileSize, ld.MemSize, off})
				fileBytes += ld.FileSize
				vaddr[uint64(i)] = ld.Vaddr
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("PT_LOADs\n got %v\nwant %v", got, tc.want)
			}
			if l.ExcludedPages != tc.excluded {
				t.Errorf("ExcludedPages %d, want %d", l.ExcludedPages, tc.excluded)
			}
			if l.Size != l.DataOffset+fileBytes {
				t.Errorf("Size %d, want %d", l.Size, l.DataOffset+fileBytes)
			}
			// p_vaddr moves with p_paddr; p_flags and p_align are the input's.
			for _, ld := range l.Loads {
				follows := false
				for _, s := range tc.segs {
					follows = follows || ld.Paddr >= s.Paddr && ld.Paddr-s.Paddr <= s.MemSize &&
						ld.Vaddr-s.Vaddr == ld.Paddr-s.Paddr && ld.Flags == s.Flags && ld.Align == s.Align
				}
				if !follows {
					t.Errorf("PT_LOAD %+v does not follow an input segment", ld)
				}
			}
		})
	}
}

// The headers of the dump: e_phnum (PN_XNUM with section header 0 from
// 0xffff program headers on), e_phoff 64, no section headers otherwise,
// and the input's PT_NOTE with the new offset.
func TestELFLayoutHeaders(t *testing.T) {
	le := binary.LittleEndian
	in := inputEhdr()
	le.PutUint64(in[32:], 192)  // QEMU's e_phoff
	le.PutUint64(in[40:], 64)   // and section headers
	le.PutUint16(in[58:], 64)   // e_shentsize
	le.PutUint16(in[60:], 2)    // e_shnum
	le.PutUint16(in[62:], 1)    // e_shstrndx
	le.PutUint32(in[48:], 0x55) // e_flags, kept

	t.Run("small", func(t *testing.T) {
		l := NewELFLayout(pg, in, notePhdr(100), 100, []ELFSegment{{MemSize: pg}}, keepAllBut(1))
		h := l.Ehdr
		if le.Uint64(h[32:]) != 64 || le.Uint16(h[56:]) != 2 || le.Uint64(h[40:]) != 0 || le.Uint16(h[60:]) != 0 || le.Uint16(h[62:]) != 0 || le.Uint32(h[48:]) != 0x55 {
			t.Errorf("ehdr % x", h)
		}
		n := l.NotePhdr
		if le.Uint32(n[0:]) != uint32(elf.PT_NOTE) || le.Uint64(n[8:]) != 64+2*56 || le.Uint64(n[32:]) != 100 || le.Uint64(n[40:]) != 100 {
			t.Errorf("PT_NOTE % x", n)
		}
	})
	t.Run("no PT_NOTE in the input", func(t *testing.T) {
		l := NewELFLayout(pg, in, [phdrSize]byte{}, 40, []ELFSegment{{MemSize: pg}}, keepAllBut(1))
		n := l.NotePhdr
		if le.Uint32(n[0:]) != uint32(elf.PT_NOTE) || le.Uint64(n[8:]) != 64+2*56 || le.Uint64(n[32:]) != 40 || le.Uint64(n[40:]) != 40 {
			t.Errorf("PT_NOTE % x", n)
		}
	})
	t.Run("PN_XNUM", func(t *testing.T) {
		// 0xfffe segments of one page each: 0xffff program headers. Every
		// 100th page is kept.
		segs := make([]ELFSegment, pnXnum-1)
		keep := bitmap.New(2 * pnXnum)
		for i := range segs {
			segs[i] = ELFSegment{Paddr: uint64(2*i) * pg, MemSize: pg}
			if i%100 == 0 {
				keep.Set(uint64(2 * i))
			}
		}
		l := NewELFLayout(pg, in, notePhdr(100), 100, segs, keep)
		h := l.Ehdr
		shoff := uint64(64 + 56*pnXnum)
		if !l.Xnum || l.PhNum != pnXnum || le.Uint16(h[56:]) != pnXnum || le.Uint64(h[40:]) != shoff ||
			le.Uint16(h[58:]) != 64 || le.Uint16(h[60:]) != 1 || le.Uint16(h[62:]) != 0 {
			t.Fatalf("xnum %v phnum %d, ehdr % x", l.Xnum, l.PhNum, h)
		}
		if l.NoteOffset != shoff+64 {
			t.Errorf("notes at %#x, want %#x", l.NoteOffset, shoff+64)
		}
		out := &memOutput{buf: make([]byte, 0, l.Size)}
		writeAll(t, out, l, bytes.Repeat([]byte{'n'}, 100), testPage)
		sh := out.buf[shoff : shoff+64]
		if le.Uint32(sh[4:]) != 0 || le.Uint64(sh[32:]) != 1 || le.Uint32(sh[40:]) != 0 || le.Uint32(sh[44:]) != pnXnum {
			t.Errorf("section header 0: % x", sh)
		}
		checkDump(t, out.buf, l, testPage)
	})
}

// testPage is the memory the writer tests dump: every byte tells its pfn
// and place.
func testPage(pfn uint64, b []byte) {
	for i := range b {
		b[i] = byte(pfn*7 + uint64(i)*13 + uint64(i)>>8)
	}
}

// memOutput is an Output in memory that records its writes.
type memOutput struct {
	buf    []byte
	writes [][2]int64 // offset, size
	fail   int64      // fail writes that reach past this offset (0: never)
}

func (m *memOutput) WriteAt(p []byte, off int64) (int, error) {
	if m.fail > 0 && off+int64(len(p)) > m.fail {
		return 0, io.ErrShortWrite
	}
	if end := off + int64(len(p)); end > int64(len(m.buf)) {
		m.buf = append(m.buf, make([]byte, end-int64(len(m.buf)))...)
	}
	copy(m.buf[off:], p)
	m.writes = append(m.writes, [2]int64{off, int64(len(p))})
	return len(p), nil
}

// writeAll writes the dump of l with pages from mem, in uneven batches.
func writeAll(t *testing.T, out Output, l *ELFLayout, notes []byte, mem func(uint64, []byte)) {
	t.Helper()
	e, err := NewELF(out, l, notes)
	if err != nil {
		t.Fatal(err)
	}
	var pages []chunk.Page
	var data []byte
	batch := 1
	flush := func() {
		if err := e.WriteChunk(chunk.Chunk{Pages: pages, Data: data}); err != nil {
			t.Fatal(err)
		}
		pages, data = pages[:0], data[:0]
		batch = batch%7 + 1
	}
	buf := make([]byte, pg)
	for _, r := range l.PageRuns() {
		for pfn := r.Pfn; pfn < r.Pfn+r.Pages; pfn++ {
			mem(pfn, buf)
			pages = append(pages, chunk.Page{Size: pg})
			data = append(data, buf...)
			if len(pages) == batch {
				flush()
			}
		}
	}
	flush()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e.Written() != uint64(sum(out.(*memOutput).writes)) {
		t.Errorf("Written %d, wrote %d", e.Written(), sum(out.(*memOutput).writes))
	}
}

func sum(w [][2]int64) (n int64) {
	for _, x := range w {
		n += x[1]
	}
	return n
}

// checkDump parses a written dump by hand and checks it against l and the
// memory it was made of.
func checkDump(t *testing.T, b []byte, l *ELFLayout, mem func(uint64, []byte)) {
	t.Helper()
	le := binary.LittleEndian
	if uint64(len(b)) != l.Size {
		t.Fatalf("file is %d bytes, layout %d", len(b), l.Size)
	}
	if !bytes.Equal(b[:ehdrSize], l.Ehdr[:]) {
		t.Fatalf("ELF header % x", b[:ehdrSize])
	}
	if !bytes.Equal(b[ehdrSize:ehdrSize+phdrSize], l.NotePhdr[:]) {
		t.Fatalf("PT_NOTE header % x", b[ehdrSize:ehdrSize+phdrSize])
	}
	page := make([]byte, pg)
	for i, ld := range l.Loads {
		ph := b[ehdrSize+phdrSize*(1+i):]
		got := ELFLoad{Offset: le.Uint64(ph[8:]), Vaddr: le.Uint64(ph[16:]), Paddr: le.Uint64(ph[24:]),
			FileSize: le.Uint64(ph[32:]), MemSize: le.Uint64(ph[40:]), Flags: le.Uint32(ph[4:]), Align: le.Uint64(ph[48:])}
		if le.Uint32(ph) != uint32(elf.PT_LOAD) || got != ld {
			t.Fatalf("PT_LOAD %d: %+v, want %+v", i, got, ld)
		}
		for done := uint64(0); done < ld.FileSize; {
			paddr := ld.Paddr + done
			mem(paddr/pg, page)
			n := min(pg-paddr%pg, ld.FileSize-done)
			if !bytes.Equal(b[ld.Offset+done:][:n], page[paddr%pg:][:n]) {
				t.Fatalf("PT_LOAD %d: bytes at paddr %#x differ", i, paddr)
			}
			done += n
		}
	}
}

// writerLayout is the layout TestELFWriter and TestELFAbort write, and
// its notes: three segments, one of them not page-aligned and one with a
// partial last page, with excluded pages in and between them.
func writerLayout() (*ELFLayout, []byte) {
	segs := []ELFSegment{
		{Paddr: 0x200000, Vaddr: 0xffffffff81000000, MemSize: 600 * pg, Flags: 7},
		{Paddr: 0x800, Vaddr: 0xffff888000000800, MemSize: 0x200000 + 700*pg - 0x800},
		{Paddr: 0x10000000, Vaddr: 0xffff888010000000, MemSize: 50*pg + 0x123},
	}
	keep := keepAllBut(0x10000+51, [2]uint64{0x100, 0x180}, [2]uint64{0x200 + 10, 0x200 + 300}, [2]uint64{0x200 + 600, 0x200 + 610})
	notes := bytes.Repeat([]byte("note"), 0x1348/4)
	l := NewELFLayout(pg, inputEhdr(), notePhdr(uint64(len(notes))), uint64(len(notes)), segs, keep)
	return l, notes
}

// The writer puts each PT_LOAD's bytes where its header says, clipping
// partial pages, and writes in makedumpfile's order and sizes: the program
// header area reserved, the ELF header, the notes, then page data in 64 KiB
// pieces with the program headers (64 KiB pieces too) flushed last.
func TestELFWriter(t *testing.T) {
	l, notes := writerLayout()
	if len(l.Loads) != 5 {
		t.Fatalf("%d PT_LOADs: %+v", len(l.Loads), l.Loads)
	}
	out := &memOutput{buf: make([]byte, 0, l.Size)}
	writeAll(t, out, l, notes, testPage)
	checkDump(t, out.buf, l, testPage)
	if !bytes.Equal(out.buf[l.NoteOffset:l.DataOffset], notes) {
		t.Error("notes differ")
	}

	// Go's ELF reader agrees.
	f, err := elf.NewFile(bytes.NewReader(out.buf))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Progs) != 6 || f.Progs[0].Type != elf.PT_NOTE || f.Progs[0].Off != l.NoteOffset {
		t.Fatalf("program headers %+v", f.Progs)
	}

	w := out.writes
	phEnd := int64(ehdrSize + phdrSize*l.PhNum)
	head := [][2]int64{{ehdrSize, phEnd - ehdrSize}, {0, ehdrSize}, {int64(l.NoteOffset), int64(len(notes))}}
	if fmt.Sprint(w[:3]) != fmt.Sprint(head) {
		t.Fatalf("first writes %v, want %v", w[:3], head)
	}
	data := w[3 : len(w)-2]
	for i, x := range data {
		if x != [2]int64{int64(l.DataOffset) + int64(i)*elfCacheSize, elfCacheSize} {
			t.Fatalf("data write %d: %v", i, x)
		}
	}
	last := [][2]int64{{ehdrSize, phEnd - ehdrSize}, {int64(l.DataOffset) + int64(len(data))*elfCacheSize, int64(l.Size-l.DataOffset) - int64(len(data))*elfCacheSize}}
	if fmt.Sprint(w[len(w)-2:]) != fmt.Sprint(last) {
		t.Fatalf("last writes %v, want %v", w[len(w)-2:], last)
	}
}

// With more program headers than one cache holds, the header cache is
// written out in 64 KiB pieces as it fills, among the data.
func TestELFWriterManyHeaders(t *testing.T) {
	const n = 3000
	segs := make([]ELFSegment, n)
	for i := range segs {
		segs[i] = ELFSegment{Paddr: uint64(i) * 4 * pg, MemSize: 3 * pg}
	}
	keep := bitmap.New(4 * n)
	for i := uint64(0); i < n; i++ {
		keep.SetRange(4*i, 4*i+3)
	}
	l := NewELFLayout(pg, inputEhdr(), notePhdr(8), 8, segs, keep)
	out := &memOutput{buf: make([]byte, 0, l.Size)}
	writeAll(t, out, l, make([]byte, 8), testPage)
	checkDump(t, out.buf, l, testPage)
	var hdr []int64
	for i, w := range out.writes[3:] {
		if w[0] < int64(l.NoteOffset) {
			hdr = append(hdr, int64(i))
			if w[0] != ehdrSize+int64(len(hdr)-1)*elfCacheSize {
				t.Errorf("header piece at %#x", w[0])
			}
		}
	}
	if want := (phdrSize*(n+1))/elfCacheSize + 1; len(hdr) != want || hdr[0] == int64(len(out.writes)-5) {
		t.Errorf("%d header pieces (at writes %v), want %d, the first among the data", len(hdr), hdr, want)
	}
}

func TestELFWriterErrors(t *testing.T) {
	l := NewELFLayout(pg, inputEhdr(), notePhdr(8), 8, []ELFSegment{{MemSize: 2 * pg}}, keepAllBut(2))
	page := make([]byte, pg)
	newELF := func() *ELF {
		e, err := NewELF(&memOutput{}, l, make([]byte, 8))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	if _, err := NewELF(&memOutput{}, l, make([]byte, 9)); err == nil {
		t.Error("notes of the wrong size accepted")
	}
	for _, p := range []chunk.Page{{Zero: true}, {Size: 100, Flags: 1}, {Size: pg / 2}} {
		if err := newELF().WriteChunk(chunk.Chunk{Pages: []chunk.Page{p}, Data: page}); err == nil {
			t.Errorf("page %+v accepted", p)
		}
	}
	e := newELF()
	if err := e.WriteChunk(chunk.Chunk{Pages: []chunk.Page{{Size: pg}}, Data: page}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err == nil || !strings.Contains(err.Error(), "got 4096 of its 8192 bytes") {
		t.Errorf("short dump closed: %v", err)
	}
	e = newELF()
	three := []chunk.Page{{Size: pg}, {Size: pg}, {Size: pg}}
	if err := e.WriteChunk(chunk.Chunk{Pages: three, Data: bytes.Repeat(page, 3)}); err == nil {
		t.Error("more pages than the layout accepted")
	}
	// A failing output is reported with the offset.
	fo := &memOutput{fail: int64(l.DataOffset) + 10}
	e, err := NewELF(fo, l, make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.WriteChunk(chunk.Chunk{Pages: three[:2], Data: bytes.Repeat(page, 2)}); err != nil {
		t.Fatal(err) // still cached
	}
	if err := e.Close(); err == nil || !strings.Contains(err.Error(), "at offset") {
		t.Errorf("failed write: %v", err)
	}
}

// An ELF dump stopped by a write error (a full disk, -L) is finished by
// Abort as a valid ELF file: e_flags has DUMP_ELF_INCOMPLETE, every
// PT_LOAD left is one of the layout's or a whole-page prefix of one whose
// bytes are all in the file and right, the lost ones are gone from the
// program headers, and the excluded-only PT_LOADs stay.
func TestELFAbort(t *testing.T) {
	l, notes := writerLayout()
	for _, cut := range []uint64{l.DataOffset + 3*elfCacheSize + 100, l.DataOffset + (l.Size-l.DataOffset)/2, l.Size - 1} {
		out := &memOutput{fail: int64(cut)}
		e, err := NewELF(out, l, notes)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, pg)
		err = nil
	write:
		for _, r := range l.PageRuns() {
			for pfn := r.Pfn; pfn < r.Pfn+r.Pages; pfn++ {
				testPage(pfn, buf)
				if err = e.WriteChunk(chunk.Chunk{Pages: []chunk.Page{{Size: pg}}, Data: buf}); err != nil {
					break write
				}
			}
		}
		if err == nil {
			err = e.Close()
		}
		if err == nil {
			t.Fatalf("cut at %d: no write error", cut)
		}
		if err := e.Abort(); err != nil {
			t.Fatalf("cut at %d: Abort: %v", cut, err)
		}
		f, err := elf.NewFile(bytes.NewReader(out.buf))
		if err != nil {
			t.Fatalf("cut at %d: not an ELF file: %v", cut, err)
		}
		if fl := binary.LittleEndian.Uint32(out.buf[48:]); fl&DumpELFIncomplete == 0 {
			t.Errorf("cut at %d: e_flags %#x", cut, fl)
		}
		if f.Progs[0].Type != elf.PT_NOTE {
			t.Fatalf("cut at %d: first program header %+v", cut, f.Progs[0].ProgHeader)
		}
		var data, all uint64
		for _, ld := range l.Loads {
			all += ld.FileSize
		}
		for _, p := range f.Progs[1:] {
			var w *ELFLoad
			for i := range l.Loads {
				if l.Loads[i].Paddr == p.Paddr && l.Loads[i].Offset == p.Off {
					w = &l.Loads[i]
				}
			}
			switch {
			case p.Type != elf.PT_LOAD || w == nil:
				t.Fatalf("cut at %d: program header %+v is none of the layout's", cut, p.ProgHeader)
			case p.Off+p.Filesz > uint64(len(out.buf)):
				t.Errorf("cut at %d: PT_LOAD %#x: data past the end of the file", cut, p.Paddr)
			case p.Filesz != w.FileSize && (p.Filesz > w.FileSize || p.Memsz != p.Filesz || (p.Paddr+p.Filesz)%pg != 0):
				t.Errorf("cut at %d: PT_LOAD %#x: filesz %#x memsz %#x of %#x/%#x", cut, p.Paddr, p.Filesz, p.Memsz, w.FileSize, w.MemSize)
			}
			data += p.Filesz
			for a := p.Paddr; a < p.Paddr+p.Filesz; a = (a/pg + 1) * pg {
				testPage(a/pg, buf)
				n := min((a/pg+1)*pg, p.Paddr+p.Filesz) - a
				if off := p.Off + a - p.Paddr; !bytes.Equal(out.buf[off:off+n], buf[a%pg:a%pg+n]) {
					t.Fatalf("cut at %d: PT_LOAD %#x: bytes at %#x differ", cut, p.Paddr, a)
				}
			}
		}
		if data == 0 || data >= all {
			t.Errorf("cut at %d: %d of %d bytes described", cut, data, all)
		}
	}
}
