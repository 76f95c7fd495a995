package sink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
)

// ErrSizeLimit is returned by a Limit output when a write would pass -L.
var ErrSizeLimit = errors.New("size limit reached")

// Limit is an Output that refuses to grow the file past Max bytes (-L
// SIZE), as a full disk would.
type Limit struct {
	Output
	Max int64
}

// WriteAt writes p unless its end would pass Max.
func (l Limit) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > l.Max {
		return 0, ErrSizeLimit
	}
	return l.Output.WriteAt(p, off)
}

// Abort finishes a dump that cannot be completed (disk full, -L, a
// signal) so that it stays valid and every reader can open it:
//
//   - the descriptors written so far all describe data that landed (they
//     are flushed only after their data); of the buffered ones, those whose
//     data landed are written, where the disk still allows;
//   - every later page is taken out of the 2nd bitmap, so readers see it as
//     not dumped (libkdumpfile rejects a zeroed descriptor as corrupt,
//     where crash would report it lost); its descriptor, if any, is zeroed;
//   - the header gets DUMP_DH_COMPRESSED_INCOMPLETE.
//
// The bitmap and header were written first, so rewriting them needs no new
// space. Abort returns the first error that stops it.
func (k *Kdump) Abort() error {
	// Where the disk still takes it (a signal stopped the dump, not a full
	// disk), the buffered data lands, and with it the pages it holds.
	_ = k.flushData()
	landed := k.dataNext // data before this offset is on disk
	keep := 0
	for ; keep+kdumpfmt.PageDescSize <= len(k.descs); keep += kdumpfmt.PageDescSize {
		d := kdumpfmt.UnmarshalPageDesc(k.descs[keep:])
		if uint64(d.Offset)+uint64(d.Size) > landed {
			break
		}
	}
	clear(k.descs[keep:])
	onDisk := (k.descNext - k.layout.Descs) / kdumpfmt.PageDescSize
	if k.writeAt(k.descs[:keep], k.descNext) == nil {
		onDisk += uint64(keep / kdumpfmt.PageDescSize)
	}
	// Best effort: zero the rest of the buffered descriptors (a hole reads
	// as zero anyway).
	_ = k.writeAt(k.descs[keep:], k.descNext+uint64(keep))
	k.release()

	// A prioritised file written in order also keeps the priority pages
	// whose descriptors went to their slots (ordered.go).
	var prio []pfnDesc
	if k.prio != nil {
		prio = k.priorityTail(onDisk)
	}
	if err := k.cutDumpable(onDisk, prio); err != nil {
		return err
	}
	return k.markIncomplete()
}

// Abort finishes a dump that cannot be completed as Kdump.Abort does, for
// a file written by placed chunks: the chunks whose data landed in order
// from the first are kept. The descriptors of later chunks never reached
// the file (they are written only in order, after the data before them),
// so their slots are holes, which read as zero.
func (k *PlacedKdump) Abort() error {
	// The descriptors of the chunks landed in order, where the disk
	// still takes them.
	_ = k.flushPending()
	if k.prio != nil {
		return k.abortPrioritised()
	}
	onDisk := (k.descsOut - k.layout.Descs) / kdumpfmt.PageDescSize
	if err := k.cutDumpable(onDisk, nil); err != nil {
		return err
	}
	return k.markIncomplete()
}

// priorityTail writes, for a prioritised file written in order cut with
// its first n descriptors in pfn order on disk, the descriptors of the
// landed priority pages past those next, packed as the cut bitmap ranks
// them (they were at their slots in the whole bitmap), and returns them;
// none where the write fails, the pages then being lost.
func (k *Kdump) priorityTail(n uint64) []pfnDesc {
	p := k.prio
	p.sort()
	front, hi := k.pastDumped(k.meta.Dumpable, n), p.hi
	var tail []pfnDesc
	var b []byte
	for _, d := range p.descs {
		if d.pfn >= front && d.pfn < hi {
			tail = append(tail, d)
			b = append(b, d.desc[:]...)
		}
	}
	if k.writeAt(b, k.layout.Descs+n*kdumpfmt.PageDescSize) != nil {
		return nil
	}
	return tail
}

