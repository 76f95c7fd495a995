package filter_test

import (
	"context"
	"os"
	"testing"

	"pagepipe/filter"
	"pagepipe/internal/synth"
	"pagepipe/source"
)

// A live dump's revisits: Revisit dumps every present pfn level 31 leaves
// out as free, cache or user memory (not hwpoison or offline ones); a
// Revisitor says each is left out still while its struct pages are as the
// scan read them, and says a free run whose struct pages changed (zeroed:
// no longer in the buddy allocator) is not, and only that run.
func TestRevisit(t *testing.T) {
	s, v, k := machine(t, t.TempDir(), "6.1", 192)
	k.Record = new(filter.Excluded)
	plan, err := filter.NewPlan(context.Background(), v, 31, k, 3, source.PartialPages{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := plan.NumDumpable
	rev, n := k.Record.Revisit(plan)
	if plan.NumDumpable != before+n || n == 0 {
		t.Fatalf("%d dumpable, %d before, %d revisited", plan.NumDumpable, before, n)
	}
	var runLo, runHi uint64
	for pfn := uint64(0); pfn < plan.MaxMapnr; pfn++ {
		c := synth.TruthOf(s, pfn)
		want := plan.Present.Test(pfn) && c.ExcludedAt(31) && c != synth.Hwpoison && c != synth.Offline
		if rev.Test(pfn) != want {
			t.Fatalf("pfn %#x (%s): revisited %v", pfn, c, rev.Test(pfn))
		}
		if c == synth.Free && runHi == 0 && pfn > 0 && synth.TruthOf(s, pfn-1) != synth.Free && synth.TruthOf(s, pfn+1) == synth.Free {
			runLo = pfn
			for runHi = pfn; synth.TruthOf(s, runHi) == synth.Free; runHi++ {
			}
		}
	}
	if runHi == 0 {
		t.Fatal("no free run of two pages")
	}
	check := func(changed bool) {
		t.Helper()
		r, err := k.NewRevisitor(31, k.Record, rev)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for pfn := uint64(0); pfn < plan.MaxMapnr; pfn++ {
			r.Forget()
			out, err := r.LeftOut(pfn)
			if err != nil {
				t.Fatal(err)
			}
			want := rev.Test(pfn) && !(changed && pfn >= runLo && pfn < runHi)
			if out != want {
				t.Fatalf("changed %v: pfn %#x (%s): left out %v", changed, pfn, synth.TruthOf(s, pfn), out)
			}
		}
	}
	check(false)
	// Zero the struct pages of the run in the file.
	f, err := os.OpenFile(v.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := v.Arch().NewTranslator(v, k.VMCOREINFO)
	if err != nil {
		t.Fatal(err)
	}
	size := k.Layout.Size
	for pfn := runLo; pfn < runHi; pfn++ {
		var vaddr uint64
		for _, sec := range k.MemMap.Sections {
			if sec.StartPFN <= pfn && pfn < sec.EndPFN {
				vaddr = sec.MemMap + (pfn-sec.StartPFN)*size
			}
		}
		paddr, err := tr.VtoP(vaddr)
		if err != nil {
			t.Fatal(err)
		}
		done := false
		for _, l := range v.Loads {
			if l.Paddr <= paddr && paddr+size <= l.Paddr+l.FileSize {
				if _, err := f.WriteAt(make([]byte, size), int64(l.Offset+paddr-l.Paddr)); err != nil {
					t.Fatal(err)
				}
				done = true
			}
		}
		if !done {
			t.Fatalf("struct page of pfn %#x (%#x) not in the file", pfn, paddr)
		}
	}
	check(true)
	t.Logf("%d pfns revisited; free run [%#x, %#x) changed", n, runLo, runHi)
}
