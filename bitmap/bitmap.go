// Package bitmap is the pfn bitmap of the kdump format: one bit per page
// frame, least significant bit first (pfn p is bit p&7 of byte p>>3).
//
// The words are uint64 and serialised little-endian, which gives exactly the
// on-disk byte order that makedumpfile writes and that crash reads as 64-bit
// words. Two bits per page (the "present" and the "dumpable" bitmap) is the
// only memory pagepipe spends per page of the crashed machine.
package bitmap

import (
	"encoding/binary"
	"math/bits"
)

// Bitmap is a fixed-size set of pfns in [0, Len()).
type Bitmap struct {
	words []uint64
	n     uint64
}

// New returns an empty bitmap for pfns [0, n).
func New(n uint64) *Bitmap {
	return &Bitmap{words: make([]uint64, (n+63)/64), n: n}
}

// FromBytes decodes an on-disk bitmap of n bits. Missing trailing bytes read
// as zero; bits past n are ignored.
func FromBytes(b []byte, n uint64) *Bitmap {
	m := New(n)
	for i := range m.words {
		var w [8]byte
		if off := i * 8; off < len(b) {
			copy(w[:], b[off:])
		}
		m.words[i] = binary.LittleEndian.Uint64(w[:])
	}
	m.clearTail()
	return m
}

// Len is the number of pfns the bitmap covers.
func (m *Bitmap) Len() uint64 { return m.n }

// Test reports whether pfn is set. Pfns outside the bitmap are not set.
func (m *Bitmap) Test(pfn uint64) bool {
	return pfn < m.n && m.words[pfn/64]&(1<<(pfn%64)) != 0
}

// Set sets pfn.
func (m *Bitmap) Set(pfn uint64) { m.words[pfn/64] |= 1 << (pfn % 64) }

// Clear clears pfn.
func (m *Bitmap) Clear(pfn uint64) { m.words[pfn/64] &^= 1 << (pfn % 64) }

// SetRange sets [lo, hi), clipped to the bitmap.
func (m *Bitmap) SetRange(lo, hi uint64) { m.apply(lo, hi, true) }

// ClearRange clears [lo, hi), clipped to the bitmap.
func (m *Bitmap) ClearRange(lo, hi uint64) { m.apply(lo, hi, false) }

func (m *Bitmap) apply(lo, hi uint64, set bool) {
	hi = min(hi, m.n)
	for lo < hi {
		w, b := lo/64, lo%64
		span := min(64-b, hi-lo)
		mask := ^uint64(0) >> (64 - span) << b
		if set {
			m.words[w] |= mask
		} else {
			m.words[w] &^= mask
		}
		lo += span
	}
}

// Count returns the number of set pfns in [lo, hi).
func (m *Bitmap) Count(lo, hi uint64) uint64 {
	hi = min(hi, m.n)
	var c uint64
	for lo < hi {
		w, b := lo/64, lo%64
		span := min(64-b, hi-lo)
		mask := ^uint64(0) >> (64 - span) << b
		c += uint64(bits.OnesCount64(m.words[w] & mask))
		lo += span
	}
	return c
}

// NextSet returns the first set pfn >= pfn, or Len() if there is none.
func (m *Bitmap) NextSet(pfn uint64) uint64 {
	if pfn >= m.n {
		return m.n
	}
	w := pfn / 64
	cur := m.words[w] >> (pfn % 64) << (pfn % 64)
	for {
		if cur != 0 {
			return min(w*64+uint64(bits.TrailingZeros64(cur)), m.n)
		}
		w++
		if w >= uint64(len(m.words)) {
			return m.n
		}
		cur = m.words[w]
	}
}

// Clone returns an independent copy.
func (m *Bitmap) Clone() *Bitmap {
	return &Bitmap{words: append([]uint64(nil), m.words...), n: m.n}
}

// Cut returns a copy holding only the pfns below n (n may exceed Len: the
// copy is then longer, with nothing set past Len).
func (m *Bitmap) Cut(n uint64) *Bitmap {
	c := New(n)
	copy(c.words, m.words)
	c.clearTail()
	return c
}

// And clears every pfn that is not set in o (which must have the same length).
func (m *Bitmap) And(o *Bitmap) {
	for i := range m.words {
		m.words[i] &= o.words[i]
	}
}

// Equal reports whether both bitmaps hold the same pfns over the same length.
func (m *Bitmap) Equal(o *Bitmap) bool {
	if m.n != o.n {
		return false
	}
	for i := range m.words {
		if m.words[i] != o.words[i] {
			return false
		}
	}
	return true
}

// PutBytes writes the on-disk form of the bits [8*off, 8*(off+len(dst)))
// into dst; bytes past the end of the bitmap are zero. off is a byte offset.
func (m *Bitmap) PutBytes(dst []byte, off uint64) {
	i := 0
	for ; off%8 == 0 && i+8 <= len(dst) && off/8 < uint64(len(m.words)); i, off = i+8, off+8 {
		binary.LittleEndian.PutUint64(dst[i:], m.words[off/8])
	}
	dst = dst[i:]
	for i := range dst {
		bo := off + uint64(i)
		w := bo / 8
		if w >= uint64(len(m.words)) {
			dst[i] = 0
			continue
		}
		dst[i] = byte(m.words[w] >> (8 * (bo % 8)))
	}
}

// ByteLen is the length of the on-disk form: ceil(Len()/8).
func (m *Bitmap) ByteLen() uint64 { return (m.n + 7) / 8 }

func (m *Bitmap) clearTail() {
	if r := m.n % 64; r != 0 {
		m.words[len(m.words)-1] &= (1 << r) - 1
	}
}
