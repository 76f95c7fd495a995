package convert

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// SplitSet is the parts of a split dump (--split), checked to belong
// together and sorted by pfn; Reassemble joins them into one dump.
type SplitSet struct {
	parts    []splitPart // sorted by start pfn
	header   []byte      // the main header the output gets, as on disk
	maxMapnr uint64
	// Lost counts, after Reassemble, the pages the dump was to hold that
	// the parts lack (lost by incomplete parts, out of the output's 2nd
	// bitmap).
	Lost uint64
}

// Incomplete lists the parts marked INCOMPLETE: a dump cut short by a full
// disk or a signal. Reassembling them gives a dump marked INCOMPLETE too.
func (s *SplitSet) Incomplete() []string {
	var names []string
	for _, p := range s.parts {
		if p.incomplete() {
			names = append(names, p.path)
		}
	}
	return names
}

type splitPart struct {
	path       string
	header     kdumpfmt.Header
	sub        kdumpfmt.SubHeader
	start, end uint64 // pfns [start, end)
}

func (p *splitPart) incomplete() bool { return p.header.Status&kdumpfmt.StatusIncomplete != 0 }

// OpenSplitSet reads the headers of the split files at paths, given in any
// order, and checks that they make one dump: every file is a split part,
// their main headers are identical (but for the INCOMPLETE flag), their
// sub headers agree but for the pfn range and the eraseinfo, and their pfn
// ranges cover [0, max_mapnr) with no gap or overlap. makedumpfile's split
// files are accepted as well as pagepipe's.
func OpenSplitSet(paths []string) (*SplitSet, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("no split files")
	}
	s := &SplitSet{}
	var incomplete []byte
	for _, path := range paths {
		p, raw, maxMapnr, err := readPartHeaders(path)
		if err != nil {
			return nil, err
		}
		if p.sub.Split == 0 {
			return nil, fmt.Errorf("%s is not a split dump file (its sub header says split = 0)", path)
		}
		if len(s.parts) == 0 {
			s.maxMapnr = maxMapnr
		} else if err := sameDump(&s.parts[0], &p); err != nil {
			return nil, fmt.Errorf("%s and %s are not parts of one dump: %v", s.parts[0].path, path, err)
		}
		if p.incomplete() {
			incomplete = raw
		}
		s.header = raw
		s.parts = append(s.parts, p)
	}
	if incomplete != nil {
		s.header = incomplete
	}
	slices.SortStableFunc(s.parts, func(a, b splitPart) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return cmp.Compare(a.end, b.end)
	})
	next := uint64(0)
	for _, p := range s.parts {
		switch {
		case p.end < p.start:
			return nil, fmt.Errorf("%s: split range [%d, %d) ends before it starts", p.path, p.start, p.end)
		case p.start > next:
			return nil, fmt.Errorf("no split file holds pfns [%d, %d)", next, p.start)
		case p.start < next:
			return nil, fmt.Errorf("%s holds pfns [%d, %d), which another split file holds too", p.path, p.start, min(next, p.end))
		}
		next = p.end
	}
	if next != s.maxMapnr {
		return nil, fmt.Errorf("no split file holds pfns [%d, %d)", next, s.maxMapnr)
	}
	return s, nil
}

// readPartHeaders reads one split file's headers, and its main header as
// the bytes on disk.
func readPartHeaders(path string) (p splitPart, raw []byte, maxMapnr uint64, err error) {
	d, err := source.OpenDump(path)
	if err != nil {
		return p, nil, 0, err
	}
	defer d.Close()
	p = splitPart{path: path, header: *d.Header, sub: *d.Sub}
	p.start, p.end = d.Sub.StartPFN64, d.Sub.EndPFN64
	if d.Header.HeaderVersion < 6 {
		p.start, p.end = d.Sub.StartPFN, d.Sub.EndPFN
	}
	f, err := os.Open(path)
	if err != nil {
		return p, nil, 0, err
	}
	defer f.Close()
	raw = make([]byte, kdumpfmt.HeaderSize)
	if _, err := f.ReadAt(raw, 0); err != nil {
		return p, nil, 0, fmt.Errorf("%s: read header: %w", path, err)
	}
	return p, raw, d.MaxMapnr, nil
}

