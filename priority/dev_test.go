package priority

import (
	"os"
	"testing"

	"pagepipe/kernel"
	"pagepipe/source"
)

func TestDevFind(t *testing.T) {
	path := os.Getenv("PRIO_VMCORE")
	if path == "" {
		t.Skip()
	}
	v, err := source.OpenMemory(path)
	if err != nil {
		t.Fatal(err)
	}
	notes, _, off, size := v.Notes()
	vi, err := kernel.ParseVMCOREINFO(notes[off : off+size])
	if err != nil {
		t.Fatal(err)
	}
	s, err := Find(v, vi)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range s.Classes {
		lo, hi := uint64(0), uint64(0)
		if len(c.Pfns) > 0 {
			lo, hi = c.Pfns[0], c.Pfns[len(c.Pfns)-1]
		}
		t.Logf("%s: %d pages %#x-%#x", c.Name, len(c.Pfns), lo, hi)
	}
	t.Logf("missing: %q", s.Missing)
}
