package codec

import (
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"pagepipe/codec/lzo"
	"pagepipe/kdumpfmt"
)

func init() {
	// snappy (-p): the raw block format (varint length + elements) that
	// snappy_uncompress reads, not the framed stream.
	register(&Codec{
		Flag: kdumpfmt.StatusSnappy, Name: "snappy", Standard: true,
		NewCompressor:   func() Compressor { return snappyCompressor{} },
		NewDecompressor: func() Decompressor { return snappyDecompressor{} },
	})
	// zstd (-z): one frame per page at the fastest level, content size in
	// the frame header, no checksum, literals stored raw (see
	// newZstdCompressor).
	register(&Codec{
		Flag: kdumpfmt.StatusZstd, Name: "zstd", Standard: true,
		NewCompressor:   newZstdCompressor,
		NewDecompressor: newZstdDecompressor,
	})
	// lz4 (--lz4): a pagepipe extension; one lz4 block per page.
	register(&Codec{
		Flag: kdumpfmt.StatusLZ4, Name: "lz4", Standard: false,
		NewCompressor:   func() Compressor { return &lz4Compressor{} },
		NewDecompressor: func() Decompressor { return lz4Decompressor{} },
	})
}

type snappyCompressor struct{}

func (snappyCompressor) Compress(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}

type snappyDecompressor struct{}

func (snappyDecompressor) Decompress(dst, src []byte) error {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return err
	}
	if err := exact("snappy", n, len(dst)); err != nil {
		return err
	}
	_, err = snappy.Decode(dst, src)
	return err
}

type zstdCompressor struct{ enc *zstd.Encoder }

// newZstdCompressor returns klauspost's fastest encoder with the literals
// of every block stored raw, not Huffman-coded
// (WithNoEntropyCompression). Each page is a frame of its own, so a
// Huffman table cannot be reused from page to page: every page would pay
// for counting its literals, building a tree and writing the table
// (FSE-compressed weights), most of what the encoder spends on a 4 KiB
// page. Without it the encoder is about 1.6 times as fast on real pages
// and stores 6 % more of them, 3 % more in a whole -z dump
// (docs/benchmarks.md, BenchmarkZstdLiterals). The sequences stay
// FSE-coded; every zstd decoder reads raw literals.
func newZstdCompressor() Compressor {
	return newZstdWith(zstd.WithNoEntropyCompression(true))
}

// newZstdWith returns the -z encoder's options plus extra.
func newZstdWith(extra ...zstd.EOption) Compressor {
	opts := append([]zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true), zstd.WithLowerEncoderMem(true)}, extra...)
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		panic(err) // only bad options fail, and these are constant
	}
	return &zstdCompressor{enc: enc}
}

func (c *zstdCompressor) Compress(dst, src []byte) ([]byte, error) {
	return c.enc.EncodeAll(src, dst[:0]), nil
}

type zstdDecompressor struct{ dec *zstd.Decoder }

// newZstdDecompressor decodes into the page buffer and no further
// (WithDecodeAllCapLimit, with dst's capacity cut to the page). Without the
// limit DecodeAll grows its output to whatever the frames produce before
// the size check can refuse it, and a zstd RLE block is 4 bytes for up to
// 128 KiB: a hostile stored page of a few KiB expands 32768-fold.
func newZstdDecompressor() Decompressor {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic(err)
	}
	return &zstdDecompressor{dec: dec}
}

func (d *zstdDecompressor) Decompress(dst, src []byte) error {
	out, err := d.dec.DecodeAll(src, dst[:0:len(dst)])
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return fmt.Errorf("zstd: page decompresses to more than %d bytes", len(dst))
	}
	if err != nil {
		return err
	}
	if err := exact("zstd", len(out), len(dst)); err != nil {
		return err
	}
	if &out[0] != &dst[0] {
		copy(dst, out)
	}
	return nil
}

type lz4Compressor struct{ c lz4.Compressor }

func (c *lz4Compressor) Compress(dst, src []byte) ([]byte, error) {
	dst = dst[:cap(dst)]
	n, err := c.c.CompressBlock(src, dst)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil // incompressible
	}
	return dst[:n], nil
}

type lz4Decompressor struct{}

func (lz4Decompressor) Decompress(dst, src []byte) error {
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return err
	}
	return exact("lz4", n, len(dst))
}

// MaxCompressedLen bounds every codec's output for a page of n bytes, so a
// worker's buffer never grows.
func MaxCompressedLen(n int) int {
	return max(s2.MaxEncodedLen(n), lz4.CompressBlockBound(n), lzo.MaxCompressedLen(n), n+1024)
}
