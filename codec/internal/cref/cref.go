//go:build cgo && lzo2

package cref

/*
#cgo LDFLAGS: -lz -llzo2 -lsnappy -lzstd
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <lzo/lzo1x.h>
#include <snappy-c.h>
#include <zstd.h>

// Results come back by value: a Go pointer passed to C for an output
// length would make the variable escape to the heap, one allocation per
// call.
typedef struct { size_t n; int code; } cref_result;

// zlib, as makedumpfile's compress_mdf: one z_stream made by deflateInit at
// Z_BEST_SPEED, per page deflate(Z_FINISH) then deflateReset. The stream
// lives in C memory and keeps no Go pointer once a call returns.
static z_stream *cref_zlib_new(int *code) {
	z_stream *s = calloc(1, sizeof(z_stream));
	if (s == NULL) {
		*code = Z_MEM_ERROR;
		return NULL;
	}
	*code = deflateInit(s, Z_BEST_SPEED);
	if (*code != Z_OK) {
		free(s);
		return NULL;
	}
	return s;
}

static void cref_zlib_free(z_stream *s) {
	deflateEnd(s);
	free(s);
}

static cref_result cref_zlib_compress(z_stream *s, const unsigned char *src, size_t src_len,
                                      unsigned char *dst, size_t dst_len) {
	cref_result r = {0, 0};
	s->next_in = (Bytef *)src;
	s->avail_in = src_len;
	s->next_out = dst;
	s->avail_out = dst_len;
	r.code = deflate(s, Z_FINISH);
	if (r.code == Z_STREAM_END) {
		r.n = s->total_out;
		r.code = deflateReset(s);
	} else if (r.code == Z_OK) {
		r.code = Z_BUF_ERROR;
	}
	s->next_in = NULL;
	s->next_out = NULL;
	return r;
}

// crash's check: uncompress into the page, Z_OK and the whole page.
static cref_result cref_zlib_uncompress(const unsigned char *src, size_t src_len,
                                        unsigned char *dst, size_t dst_len) {
	uLongf n = dst_len;
	cref_result r;
	r.code = uncompress(dst, &n, src, src_len);
	r.n = n;
	return r;
}

static int cref_lzo_init(void) { return lzo_init(); }
static size_t cref_lzo_mem(void) { return LZO1X_1_MEM_COMPRESS; }

static cref_result cref_lzo_compress(const unsigned char *src, size_t src_len,
                                     unsigned char *dst, void *wrk) {
	lzo_uint n = 0;
	cref_result r;
	r.code = lzo1x_1_compress(src, src_len, dst, &n, wrk);
	r.n = n;
	return r;
}

static cref_result cref_lzo_decompress(const unsigned char *src, size_t src_len,
                                       unsigned char *dst, size_t dst_len) {
	lzo_uint n = dst_len;
	cref_result r;
	r.code = lzo1x_decompress_safe(src, src_len, dst, &n, NULL);
	r.n = n;
	return r;
}

static cref_result cref_snappy_compress(const unsigned char *src, size_t src_len,
                                        unsigned char *dst, size_t dst_len) {
	size_t n = dst_len;
	cref_result r;
	r.code = snappy_compress((const char *)src, src_len, (char *)dst, &n);
	r.n = n;
	return r;
}

// libkdumpfile's and crash's order: the length from the preamble first,
// then the data.
static cref_result cref_snappy_uncompress(const unsigned char *src, size_t src_len,
                                          unsigned char *dst, size_t dst_len) {
	size_t n = 0;
	cref_result r;
	r.code = snappy_uncompressed_length((const char *)src, src_len, &n);
	if (r.code == SNAPPY_OK && n > dst_len) {
		r.code = SNAPPY_BUFFER_TOO_SMALL;
	}
	if (r.code == SNAPPY_OK) {
		r.code = snappy_uncompress((const char *)src, src_len, (char *)dst, &n);
	}
	r.n = n;
	return r;
}

static size_t cref_snappy_bound(size_t n) { return snappy_max_compressed_length(n); }

// A zstd result: the function's return value in n, and code 1 when that
// is an error code (ZSTD_getErrorName names it), else 0.
static cref_result cref_zstd_result(size_t ret) {
	cref_result r;
	r.n = ret;
	r.code = ZSTD_isError(ret) ? 1 : 0;
	return r;
}

static cref_result cref_zstd_compress(ZSTD_CCtx *c, const unsigned char *src, size_t src_len,
                                      unsigned char *dst, size_t dst_len) {
	return cref_zstd_result(ZSTD_compressCCtx(c, dst, dst_len, src, src_len, 1));
}

static cref_result cref_zstd_decompress(ZSTD_DCtx *d, const unsigned char *src, size_t src_len,
                                        unsigned char *dst, size_t dst_len) {
	return cref_zstd_result(ZSTD_decompressDCtx(d, dst, dst_len, src, src_len));
}

*/
import "C"

