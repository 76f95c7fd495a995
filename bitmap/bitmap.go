// Package bitmap is the pfn bitmap of the kdump format: one bit per page
// frame, least significant bit first (pfn p is bit p&7 of byte p>>3).
//
// The on-disk form is the bits as little-endian 64-bit words, which gives
// exactly the byte order that makedumpfile writes and that crash reads as
// 64-bit words.
//
// In memory the words are kept in blocks of 4 KiB (32768 pfns, 128 MiB of
// the crashed machine). A block with no pfn set is not allocated, and a
// block with every pfn set is one shared constant: a bitmap built from
// ranges, like the 1st bitmap (the PT_LOADs), costs a pointer per block, and
// only blocks where set and clear pfns mix, as in the 2nd bitmap after
// filtering, cost their 4 KiB. The bitmaps are the only memory pagepipe
// spends per page of the crashed machine: at most two bits per page, about
// one in practice (docs/benchmarks.md).
package bitmap

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math/bits"
	"sync"
)

// BlockPfns is the number of pfns in one block of words, blocks starting
// at multiples of it. Writes to one block may replace it: goroutines that
// write one bitmap at once must keep to different blocks.
const BlockPfns = blockBits

const (
	blockWords = 512             // 4 KiB
	blockBits  = blockWords * 64 // pfns per block
)

type block [blockWords]uint64

// full is every block whose pfns are all set (never the last block when it
// reaches past Len: bits past Len stay clear). Shared: never written.
var full = func() *block {
	var b block
	for i := range b {
		b[i] = ^uint64(0)
	}
	return &b
}()

// Bitmap is a fixed-size set of pfns in [0, Len()).
type Bitmap struct {
	blocks []*block // nil: no pfn set; full: every pfn set; else its own words
	n      uint64
	win    *window // nil: every pfn held at once
}

// A Filler makes the bits of the pfns [lo, hi) of m, which holds none of
// them when it is called; it must set or clear no pfn outside them, and
// read none (every read of m outside [lo, hi) while it runs sees nothing
// set). It may run goroutines of its own that write different blocks.
type Filler func(m *Bitmap, lo, hi uint64) error

// window is a windowed bitmap's state: which pfns it holds now.
type window struct {
	size   uint64 // pfns per window, a multiple of 64
	fill   Filler
	lo, hi uint64 // the pfns held; lo == hi: none yet
	fills  int
	err    error
	// spare are the blocks of windows dropped, for the next ones: a
	// window allocates nothing once the first is made, so a cycle leaves
	// no garbage for the collector (whose heap would grow to twice the
	// window). Fillers' goroutines take them under mu.
	mu    sync.Mutex
	spare []*block
}

// NewWindowed returns a bitmap of n pfns that holds at most size of them
// (rounded up to a multiple of 64) at a time, in windows [k*size,
// (k+1)*size): a read of a pfn outside the window held drops it and has
// fill make the window of that pfn. So its memory is bounded by size
// whatever n, and a reader that goes through the pfns in order (a copy
// pass, writing the bitmap out, counting) makes each window once. It is
// what a cycle of makedumpfile's cyclic mode is: the 2nd bitmap made,
// consumed and dropped a window at a time. A fill that fails leaves its
// window empty and every later window too: the error is Err's, and a
// reader of such a bitmap must check Err when it is done.
func NewWindowed(n, size uint64, fill Filler) *Bitmap {
	size = max((size+63)/64*64, 64)
	m := New(n)
	m.win = &window{size: size, fill: fill}
	return m
}

// Err is the first error of a windowed bitmap's Filler.
func (m *Bitmap) Err() error {
	if m.win == nil {
		return nil
	}
	return m.win.err
}

// Fills is how many windows a windowed bitmap has made so far (0 for one
// that holds every pfn).
func (m *Bitmap) Fills() int {
	if m.win == nil {
		return 0
	}
	return m.win.fills
}

// hold makes the window of pfn (< Len) the one held and returns the end
// of the pfns held from pfn on: Len for a bitmap without windows.
func (m *Bitmap) hold(pfn uint64) uint64 {
	w := m.win
	if w == nil {
		return m.n
	}
	if pfn >= w.lo && pfn < w.hi {
		return w.hi
	}
	if w.lo < w.hi {
		m.drop(w.lo, w.hi)
	}
	w.lo = pfn / w.size * w.size
	w.hi = min(w.lo+w.size, m.n)
	if w.err == nil {
		w.fills++
		if w.err = w.fill(m, w.lo, w.hi); w.err != nil {
			m.drop(w.lo, w.hi)
		}
	}
	return w.hi
}

