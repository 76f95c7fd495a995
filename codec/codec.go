// Package codec is the seam between pagepipe and the per-page compressors
// of the kdump format: one table keyed by the format's page flag.
//
// Every page is compressed on its own (readers decompress one page at a
// time), so what matters is per-call cost: each worker owns a Compressor
// whose state is reused from page to page, and a steady-state Compress
// allocates nothing.
package codec

import (
	"fmt"

	"pagepipe/kdumpfmt"
)

// Compressor compresses one page at a time. Not safe for concurrent use:
// make one per worker.
type Compressor interface {
	// Compress appends the compressed form of src to dst[:0] and returns
	// it. A nil result with no error means src did not compress.
	Compress(dst, src []byte) ([]byte, error)
}

// Decompressor expands one stored page. Not safe for concurrent use.
type Decompressor interface {
	// Decompress expands src into dst, which must come out exactly full.
	Decompress(dst, src []byte) error
}

// Codec describes one compression method of the format.
type Codec struct {
	Flag uint32 // kdumpfmt.Status* bit, also the page_desc flag
	Name string // as in -v output and docs
	// Standard is false for pagepipe's own extensions that other readers
	// do not know.
	Standard        bool
	NewCompressor   func() Compressor
	NewDecompressor func() Decompressor
}

var table = map[uint32]*Codec{}

func register(c *Codec) { table[c.Flag] = c }

// ByFlag returns the codec for a page or header compression flag.
func ByFlag(flag uint32) (*Codec, error) {
	c, ok := table[flag]
	if !ok {
		return nil, fmt.Errorf("unknown compression flag %#x", flag)
	}
	return c, nil
}

// All returns every codec, in flag order.
func All() []*Codec {
	var out []*Codec
	for _, f := range []uint32{kdumpfmt.StatusZlib, kdumpfmt.StatusLZO, kdumpfmt.StatusSnappy, kdumpfmt.StatusZstd, kdumpfmt.StatusLZ4} {
		if c, ok := table[f]; ok {
			out = append(out, c)
		}
	}
	return out
}

// Decoders keeps one Decompressor per flag, created on first use: what a
// reader of a dump needs, since every page may carry its own flag.
type Decoders map[uint32]Decompressor

// Decompress expands src stored with flag into dst.
func (d Decoders) Decompress(flag uint32, dst, src []byte) error {
	dec, ok := d[flag]
	if !ok {
		c, err := ByFlag(flag)
		if err != nil {
			return err
		}
		dec = c.NewDecompressor()
		d[flag] = dec
	}
	return dec.Decompress(dst, src)
}

// sliceWriter is an io.Writer appending to a reusable slice.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// exact checks that a decompressor filled dst exactly, as crash and
// libkdumpfile require.
func exact(name string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s: page decompressed to %d bytes, want %d", name, got, want)
	}
	return nil
}
