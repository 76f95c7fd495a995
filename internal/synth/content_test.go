package synth

import (
	"bytes"
	"compress/zlib"
	"math"
	"testing"
)

func zlibRatio(t *testing.T, k Kind, pages int) float64 {
	t.Helper()
	b := make([]byte, PageSize)
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	in, out := 0, 0
	for pfn := uint64(0); pfn < uint64(pages); pfn++ {
		fill(b, k, 42, pfn)
		z.Reset()
		w.Reset(&z) // one stream per page, as the kdump format compresses
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		in += PageSize
		out += z.Len()
	}
	return float64(in) / float64(out)
}

func TestCompressibility(t *testing.T) {
	cases := []struct {
		k      Kind
		lo, hi float64
	}{
		{Text, 2.5, 3.6},
		{Repetitive, 20, math.Inf(1)},
		{Random, 0, 1.0},
	}
	for _, c := range cases {
		r := zlibRatio(t, c.k, 300)
		t.Logf("%v: zlib ratio %.2f", c.k, r)
		if r < c.lo || r > c.hi {
			t.Errorf("%v: zlib ratio %.2f outside [%v, %v]", c.k, r, c.lo, c.hi)
		}
	}
}

func TestPageProperties(t *testing.T) {
	b := make([]byte, PageSize)
	for pfn := uint64(0); pfn < 2000; pfn++ {
		for _, k := range []Kind{Text, Repetitive, Random} {
			fill(b, k, 7, pfn)
			if b[0] == 0 || b[PageSize-1] == 0 {
				t.Fatalf("%v page %d: zero first or last byte", k, pfn)
			}
			if k == Text {
				for i, c := range b {
					if (c < ' ' || c > '~') && c != '\n' {
						t.Fatalf("text page %d: byte %#x at %d", pfn, c, i)
					}
				}
			}
		}
	}
}

func TestMixFractions(t *testing.T) {
	s := Spec{Segments: []Segment{{Paddr: 0, FileSize: 1 << 30, MemSize: 1 << 30}}, Seed: 3, Mix: DefaultMix}
	const n = 200000
	var counts [4]int
	runs, prev := 0, Kind(255)
	for pfn := uint64(0); pfn < n; pfn++ {
		k := KindOf(s, pfn)
		counts[k]++
		if k != prev {
			runs++
			prev = k
		}
	}
	want := []float64{DefaultMix.Zero, DefaultMix.Text, DefaultMix.Repetitive, DefaultMix.Random}
	for k, c := range counts {
		f := float64(c) / n
		if math.Abs(f-want[k]) > 0.02 {
			t.Errorf("%v: fraction %.3f, want %.2f", Kind(k), f, want[k])
		}
	}
	t.Logf("counts %v, mean run %.1f pages", counts, float64(n)/float64(runs))

	// The rest of an incomplete mix is text; Mix{} is all text.
	s.Mix = Mix{Zero: 0.5}
	for pfn := uint64(0); pfn < 1000; pfn++ {
		if k := KindOf(s, pfn); k != Zero && k != Text {
			t.Fatalf("Mix{Zero: .5} gave %v", k)
		}
	}
}

// A page clipped to a sliver in its middle (two tiny segments) still
// agrees between Page and KindOf.
func TestSliverPages(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		s := Spec{Seed: seed, Mix: Mix{Repetitive: 0.5, Random: 0.5}, Segments: []Segment{
			{Paddr: 0x1100, FileSize: 3, MemSize: 3},
			{Paddr: 0x1102, FileSize: 5, MemSize: 5}, // overlaps the first
			{Paddr: 0x1800, FileSize: 1, MemSize: 1},
		}}
		b := make([]byte, PageSize)
		Page(s, 1, b)
		if allZero(b) != (KindOf(s, 1) == Zero) {
			t.Fatalf("seed %d: Page/KindOf disagree", seed)
		}
		for i, c := range b {
			in := (i >= 0x100 && i < 0x107) || i == 0x800
			if !in && c != 0 {
				t.Fatalf("seed %d: byte %#x outside the segments is %#x", seed, i, c)
			}
		}
	}
}
