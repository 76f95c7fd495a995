package lzo

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

const (
	// dictBits is liblzo2's for lzo1x_1_compress, which makedumpfile
	// calls, so that the streams are the same. Clearing the dictionary
	// for every block takes about a tenth of a 4 KiB page's time; with
	// 12 bits (lzo1x_1_12_compress) it costs a quarter of that, and pages
	// already in the L1 cache compress 10 % faster (those read from
	// further away, as in BenchmarkRealPages, no faster), but the dumps
	// are 0.1 % larger and no longer makedumpfile's.
	dictBits = 14
	dictSize = 1 << dictBits
	hashMul  = 0x1824429d // multiplicative hash of a little-endian 4-byte sequence

	// blockLen is the most input hashed against one dictionary. Inputs
	// longer than that are cut into independent blocks, so no match
	// distance can exceed 0xBFFF, the farthest the format expresses.
	blockLen = 0xC000
	// No match is searched for in the last tailLen bytes of a block.
	// This also keeps the 8-byte loads of matchLen and the 16-byte
	// literal copies inside the block.
	tailLen = 20

	m2MaxLen = 8      // longest match of the two-byte 01LDDDSS / 1LLDDDSS form
	m2MaxOff = 0x0800 // farthest distance of that form
	m3MaxLen = 33     // longest match of 001LLLLL without length bytes
	m3MaxOff = 0x4000 // farthest distance of the 001LLLLL form
	m4MaxLen = 9      // longest match of 0001HLLL without length bytes

	m3Marker = 0x20
	m4Marker = 0x10
)

// MaxCompressedLen returns the largest stream [Compressor.Compress] can
// produce for n input bytes: n + n/16 + 64 + 3, the bound liblzo2
// documents for LZO1X.
func MaxCompressedLen(n int) int {
	return n + n/16 + 64 + 3
}

// Compressor holds the hash dictionary that LZO1X-1 uses to find matches.
// It is reused from call to call, so keep one per worker goroutine. A
// Compressor is not safe for concurrent use; its zero value is ready to
// use.
//
// Like liblzo2, Compress clears the dictionary for every block. Keeping
// it across pages instead was measured slower: telling stale entries by
// their position (stored plus an offset that moves with every block) put
// a check on the probe's critical path, or a mispredicted branch, that
// cost more than the clear; taking stale entries as candidates like any
// other was faster, but made a page's stream depend on the pages
// compressed before it, so dumps would differ with the number of workers.
type Compressor struct {
	// dict maps a hash of 4 input bytes to the position, relative to
	// the current block, where those bytes were last seen.
	dict [dictSize]uint16
}

// Compress appends the LZO1X-1 stream for src to dst[:0] and returns it.
// The stream has no header; it is what liblzo2's lzo1x_1_compress writes
// for the same input. Compress does not allocate when cap(dst) >=
// MaxCompressedLen(len(src)).
func (c *Compressor) Compress(dst, src []byte) []byte {
	return c.compress(dst, src, (*Compressor).compressBlockFast)
}

// compress is Compress with the function that compresses one block:
// compressBlockFast, or compressBlock for the tests that check the
// assembly against it.
func (c *Compressor) compress(dst, src []byte, block func(c *Compressor, dst []byte, op int, src []byte, start, end, carry int) (int, int)) []byte {
	need := MaxCompressedLen(len(src))
	if cap(dst) < need {
		dst = make([]byte, need)
	}
	dst = dst[:need]

	op := 0      // output position
	pos := 0     // start of the next block
	pending := 0 // literals before pos not yet written out
	for len(src)-pos > tailLen {
		end := min(pos+blockLen, len(src))
		if pending+end-pos < 32 {
			// Like liblzo2, search no block that is shorter than
			// 32 bytes with the literals pending before it.
			break
		}
		clear(c.dict[:])
		op, pending = block(c, dst, op, src, pos, end, pending)
		pos = end
	}
	pending += len(src) - pos

	if pending > 0 {
		lit := src[len(src)-pending:]
		if op == 0 && pending <= 238 {
			// A stream that starts with literals may say so in
			// its first byte.
			dst[0] = byte(17 + pending)
			op = 1
		} else {
			op = putLiteralHeader(dst, op, pending)
		}
		op += copy(dst[op:], lit)
	}
	// End of stream: a 0001HLLL match with distance 16384.
	dst[op] = m4Marker | 1
	dst[op+1] = 0
	dst[op+2] = 0
	return dst[:op+3]
}

