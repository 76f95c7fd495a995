//go:build cgo && lzo2 && integration

package codec_test

import (
	"bytes"
	"testing"

	"pagepipe/codec"
	"pagepipe/codec/internal/cref"
	"pagepipe/internal/realsample"
)

// The C libraries' compressors for the real-page benchmarks
// (realpages_integration_test.go).
func init() {
	newCCompressor = func(tb testing.TB, name string) (pageCompressor, func()) {
		c, err := cref.NewCompressor(name)
		if err != nil {
			tb.Fatal(err)
		}
		if c == nil {
			return nil, nil
		}
		return c, c.Close
	}
}

// Every Go-compressed page of the real sample decompresses with the C
// library that crash and libkdumpfile call (uncompress,
// lzo1x_decompress_safe, snappy_uncompress, ZSTD_decompressDCtx) to the
// same page, exactly a page long. So do the C libraries' own streams (a
// check of the wrappers the benchmarks time), and for LZO the Go stream is
// byte for byte the one liblzo2 writes.
func TestRealPagesDecodeWithC(t *testing.T) {
	pages := realsample.Get(t).Pages
	dec := cref.NewDecompressor()
	defer dec.Close()
	// First with room past the page: a stream that expands to more than
	// a page must show as a wrong length, not as a full buffer.
	got := make([]byte, 2*pageSize)
	check := func(t *testing.T, who, name string, i int, stream []byte) {
		t.Helper()
		clear(got)
		n, err := dec.Decompress(name, got, stream)
		if err != nil {
			t.Fatalf("%s %s, page %d of the sample (%d-byte stream): %v", who, name, i, len(stream), err)
		}
		if n != pageSize {
			t.Fatalf("%s %s, page %d: decompressed to %d bytes, want %d", who, name, i, n, pageSize)
		}
		if !bytes.Equal(got[:n], pages[i]) {
			t.Fatalf("%s %s, page %d: decompressed page differs", who, name, i)
		}
		// And into exactly a page, as crash does.
		clear(got)
		if n, err := dec.Decompress(name, got[:pageSize], stream); err != nil || n != pageSize || !bytes.Equal(got[:n], pages[i]) {
			t.Fatalf("%s %s, page %d: into a page-sized buffer: %d bytes, %v", who, name, i, n, err)
		}
	}
	for _, name := range cref.Names {
		t.Run(name, func(t *testing.T) {
			var goc codec.Compressor
			for _, cd := range codec.All() {
				if cd.Name == name {
					goc = cd.NewCompressor()
				}
			}
			if goc == nil {
				t.Fatalf("package codec has no %s", name)
			}
			cc, err := cref.NewCompressor(name)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			gbuf := make([]byte, 0, outBufLen)
			cbuf := make([]byte, 0, outBufLen)
			var goBytes, cBytes int
			for i, p := range pages {
				gs, err := goc.Compress(gbuf, p)
				if err != nil {
					t.Fatalf("go %s, page %d: %v", name, i, err)
				}
				if gs == nil {
					t.Fatalf("go %s, page %d: no stream", name, i)
				}
				check(t, "go", name, i, gs)
				cs, err := cc.Compress(cbuf, p)
				if err != nil {
					t.Fatalf("c %s, page %d: %v", name, i, err)
				}
				check(t, "c", name, i, cs)
				if name == "lzo" && !bytes.Equal(gs, cs) {
					t.Fatalf("lzo, page %d: Go stream (%d bytes) differs from liblzo2's (%d bytes)", i, len(gs), len(cs))
				}
				goBytes += storedSize(gs)
				cBytes += storedSize(cs)
			}
			t.Logf("%s: %d pages, stored size Go %d, C %d bytes (Go/C %.3f)", name, len(pages), goBytes, cBytes, float64(goBytes)/float64(cBytes))
		})
	}
}
