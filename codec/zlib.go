package codec

import (
	"bytes"
	"io"

	"github.com/klauspost/compress/zlib"

	"pagepipe/kdumpfmt"
)

// zlib (-c): an RFC 1950 stream per page at level 1, as makedumpfile's
// deflate(Z_FINISH) with Z_BEST_SPEED. The bytes differ from C zlib's but
// every reader inflates them the same.
func init() {
	register(&Codec{
		Flag: kdumpfmt.StatusZlib, Name: "zlib", Standard: true,
		NewCompressor:   func() Compressor { return &zlibCompressor{} },
		NewDecompressor: func() Decompressor { return &zlibDecompressor{} },
	})
}

type zlibCompressor struct {
	w   *zlib.Writer
	out sliceWriter
}

func (c *zlibCompressor) Compress(dst, src []byte) ([]byte, error) {
	c.out.b = dst[:0]
	if c.w == nil {
		w, err := zlib.NewWriterLevel(&c.out, zlib.BestSpeed)
		if err != nil {
			return nil, err
		}
		c.w = w
	} else {
		c.w.Reset(&c.out)
	}
	if _, err := c.w.Write(src); err != nil {
		return nil, err
	}
	if err := c.w.Close(); err != nil {
		return nil, err
	}
	return c.out.b, nil
}

type zlibDecompressor struct {
	r  io.ReadCloser
	br bytes.Reader
}

func (d *zlibDecompressor) Decompress(dst, src []byte) error {
	d.br.Reset(src)
	var err error
	if d.r == nil {
		d.r, err = zlib.NewReader(&d.br)
	} else {
		err = d.r.(zlib.Resetter).Reset(&d.br, nil)
	}
	if err != nil {
		return err
	}
	n, err := io.ReadFull(d.r, dst)
	if err != nil {
		return err
	}
	var one [1]byte
	if m, _ := d.r.Read(one[:]); m != 0 {
		return exact("zlib", n+m, len(dst))
	}
	return nil
}