// putLiteralHeader writes what announces a run of n >= 1 literals at
// dst[op:] and returns the new output position. Runs of 1 to 3 literals
// have no header: their count goes into the SS bits of the match written
// just before, found at dst[op-2] for every match form.
func putLiteralHeader(dst []byte, op, n int) int {
	switch {
	case n <= 3:
		dst[op-2] |= byte(n)
	case n <= 18:
		dst[op] = byte(n - 3)
		op++
	default:
		op = putLongLength(dst, op, 0, n-18)
	}
	return op
}

// putLongLength writes an instruction byte whose length field is zero,
// followed by rest, the part of the length beyond what the field could
// hold, as zero bytes worth 255 each and a final non-zero byte.
func putLongLength(dst []byte, op int, inst byte, rest int) int {
	dst[op] = inst
	op++
	for rest > 255 {
		dst[op] = 0
		op++
		rest -= 255
	}
	dst[op] = byte(rest)
	return op + 1
}

// compressBlock compresses src[start:end] (end-start > tailLen) into
// dst[op:] against an empty dictionary and returns the new output position
// and the number of literals at the end of the block not yet written out.
// carry literals before start are still pending from the previous block;
// they are written out in front of this block's first literals.
//
// Positions are relative to start, as the dictionary holds them: the
// search for a match, the hot loop, then needs neither start nor src.
//
// The reads of the input go through load32 and load64, without the
// bounds checks that took about 6 % of the time; the invariants noted
// where they are keep every one within src. Writes to dst stay checked.
//
// On amd64 Compress uses compressBlockAMD64 instead (lzo_amd64.s), which
// follows this function step by step and must write the same bytes
// (TestAsmSameAsGo): a change here must be made there too.
func (c *Compressor) compressBlock(dst []byte, op int, src []byte, start, end, carry int) (int, int) {
	dict := &c.dict
	in := src[start:end]
	limit := len(in) - tailLen // no match starts at or after limit
	anchor := 0                // first byte not yet covered by a match
	ip := 1
	if carry < 4 {
		ip += 4 - carry
	}

	for {
		var cand int
		for {
			if ip >= limit {
				return op, len(in) - anchor + carry
			}
			seq := load32(in, ip)                   // ip < limit
			h := (seq * hashMul) >> (32 - dictBits) // < dictSize
			cand = int(dict[h])
			dict[h] = uint16(ip)
			if load32(in, cand) == seq { // cand < ip
				break
			}
			// No match: move on, faster and faster the longer the
			// run of literals gets.
			ip += 1 + (ip-anchor)>>5
		}

		// Write out the literals before the match.
		if n := ip - anchor + carry; n > 0 {
			lit := start + anchor - carry
			op = putLiteralHeader(dst, op, n)
			if n <= 16 && op+16 <= len(dst) {
				// Short run: copy 16 bytes, keep n. The source
				// has at least tailLen bytes after ip, so lit+16
				// < start+limit+tailLen.
				d := dst[op : op+16 : op+16]
				binary.LittleEndian.PutUint64(d[:8], load64(src, lit))
				binary.LittleEndian.PutUint64(d[8:], load64(src, lit+8))
				op += n
			} else {
				op += copy(dst[op:], src[lit:start+ip])
			}
		}
		carry = 0

		// Most matches end within their first 12 bytes: find those
		// here, and call matchLen only for longer ones. cand < ip <
		// limit, so both words end before limit+tailLen.
		var n int
		if diff := load64(in, ip+4) ^ load64(in, cand+4); diff != 0 {
			n = 4 + bits.TrailingZeros64(diff)>>3
		} else {
			n = matchLen(in, ip, cand, limit)
		}
		dist := ip - cand
		ip += n
		anchor = ip
		if n <= m2MaxLen && dist <= m2MaxOff {
			// The commonest form, written here: see putMatch.
			dist--
			dst[op+1] = byte(dist >> 3)
			dst[op] = byte((n-1)<<5 | (dist&7)<<2)
			op += 2
		} else {
			op = putMatch(dst, op, n, dist)
		}
	}
}

