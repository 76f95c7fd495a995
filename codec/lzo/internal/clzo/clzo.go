//go:build cgo && lzo2

package clzo

/*
#cgo LDFLAGS: -llzo2
#include <stdlib.h>
#include <lzo/lzo1x.h>

static int clzo_init(void) { return lzo_init(); }
static size_t clzo_mem_compress(void) { return LZO1X_1_MEM_COMPRESS; }

// Results come back by value: a Go pointer passed to C would make the
// variable escape to the heap, one allocation per call.
typedef struct { size_t n; int code; } clzo_result;

static clzo_result clzo_compress(const unsigned char *src, size_t src_len,
                                 unsigned char *dst, void *wrk) {
	lzo_uint n = 0;
	clzo_result r;
	r.code = lzo1x_1_compress(src, src_len, dst, &n, wrk);
	r.n = n;
	return r;
}

static clzo_result clzo_decompress(const unsigned char *src, size_t src_len,
                                   unsigned char *dst, size_t dst_len) {
	lzo_uint n = dst_len;
	clzo_result r;
	r.code = lzo1x_decompress_safe(src, src_len, dst, &n, NULL);
	r.n = n;
	return r;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

func init() {
	if r := C.clzo_init(); r != C.LZO_E_OK {
		panic(fmt.Sprintf("clzo: lzo_init failed: %d", int(r)))
	}
}

// Compressor owns the work memory lzo1x_1_compress needs. It is not safe
// for concurrent use.
type Compressor struct {
	wrk unsafe.Pointer
}

// NewCompressor allocates the work memory (in C memory) for one
// Compressor. Call Close to free it.
func NewCompressor() *Compressor {
	return &Compressor{wrk: C.malloc(C.clzo_mem_compress())}
}

// Close frees the work memory.
func (c *Compressor) Close() {
	C.free(c.wrk)
	c.wrk = nil
}

// MaxCompressedLen is liblzo2's documented bound for LZO1X output.
func MaxCompressedLen(n int) int { return n + n/16 + 64 + 3 }

// Compress writes lzo1x_1_compress's stream for src into dst[:0] and
// returns it; dst is grown to MaxCompressedLen(len(src)) when it is
// smaller.
func (c *Compressor) Compress(dst, src []byte) []byte {
	need := MaxCompressedLen(len(src))
	if cap(dst) < need {
		dst = make([]byte, need)
	}
	dst = dst[:need]
	r := C.clzo_compress(ptr(src), C.size_t(len(src)), ptr(dst), c.wrk)
	if r.code != C.LZO_E_OK {
		panic(fmt.Sprintf("clzo: lzo1x_1_compress failed: %d", int(r.code)))
	}
	return dst[:r.n]
}

// Decompress runs lzo1x_decompress_safe on src with len(dst) bytes of
// room and returns the byte count it reports and its result code (0 is
// LZO_E_OK, negative values are LZO_E_* errors).
func Decompress(dst, src []byte) (n int, code int) {
	r := C.clzo_decompress(ptr(src), C.size_t(len(src)), ptr(dst), C.size_t(len(dst)))
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
