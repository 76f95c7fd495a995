package codec

import (
	"pagepipe/codec/lzo"
	"pagepipe/kdumpfmt"
)

// lzo (-l): a raw LZO1X-1 stream per page, as lzo1x_1_compress writes it,
// from pagepipe's own pure-Go encoder (package lzo).
func init() {
	register(&Codec{
		Flag: kdumpfmt.StatusLZO, Name: "lzo", Standard: true,
		NewCompressor:   func() Compressor { return &lzoCompressor{} },
		NewDecompressor: func() Decompressor { return lzoDecompressor{} },
	})
}

type lzoCompressor struct{ c lzo.Compressor }

func (c *lzoCompressor) Compress(dst, src []byte) ([]byte, error) {
	return c.c.Compress(dst, src), nil
}

type lzoDecompressor struct{}

func (lzoDecompressor) Decompress(dst, src []byte) error {
	n, err := lzo.Decompress(dst, src)
	if err != nil {
		return err
	}
	return exact("lzo", n, len(dst))
}
