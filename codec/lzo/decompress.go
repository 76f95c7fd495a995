package lzo

import (
	"errors"
	"math"
)

// Errors returned by [Decompress]. They correspond to liblzo2's
// LZO_E_INPUT_OVERRUN, LZO_E_OUTPUT_OVERRUN, LZO_E_LOOKBEHIND_OVERRUN and
// LZO_E_INPUT_NOT_CONSUMED.
var (
	// ErrInputOverrun: src ends before the end-of-stream marker
	// (a truncated or corrupt stream).
	ErrInputOverrun = errors.New("lzo: input overrun (truncated stream)")
	// ErrOutputOverrun: the stream decodes to more than len(dst) bytes.
	ErrOutputOverrun = errors.New("lzo: output overrun")
	// ErrLookBehindOverrun: a match refers to data before the start of
	// the output.
	ErrLookBehindOverrun = errors.New("lzo: lookbehind overrun")
	// ErrInputNotConsumed: src holds bytes after the end-of-stream
	// marker. The output is complete.
	ErrInputNotConsumed = errors.New("lzo: input not consumed")
)

// Decompress decodes the LZO1X stream src into dst and returns the number
// of bytes written. len(dst) is the most output accepted: a stream that
// decodes to more is rejected with [ErrOutputOverrun]. Callers that expect
// an exact size, such as a page, must check that the returned count equals
// it; a shorter result is not an error here, as in liblzo2.
//
// Decompress behaves like liblzo2's lzo1x_decompress_safe: it accepts
// every valid LZO1X stream, never reads outside src or writes outside
// dst[:len(dst)], and always ends, on any input. On error the count says
// how far the output got. It does not allocate.
func Decompress(dst, src []byte) (int, error) {
	ip, op := 0, 0
	// state is the number of literals the previous instruction copied:
	// 0 after a match with none, 1..3 after a match's SS literals, 4
	// after a literal run. It changes the meaning of 0000xxxx bytes.
	state := 0

	if len(src) == 0 {
		return 0, ErrInputOverrun
	}
	if src[0] > 17 {
		// Opening literal run of src[0]-17 bytes.
		n := int(src[0]) - 17
		ip = 1
		if len(dst) < n {
			return 0, ErrOutputOverrun
		}
		if len(src)-ip < n {
			return 0, ErrInputOverrun
		}
		op = copy(dst, src[ip:ip+n])
		ip += n
		state = min(n, 4)
	}

	for {
		if ip >= len(src) {
			return op, ErrInputOverrun
		}
		inst := int(src[ip])
		ip++
		var length, dist, next int // next: literals after the match (SS)

		switch {
		case inst >= 64:
			// 01LDDDSS or 1LLDDDSS: 3..8 bytes, distance 1..2048.
			if ip >= len(src) {
				return op, ErrInputOverrun
			}
			length = inst>>5 + 1
			dist = int(src[ip])<<3 + inst>>2&7 + 1
			ip++
			next = inst & 3

		case inst >= 32:
			// 001LLLLL + LE16: distance 1..16384.
			length = inst & 31
			if length == 0 {
				var ok bool
				if length, ip, ok = longLength(src, ip, 31); !ok {
					return op, ErrInputOverrun
				}
			}
			length += 2
			if len(src)-ip < 2 {
				return op, ErrInputOverrun
			}
			w := int(src[ip]) | int(src[ip+1])<<8
			ip += 2
			dist = w>>2 + 1
			next = w & 3

		case inst >= 16:
			// 0001HLLL + LE16: distance 16385..49151, or the end.
			length = inst & 7
			if length == 0 {
				var ok bool
				if length, ip, ok = longLength(src, ip, 7); !ok {
					return op, ErrInputOverrun
				}
			}
			length += 2
			if len(src)-ip < 2 {
				return op, ErrInputOverrun
			}
			w := int(src[ip]) | int(src[ip+1])<<8
			ip += 2
			dist = (inst&8)<<11 + w>>2
			if dist == 0 {
				if ip != len(src) {
					return op, ErrInputNotConsumed
				}
				return op, nil
			}
			dist += 0x4000
			next = w & 3

		case state == 0:
			// 0000LLLL: a run of 4 or more literals.
			length = inst
			if length == 0 {
				var ok bool
				if length, ip, ok = longLength(src, ip, 15); !ok {
					return op, ErrInputOverrun
				}
			}
			length += 3
			if len(dst)-op < length {
				return op, ErrOutputOverrun
			}
			if len(src)-ip < length {
				return op, ErrInputOverrun
			}
			op += copy(dst[op:], src[ip:ip+length])
			ip += length
			state = 4
			continue

		default:
			// 0000DDSS + one byte: 2 bytes from distance 1..1024
			// after a short literal run, 3 bytes from distance
			// 2049..3072 after a long one.
			if ip >= len(src) {
				return op, ErrInputOverrun
			}
			dist = int(src[ip])<<2 + inst>>2 + 1
			ip++
			length = 2
			if state == 4 {
				dist += 0x800
				length = 3
			}
			next = inst & 3
		}

		if dist > op {
			return op, ErrLookBehindOverrun
		}
		if len(dst)-op < length {
			return op, ErrOutputOverrun
		}
		from := op - dist
		if dist >= length {
			op += copy(dst[op:op+length], dst[from:])
		} else {
			// Overlapping copy: repeats the last dist bytes.
			for i := range length {
				dst[op+i] = dst[from+i]
			}
			op += length
		}

		if next > 0 {
			if len(dst)-op < next {
				return op, ErrOutputOverrun
			}
			if len(src)-ip < next {
				return op, ErrInputOverrun
			}
			op += copy(dst[op:], src[ip:ip+next])
			ip += next
		}
		state = next
	}
}

// longLength reads the continuation of a length field that was zero,
// starting at src[ip]: base, plus 255 for each zero byte, plus the first
// non-zero byte. It fails (ok false) when src ends first. It does not stop
// early when the length outgrows dst: a match that ends the stream may
// carry any length, and liblzo2 accepts it. The loop is bounded by src all
// the same; the guard on n only matters where int has 32 bits.
func longLength(src []byte, ip, base int) (n, next int, ok bool) {
	n = base
	for ip < len(src) && src[ip] == 0 {
		n += 255
		ip++
		if n > math.MaxInt/2 {
			return 0, ip, false
		}
	}
	if ip >= len(src) {
		return 0, ip, false
	}
	return n + int(src[ip]), ip + 1, true
}