import (
	"fmt"
	"unsafe"
)

func init() {
	if r := C.cref_lzo_init(); r != C.LZO_E_OK {
		panic(fmt.Sprintf("cref: lzo_init failed: %d", int(r)))
	}
}

// Compressor compresses one page at a time with one C library, reusing
// its state from page to page. Not safe for concurrent use.
type Compressor interface {
	// Compress writes the compressed form of src into dst[:0] and
	// returns it; dst is grown to Bound(len(src)) when it is smaller.
	Compress(dst, src []byte) ([]byte, error)
	// Close frees the C state.
	Close()
}

// Names lists the codecs this package wraps, by package codec's names.
var Names = []string{"zlib", "lzo", "snappy", "zstd"}

// NewCompressor returns the C compressor for a codec named as in package
// codec, or nil when this package does not wrap one.
func NewCompressor(name string) (Compressor, error) {
	switch name {
	case "zlib":
		return newZlib()
	case "lzo":
		return &lzoCompressor{wrk: C.malloc(C.cref_lzo_mem())}, nil
	case "snappy":
		return snappyCompressor{}, nil
	case "zstd":
		c := C.ZSTD_createCCtx()
		if c == nil {
			return nil, fmt.Errorf("cref: ZSTD_createCCtx failed")
		}
		return &zstdCompressor{c: c}, nil
	}
	return nil, nil
}

// Bound is the largest output of any wrapped compressor for n input bytes.
func Bound(n int) int {
	return max(int(C.compressBound(C.uLong(n))), n+n/16+64+3,
		int(C.cref_snappy_bound(C.size_t(n))), int(C.ZSTD_compressBound(C.size_t(n))))
}

// grow returns dst[:Bound(len(src))], allocating when it has less room.
func grow(dst, src []byte) []byte {
	need := Bound(len(src))
	if cap(dst) < need {
		return make([]byte, need)
	}
	return dst[:need]
}

type zlibCompressor struct{ s *C.z_stream }

func newZlib() (*zlibCompressor, error) {
	var code C.int
	s := C.cref_zlib_new(&code)
	if s == nil {
		return nil, fmt.Errorf("cref: deflateInit: %d", int(code))
	}
	return &zlibCompressor{s: s}, nil
}

func (c *zlibCompressor) Compress(dst, src []byte) ([]byte, error) {
	dst = grow(dst, src)
	r := C.cref_zlib_compress(c.s, ptr(src), C.size_t(len(src)), ptr(dst), C.size_t(len(dst)))
	if r.code != C.Z_OK {
		return nil, fmt.Errorf("cref: deflate: %d", int(r.code))
	}
	return dst[:r.n], nil
}

func (c *zlibCompressor) Close() { C.cref_zlib_free(c.s); c.s = nil }

type lzoCompressor struct{ wrk unsafe.Pointer }

func (c *lzoCompressor) Compress(dst, src []byte) ([]byte, error) {
	dst = grow(dst, src)
	r := C.cref_lzo_compress(ptr(src), C.size_t(len(src)), ptr(dst), c.wrk)
	if r.code != C.LZO_E_OK {
		return nil, fmt.Errorf("cref: lzo1x_1_compress: %d", int(r.code))
	}
	return dst[:r.n], nil
}