// drop empties the blocks of the pfns [lo, hi), keeping their memory for
// the next window.
func (m *Bitmap) drop(lo, hi uint64) {
	for i := lo / blockBits; i <= (hi-1)/blockBits; i++ {
		if b := m.blocks[i]; b != nil && b != full {
			m.win.spare = append(m.win.spare, b)
		}
		m.blocks[i] = nil
	}
}

// newBlock is a block of zeros: a spare one of a windowed bitmap, else new.
func (m *Bitmap) newBlock() *block {
	if w := m.win; w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := len(w.spare); n > 0 {
			b := w.spare[n-1]
			w.spare = w.spare[:n-1]
			*b = block{}
			return b
		}
	}
	return new(block)
}

// CopyRange copies the pfns [lo, hi) of src (of the same length) into m,
// whose pfns there must be clear; lo and hi are multiples of 64 or Len.
// Whole blocks are shared when they are empty or full, copied otherwise.
func (m *Bitmap) CopyRange(src *Bitmap, lo, hi uint64) {
	hi = min(hi, m.n)
	for lo < hi {
		i := lo / blockBits
		start := i * blockBits
		end := min(start+blockBits, hi)
		switch b := src.blocks[i]; {
		case b == nil:
		case lo == start && end == start+blockBits && b == full:
			m.blocks[i] = full
		default:
			dst := m.writable(i)
			for w := (lo - start) / 64; w < (end-start+63)/64; w++ {
				dst[w] |= b[w]
			}
		}
		lo = end
	}
}

// New returns an empty bitmap for pfns [0, n). It allocates a pointer per
// 32768 pfns; blocks are allocated as bits are set.
func New(n uint64) *Bitmap {
	return &Bitmap{blocks: make([]*block, (n+blockBits-1)/blockBits), n: n}
}

// FromBytes decodes an on-disk bitmap of n bits. Missing trailing bytes read
// as zero; bits past n are ignored.
func FromBytes(b []byte, n uint64) *Bitmap {
	m := New(n)
	for i := range m.blocks {
		blk := new(block)
		zero, ones := true, true
		for w := range blk {
			var word [8]byte
			if off := (i*blockWords + w) * 8; off < len(b) {
				copy(word[:], b[off:])
			}
			blk[w] = binary.LittleEndian.Uint64(word[:])
			zero, ones = zero && blk[w] == 0, ones && blk[w] == ^uint64(0)
		}
		m.blocks[i] = blk
		m.clearPast(uint64(i), n)
		switch {
		case zero:
			m.blocks[i] = nil
		case ones && m.whole(uint64(i)):
			m.blocks[i] = full
		}
	}
	return m
}

// Len is the number of pfns the bitmap covers.
func (m *Bitmap) Len() uint64 { return m.n }

// Test reports whether pfn is set. Pfns outside the bitmap are not set.
func (m *Bitmap) Test(pfn uint64) bool {
	return pfn < m.n && m.word(pfn/64)&(1<<(pfn%64)) != 0
}

// Set sets pfn.
func (m *Bitmap) Set(pfn uint64) {
	if i := pfn / blockBits; m.blocks[i] != full {
		m.writable(i)[pfn%blockBits/64] |= 1 << (pfn % 64)
	}
}

// Clear clears pfn.
func (m *Bitmap) Clear(pfn uint64) {
	if i := pfn / blockBits; m.blocks[i] != nil {
		m.writable(i)[pfn%blockBits/64] &^= 1 << (pfn % 64)
	}
}

// SetRange sets [lo, hi), clipped to the bitmap.
func (m *Bitmap) SetRange(lo, hi uint64) { m.apply(lo, hi, true) }

// ClearRange clears [lo, hi), clipped to the bitmap.
func (m *Bitmap) ClearRange(lo, hi uint64) { m.apply(lo, hi, false) }

func (m *Bitmap) apply(lo, hi uint64, set bool) {
	hi = min(hi, m.n)
	for lo < hi {
		i := lo / blockBits
		start := i * blockBits
		end := min(start+blockBits, hi)
		switch b := m.blocks[i]; {
		case lo == start && end == start+blockBits: // the whole block
			m.blocks[i] = nil
			if set {
				m.blocks[i] = full
			}
		case set && b != full, !set && b != nil:
			applyWords(m.writable(i)[:], lo-start, end-start, set)
		}
		lo = end
	}
}

