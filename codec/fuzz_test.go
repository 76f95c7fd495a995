package codec_test

import (
	"bytes"
	"testing"

	"pagepipe/codec"
)

// cDecompress decodes a page with the C library readers use, or is nil
// when the test binary is built without them (realpages_cref_test.go,
// build tag lzo2).
var cDecompress func(name string, dst, src []byte) (int, error)

// fuzzPage makes a page from fuzz input: the input, repeated to fill the
// page (so that matches are found at every distance it implies), after a
// prefix of the input's own length in zero bytes.
func fuzzPage(data []byte) []byte {
	page := make([]byte, pageSize)
	if len(data) == 0 {
		return page
	}
	for i := len(data) % 512; i < len(page); i += copy(page[i:], data) {
	}
	return page
}

// Every codec's stream for any page decodes to exactly that page with
// pagepipe's decoder and, with -tags lzo2, with the C library crash and
// libkdumpfile call.
func FuzzCodecsRoundTrip(f *testing.F) {
	f.Add([]byte("kernel: page allocation failure: order:0"))
	f.Add([]byte{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0})
	f.Add(bytes.Repeat([]byte{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233}, 40))
	type pair struct {
		c codec.Compressor
		d codec.Decompressor
	}
	var all []pair
	for _, c := range codec.All() {
		all = append(all, pair{c.NewCompressor(), c.NewDecompressor()})
	}
	buf := make([]byte, 0, codec.MaxCompressedLen(pageSize))
	got := make([]byte, 2*pageSize)
	f.Fuzz(func(t *testing.T, data []byte) {
		page := fuzzPage(data)
		for i, c := range codec.All() {
			out, err := all[i].c.Compress(buf, page)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			if out == nil {
				continue // stored raw
			}
			clear(got)
			if err := all[i].d.Decompress(got[:pageSize], out); err != nil || !bytes.Equal(got[:pageSize], page) {
				t.Fatalf("%s: %d-byte stream: Go decoder: %v, equal %v", c.Name, len(out), err, bytes.Equal(got[:pageSize], page))
			}
			if cDecompress == nil || !c.Standard {
				continue
			}
			clear(got)
			n, err := cDecompress(c.Name, got, out)
			if err != nil || n != pageSize || !bytes.Equal(got[:n], page) {
				t.Fatalf("%s: %d-byte stream: C decoder: %d bytes, %v", c.Name, len(out), n, err)
			}
		}
	})
}
