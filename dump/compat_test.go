package dump

import (
	"path/filepath"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/internal/synth"
	"pagepipe/source"
)

// Past the end of mem_map the ELF walk takes the bits of the same places
// in the 32768-pfn bitmap block of the last pfn below it that it visited,
// as makedumpfile's stale bitmap buffer gives them.
func TestMarkPastMemMap(t *testing.T) {
	const bp = synth.PageSize * 8 // pfns per bitmap block (a page of bits)

	bios := synth.Segment{Paddr: 0xfffc0000, FileSize: 0x40000, MemSize: 0x40000} // pfns 0xfffc0-0xfffff
	ram := synth.Segment{Paddr: 0, FileSize: 2 * bp * synth.PageSize, MemSize: 2 * bp * synth.PageSize}
	low := synth.Segment{Paddr: 0x100 * synth.PageSize, FileSize: 0x100 * synth.PageSize, MemSize: 0x100 * synth.PageSize}
	open := func(segs ...synth.Segment) *source.Vmcore {
		s := synth.Spec{Segments: segs, CPUs: 1, Seed: 1, Mix: synth.Mix{Zero: 1}}
		path := filepath.Join(t.TempDir(), "v")
		if err := synth.WriteFile(path, s); err != nil {
			t.Fatal(err)
		}
		v, err := source.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return v
	}
	// pattern sets every third pfn below maxMapnr.
	pattern := func(n, maxMapnr uint64) *bitmap.Bitmap {
		m := bitmap.New(n)
		for p := uint64(0); p < maxMapnr; p += 3 {
			m.Set(p)
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		segs     []synth.Segment
		maxMapnr uint64
		want     func(p uint64, keep *bitmap.Bitmap) bool
	}{{
		name: "after the last block", segs: []synth.Segment{ram, bios}, maxMapnr: 2 * bp,
		want: func(p uint64, k *bitmap.Bitmap) bool { return k.Test(bp + p%bp) },
	}, {
		name: "after a segment in block 0", segs: []synth.Segment{ram, low, bios}, maxMapnr: 2 * bp,
		want: func(p uint64, k *bitmap.Bitmap) bool { return k.Test(p % bp) },
	}, {
		name: "first: the walk starts after a pass over all of mem_map", segs: []synth.Segment{bios, low}, maxMapnr: 2 * bp,
		want: func(p uint64, k *bitmap.Bitmap) bool { return k.Test(bp + p%bp) },
	}, {
		name: "a short last block", segs: []synth.Segment{ram, bios}, maxMapnr: 2*bp - 0x3d,
		want: func(p uint64, k *bitmap.Bitmap) bool {
			q := bp + p%bp
			switch {
			case q < 2*bp-0x3d:
				return k.Test(q)
			case q < 2*bp-0x38:
				return false
			}
			return k.Test(q - bp)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			v := open(tc.segs...)
			keep := pattern(v.Pfns(), tc.maxMapnr)
			before := keep.Clone()
			markPastMemMap(keep, v, tc.maxMapnr)
			if keep.Count(0, tc.maxMapnr) != before.Count(0, tc.maxMapnr) {
				t.Fatal("bits below maxMapnr changed")
			}
			n := 0
			for p := tc.maxMapnr; p < v.Pfns(); p++ {
				inFile := p < 2*bp || p >= 0xfffc0 // in the RAM or BIOS segment
				want := inFile && tc.want(p, before)
				if keep.Test(p) != want {
					if n++; n < 5 {
						t.Errorf("pfn %#x: %v, want %v", p, keep.Test(p), want)
					}
				}
			}
		})
	}
}

// In cycles the ELF walk keeps every pfn past mem_map that a PT_LOAD has
// data for, and nothing below it changes.
func TestKeepPastMemMap(t *testing.T) {
	const bp = synth.PageSize * 8 // pfns per bitmap block (a page of bits)

	bios := synth.Segment{Paddr: 0xfffc0000, FileSize: 0x3f000, MemSize: 0x40000} // data for pfns 0xfffc0-0xffffe
	ram := synth.Segment{Paddr: 0, FileSize: 2 * bp * synth.PageSize, MemSize: 2 * bp * synth.PageSize}
	s := synth.Spec{Segments: []synth.Segment{ram, bios}, CPUs: 1, Seed: 1, Mix: synth.Mix{Zero: 1}}
	path := filepath.Join(t.TempDir(), "v")
	if err := synth.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	v, err := source.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	for _, tc := range []struct {
		name     string
		maxMapnr uint64
		kept     bool
	}{
		{"mem_map ends with RAM", 2 * bp, true},
		{"mem_map ends mid-RAM", bp + 5, true},
		{"mem_map covers everything", v.Pfns(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep := bitmap.New(v.Pfns())
			for p := uint64(0); p < tc.maxMapnr; p += 3 {
				keep.Set(p)
			}
			before := keep.Clone()
			if got := keepPastMemMap(keep, v, tc.maxMapnr, source.PartialPages{}); got != tc.kept {
				t.Fatalf("kept %v, want %v", got, tc.kept)
			}
			for p := uint64(0); p < v.Pfns(); p++ {
				want := before.Test(p)
				if p >= tc.maxMapnr {
					want = p < 2*bp || p >= 0xfffc0 && p < 0xfffff
				}
				if keep.Test(p) != want {
					t.Fatalf("pfn %#x: kept %v, want %v", p, keep.Test(p), want)
				}
			}
		})
	}
}
