package source

import (
	"errors"
	"fmt"
	"io"

	"pagepipe/kdumpfmt"
)

// Rearrange rebuilds a dump file from a flattened stream (-R): each
// record's bytes are written at its offset. It stops at the end marker and
// ignores what follows (a raw partition holds old data after the stream);
// a stream that ends before its end marker is an error, since the dump is
// then incomplete.
func Rearrange(r io.Reader, w io.WriterAt) (written int64, err error) {
	head := make([]byte, kdumpfmt.FlatHeaderSize)
	if _, err := io.ReadFull(r, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, kdumpfmt.ErrNotFlattened
		}
		return 0, err
	}
	if err := kdumpfmt.CheckFlatHeader(head); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var h [kdumpfmt.FlatRecordSize]byte
	for rec := 0; ; rec++ {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return written, fmt.Errorf("flattened stream ends before its end marker (record %d): %w", rec, err)
		}
		off, size, end := kdumpfmt.FlatRecord(h[:])
		if end {
			return written, nil
		}
		if off < 0 || size <= 0 {
			return written, fmt.Errorf("flattened record %d: bad header {offset %d, size %d}", rec, off, size)
		}
		for size > 0 {
			n := min(size, int64(len(buf)))
			if _, err := io.ReadFull(r, buf[:n]); err != nil {
				return written, fmt.Errorf("flattened record %d at offset %d: %w", rec, off, err)
			}
			if _, err := w.WriteAt(buf[:n], off); err != nil {
				return written, err
			}
			off, size, written = off+n, size-n, written+n
		}
	}
}
