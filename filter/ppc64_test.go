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

// ppc64Machines are the generated ppc64le kernel machines (4 KiB pages,
// Debian 13's default flavour) the tests dump: radix, whose vmemmap the
// walk finds through the 64 KiB top table, with RAM that is not a whole
// GiB (2 MiB and page leaves) and with a 1 GiB leaf; hash, whose vmemmap
// is vmemmap_list's alone; a 6.6 era of each.
var ppc64Machines = []struct {
	name string
	ks   synth.KernelSpec
	mib  int
}{
	{"radix", synth.KernelSpec{Profile: "6.12"}, 161},
	{"radix-1g", synth.KernelSpec{Profile: "6.12"}, 1100},
	{"hash", synth.KernelSpec{Profile: "6.12", HashMMU: true}, 161},
	{"radix-6.6", synth.KernelSpec{Profile: "6.6"}, 96},
	{"hash-6.1", synth.KernelSpec{Profile: "6.1", HashMMU: true}, 96},
}

// On every ppc64le machine the page scan, through the ppc64 walk, leaves
// out exactly the pages the generator's truth says, with its counts.
func TestScanPPC64MatchesTruth(t *testing.T) {
	dir := t.TempDir()
	for _, g := range ppc64Machines {
		t.Run(g.name, func(t *testing.T) {
			s := synth.NewPPC64Machine(g.ks, g.mib)
			path := filepath.Join(dir, g.name)
			if err := synth.WriteFile(path, s); err != nil {
				t.Fatal(err)
			}
			v, err := source.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if v.Arch() != kernel.PPC64LE || v.PageSize() != 4096 {
				t.Fatalf("arch %s, %d-byte pages", v.Arch().Name(), v.PageSize())
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
				if level == 31 && (got.Free == 0 || got.User == 0 || got.Cache == 0) {
					t.Fatalf("-d 31 excluded %+v: a class is missing", got)
				}
			}
		})
	}
}
