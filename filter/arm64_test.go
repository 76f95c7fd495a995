package filter_test

import (
	"context"
	"path/filepath"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/filter"
	"pagepipe/internal/synth"
	"pagepipe/kernel"
	"pagepipe/source"
)

// ARM64Geometries are the arm64 kernel machines the tests dump: every VA
// size arm64 Linux has with 4 KiB pages, a 52-bit kernel on 48-bit
// hardware, 52-bit physical addresses (LPA2), and one without KASLR and
// 1 GiB blocks; then 16 KiB pages (47- and 48-bit VAs) and 64 KiB pages
// (42, 48 over several 512 MiB sections and blocks, 52 on 48-bit
// hardware, 52-bit PAs).
var arm64Geometries = []struct {
	name string
	ks   synth.KernelSpec
	mib  int
	page uint64 // 0: 4 KiB
}{
	{"va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 160, 0},
	{"va39", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 39}, 96, 0},
	{"va52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52}, 96, 0},
	{"va52-on-48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, VABitsActual: 48}, 96, 0},
	{"va52-pa52", synth.KernelSpec{Profile: "6.12", KASLR: true, VABits: 52, PA52: true}, 96, 0},
	{"va48-nokaslr-1g", synth.KernelSpec{Profile: "6.6", VABits: 48}, 2100, 0},
	{"16k-va47", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 47}, 96, 16 << 10},
	{"16k-va48", synth.KernelSpec{Profile: "6.6", KASLR: true, VABits: 48}, 160, 16 << 10},
	{"64k-va42", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 42}, 96, 64 << 10},
	{"64k-va48-nokaslr", synth.KernelSpec{Profile: "6.6", VABits: 48}, 1100, 64 << 10},
	{"64k-va52-on-48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, VABitsActual: 48}, 96, 64 << 10},
	{"64k-va52-pa52", synth.KernelSpec{Profile: "6.12", KASLR: true, VABits: 52, PA52: true}, 96, 64 << 10},
}

// On every arm64 geometry the page scan, through the arm64 walk, leaves
// out exactly the pages the generator's truth says, with its counts.
func TestScanARM64MatchesTruth(t *testing.T) {
	dir := t.TempDir()
	for _, g := range arm64Geometries {
		t.Run(g.name, func(t *testing.T) {
			s := synth.NewARM64Machine(g.ks, g.mib)
			s.PageSize = g.page
			path := filepath.Join(dir, g.name)
			if err := synth.WriteFile(path, s); err != nil {
				t.Fatal(err)
			}
			v, err := source.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if v.Arch() != kernel.ARM64 {
				t.Fatalf("arch %s", v.Arch().Name())
			}
			vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
			if err != nil {
				t.Fatal(err)
			}
			k, err := filter.OpenKernel(vi, v, v.MaxMapnr)
			if err != nil {
				t.Fatal(err)
			}
			for _, level := range []filter.Level{1, 2, 4, 8, 16, 31, 11} {
				wantBits, want, err := synth.ExpectedFilter(s, int(level))
				if err != nil {
					t.Fatal(err)
				}
				plan, err := filter.NewPlan(context.Background(), v, level, k, 2, source.PartialPages{}, 0)
				if err != nil {
					t.Fatal(err)
				}
				if wantMap := bitmap.FromBytes(wantBits, plan.MaxMapnr); !plan.Dumpable.Equal(wantMap) {
					t.Fatalf("-d %d: dumped pfns differ from the truth: %s", level, firstDifference(plan.Dumpable, wantMap))
				}
				got := plan.Excluded
				if got.Cache != want.Cache || got.CachePrivate != want.CachePrivate || got.User != want.User ||
					got.Free != want.Free || got.Hwpoison != want.Hwpoison || got.Offline != want.Offline {
					t.Fatalf("-d %d: counts %+v, want %+v", level, got, want)
				}
				if level == 31 && got.Total() == 0 {
					t.Fatal("-d 31 excluded nothing")
				}
			}
		})
	}
}
