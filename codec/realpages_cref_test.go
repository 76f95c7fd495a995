//go:build cgo && lzo2

package codec_test

import "pagepipe/codec/internal/cref"

// The C libraries that crash and libkdumpfile call decode what the fuzz
// targets compress.
func init() {
	dec := cref.NewDecompressor() // for the life of the test binary
	cDecompress = dec.Decompress
}
