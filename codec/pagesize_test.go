package codec_test

import (
	"bytes"
	"fmt"
	"testing"

	"pagepipe/codec"
)

// pageSize is the size of the pages most tests here compress: the real
// fixture's (x86_64, 4 KiB). The codecs take pages of any size; the dump
// passes its own (pipeline.Config.PageSize).
const pageSize = 4096

// Every codec compresses and restores pages of 16 and 64 KiB (arm64's
// and ppc64le's) as it does 4 KiB ones, within MaxCompressedLen, with
// pagepipe's decoder and, with -tags lzo2, the C library's.
func TestCodecsTakeEveryPageSize(t *testing.T) {
	for _, ps := range []int{4 << 10, 16 << 10, 64 << 10} {
		for _, kind := range []string{"text", "sparse", "random"} {
			page := make([]byte, ps)
			switch kind {
			case "text":
				for i := 0; i < ps; i += copy(page[i:], fmt.Sprintf("[%8d] kernel: page allocation at %#x\n", i, i*7)) {
				}
			case "sparse":
				for i := 0; i < ps; i += 4099 {
					page[i] = byte(i)
				}
			case "random":
				x := uint64(ps)
				for i := range page {
					x = x*6364136223846793005 + 1442695040888963407
					page[i] = byte(x >> 56)
				}
			}
			for _, c := range codec.All() {
				t.Run(fmt.Sprintf("%d/%s/%s", ps, kind, c.Name), func(t *testing.T) {
					out, err := c.NewCompressor().Compress(make([]byte, 0, codec.MaxCompressedLen(ps)), page)
					if err != nil {
						t.Fatal(err)
					}
					if out == nil {
						if kind != "random" {
							t.Fatalf("a %s page of %d bytes did not compress", kind, ps)
						}
						return // stored raw
					}
					if len(out) > codec.MaxCompressedLen(ps) {
						t.Fatalf("%d-byte stream, MaxCompressedLen %d", len(out), codec.MaxCompressedLen(ps))
					}
					got := make([]byte, ps)
					if err := c.NewDecompressor().Decompress(got, out); err != nil || !bytes.Equal(got, page) {
						t.Fatalf("Go decoder: %v, equal %v", err, bytes.Equal(got, page))
					}
					if cDecompress == nil || !c.Standard {
						return
					}
					buf := make([]byte, 2*ps)
					if n, err := cDecompress(c.Name, buf, out); err != nil || n != ps || !bytes.Equal(buf[:n], page) {
						t.Fatalf("C decoder: %d bytes, %v", n, err)
					}
				})
			}
		}
	}
}
