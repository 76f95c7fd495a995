//go:build !purego

package lzo

// compressBlockFast is compressBlock in assembly (lzo_amd64.s).
//
// Why assembly: the Go compiler, with the probe loop's ten live values
// (input, dictionary, ip, anchor, limit and the loop's temporaries),
// spills some of them to the stack and reloads loop-invariant ones in
// every probe, and the three pure-Go restructurings tried (see
// docs/benchmarks.md) did not get below that. The assembly keeps every
// value of the block in a register for the whole block and finds the
// length of a long match 16 bytes at a time with SSE2 (part of every
// amd64). It writes exactly what compressBlock writes (TestAsmSameAsGo,
// FuzzAsmSameAsGo); build with -tags purego to use the Go code instead.
func (c *Compressor) compressBlockFast(dst []byte, op int, src []byte, start, end, carry int) (int, int) {
	op, pending := compressBlockAMD64(&c.dict, dst, op, src[start-carry:end], carry)
	if op < 0 {
		panic("lzo: output buffer too short for the block")
	}
	return op, pending
}

// compressBlockAMD64 compresses block[carry:] as compressBlock compresses
// src[start:end] with block = src[start-carry:end]: it returns the new
// output position and the literals pending at the end of the block, or
// newOp = -1 if dst[:len(dst)] has no room for what it must write (it
// then writes nothing past len(dst)).
//
//go:noescape
func compressBlockAMD64(dict *[dictSize]uint16, dst []byte, op int, block []byte, carry int) (newOp, pending int)
