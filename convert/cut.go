package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
)

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
// sink's Abort leaves a dump it stops: every dumped page whose descriptor did not
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
	reg := kdumpfmt.LayoutOf(h, sub)
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
