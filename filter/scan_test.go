package filter_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/filter"
	"pagepipe/internal/synth"
	"pagepipe/kernel"
	"pagepipe/source"
)

// machine writes a generated kernel machine and opens it as pagepipe does.
func machine(t testing.TB, dir, profile string, sizeMiB int) (synth.Spec, *source.Vmcore, *filter.Kernel) {
	t.Helper()
	s := synth.KernelMachine(profile, sizeMiB)
	path := filepath.Join(dir, "vmcore-"+profile)
	if err := synth.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	v, err := source.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
	if err != nil {
		t.Fatal(err)
	}
	k, err := filter.OpenKernel(vi, v, v.MaxMapnr)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, k
}

var testLevels = []filter.Level{0, 1, 2, 4, 8, 16, 31, 6, 24, 30}

// On every kernel era's generated machine, the page scan leaves out exactly
// the pages the generator's truth says the level excludes, with the same
// counts per class, on one worker and on several, with the 2nd bitmap
// whole and made in cycles whose ends cut free blocks and compound pages
// (4160 and 40000 pfns are no multiples of 1024).
func TestScanMatchesTruth(t *testing.T) {
	dir := t.TempDir()
	for _, profile := range synth.Profiles() {
		t.Run(profile, func(t *testing.T) {
			s, v, k := machine(t, dir, profile, 192)
			for _, level := range testLevels {
				wantBits, want, err := synth.ExpectedFilter(s, int(level))
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct {
					workers int
					window  uint64
				}{{1, 0}, {3, 0}, {3, 4160}, {2, 40000}} {
					plan, err := filter.NewPlan(context.Background(), v, level, k, c.workers, source.PartialPages{}, c.window)
					if err != nil {
						t.Fatal(err)
					}
					wantMap := bitmap.FromBytes(wantBits, plan.MaxMapnr)
					if !plan.Dumpable.Equal(wantMap) {
						t.Fatalf("-d %d, %+v: dumped pfns differ from the truth: %s", level, c, firstDifference(plan.Dumpable, wantMap))
					}
					if n := wantMap.Count(0, wantMap.Len()); plan.NumDumpable != n {
						t.Fatalf("-d %d, %+v: %d dumpable, want %d", level, c, plan.NumDumpable, n)
					}
					got := plan.Excluded
					if got.Cache != want.Cache || got.CachePrivate != want.CachePrivate || got.User != want.User ||
						got.Free != want.Free || got.Hwpoison != want.Hwpoison || got.Offline != want.Offline {
						t.Fatalf("-d %d, %+v: counts %+v, want %+v", level, c, got, want)
					}
				}
			}
		})
	}
}

func firstDifference(a, b *bitmap.Bitmap) string {
	if a.Len() != b.Len() {
		return fmt.Sprintf("max_mapnr %d vs %d", a.Len(), b.Len())
	}
	n := 0
	first := uint64(0)
	for pfn := uint64(0); pfn < a.Len(); pfn++ {
		if a.Test(pfn) != b.Test(pfn) {
			if n == 0 {
				first = pfn
			}
			n++
		}
	}
	return fmt.Sprintf("%d pfns, first %#x (got %v)", n, first, a.Test(first))
}

// leanMachine writes a Lean machine (internal/synth: what makes machines
// of several TiB cheap) of 1 GiB and opens it as pagepipe does.
func leanMachine(t *testing.T, dir string) (synth.Spec, *source.Vmcore, *filter.Kernel) {
	t.Helper()
	s := synth.NewKernelMachine(synth.KernelSpec{Profile: "6.1", KASLR: true, Lean: true}, 1024)
	path := filepath.Join(dir, "vmcore")
	if err := synth.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	v, err := source.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
	if err != nil {
		t.Fatal(err)
	}
	k, err := filter.OpenKernel(vi, v, v.MaxMapnr)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, k
}

// A Lean machine filters as its truth says, in cycles too: the zero
// struct pages of free blocks' tails change nothing (and makedumpfile
// filters it alike: TestLeanMachineMakedumpfile).
func TestLeanMachine(t *testing.T) {
	s, v, k := leanMachine(t, t.TempDir())
	for _, level := range []filter.Level{31, 8, 16} {
		wantBits, _, err := synth.ExpectedFilter(s, int(level))
		if err != nil {
			t.Fatal(err)
		}
		for _, window := range []uint64{0, 40000} {
			plan, err := filter.NewPlan(context.Background(), v, level, k, 2, source.PartialPages{}, window)
			if err != nil {
				t.Fatal(err)
			}
			if want := bitmap.FromBytes(wantBits, plan.MaxMapnr); !plan.Dumpable.Equal(want) {
				t.Fatalf("-d %d, window %d: %s", level, window, firstDifference(plan.Dumpable, want))
			}
		}
	}
}

// Through mmap windows (what /proc/vmcore gets: the struct pages with
// Kernel.MapSize, the page-table walks with MapReads) the scan leaves out
// the same pfns as through pread, in one cycle and in several, and its
// struct pages came from windows.
func TestScanThroughWindows(t *testing.T) {
	dir := t.TempDir()
	s, v, k := machine(t, dir, "6.1", 192)
	v.MapReads(source.MetadataMapSize, source.MetadataWindows)
	for _, mapSize := range []int{64 << 10, source.DefaultMapSize} {
		k.MapSize = mapSize
		for _, level := range []filter.Level{31, 1} {
			wantBits, _, err := synth.ExpectedFilter(s, int(level))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				workers int
				window  uint64
			}{{1, 0}, {3, 4160}} {
				before := v.MapStats().Windows.Load()
				plan, err := filter.NewPlan(context.Background(), v, level, k, c.workers, source.PartialPages{}, c.window)
				if err != nil {
					t.Fatal(err)
				}
				want := bitmap.FromBytes(wantBits, plan.MaxMapnr)
				if !plan.Dumpable.Equal(want) {
					t.Fatalf("map size %d, -d %d, %+v: dumped pfns differ from the truth: %s", mapSize, level, c, firstDifference(plan.Dumpable, want))
				}
				// 192 MiB of memory, 3 MiB of struct pages: read through
				// windows of mapSize (or of a 512 KiB piece, when larger),
				// at least half as many as they fill (the page-table walks'
				// windows are MapReads', mapped before and kept).
				structBytes := plan.MaxMapnr * uint64(k.Layout.Size)
				if n := v.MapStats().Windows.Load() - before; level == 31 && n < max(1, structBytes/uint64(max(mapSize, 512<<10))/2) {
					t.Errorf("map size %d, -d %d, %+v: %d windows mapped for %d bytes of struct pages", mapSize, level, c, n, structBytes)
				}
			}
		}
	}
	if v.MapStats().Failed.Load() != 0 {
		t.Errorf("%d maps failed: %v", v.MapStats().Failed.Load(), v.MapStats().FirstError())
	}
}