func (c *lzoCompressor) Close() { C.free(c.wrk); c.wrk = nil }

type snappyCompressor struct{}

func (snappyCompressor) Compress(dst, src []byte) ([]byte, error) {
	dst = grow(dst, src)
	r := C.cref_snappy_compress(ptr(src), C.size_t(len(src)), ptr(dst), C.size_t(len(dst)))
	if r.code != C.SNAPPY_OK {
		return nil, fmt.Errorf("cref: snappy_compress: %d", int(r.code))
	}
	return dst[:r.n], nil
}

func (snappyCompressor) Close() {}

type zstdCompressor struct{ c *C.ZSTD_CCtx }

func (c *zstdCompressor) Compress(dst, src []byte) ([]byte, error) {
	dst = grow(dst, src)
	r := C.cref_zstd_compress(c.c, ptr(src), C.size_t(len(src)), ptr(dst), C.size_t(len(dst)))
	if r.code != 0 {
		return nil, fmt.Errorf("cref: ZSTD_compressCCtx: %s", C.GoString(C.ZSTD_getErrorName(r.n)))
	}
	return dst[:r.n], nil
}

func (c *zstdCompressor) Close() { C.ZSTD_freeCCtx(c.c); c.c = nil }

// Decompressor expands pages with the C libraries, as crash and
// libkdumpfile do. Not safe for concurrent use.
type Decompressor struct{ d *C.ZSTD_DCtx }

// NewDecompressor makes a Decompressor; Close frees it.
func NewDecompressor() *Decompressor { return &Decompressor{d: C.ZSTD_createDCtx()} }

// Close frees the C state.
func (d *Decompressor) Close() { C.ZSTD_freeDCtx(d.d); d.d = nil }

// Decompress expands src, a page stored with the codec named name, into
// dst and returns the number of bytes the library reports it wrote; an
// error when the library rejects the stream.
func (d *Decompressor) Decompress(name string, dst, src []byte) (int, error) {
	s, sl, o, ol := ptr(src), C.size_t(len(src)), ptr(dst), C.size_t(len(dst))
	var r C.cref_result
	switch name {
	case "zlib":
		if r = C.cref_zlib_uncompress(s, sl, o, ol); r.code != C.Z_OK {
			return 0, fmt.Errorf("cref: uncompress: %d", int(r.code))
		}
	case "lzo":
		n, code := LZODecompress(dst, src)
		if code != C.LZO_E_OK {
			return 0, fmt.Errorf("cref: lzo1x_decompress_safe: %d", code)
		}
		return n, nil
	case "snappy":
		if r = C.cref_snappy_uncompress(s, sl, o, ol); r.code != C.SNAPPY_OK {
			return 0, fmt.Errorf("cref: snappy_uncompress: %d", int(r.code))
		}
	case "zstd":
		if r = C.cref_zstd_decompress(d.d, s, sl, o, ol); r.code != 0 {
			return 0, fmt.Errorf("cref: ZSTD_decompressDCtx: %s", C.GoString(C.ZSTD_getErrorName(r.n)))
		}
	default:
		return 0, fmt.Errorf("cref: no C decompressor for %q", name)
	}
	return int(r.n), nil
}

// LZODecompress runs lzo1x_decompress_safe on src with len(dst) bytes of
// room and returns the byte count it reports and its result code (0 is
// LZO_E_OK, negative values are LZO_E_* errors): package lzo's tests
// compare those codes with its own errors.
func LZODecompress(dst, src []byte) (n, code int) {
	r := C.cref_lzo_decompress(ptr(src), C.size_t(len(src)), ptr(dst), C.size_t(len(dst)))
	return int(r.n), int(r.code)
}

// ptr returns a C pointer to b's data: a valid one even for an empty b,
// where C gets no room to write anyway.
func ptr(b []byte) *C.uchar {
	if len(b) == 0 {
		return (*C.uchar)(unsafe.Pointer(&empty))
	}
	return (*C.uchar)(unsafe.Pointer(&b[0]))
}

var empty byte