// cutDumpable rewrites the 2nd bitmap keeping only the first n dumped pfns
// and the pfns of also (the priority pages whose descriptors are on disk).
// A split part cuts only its own pfn range: the rest of its bitmap is the
// other parts' business (and --reassemble takes each part's bits of its
// own range).
func (k *kdumpFile) cutDumpable(n uint64, also []pfnDesc) error {
	m := k.meta.Dumpable.Clone()
	lo, hi := k.pfnRange()
	pfn := k.pastDumped(m, n)
	if pfn < hi {
		m.ClearRange(pfn, hi)
	}
	for _, d := range also {
		if d.pfn >= lo && d.pfn < hi {
			m.Set(d.pfn)
		}
	}
	if err := k.writeBitmap(m, k.layout.Bitmap2, k.layout.BitmapBlocks/2*k.layout.BlockSize); err != nil {
		return fmt.Errorf("take the lost pages out of the bitmap: %w", err)
	}
	return nil
}

// pfnRange is the pfns this file holds: a split part's range, or all.
func (k *kdumpFile) pfnRange() (lo, hi uint64) {
	hi = k.meta.Dumpable.Len()
	if r := k.meta.Split; r != nil {
		return min(r.Start, hi), min(r.End, hi)
	}
	return 0, hi
}

// pastDumped is the pfn past the first n dumped pfns of this file in m
// (the end of its range where it holds no more).
func (k *kdumpFile) pastDumped(m *bitmap.Bitmap, n uint64) uint64 {
	lo, hi := k.pfnRange()
	pfn := m.NextSet(lo)
	for i := uint64(0); i < n && pfn < hi; i++ {
		pfn = m.NextSet(pfn + 1)
	}
	return pfn
}

// markIncomplete sets the INCOMPLETE status bit in the header on disk
// (block 0 was written first, so this needs no new space).
func (k *kdumpFile) markIncomplete() error {
	k.status |= kdumpfmt.StatusIncomplete
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], k.status)
	if _, err := k.out.WriteAt(b[:], kdumpfmt.StatusOffset); err != nil {
		return fmt.Errorf("mark the dump incomplete: %w", err)
	}
	return nil
}

// File is a dump file that is read back as well as written.
type File interface {
	io.ReaderAt
	io.WriterAt
}

// ErrCutInHeaders: a flattened stream that ends before its headers and
// bitmaps landed is no dump at all, not even an incomplete one.
var ErrCutInHeaders = errors.New("the stream ends before its headers and bitmaps: no dump")

