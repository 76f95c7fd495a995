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
	err error
}

// NewFlat writes the flattened header to w.
func NewFlat(w io.Writer) (*Flat, error) {
	f := &Flat{w: bufio.NewWriterSize(w, 1<<20)}
	if _, err := f.w.Write(kdumpfmt.FlatHeader()); err != nil {
		return nil, fmt.Errorf("flattened header: %w", err)
	}
	return f, nil
}

// WriteAt appends one record for p at off.
func (f *Flat) WriteAt(p []byte, off int64) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	var h [kdumpfmt.FlatRecordSize]byte
	kdumpfmt.PutFlatRecord(h[:], off, int64(len(p)))
	if _, f.err = f.w.Write(h[:]); f.err != nil {
		return 0, f.err
	}
	n, err := f.w.Write(p)
	f.err = err
	return n, err
}

// Close writes the end marker and flushes. A dump that failed is not
// closed, so its stream has no end marker and readers know it is short.
func (f *Flat) Close() error {
	if f.err != nil {
		return f.err
	}
	var h [kdumpfmt.FlatRecordSize]byte
	kdumpfmt.PutFlatRecord(h[:], -1, -1)
	if _, err := f.w.Write(h[:]); err != nil {
		return err
	}
	return f.w.Flush()
}
