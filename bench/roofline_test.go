package bench

import (
	"os"
	"path/filepath"
	"testing"

	"pagepipe/chunk"
	"pagepipe/internal/synth"
)

// The floor's parts handle exactly what a dump of the machine must: every
// struct page, every page the page scan leaves in, the non-zero ones of
// those through the codec, and the dump's bytes.
func TestFloorHandlesWhatTheDumpMust(t *testing.T) {
	dir := t.TempDir()
	s := synth.KernelMachine("6.1", 128)
	vmcore := filepath.Join(dir, "vmcore")
	if err := synth.WriteFile(vmcore, s); err != nil {
		t.Fatal(err)
	}
	job, err := FloorSetup(vmcore, 31)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	dump := filepath.Join(dir, "dump")
	if err := os.WriteFile(dump, make([]byte, 3<<20+5), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := job.MeasureFloor("l", dump, dir, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	wantBits, _, err := synth.ExpectedFilter(s, 31)
	if err != nil {
		t.Fatal(err)
	}
	var kept, nonZero int64
	page := make([]byte, synth.PageSize)
	for pfn := range job.plan.Dumpable.Ones() {
		kept++
		synth.Page(s, pfn, page)
		if !chunk.IsZero(page) {
			nonZero++
		}
	}
	if wantKept := countBits(wantBits, job.plan.MaxMapnr); kept != wantKept {
		t.Fatalf("the plan keeps %d pages, the truth %d", kept, wantKept)
	}
	structBytes := int64(job.plan.MaxMapnr) * 64 // 6.1: 64-byte struct pages, every section present
	if f.StructBytes < structBytes*9/10 || f.StructBytes > structBytes {
		t.Errorf("%d bytes of struct pages read, about %d expected", f.StructBytes, structBytes)
	}
	if f.PagesRead != kept || f.PagesCompressed != nonZero || f.BytesWritten != 3<<20+5 {
		t.Errorf("floor %+v: want %d pages read, %d compressed, %d bytes written", f, kept, nonZero, 3<<20+5)
	}
	if f.CPU() <= 0 || f.Codec <= 0 {
		t.Errorf("floor %+v: no CPU time measured", f)
	}
}

func countBits(b []byte, n uint64) int64 {
	var c int64
	for i := uint64(0); i < n; i++ {
		if b[i/8]&(1<<(i%8)) != 0 {
			c++
		}
	}
	return c
}