// sameDump compares two parts' headers but for what differs between the
// parts of one dump: the INCOMPLETE flag (a part cut short by a full disk
// is still a part), the pfn range and the eraseinfo, which follows each
// part's data.
func sameDump(a, b *splitPart) error {
	x, y := a.header, b.header
	x.Status &^= kdumpfmt.StatusIncomplete
	y.Status &^= kdumpfmt.StatusIncomplete
	if x != y {
		return errors.New("their main headers differ")
	}
	u, v := a.sub, b.sub
	for _, s := range []*kdumpfmt.SubHeader{&u, &v} {
		s.StartPFN, s.EndPFN, s.StartPFN64, s.EndPFN64 = 0, 0, 0, 0
		s.OffsetEraseinfo, s.SizeEraseinfo = 0, 0
	}
	if u != v {
		return errors.New("their sub headers differ")
	}
	return nil
}

// Reassemble writes the dump the split files were cut from: the main
// header (of a part marked INCOMPLETE if there is one), the first part's
// sub header with the split fields cleared, its notes and bitmaps, then
// one dense descriptor array and a new data area, with the zero page (dump
// level bit 1) once at its start, and the parts' eraseinfo concatenated
// after the data. That is the file the same dump without --split is. It
// streams: page data and descriptors go through fixed buffers; only the
// bitmaps are held in memory. It returns the bytes written.
//
// Incomplete parts make an incomplete dump, as pagepipe writes one: the
// 2nd bitmap takes each part's bits of its own pfn range (pagepipe takes a
// part's lost pages out there), and a page whose descriptor is lost
// (makedumpfile zeroes it, or its data lies past the end of the file)
// leaves the bitmap as well, so that every page the output's bitmap holds
// has its data. Lost counts the pages missing.
func (s *SplitSet) Reassemble(ctx context.Context, out io.WriterAt) (written uint64, err error) {
	first, err := source.OpenDump(s.parts[0].path)
	if err != nil {
		return 0, err
	}
	defer first.Close()
	h, sub := first.Header, s.parts[0].sub
	bs := uint64(h.BlockSize)
	pages, err := s.pages(first)
	if err != nil {
		return 0, err
	}
	reg := kdumpfmt.LayoutOf(h, &sub)
	l := layout{bitmaps: reg.Bitmap1, descs: reg.Descs}
	l.data = l.descs + pages*kdumpfmt.PageDescSize

	w := &posWriter{out: out}
	if err := w.writeAt(s.header, 0); err != nil {
		return w.n, err
	}
	if sub.SizeNote > 0 {
		notes, _, _, _ := first.Notes()
		if uint64(len(notes)) != sub.SizeNote {
			return w.n, fmt.Errorf("%s: cannot read its %d bytes of notes", first.Path, sub.SizeNote)
		}
		if err := w.writeAt(notes, sub.OffsetNote); err != nil {
			return w.n, err
		}
	}
	// The sub header is written last, when the eraseinfo's place is known.
	if err := w.copyFrom(s.parts[0].path, l.bitmaps, l.descs-l.bitmaps, l.bitmaps); err != nil {
		return w.n, fmt.Errorf("bitmaps: %w", err)
	}

	descs := newSeqWriter(w, l.descs, descBufSize)
	data := newSeqWriter(w, l.data, dataBufSize)
	zeroPage := sub.DumpLevel&1 != 0
	if zeroPage {
		if err := data.write(make([]byte, bs)); err != nil {
			return w.n, err
		}
	}
	// The parts' bitmaps agree but in the ranges of incomplete parts.
	var cut [][2]uint64
	for _, p := range s.parts {
		if p.incomplete() {
			cut = append(cut, [2]uint64{p.start, p.end})
		}
	}
	dumpable := first.Dumpable.Clone() // the output's 2nd bitmap
	for _, p := range s.parts {
		if err := ctx.Err(); err != nil {
			return w.n, err
		}
		if err := copyPart(first, p, l, cut, dumpable, descs, data, zeroPage); err != nil {
			return w.n, fmt.Errorf("%s: %w", p.path, err)
		}
	}
	if err := data.flush(); err != nil {
		return w.n, err
	}
	if err := descs.flush(); err != nil {
		return w.n, err
	}
	// The descriptor area is reserved for every page the dump was to hold.
	s.Lost = (l.data-l.descs)/kdumpfmt.PageDescSize - dumpable.Count(0, dumpable.Len())
	if !dumpable.Equal(first.Dumpable) {
		if err := w.writeBitmap(dumpable, reg.Bitmap2, reg.BitmapSize); err != nil {
			return w.n, err
		}
	}

	sub.Split, sub.StartPFN, sub.EndPFN, sub.StartPFN64, sub.EndPFN64 = 0, 0, 0, 0, 0
	sub.OffsetEraseinfo, sub.SizeEraseinfo = 0, 0
	for _, p := range s.parts {
		if p.sub.SizeEraseinfo == 0 {
			continue
		}
		if err := w.copyFrom(p.path, p.sub.OffsetEraseinfo, p.sub.SizeEraseinfo, data.next+sub.SizeEraseinfo); err != nil {
			return w.n, fmt.Errorf("%s: eraseinfo: %w", p.path, err)
		}
		sub.SizeEraseinfo += p.sub.SizeEraseinfo
	}
	if sub.SizeEraseinfo > 0 {
		sub.OffsetEraseinfo = data.next
	}
	if err := w.writeAt(sub.Marshal(), bs); err != nil {
		return w.n, err
	}
	return w.n, nil
}

