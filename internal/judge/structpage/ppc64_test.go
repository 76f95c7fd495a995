package structpage

import (
	"path/filepath"
	"testing"

	"pagepipe/internal/synth"
)

// On generated ppc64le machines with 4 KiB pages, radix (struct pages
// found by the walk through the 64 KiB top table) and hash (through
// vmemmap_list), the reader's classes at each level are the generator's
// truth: the pages it keeps, and its count of each class. (A kdump file
// keeps a zero page's bit: the truth's bitmap holds them.)
func TestPPC64GeneratedMachines(t *testing.T) {
	dir := t.TempDir()
	for _, hash := range []bool{false, true} {
		s := synth.NewPPC64Machine(synth.KernelSpec{Profile: "6.12", HashMMU: hash}, 161)
		path := filepath.Join(dir, "vmcore")
		if err := synth.WriteFile(path, s); err != nil {
			t.Fatal(err)
		}
		v, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Read(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Anomalies) > 0 || m.Sections == 0 {
			t.Fatalf("hash %v: %d sections, anomalies %v", hash, m.Sections, m.Anomalies)
		}
		for _, level := range []int{1, 2, 4, 8, 16, 31} {
			bits, want, err := synth.ExpectedFilter(s, level)
			if err != nil {
				t.Fatal(err)
			}
			class, count := m.Level(level)
			for pfn := range m.MaxPFN {
				kept := m.RAM(pfn) && (class[pfn] == Kept || class[pfn] == Zero)
				if truth := bits[pfn/8]>>(pfn%8)&1 != 0; kept != truth {
					t.Fatalf("hash %v, -d %d: pfn %#x kept %v, the truth %v (%s)", hash, level, pfn, kept, truth, class[pfn].Label())
				}
			}
			if count[Zero] != want.Zero || count[Free] != want.Free || count[Cache] != want.Cache || count[CachePrivate] != want.CachePrivate || count[User] != want.User {
				t.Errorf("hash %v, -d %d: counts %v, the truth %+v", hash, level, count, want)
			}
		}
		v.Close()
	}
}
