// Package convert turns dump files into other dump files, without the
// vmcore: a flattened stream into a dump file (-R), a stream cut short
// into a dump marked incomplete, split files into the one dump they were
// cut from (--reassemble). It reads dumps as source reads them and writes
// the bytes sink would have written; sink only writes, source only reads.
package convert

import (
	"context"
	"io"

	"pagepipe/kdumpfmt"
)

// The buffers of a rebuilt file's regions: its page data and its
// descriptors.
const (
	dataBufSize = 1 << 20
	descBufSize = 256 << 10
)

// Rearrange rebuilds a dump file from a flattened stream (-R) into w, as
// kdumpfmt.Unflatten does, stopping with ctx's error when ctx is done. A
// stream that ends before its end marker is a *kdumpfmt.CutError: its
// complete records are written, and FinishCut makes the file a dump marked
// incomplete.
func Rearrange(ctx context.Context, stream io.Reader, w io.WriterAt) (written int64, err error) {
	return kdumpfmt.Unflatten(ctxReader{ctx, stream}, w)
}

// ctxReader is a Reader that fails once its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
