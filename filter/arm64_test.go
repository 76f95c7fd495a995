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

// ARM64Geometries are the arm64 kernel machines the tests dump: every VA
// size arm64 Linux has with 4 KiB pages, a 52-bit kernel on 48-bit
// hardware, 52-bit physical addresses (LPA2), and one without KASLR and
// 1 GiB blocks.
var arm64Geometries = []struct {
	name string
	ks   synth.KernelSpec
	mib  int
}{
	{"va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 160},
	{"va39", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 39}, 96},
	{"va52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52}, 96},
	{"va52-on-48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, VABitsActual: 48}, 96},
	{"va52-pa52", synth.KernelSpec{Profile: "6.12", KASLR: true, VABits: 52, PA52: true}, 96},
	{"va48-nokaslr-1g", synth.KernelSpec{Profile: "6.6", VABits: 48}, 2100},
}

// On every arm64 geometry the page scan, through the arm64 walk, leaves
// out exactly the pages the generator's truth says, with its counts.
func TestScanARM64MatchesTruth(t *testing.T) {
	dir := t.TempDir()
	for _, g := range arm64Geometries {
		t.Run(g.name, func(t *testing.T) {
			s := synth.NewARM64Machine(g.ks, g.mib)
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
					t.Fatal(fmt.Sprint("-d 31 excluded nothing"))
				}
			}
		})
	}
}