// layout is where the regions of every part, and of the output, start.
type layout struct{ bitmaps, descs, data uint64 }

// pages is the number of pages the dump was to hold, which fixes where its
// data starts. Every part's file has the whole 2nd bitmap, but pagepipe
// takes an incomplete part's lost pages out of its own range in its own
// file: the first part's range is then counted in the second's file.
func (s *SplitSet) pages(first *source.Dump) (uint64, error) {
	n := first.NumDumpable()
	if p := s.parts[0]; p.incomplete() && len(s.parts) > 1 {
		next, err := source.OpenDump(s.parts[1].path)
		if err != nil {
			return 0, err
		}
		defer next.Close()
		n = n - first.Dumpable.Count(p.start, p.end) + next.Dumpable.Count(p.start, p.end)
	}
	return n, nil
}

// copyPart appends one part's descriptors and page data, and puts its
// bits of its own pfn range into dumpable. The part's zero page is a
// descriptor offset equal to the first data offset (only with dump level
// bit 1: without it that offset holds the part's first page); it becomes
// the output's one zero page. Pages lost in an incomplete part (offset 0,
// or data past the end of an INCOMPLETE file) are taken out of dumpable.
// cut lists the pfn ranges of the incomplete parts,
// where the parts' 2nd bitmaps may differ.
func copyPart(first *source.Dump, p splitPart, l layout, cut [][2]uint64, dumpable *bitmap.Bitmap, descs, data *seqWriter, zeroPage bool) error {
	d := first
	if p.path != first.Path {
		var err error
		if d, err = source.OpenDump(p.path); err != nil {
			return err
		}
		defer d.Close()
		a, b := d.Dumpable, first.Dumpable
		if len(cut) > 0 {
			a, b = a.Clone(), b.Clone()
			for _, r := range cut {
				a.ClearRange(r[0], min(r[1], a.Len()))
				b.ClearRange(r[0], min(r[1], b.Len()))
			}
		}
		if !d.Present.Equal(first.Present) || !a.Equal(b) {
			return fmt.Errorf("its bitmaps differ from %s's", first.Path)
		}
	}
	end := min(p.end, dumpable.Len())
	start := min(p.start, end)
	dumpable.ClearRange(start, end)
	for pfn := d.Dumpable.NextSet(start); pfn < end; pfn = d.Dumpable.NextSet(pfn + 1) {
		dumpable.Set(pfn)
	}
	f, err := os.Open(p.path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := uint64(st.Size())
	bs := uint64(d.Header.BlockSize)
	incomplete := p.incomplete()
	n := d.Dumpable.Count(p.start, p.end)
	// The part's descriptors fill the first n slots of its descriptor area.
	dr := bufio.NewReaderSize(io.NewSectionReader(f, int64(l.descs), int64(n*kdumpfmt.PageDescSize)), descBufSize)
	src := &seqReader{f: f, size: size}
	var b [kdumpfmt.PageDescSize]byte
	pfn := d.Dumpable.NextSet(start)
	for k := range n {
		if _, err := io.ReadFull(dr, b[:]); err != nil {
			return fmt.Errorf("read page descriptor %d: %w", k, err)
		}
		this := pfn
		pfn = d.Dumpable.NextSet(pfn + 1)
		pd := kdumpfmt.UnmarshalPageDesc(b[:])
		switch {
		case pd.Offset == 0 && incomplete:
			// Lost: out of the bitmap, no descriptor.
			dumpable.Clear(this)
			continue
		case pd.Offset == 0:
			return fmt.Errorf("page descriptor %d (pfn %#x) has offset 0 in a file not marked incomplete", k, this)
		case zeroPage && uint64(pd.Offset) == l.data:
			// The part's zero page is the output's (at the same offset).
		case uint64(pd.Size) > bs || pd.Offset < 0:
			return fmt.Errorf("page descriptor %d {offset %d, size %d} does not describe a page", k, pd.Offset, pd.Size)
		case uint64(pd.Offset)+uint64(pd.Size) > size:
			if !incomplete {
				return fmt.Errorf("page descriptor %d: data [%d, %d) past the end of the %d-byte file", k, pd.Offset, uint64(pd.Offset)+uint64(pd.Size), size)
			}
			dumpable.Clear(this)
			continue
		default:
			page, err := src.read(uint64(pd.Offset), int(pd.Size))
			if err != nil {
				return fmt.Errorf("page descriptor %d: %w", k, err)
			}
			pd.Offset = int64(data.next)
			if err := data.write(page); err != nil {
				return err
			}
		}
		pd.Put(b[:])
		if err := descs.write(b[:]); err != nil {
			return err
		}
	}
	return nil
}

// posWriter writes to the output at absolute offsets, wrapping errors
// with where they happened and counting the bytes written.
type posWriter struct {
	out io.WriterAt
	n   uint64
}

func (w *posWriter) writeAt(p []byte, off uint64) error {
	if len(p) == 0 {
		return nil
	}
	if _, err := w.out.WriteAt(p, int64(off)); err != nil {
		return fmt.Errorf("write %d bytes at offset %d: %w", len(p), off, err)
	}
	w.n += uint64(len(p))
	return nil
}

// writeBitmap writes m, padded with zeros to size bytes, at off, in
// pieces of 64 KiB.
func (w *posWriter) writeBitmap(m *bitmap.Bitmap, off, size uint64) error {
	buf := make([]byte, min(size, 64<<10))
	return m.WriteOut(buf, size, func(p []byte, at uint64) error { return w.writeAt(p, off+at) })
}

// copyFrom copies size bytes at off in the file at path to dst.
func (w *posWriter) copyFrom(path string, off, size, dst uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, min(size, 1<<20))
	for done := uint64(0); done < size; {
		n := min(uint64(len(buf)), size-done)
		if _, err := f.ReadAt(buf[:n], int64(off+done)); err != nil {
			return fmt.Errorf("%s: read %d bytes at offset %d: %w", path, n, off+done, err)
		}
		if err := w.writeAt(buf[:n], dst+done); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// seqWriter appends to a region of the output through a buffer.
type seqWriter struct {
	w    *posWriter
	next uint64 // file offset of the next byte appended
	buf  []byte
}

func newSeqWriter(w *posWriter, off uint64, size int) *seqWriter {
	return &seqWriter{w: w, next: off, buf: make([]byte, 0, size)}
}

func (s *seqWriter) write(p []byte) error {
	if len(s.buf)+len(p) > cap(s.buf) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	s.buf = append(s.buf, p...)
	s.next += uint64(len(p))
	return nil
}

func (s *seqWriter) flush() error {
	err := s.w.writeAt(s.buf, s.next-uint64(len(s.buf)))
	s.buf = s.buf[:0]
	return err
}

// seqReader reads page data through a buffer while the reads follow each
// other, as a part's pages do; a jump restarts the buffer there.
type seqReader struct {
	f    *os.File
	size uint64
	r    *bufio.Reader
	pos  uint64 // file offset of the next byte r yields
	page []byte
}

func (s *seqReader) read(off uint64, n int) ([]byte, error) {
	if s.r == nil || off != s.pos {
		sr := io.NewSectionReader(s.f, int64(off), int64(s.size-off))
		if s.r == nil {
			s.r = bufio.NewReaderSize(sr, dataBufSize)
		} else {
			s.r.Reset(sr)
		}
		s.pos = off
	}
	if cap(s.page) < n {
		s.page = make([]byte, n)
	}
	p := s.page[:n]
	if _, err := io.ReadFull(s.r, p); err != nil {
		return nil, fmt.Errorf("read %d bytes at offset %d: %w", n, off, err)
	}
	s.pos += uint64(n)
	return p, nil
}
