package reorder

import (
	"math/rand/v2"
	"testing"
)

// Items put in any order come back in order, each once, whether the ring
// was sized for them or had to grow.
func TestInOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, 4, 64} {
		var b *Buffer[int]
		if size == 0 {
			b = &Buffer[int]{}
		} else {
			b = New[int](size)
		}
		const n = 1000
		window := max(size, 16) // how far ahead an item may come
		var got []int
		perm := r.Perm(n)
		// Shuffle only within windows, as a pool of chunks in flight does.
		for lo := 0; lo < n; lo += window {
			hi := min(lo+window, n)
			seqs := perm[:0:0]
			for s := lo; s < hi; s++ {
				seqs = append(seqs, s)
			}
			r.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
			for _, s := range seqs {
				b.Put(uint64(s), s*10)
				for v, ok := b.Next(); ok; v, ok = b.Next() {
					got = append(got, v)
				}
			}
		}
		if len(got) != n {
			t.Fatalf("ring %d: %d items back of %d", size, len(got), n)
		}
		for i, v := range got {
			if v != i*10 {
				t.Fatalf("ring %d: item %d is %d, want %d", size, i, v, i*10)
			}
		}
	}
}

// An item further ahead than the ring reaches makes it grow; the items
// held keep their place.
func TestGrowKeepsItems(t *testing.T) {
	b := New[string](2)
	b.Put(1, "one")
	b.Put(9, "nine")
	if _, ok := b.Next(); ok {
		t.Fatal("item 0 handed back before it came")
	}
	b.Put(0, "zero")
	for i, want := range []string{"zero", "one"} {
		if v, ok := b.Next(); !ok || v != want {
			t.Fatalf("item %d: %q %v, want %q", i, v, ok, want)
		}
	}
	if _, ok := b.Next(); ok {
		t.Fatal("item 2 handed back before it came")
	}
}

// A ring sized for what is in flight does not allocate.
func TestNoAllocsInSteadyState(t *testing.T) {
	b := New[int](8)
	seq := uint64(0)
	allocs := testing.AllocsPerRun(100, func() {
		for _, d := range []uint64{3, 1, 0, 2} {
			b.Put(seq+d, 1)
		}
		for _, ok := b.Next(); ok; _, ok = b.Next() {
		}
		seq += 4
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run", allocs)
	}
}
