package bitmap

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBitmapAgainstModel(t *testing.T) {
	// Sizes around the 32768-pfn blocks too: whole-block ranges make the
	// shared full block or drop a block, and writes copy it back.
	for _, n := range []uint64{1, 63, 64, 65, 1000, 4097, blockBits, blockBits + 1, 3*blockBits - 5} {
		r := rand.New(rand.NewPCG(n, 1))
		m, want := New(n), make([]bool, n) // want: the obvious model
		for range 200 {
			lo := r.Uint64N(n)
			hi := lo + r.Uint64N(n-lo+1)
			if r.IntN(3) == 0 { // block aligned
				lo = lo / blockBits * blockBits
				hi = min((hi/blockBits+1)*blockBits, n)
			}
			switch r.IntN(4) {
			case 0:
				m.SetRange(lo, hi)
				for p := lo; p < hi; p++ {
					want[p] = true
				}
			case 1:
				m.ClearRange(lo, hi)
				for p := lo; p < hi; p++ {
					want[p] = false
				}
			case 2:
				m.Set(lo)
				want[lo] = true
			case 3:
				m.Clear(lo)
				want[lo] = false
			}
			lo, hi = r.Uint64N(n), r.Uint64N(n+1)
			var c uint64
			for p := lo; p < hi; p++ {
				if want[p] {
					c++
				}
			}
			if got := m.Count(lo, hi); got != c {
				t.Fatalf("n=%d Count(%d,%d) = %d, want %d", n, lo, hi, got, c)
			}
			next := n
			for p := lo; p < n; p++ {
				if want[p] {
					next = p
					break
				}
			}
			if got := m.NextSet(lo); got != next {
				t.Fatalf("n=%d NextSet(%d) = %d, want %d", n, lo, got, next)
			}
		}
		for p := range n {
			if m.Test(p) != want[p] {
				t.Fatalf("n=%d Test(%d) = %v", n, p, !want[p])
			}
		}
		// The cursor yields the set pfns in order whatever the chunk size,
		// a chunk stopping inside a word or a block.
		var ones []uint64
		for p := range n {
			if want[p] {
				ones = append(ones, p)
			}
		}
		for _, size := range []int{1, 3, 64, 256, 40000} {
			cur, got := m.Cursor(), []uint64{}
			for {
				chunk := cur.Next(make([]uint64, 0, size))
				if len(chunk) == 0 {
					break
				}
				got = append(got, chunk...)
			}
			if !slices.Equal(got, ones) {
				t.Fatalf("n=%d cursor in chunks of %d: %d pfns, want %d", n, size, len(got), len(ones))
			}
		}
		// Copies are independent, cut where asked, and And intersects.
		c := m.Clone()
		c.ClearRange(0, n)
		if !c.Equal(New(n)) || m.Count(0, n) != count(want) {
			t.Fatalf("n=%d clearing a clone changed the original or left bits", n)
		}
		cut := n / 3
		if got, w := m.Cut(cut).Count(0, n), count(want[:cut]); got != w {
			t.Fatalf("n=%d Cut(%d) holds %d pfns, want %d", n, cut, got, w)
		}
		if grown := m.Cut(n + blockBits); grown.Count(0, grown.Len()) != count(want) || grown.Test(n) {
			t.Fatalf("n=%d Cut past Len changed the pfns", n)
		}
		o := New(n)
		o.SetRange(n/4, n)
		o.ClearRange(n/2, n/2+blockBits/2)
		and := m.Clone()
		and.And(o)
		for p := range n {
			if and.Test(p) != (want[p] && o.Test(p)) {
				t.Fatalf("n=%d And wrong at pfn %d", n, p)
			}
		}
		// The on-disk form round-trips and is LSB-first.
		b := make([]byte, m.ByteLen())
		m.PutBytes(b, 0)
		for p := range n {
			if got := b[p/8]>>(p%8)&1 == 1; got != want[p] {
				t.Fatalf("n=%d byte form of pfn %d = %v", n, p, got)
			}
		}
		if !FromBytes(b, n).Equal(m) {
			t.Fatalf("n=%d FromBytes(PutBytes) differs", n)
		}
		// Unaligned pieces give the same bytes.
		for off := uint64(0); off < uint64(len(b)); off += 3 {
			piece := make([]byte, 5)
			m.PutBytes(piece, off)
			for i, c := range piece {
				var w byte
				if off+uint64(i) < uint64(len(b)) {
					w = b[off+uint64(i)]
				}
				if c != w {
					t.Fatalf("n=%d PutBytes at %d differs at %d", n, off, i)
				}
			}
		}
	}
}

func count(want []bool) uint64 {
	var c uint64
	for _, w := range want {
		if w {
			c++
		}
	}
	return c
}

