package kdumpfmt

import (
	"errors"
	"fmt"
	"io"
)

// Unflatten rebuilds a dump file from a flattened stream: each
// record's bytes are written at its offset. It stops at the end marker and
// ignores what follows (a raw partition holds old data after the stream).
// A stream that ends before its end marker (the writer was stopped, or the
// disk it went to filled up) is an error, a *CutError: the complete
// records before the cut are written, the one it cuts is dropped whole
// (a descriptor record cut in two would leave a corrupt descriptor), so
// what was written is the stream's consistent prefix.
func Unflatten(r io.Reader, w io.WriterAt) (written int64, err error) {
	head := make([]byte, FlatHeaderSize)
	if _, err := io.ReadFull(r, head); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, ErrNotFlattened
		}
		return 0, err
	}
	if err := CheckFlatHeader(head); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var h [FlatRecordSize]byte
	var maxEnd int64
	cut := func(rec int, err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &CutError{Records: rec, End: maxEnd, Err: err}
		}
		return fmt.Errorf("flattened record %d: %w", rec, err)
	}
	for rec := 0; ; rec++ {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return written, cut(rec, err)
		}
		off, size, end := FlatRecord(h[:])
		if end {
			return written, nil
		}
		if off < 0 || size <= 0 || off > 1<<62-size {
			return written, fmt.Errorf("flattened record %d: bad header {offset %d, size %d}", rec, off, size)
		}
		if size <= maxBufferedRecord {
			// Read whole before it is written, so that a record the cut
			// falls in leaves nothing.
			if int64(cap(buf)) < size {
				buf = make([]byte, size)
			}
			b := buf[:size]
			if _, err := io.ReadFull(r, b); err != nil {
				return written, cut(rec, err)
			}
			if _, err := w.WriteAt(b, off); err != nil {
				return written, err
			}
			written += size
			maxEnd = max(maxEnd, off+size)
			continue
		}
		// A record too large to hold (no writer here makes one): written
		// as it comes, so a cut inside it is no consistent prefix.
		for size > 0 {
			n := min(size, int64(len(buf)))
			if _, err := io.ReadFull(r, buf[:n]); err != nil {
				return written, fmt.Errorf("flattened record %d at offset %d, cut inside it: %w", rec, off, err)
			}
			if _, err := w.WriteAt(buf[:n], off); err != nil {
				return written, err
			}
			off, size, written = off+n, size-n, written+n
		}
		maxEnd = max(maxEnd, off)
	}
}

// maxBufferedRecord is the largest record Unflatten reads whole before
// writing it. pagepipe's records are at most a chunk's data (1 MiB, more
// only for a page larger than that) or a descriptor buffer's; makedumpfile's
// are its write buffer's.
const maxBufferedRecord = 64 << 20

// CutError is a flattened stream that ends before its end marker: Records
// complete records were written, the last byte any of them wrote being
// End-1.
type CutError struct {
	Records int
	End     int64
	Err     error
}

func (e *CutError) Error() string {
	return fmt.Sprintf("flattened stream ends before its end marker (after %d complete records): %v", e.Records, e.Err)
}

func (e *CutError) Unwrap() error { return e.Err }