// FinishCut leaves a kdump file rebuilt from a flattened stream that was
// cut short (end: past the last byte its complete records wrote) as
// Abort leaves a dump it stops: every dumped page whose descriptor did not
// land (its slot reads as zero: a descriptor reaches the stream only after
// its page's data, so one that landed points at data that did) is taken
// out of the 2nd bitmap, the landed descriptors are packed to the slots
// the new bitmap gives them (a slot is a page's rank among the dumped
// pfns), and the header says INCOMPLETE. So a stream in
// pfn order keeps its pages up to the cut, a prioritised one (--priority)
// also the priority pages that landed before it. It returns the pages
// kept and lost; a file whose headers and bitmaps are not whole is
// ErrCutInHeaders, one that is no kdump file (an ELF stream, -E -F) an
// error.
func FinishCut(f File, end int64) (kept, lost uint64, err error) {
	hb := make([]byte, kdumpfmt.HeaderSize)
	if _, err := f.ReadAt(hb, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, fmt.Errorf("read the header: %w", err)
	}
	if end < int64(len(hb)) || string(hb[:8]) != kdumpfmt.Signature {
		if end >= 4 && string(hb[:4]) == "\x7fELF" {
			return 0, 0, errors.New("an ELF stream (-E -F) cut short cannot be rebuilt")
		}
		return 0, 0, ErrCutInHeaders
	}
	h, err := kdumpfmt.UnmarshalHeader(hb)
	if err != nil {
		return 0, 0, err
	}
	sb := make([]byte, kdumpfmt.SubHeaderSize)
	if _, err := f.ReadAt(sb, int64(h.BlockSize)); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, fmt.Errorf("read the sub header: %w", err)
	}
	sub, err := kdumpfmt.UnmarshalSubHeader(sb)
	if err != nil {
		return 0, 0, err
	}
	reg := kdumpfmt.RegionsOf(h, sub)
	maxMapnr, half, bm2, descs := reg.MaxMapnr, reg.BitmapSize, reg.Bitmap2, reg.Descs
	// The 2nd bitmap's last piece ends where the descriptors begin, and
	// every record before it is a header's or a bitmap's: a record that
	// reached this far means they all landed.
	if uint64(end) < descs || maxMapnr > half*8 {
		return 0, 0, ErrCutInHeaders
	}
	buf := make([]byte, half)
	if _, err := f.ReadAt(buf, int64(bm2)); err != nil {
		return 0, 0, fmt.Errorf("read the 2nd bitmap: %w", err)
	}
	m := bitmap.FromBytes(buf, maxMapnr)
	// The descriptors are read in pfn order, in pieces (past the end of
	// the file they are zero); the landed ones are written back packed,
	// as the new bitmap's ranks place them, over slots already read.
	const piece = 8192 * kdumpfmt.PageDescSize
	in, out := make([]byte, piece), make([]byte, 0, piece)
	readOff, writeOff, have := descs, descs, 0
	var lastNonzero uint64 // past the last slot that held a descriptor
	flush := func() error {
		if _, err := f.WriteAt(out, int64(writeOff)); err != nil {
			return fmt.Errorf("write the page descriptors: %w", err)
		}
		writeOff += uint64(len(out))
		out = out[:0]
		return nil
	}
	for pfn := m.NextSet(0); pfn < maxMapnr; pfn = m.NextSet(pfn + 1) {
		if have == 0 {
			clear(in)
			if _, err := f.ReadAt(in, int64(readOff)); err != nil && !errors.Is(err, io.EOF) {
				return 0, 0, fmt.Errorf("read the page descriptors: %w", err)
			}
			have = len(in)
		}
		d := in[len(in)-have:][:kdumpfmt.PageDescSize]
		have -= kdumpfmt.PageDescSize
		readOff += kdumpfmt.PageDescSize
		if [kdumpfmt.PageDescSize]byte(d) == [kdumpfmt.PageDescSize]byte{} {
			m.Clear(pfn) // NextSet(pfn+1) is unchanged by it
			lost++
			continue
		}
		kept++
		lastNonzero = readOff
		if len(out) == cap(out) {
			if err := flush(); err != nil {
				return 0, 0, err
			}
		}
		out = append(out, d...)
	}
	if err := flush(); err != nil {
		return 0, 0, err
	}
	// The slots past the packed ones that held descriptors are zeroed.
	for writeOff < lastNonzero {
		out = out[:min(uint64(cap(out)), lastNonzero-writeOff)]
		clear(out)
		if err := flush(); err != nil {
			return 0, 0, err
		}
	}
	m.PutBytes(buf, 0)
	if _, err := f.WriteAt(buf, int64(bm2)); err != nil {
		return 0, 0, fmt.Errorf("take the lost pages out of the bitmap: %w", err)
	}
	var st [4]byte
	binary.LittleEndian.PutUint32(st[:], h.Status|kdumpfmt.StatusIncomplete)
	if _, err := f.WriteAt(st[:], kdumpfmt.StatusOffset); err != nil {
		return 0, 0, fmt.Errorf("mark the dump incomplete: %w", err)
	}
	return kept, lost, nil
}