// load32 and load64 read little-endian words at in[i:], which the caller
// guarantees lie within in: they check nothing.
func load32(in []byte, i int) uint32 {
	return binary.LittleEndian.Uint32((*[4]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(in)), i))[:])
}
func load64(in []byte, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(in)), i))[:])
}

// matchLen returns the length of the match between in[a:] and in[b:]
// (b < a), whose first 12 bytes are known to be equal. Like liblzo2, it
// compares 8 bytes at a time from a+4 on and stops counting once the next
// 8 bytes would start at or after limit, which keeps every load within
// tailLen bytes past limit. Long matches are compared 32 bytes a step
// first; the result is the same.
func matchLen(in []byte, a, b, limit int) int {
	n := 4
	for a+n+32 < limit {
		// The words at n+8 .. n+32 all start before limit.
		d0 := load64(in, a+n+8) ^ load64(in, b+n+8)
		d1 := load64(in, a+n+16) ^ load64(in, b+n+16)
		d2 := load64(in, a+n+24) ^ load64(in, b+n+24)
		d3 := load64(in, a+n+32) ^ load64(in, b+n+32)
		if d0|d1|d2|d3 != 0 {
			// The first differing byte, found without a branch
			// (TrailingZeros64 counts 64 in a word with no
			// difference): a branch would often be mispredicted.
			t0 := bits.TrailingZeros64(d0)
			t1 := bits.TrailingZeros64(d1)
			t2 := bits.TrailingZeros64(d2)
			t3 := bits.TrailingZeros64(d3)
			t2 += t3 & -(t2 >> 6)
			t1 += t2 & -(t1 >> 6)
			t0 += t1 & -(t0 >> 6)
			return n + 8 + t0>>3
		}
		n += 32
	}
	for {
		n += 8
		if a+n >= limit {
			return n
		}
		if diff := load64(in, a+n) ^ load64(in, b+n); diff != 0 {
			return n + bits.TrailingZeros64(diff)>>3
		}
	}
}

// putMatch writes a match of length n >= 4 at distance dist (1..0xBFFF)
// in the shortest form and returns the new output position. Every form
// ends with the byte pair whose first byte holds the SS bits.
func putMatch(dst []byte, op, n, dist int) int {
	switch {
	case n <= m2MaxLen && dist <= m2MaxOff:
		dist--
		d := dst[op : op+2]
		d[0] = byte((n-1)<<5 | (dist&7)<<2)
		d[1] = byte(dist >> 3)
		return op + 2
	case dist <= m3MaxOff:
		dist--
		if n <= m3MaxLen {
			dst[op] = m3Marker | byte(n-2)
			op++
		} else {
			op = putLongLength(dst, op, m3Marker, n-m3MaxLen)
		}
	default:
		dist -= 0x4000
		marker := m4Marker | byte(dist>>11)&8
		if n <= m4MaxLen {
			dst[op] = marker | byte(n-2)
			op++
		} else {
			op = putLongLength(dst, op, marker, n-m4MaxLen)
		}
	}
	d := dst[op : op+2]
	d[0] = byte(dist << 2)
	d[1] = byte(dist >> 6)
	return op + 2
}