// applyWords sets or clears bits [lo, hi) of words.
func applyWords(words []uint64, lo, hi uint64, set bool) {
	for lo < hi {
		w, b := lo/64, lo%64
		span := min(64-b, hi-lo)
		mask := ^uint64(0) >> (64 - span) << b
		if set {
			words[w] |= mask
		} else {
			words[w] &^= mask
		}
		lo += span
	}
}

// Count returns the number of set pfns in [lo, hi).
func (m *Bitmap) Count(lo, hi uint64) uint64 {
	hi = min(hi, m.n)
	var c uint64
	for lo < hi {
		held := min(m.hold(lo), hi)
		c += m.count(lo, held)
		lo = held
	}
	return c
}

// count is Count within the pfns held.
func (m *Bitmap) count(lo, hi uint64) uint64 {
	var c uint64
	for lo < hi {
		i := lo / blockBits
		start := i * blockBits
		end := min(start+blockBits, hi)
		switch b := m.blocks[i]; b {
		case nil:
		case full:
			c += end - lo
		default:
			for l, h := lo-start, end-start; l < h; {
				w, bit := l/64, l%64
				span := min(64-bit, h-l)
				mask := ^uint64(0) >> (64 - span) << bit
				c += uint64(bits.OnesCount64(b[w] & mask))
				l += span
			}
		}
		lo = end
	}
	return c
}

// NextSet returns the first set pfn >= pfn, or Len() if there is none.
func (m *Bitmap) NextSet(pfn uint64) uint64 {
	for pfn < m.n {
		held := m.hold(pfn)
		if p := m.nextSet(pfn, held); p < held {
			return p
		}
		pfn = held
	}
	return m.n
}

// nextSet is NextSet within the pfns held, [pfn, held): held if none is set.
func (m *Bitmap) nextSet(pfn, held uint64) uint64 {
	for pfn < held {
		i := pfn / blockBits
		start := i * blockBits
		switch b := m.blocks[i]; b {
		case nil:
		case full:
			return pfn
		default:
			w := (pfn - start) / 64
			cur := b[w] >> (pfn % 64) << (pfn % 64)
			for {
				if cur != 0 {
					return min(start+w*64+uint64(bits.TrailingZeros64(cur)), held)
				}
				if w++; w == blockWords {
					break
				}
				cur = b[w]
			}
		}
		pfn = start + blockBits
	}
	return held
}

// Ones yields the set pfns in order: what a copy pass walks.
func (m *Bitmap) Ones() iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for pfn := m.NextSet(0); pfn < m.n; pfn = m.NextSet(pfn + 1) {
			if !yield(pfn) {
				return
			}
		}
	}
}

// Cursor walks the set pfns in order, a word at a time: what a copy pass
// cuts into chunks (pipeline.Pfns). Not safe for concurrent use.
type Cursor struct {
	m   *Bitmap
	pfn uint64 // the next pfn to look at
}

// Cursor returns a cursor at the first pfn.
func (m *Bitmap) Cursor() *Cursor { return &Cursor{m: m} }

// Next appends the next set pfns to dst, as many as its capacity takes,
// and returns it; none appended: no set pfn is left. A word of 64 pfns
// costs one load and a trailing-zero count per set pfn; a block with no
// pfn set, one test.
func (c *Cursor) Next(dst []uint64) []uint64 {
	m := c.m
	for len(dst) < cap(dst) && c.pfn < m.n {
		i := c.pfn / blockBits
		start := i * blockBits
		end := min(start+blockBits, m.hold(c.pfn))
		switch b := m.blocks[i]; b {
		case nil:
			c.pfn = end
		case full:
			for ; c.pfn < end && len(dst) < cap(dst); c.pfn++ {
				dst = append(dst, c.pfn)
			}
		default:
			// Bits past Len, and past the window held, are clear, so
			// every set bit is a pfn below end.
			for w := (c.pfn - start) / 64; w < (end-start+63)/64; w++ {
				base := start + w*64
				cur := b[w] >> (c.pfn - base) << (c.pfn - base)
				for cur != 0 {
					if len(dst) == cap(dst) {
						c.pfn = base + uint64(bits.TrailingZeros64(cur))
						return dst
					}
					dst = append(dst, base+uint64(bits.TrailingZeros64(cur)))
					cur &= cur - 1
				}
				c.pfn = base + 64
			}
			c.pfn = min(c.pfn, end)
		}
	}
	return dst
}

// Clone returns an independent copy.
func (m *Bitmap) Clone() *Bitmap { return m.Cut(m.n) }