// TestMemoryOnlyWhereBitsMix checks the point of the blocks: ranges cost no
// memory, a bitmap of 64 GiB of memory after filtering costs its mixed
// blocks only, and the on-disk form read back is as compact.
func TestMemoryOnlyWhereBitsMix(t *testing.T) {
	const n = 64 << 30 / 4096 // 64 GiB of 4 KiB pages
	present := New(n)
	present.SetRange(0, 640<<20/4096)           // below the PCI hole
	present.SetRange(4<<30/4096, n-blockBits/2) // the rest, ending mid-block
	if got := present.allocated(); got != 1 {
		t.Errorf("a bitmap of two ranges holds %d blocks, want 1 (the partial last one)", got)
	}
	dumpable := present.Clone()
	for pfn := uint64(0); pfn < n/2; pfn += 1000 {
		dumpable.Clear(pfn) // the lower half filtered
	}
	// The lower half's blocks less the hole's (nothing to clear there),
	// and the partial last block.
	hole := (4<<30 - 640<<20) / 4096 / blockBits
	if got, want := dumpable.allocated(), n/2/blockBits-hole+1; got != want {
		t.Errorf("half-filtered bitmap holds %d blocks, want %d", got, want)
	}
	b := make([]byte, present.ByteLen())
	present.PutBytes(b, 0)
	back := FromBytes(b, n)
	if !back.Equal(present) || back.allocated() != 1 {
		t.Errorf("read back: equal %v, %d blocks", back.Equal(present), back.allocated())
	}
}

func BenchmarkCount(b *testing.B) {
	m := New(1 << 24)
	m.SetRange(1000, 1<<23)
	b.SetBytes(1 << 21)
	for b.Loop() {
		m.Count(0, m.Len())
	}
}

// TestWindowed reads a bitmap made a window at a time through every
// reader and compares it with the same bitmap held whole: windows smaller
// than a block, a block, and ones that cut blocks, over full, empty and
// mixed blocks. A reader going through the pfns in order makes each
// window once; memory holds no block outside the window.
func TestWindowed(t *testing.T) {
	const n = 5*blockBits + 1000
	ref := New(n)
	ref.SetRange(blockBits, 3*blockBits) // two full blocks
	r := rand.New(rand.NewPCG(7, 7))
	for range 3000 { // mixed: the first, the fourth and the last
		for _, base := range []uint64{0, 3 * blockBits, 5 * blockBits} {
			ref.Set(base + r.Uint64N(min(blockBits, n-base)))
		}
	}
	ref.ClearRange(2*blockBits+100, 2*blockBits+200)
	for _, size := range []uint64{64, 1000, 8192, blockBits, blockBits + 640, 2*blockBits + 64, n} {
		windows := int((n + (size+63)/64*64 - 1) / ((size + 63) / 64 * 64))
		fill := func(m *Bitmap, lo, hi uint64) error {
			if lo%64 != 0 || hi > n || hi-lo > (size+63)/64*64 {
				t.Errorf("size %d: fill [%d, %d)", size, lo, hi)
			}
			m.CopyRange(ref, lo, hi)
			return nil
		}
		m := NewWindowed(n, size, fill)
		var got []uint64
		c := m.Cursor()
		for buf := make([]uint64, 0, 77); ; {
			buf = c.Next(buf[:0])
			if len(buf) == 0 {
				break
			}
			got = append(got, buf...)
		}
		if want := slices.Collect(ref.Ones()); !slices.Equal(got, want) {
			t.Fatalf("size %d: cursor gives %d pfns, want %d", size, len(got), len(want))
		}
		if m.Fills() != windows {
			t.Errorf("size %d: the cursor made %d windows, want %d", size, m.Fills(), windows)
		}
		if m.allocated() > int((size+63)/64*64/blockBits)+2 {
			t.Errorf("size %d: %d blocks held", size, m.allocated())
		}
		if got, want := slices.Collect(m.Ones()), slices.Collect(ref.Ones()); !slices.Equal(got, want) {
			t.Errorf("size %d: NextSet differs", size)
		}
		a, b := make([]byte, ref.ByteLen()), make([]byte, ref.ByteLen())
		m.PutBytes(a, 0)
		ref.PutBytes(b, 0)
		if !slices.Equal(a, b) || !m.Equal(ref) || !m.Cut(n).Equal(ref) || !ref.Equal(m.Clone()) {
			t.Errorf("size %d: PutBytes, Equal or Cut differ", size)
		}
		for range 300 {
			lo := r.Uint64N(n)
			hi := lo + r.Uint64N(n-lo+1)
			if m.Count(lo, hi) != ref.Count(lo, hi) || m.Test(lo) != ref.Test(lo) {
				t.Fatalf("size %d: Count [%d, %d) %d, want %d", size, lo, hi, m.Count(lo, hi), ref.Count(lo, hi))
			}
		}
		if m.Err() != nil {
			t.Errorf("size %d: %v", size, m.Err())
		}
	}
}

// TestWindowedError: a window that cannot be made reads empty, as every
// one after it, and Err says why.
func TestWindowedError(t *testing.T) {
	const n = 4 * blockBits
	m := NewWindowed(n, blockBits, func(m *Bitmap, lo, hi uint64) error {
		m.SetRange(lo, hi)
		if lo >= 2*blockBits {
			return errors.New("struct pages unreadable")
		}
		return nil
	})
	if got := m.Count(0, n); got != 2*blockBits || m.Err() == nil || m.Fills() != 3 {
		t.Fatalf("Count %d, Err %v, fills %d; want %d, an error, 3", got, m.Err(), m.Fills(), 2*blockBits)
	}
}
