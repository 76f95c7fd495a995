package filter

import (
	"slices"
	"testing"

	"pagepipe/kernel"
)

// TestWorkUnitsKeepBlocksApart: a write may replace a bitmap block, so
// sections smaller than a block (SECTION_SIZE_BITS comes from the vmcore)
// must reach the scan workers grouped by block, every pfn once.
func TestWorkUnitsKeepBlocksApart(t *testing.T) {
	for _, size := range []uint64{unitPages / 4, unitPages, 3 * unitPages} {
		var secs []kernel.Section
		for start := uint64(0); start < 8*unitPages; start += size {
			if start/size%5 != 3 { // a hole now and then
				secs = append(secs, kernel.Section{StartPFN: start, EndPFN: start + size})
			}
		}
		slices.Reverse(secs)
		var covered uint64
		seen := map[uint64]bool{}
		for _, g := range new(workUnits).cut(secs) {
			block := g[0].lo / unitPages
			if seen[block] {
				t.Fatalf("size %d: block %d in two groups", size, block)
			}
			seen[block] = true
			for _, u := range g {
				if u.lo/unitPages != block || (u.hi-1)/unitPages != block || u.lo < u.sec.StartPFN || u.hi > u.sec.EndPFN {
					t.Fatalf("size %d: unit [%d, %d) of section [%d, %d) strays from block %d", size, u.lo, u.hi, u.sec.StartPFN, u.sec.EndPFN, block)
				}
				covered += u.hi - u.lo
			}
		}
		var want uint64
		for _, s := range secs {
			want += s.EndPFN - s.StartPFN
		}
		if covered != want {
			t.Errorf("size %d: units cover %d pfns, sections %d", size, covered, want)
		}
	}
}

// TestWorkUnitsReused: cut again into the same workUnits, a cycle's
// units cost no allocation (they were the scan's garbage, a cycle's worth
// per cycle per pass) and come out the same.
func TestWorkUnitsReused(t *testing.T) {
	var secs []kernel.Section
	for start := uint64(0); start < 64*unitPages; start += unitPages / 2 {
		secs = append(secs, kernel.Section{StartPFN: start, EndPFN: start + unitPages/2})
	}
	var w workUnits
	first := slices.Clone(w.cut(secs))
	want := make([][]unit, len(first))
	for i, g := range first {
		want[i] = slices.Clone(g)
	}
	if len(want) != 64 {
		t.Fatalf("%d groups, want 64", len(want))
	}
	if n := testing.AllocsPerRun(10, func() { w.cut(secs) }); n != 0 {
		t.Errorf("cut into used workUnits: %v allocations, want 0", n)
	}
	got := w.cut(secs)
	if !slices.EqualFunc(got, want, func(a, b []unit) bool { return slices.Equal(a, b) }) {
		t.Errorf("cut again: groups differ from the first cut")
	}
}
