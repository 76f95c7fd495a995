package sink

import (
	"encoding/binary"
	"errors"
	"fmt"

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
	if k.placed {
		return k.abortPlaced()
	}
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

	if err := k.cutDumpable(onDisk); err != nil {
		return err
	}
	return k.markIncomplete()
}

// abortPlaced is Abort for a file written by placed chunks: the chunks
// whose data landed in order from the first are kept. The descriptors of
// later chunks never reached the file (they are written only in order,
// after the data before them), so their slots are holes, which read as
// zero.
func (k *Kdump) abortPlaced() error {
	// The descriptors of the chunks landed in order, where the disk
	// still takes them.
	_ = k.flushPending()
	if k.prio != nil {
		return k.abortPrioritised()
	}
	onDisk := (k.descsOut - k.layout.Descs) / kdumpfmt.PageDescSize
	if err := k.cutDumpable(onDisk); err != nil {
		return err
	}
	return k.markIncomplete()
}

// cutDumpable rewrites the 2nd bitmap keeping only the first n dumped pfns.
// A split part cuts only its own pfn range: the rest of its bitmap is the
// other parts' business (and --reassemble takes each part's bits of its
// own range).
func (k *Kdump) cutDumpable(n uint64) error {
	m := k.meta.Dumpable.Clone()
	lo, hi := uint64(0), m.Len()
	if r := k.meta.Split; r != nil {
		lo, hi = min(r.Start, hi), min(r.End, hi)
	}
	pfn := m.NextSet(lo)
	for i := uint64(0); i < n && pfn < hi; i++ {
		pfn = m.NextSet(pfn + 1)
	}
	if pfn < hi {
		m.ClearRange(pfn, hi)
	}
	if err := k.writeBitmap(m, k.layout.Bitmap2, k.layout.BitmapBlocks/2*k.layout.BlockSize); err != nil {
		return fmt.Errorf("take the lost pages out of the bitmap: %w", err)
	}
	return nil
}

// markIncomplete sets the INCOMPLETE status bit in the header on disk
// (block 0 was written first, so this needs no new space).
func (k *Kdump) markIncomplete() error {
	k.status |= kdumpfmt.StatusIncomplete
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], k.status)
	if _, err := k.out.WriteAt(b[:], kdumpfmt.StatusOffset); err != nil {
		return fmt.Errorf("mark the dump incomplete: %w", err)
	}
	return nil
}
