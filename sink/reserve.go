package sink

import "os"

// reserve allocates disk space for [off, off+n) of out ahead of writing it,
// where the output is a file (or a file under -L, up to the limit), and
// does nothing for other outputs. It is best effort: a file system that
// cannot (NFS before 4.2) or a disk already too full is left as it was.
//
// A kdump writer reserves its descriptor area first: when the disk later
// fills up, the descriptors of the pages whose data landed still have
// their place, so Abort keeps every such page, as under -L. (Without it,
// the descriptors still buffered would need new blocks on a full disk and
// be lost, and with them up to 8192 pages that did land.)
func reserve(out Output, off, n int64) {
	switch o := out.(type) {
	case Limit:
		if off+n > o.Max {
			n = o.Max - off
		}
		reserve(o.Output, off, n)
	case *os.File:
		if n > 0 {
			_ = fallocate(o, off, n)
		}
	}
}