// Cut returns a copy holding only the pfns below n (n may exceed Len: the
// copy is then longer, with nothing set past Len).
func (m *Bitmap) Cut(n uint64) *Bitmap {
	c := New(n)
	if m.win != nil {
		// Every window in turn: the copy holds all of them.
		for lo := uint64(0); lo < min(n, m.n); lo += m.win.size {
			m.hold(lo)
			c.CopyRange(m, lo, min(lo+m.win.size, n, m.n))
		}
		if last := len(c.blocks) - 1; last >= 0 && c.blocks[last] != nil && c.blocks[last] != full {
			c.clearPast(uint64(last), n)
		}
		return c
	}
	for i := range c.blocks {
		if i >= len(m.blocks) || m.blocks[i] == nil {
			continue
		}
		if b := m.blocks[i]; b == full && c.whole(uint64(i)) {
			c.blocks[i] = full
		} else {
			cp := *b
			c.blocks[i] = &cp
			c.clearPast(uint64(i), n)
		}
	}
	return c
}

// Equal reports whether both bitmaps hold the same pfns over the same length.
func (m *Bitmap) Equal(o *Bitmap) bool {
	if m.n != o.n {
		return false
	}
	for w := range uint64(len(m.blocks)) * blockWords {
		if m.word(w) != o.word(w) {
			return false
		}
	}
	return true
}

// PutBytes writes the on-disk form of the bits [8*off, 8*(off+len(dst)))
// into dst; bytes past the end of the bitmap are zero. off is a byte offset.
func (m *Bitmap) PutBytes(dst []byte, off uint64) {
	words := uint64(len(m.blocks)) * blockWords
	i := 0
	for ; off%8 == 0 && i+8 <= len(dst) && off/8 < words; i, off = i+8, off+8 {
		binary.LittleEndian.PutUint64(dst[i:], m.word(off/8))
	}
	dst = dst[i:]
	for i := range dst {
		bo := off + uint64(i)
		if w := bo / 8; w < words {
			dst[i] = byte(m.word(w) >> (8 * (bo % 8)))
		} else {
			dst[i] = 0
		}
	}
}

// WriteOut writes m's on-disk form, padded with zeros to size bytes, by
// write(piece, at) in pieces of at most len(buf) bytes (at counts from the
// form's start), and then reports m.Err: a windowed bitmap says there
// whether a window could not be made. The kdump writer and --reassemble
// write their bitmaps through it.
func (m *Bitmap) WriteOut(buf []byte, size uint64, write func(piece []byte, at uint64) error) error {
	for done := uint64(0); done < size; {
		n := min(uint64(len(buf)), size-done)
		m.PutBytes(buf[:n], done)
		if err := write(buf[:n], done); err != nil {
			return fmt.Errorf("bitmap: %w", err)
		}
		done += n
	}
	return m.Err()
}

// allocated is how many 4 KiB blocks of words the bitmap holds in memory.
func (m *Bitmap) allocated() int {
	n := 0
	for _, b := range m.blocks {
		if b != nil && b != full {
			n++
		}
	}
	return n
}

// Word returns word w: pfns 64w to 64w+63, pfn 64w in bit 0; 0 past the
// last block. (makedumpfile's -e looks at the bitmaps a word at a time.)
func (m *Bitmap) Word(w uint64) uint64 {
	if w/blockWords >= uint64(len(m.blocks)) {
		return 0
	}
	return m.word(w)
}

// word returns word w: pfns 64w to 64w+63.
func (m *Bitmap) word(w uint64) uint64 {
	if m.win != nil && w*64 < m.n {
		m.hold(w * 64)
	}
	if b := m.blocks[w/blockWords]; b != nil {
		return b[w%blockWords]
	}
	return 0
}

// writable returns block i for writing: allocated when no pfn was set,
// copied when it was the shared full block.
func (m *Bitmap) writable(i uint64) *block {
	switch b := m.blocks[i]; b {
	case nil:
		m.blocks[i] = m.newBlock()
	case full:
		nb := m.newBlock()
		*nb = *full
		m.blocks[i] = nb
	}
	return m.blocks[i]
}

// whole reports whether block i lies wholly below Len.
func (m *Bitmap) whole(i uint64) bool { return (i+1)*blockBits <= m.n }

// clearPast clears the bits of block i (which must be its own words) at and
// past pfn n.
func (m *Bitmap) clearPast(i, n uint64) {
	if start := i * blockBits; n < start+blockBits {
		applyWords(m.blocks[i][:], max(n, start)-start, blockBits, false)
	}
}
