package sink

import (
	"bufio"
	"fmt"
	"io"

	"pagepipe/kdumpfmt"
)

// Flat is an Output that turns every positioned write into a record of
// makedumpfile's flattened format, so a dump can go down a pipe (-F): a
// 4096-byte header, then {offset, size} big-endian record headers each
// followed by its bytes, then an end marker. `makedumpfile -R`, `pagepipe
// -R` and crash rebuild or read the file from it.
type Flat struct {
	w   *bufio.Writer
	out io.Writer // what w buffers
	err error
	// max, when positive, is -L: the most bytes the stream may take; n,
	// the bytes taken so far.
	max, n int64
}

// NewFlat writes the flattened header to w. A positive max limits the
// stream to max bytes (-L), as makedumpfile limits its standard output:
// the write that would pass it puts out what fits and fails with
// ErrSizeLimit, so the stream ends inside a record, and a reader (-R)
// keeps what landed before it.
func NewFlat(w io.Writer, max int64) (*Flat, error) {
	f := &Flat{w: bufio.NewWriterSize(w, 1<<20), out: w, max: max}
	if err := f.put(kdumpfmt.FlatHeader()); err != nil {
		return nil, fmt.Errorf("flattened header: %w", err)
	}
	return f, nil
}

// put appends p to the stream, up to the limit.
func (f *Flat) put(p []byte) error {
	if f.max > 0 && f.n+int64(len(p)) > f.max {
		n, err := f.w.Write(p[:max(f.max-f.n, 0)])
		f.n += int64(n)
		if err == nil {
			err = ErrSizeLimit
		}
		return err
	}
	n, err := f.w.Write(p)
	f.n += int64(n)
	return err
}

// WriteAt appends one record for p at off.
func (f *Flat) WriteAt(p []byte, off int64) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	var h [kdumpfmt.FlatRecordSize]byte
	kdumpfmt.PutFlatRecord(h[:], off, int64(len(p)))
	if f.err = f.put(h[:]); f.err != nil {
		return 0, f.err
	}
	if len(p) >= directWrite && f.max == 0 {
		// A large record goes out as it is, after what is buffered: the
		// buffer would only copy it (a chunk's page data, up to 1 MiB).
		if f.err = f.w.Flush(); f.err == nil {
			var n int
			n, f.err = f.out.Write(p)
			f.n += int64(n)
		}
		if f.err != nil {
			return 0, f.err
		}
		return len(p), nil
	}
	if f.err = f.put(p); f.err != nil {
		return 0, f.err
	}
	return len(p), nil
}

// directWrite is the record size from which WriteAt writes past the
// buffer.
const directWrite = 256 << 10

// Close writes the end marker and flushes. A dump that failed is not
// closed, so its stream has no end marker and readers know it is short;
// Flush puts out what the failed one wrote before it.
func (f *Flat) Close() error {
	if f.err != nil {
		return f.err
	}
	var h [kdumpfmt.FlatRecordSize]byte
	kdumpfmt.PutFlatRecord(h[:], -1, -1)
	if err := f.put(h[:]); err != nil {
		return err
	}
	return f.w.Flush()
}

// Flush puts out what is buffered, as far as the limit let it in: a
// stream cut short ends with what landed.
func (f *Flat) Flush() error { return f.w.Flush() }
