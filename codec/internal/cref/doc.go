// Package cref wraps, through cgo, the C compression libraries that
// makedumpfile, crash and libkdumpfile use, called the way they call them:
// zlib's deflate at level 1 with one z_stream reset per page, liblzo2's
// lzo1x_1_compress, libsnappy's snappy_compress and libzstd's
// ZSTD_compressCCtx at level 1 with one reused context; and the matching
// decompressors (uncompress, lzo1x_decompress_safe, snappy_uncompress,
// ZSTD_decompressDCtx). It is for tests and benchmarks of package codec
// and codec/lzo only; the product never links it.
//
// It is built only with the lzo2 build tag (and cgo), and needs Debian's
// zlib1g-dev, liblzo2-dev, libsnappy-dev and libzstd-dev
// (scripts/deps.sh installs them):
//
//	go test -tags lzo2 ./codec/...
package cref
