package dump

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// The dump is the same bytes whether the vmcore is read with pread or
// through mmap windows: the copy pass's pages, the page scan's struct
// pages, and the page-table walks' and the priority search's metadata
// (what /proc/vmcore gets; --map-size asks for it on any file), at -d 31
// in pfn order and prioritised, on one worker and on three.
func TestMappedReadsSameDump(t *testing.T) {
	s := synth.KernelMachine("6.1", 192)
	vmcore := filepath.Join(t.TempDir(), "vmcore")
	if err := synth.WriteFile(vmcore, s); err != nil {
		t.Fatal(err)
	}
	for _, prio := range []Priority{PriorityOff, PriorityOn} {
		dir := t.TempDir()
		dumpWith := func(name string, m Mmap, mapSize, workers int) []byte {
			out := filepath.Join(dir, name)
			run(t, Options{Input: vmcore, Levels: []Level{31}, Codec: "lzo", Workers: workers, Mmap: m, MapSize: mapSize,
				Priority: prio, Out: Output{Paths: []string{out}}})
			return readFile(t, out)
		}
		want := dumpWith("pread", MmapOff, 0, 1)
		for _, c := range []struct {
			mapSize, workers int
		}{{64 << 10, 1}, {4 << 20, 3}, {4 << 10, 3}} {
			name := fmt.Sprintf("mmap-%d-%d", c.mapSize, c.workers)
			if got := dumpWith(name, MmapOn, c.mapSize, c.workers); !bytes.Equal(got, want) {
				t.Errorf("priority %d, %s: differs from the pread dump: %s", prio, name, judge.FirstDiff(got, want))
			}
		}
	}
}
