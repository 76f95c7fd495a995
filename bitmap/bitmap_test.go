package bitmap

import (
	"math/rand/v2"
	"testing"
)

// model is the obvious implementation the bitmap is checked against.
type model map[uint64]bool

func TestBitmapAgainstModel(t *testing.T) {
	for _, n := range []uint64{1, 63, 64, 65, 1000, 4097} {
		r := rand.New(rand.NewPCG(n, 1))
		m, want := New(n), model{}
		for range 200 {
			lo := r.Uint64N(n)
			hi := lo + r.Uint64N(n-lo+1)
			switch r.IntN(4) {
			case 0:
				m.SetRange(lo, hi)
				for p := lo; p < hi; p++ {
					want[p] = true
				}
			case 1:
				m.ClearRange(lo, hi)
				for p := lo; p < hi; p++ {
					delete(want, p)
				}
			case 2:
				m.Set(lo)
				want[lo] = true
			case 3:
				m.Clear(lo)
				delete(want, lo)
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

func BenchmarkCount(b *testing.B) {
	m := New(1 << 24)
	m.SetRange(1000, 1<<23)
	b.SetBytes(1 << 21)
	for b.Loop() {
		m.Count(0, m.Len())
	}
}
