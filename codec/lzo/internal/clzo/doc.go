// Package clzo wraps liblzo2's LZO1X-1 compressor and safe decompressor
// through cgo, for tests and benchmarks of package lzo only; the product
// never links it.
//
// It is built only with the lzo2 build tag (and cgo), and needs Debian's
// liblzo2-dev:
//
//	go test -tags lzo2 ./codec/lzo/...
package clzo
