package sink

import (
	"encoding/binary"
	"errors"
	"fmt"

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
	if err := k.writeBitmap(m, k.layout.Bitmap2, k.layout.BitmapSize); err != nil {
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
