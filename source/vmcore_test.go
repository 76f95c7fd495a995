package source

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"pagepipe/internal/synth"
)

// The mmap windows never run past the end of the PT_LOAD they serve
// (mmap_vmcore would remap such a window piece by piece from other old
// memory), and the pages they serve are the vmcore's.
func TestMmapWindowsStayInTheirSegment(t *testing.T) {
	for _, shape := range []string{"kexec-1", "holes", "alias", "unaligned", "partial-page"} {
		for _, mapSize := range []int{testPageSize, 3 * testPageSize, 64 << 10, DefaultMapSize} {
			t.Run(fmt.Sprintf("%s/%d", shape, mapSize), func(t *testing.T) {
				v, _ := openShape(t, shape)
				v.MapStats().KeepWindows()
				r := v.NewReader(mapSize, true).(*PageReader)
				defer r.Close()
				_, dumpable := v.Bitmaps(v.MaxMapnr, PartialPages{})
				want := make([]byte, testPageSize)
				for pfn := dumpable.NextSet(0); pfn < dumpable.Len(); pfn = dumpable.NextSet(pfn + 1) {
					got, err := r.Page(pfn)
					if err != nil {
						t.Fatal(err)
					}
					if err := v.ReadPhys(pfn*testPageSize, want); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("pfn %#x: page differs from ReadPhys", pfn)
					}
					if len(r.wins) == 0 {
						continue
					}
					lo, hi := r.wins[0].off, r.wins[0].off+uint64(len(r.wins[0].b))
					inside := false
					for _, l := range v.Loads {
						// The file data of the segment, widened to whole
						// pages of the file as mmap needs.
						start, end := l.Offset&^(testPageSize-1), (l.Offset+l.FileSize+testPageSize-1)&^(testPageSize-1)
						if lo >= start && hi <= end {
							inside = true
						}
					}
					if !inside {
						t.Fatalf("pfn %#x: window [%#x, %#x) of the file crosses a PT_LOAD's end", pfn, lo, hi)
					}
				}
				if v.MapStats().Windows.Load() == 0 || v.MapStats().Failed.Load() != 0 {
					t.Errorf("%d windows mapped, %d failed (%v)", v.MapStats().Windows.Load(), v.MapStats().Failed.Load(), v.MapStats().FirstError())
				}
				// What the debug lines name: every window mapped, as mapped.
				kept := v.MapStats().MappedWindows()
				if len(kept) == 0 || uint64(len(kept)) != v.MapStats().Windows.Load() || len(r.wins) != 1 || kept[len(kept)-1] != (Window{r.wins[0].off, uint64(len(r.wins[0].b))}) {
					t.Errorf("kept %d windows (%+v) of %d mapped, the reader's %+v", len(kept), kept, v.MapStats().Windows.Load(), r.wins)
				}
			})
		}
	}
}

// A map that fails costs that window only: its bytes are read, the next
// window is mapped again.
func TestMmapFailureReadsThatWindowOnly(t *testing.T) {
	v, path := openShape(t, "holes")
	r := v.NewReader(testPageSize, true).(*PageReader)
	defer r.Close()
	first := v.extents[0].start
	// A descriptor that cannot be mapped, for one call.
	f := r.f
	var err error
	r.f, err = os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Page(first)
	r.f.Close()
	r.f = f
	if err == nil || v.MapStats().Failed.Load() != 1 {
		t.Fatalf("page through a write-only descriptor: %v, %d failed", err, v.MapStats().Failed.Load())
	}
	if _, err := r.Page(first + 1); err != nil || v.MapStats().Windows.Load() != 1 {
		t.Fatalf("next page: %v, %d windows", err, v.MapStats().Windows.Load())
	}
}

// openShape writes the named generated shape and opens it; the file goes
// with the test.
func openShape(t *testing.T, shape string) (*Vmcore, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vmcore")
	if err := synth.WriteFile(path, synth.Shapes()[shape]); err != nil {
		t.Fatal(err)
	}
	v, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, path
}

// testPageSize is the page size of the generated vmcores these tests read:
// x86_64's, which a vmcore says with VMCOREINFO PAGESIZE or its default.
const testPageSize = 4096

// A vmcore of 16 or 64 KiB pages (VMCOREINFO PAGESIZE) is read in them:
// pfns, max_mapnr, the bitmaps and every page the mmap and pread readers
// serve are the generator's, for every shape and both file layouts,
// partial and unaligned pages included.
func TestPagesOfEverySize(t *testing.T) {
	for _, ps := range PageSizes {
		for _, shape := range []string{"holes", "alias", "unaligned", "partial-page", "qemu"} {
			for _, layout := range []synth.Layout{synth.ProcVmcore, synth.QEMU} {
				t.Run(fmt.Sprintf("%d/%s/%s", ps, shape, layout), func(t *testing.T) {
					s, ok := synth.Shapes()[shape]
					if !ok {
						t.Fatalf("no shape %s", shape)
					}
					s = synth.WithPageSize(s, ps)
					s.Layout = layout
					path := filepath.Join(t.TempDir(), "vmcore")
					if err := synth.WriteFile(path, s); err != nil {
						t.Fatal(err)
					}
					v, err := Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer v.Close()
					if v.PageSize() != ps || v.MaxMapnr != s.MaxMapnr() {
						t.Fatalf("page size %d, max_mapnr %d; want %d, %d", v.PageSize(), v.MaxMapnr, ps, s.MaxMapnr())
					}
					_, dumpable := v.Bitmaps(v.MaxMapnr, PartialPages{LastPresent: true, KeepData: true})
					want := make([]byte, ps)
					for _, mmap := range []bool{true, false} {
						r := v.NewReader(DefaultMapSize, mmap)
						n := 0
						for pfn := dumpable.NextSet(0); pfn < dumpable.Len(); pfn = dumpable.NextSet(pfn + 1) {
							got, err := r.Page(pfn)
							if err != nil {
								t.Fatal(err)
							}
							synth.Page(s, pfn, want)
							if !bytes.Equal(got, want) {
								t.Fatalf("mmap %v: pfn %#x differs from the generator's", mmap, pfn)
							}
							n++
						}
						r.Close()
						if n == 0 {
							t.Fatal("no page with data")
						}
					}
				})
			}
		}
	}
}

// After MapReads, ReadPhys reads through mmap windows and gives the bytes
// pread gives: ranges within a page, across pages and PT_LOADs, in holes
// and partial pages; at most the windows asked for stay mapped, and the
// least recently used one goes first.
func TestMapReadsSameBytes(t *testing.T) {
	for _, shape := range []string{"kexec-1", "holes", "alias", "unaligned", "partial-page"} {
		for _, tc := range []struct{ mapSize, windows int }{{testPageSize, 1}, {64 << 10, 3}, {DefaultMapSize, 8}} {
			t.Run(fmt.Sprintf("%s/%d/%d", shape, tc.mapSize, tc.windows), func(t *testing.T) {
				v, path := openShape(t, shape)
				plain, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer plain.Close()
				v.MapReads(tc.mapSize, tc.windows)
				end := v.MaxMapnr * testPageSize
				rng := rand.New(rand.NewPCG(7, uint64(tc.mapSize)))
				for i := range 2000 {
					paddr := rng.Uint64N(end)
					if i%4 != 0 { // mostly where there are pages
						e := v.extents[rng.IntN(len(v.extents))]
						paddr = e.start*testPageSize + rng.Uint64N((e.end-e.start)*testPageSize)
					}
					n := 1 + rng.IntN(3*testPageSize)
					if i%2 == 0 {
						n = 8 // a page-table entry, a pointer
					}
					got, want := make([]byte, n), make([]byte, n)
					if err := v.ReadPhys(paddr, got); err != nil {
						t.Fatal(err)
					}
					if err := plain.ReadPhys(paddr, want); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("ReadPhys(%#x, %d) through windows differs from pread", paddr, n)
					}
					if w := len(v.shared.r.wins); w > tc.windows {
						t.Fatalf("%d windows mapped at once, %d asked for", w, tc.windows)
					}
				}
				if v.MapStats().Windows.Load() == 0 || v.MapStats().Failed.Load() != 0 {
					t.Errorf("%d windows mapped, %d failed (%v)", v.MapStats().Windows.Load(), v.MapStats().Failed.Load(), v.MapStats().FirstError())
				}
			})
		}
	}
}

func TestMapReadsEvictsLeastRecentlyUsed(t *testing.T) {
	v, _ := openShape(t, "holes")
	v.MapReads(testPageSize, 2)
	e := v.extents[0]
	if e.end-e.start < 3 {
		t.Fatalf("extent %+v: too few pages", e)
	}
	read := func(pfn uint64) {
		t.Helper()
		if err := v.ReadPhys(pfn*testPageSize, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
	}
	mapped := func() uint64 { return v.MapStats().Windows.Load() }
	read(e.start)     // window A
	read(e.start + 1) // window B
	read(e.start)     // A again: no map
	if m := mapped(); m != 2 {
		t.Fatalf("%d windows mapped, want 2", m)
	}
	read(e.start + 2) // C replaces B, the least recently used
	read(e.start)     // A is still there
	if m := mapped(); m != 3 {
		t.Errorf("%d windows mapped, want 3: A was evicted instead of B", m)
	}
	read(e.start + 1) // B again: mapped anew
	if m := mapped(); m != 4 {
		t.Errorf("%d windows mapped, want 4", m)
	}
}

// With KeepWindows the readers keep what they mapped while all of them
// hold no more than the budget, then unmap their least recently used
// window; closing them unmaps everything.
func TestKeepWindowsWithinBudget(t *testing.T) {
	v, _ := openShape(t, "kexec-1")
	const win = 4 * testPageSize
	v.KeepWindows(3 * win)
	r1 := v.NewReader(win, true).(*PageReader)
	r2 := v.NewReader(win, true).(*PageReader)
	_, dumpable := v.Bitmaps(v.MaxMapnr, PartialPages{})
	var pfns []uint64
	for pfn := dumpable.NextSet(0); pfn < dumpable.Len(); pfn = dumpable.NextSet(pfn + 1) {
		pfns = append(pfns, pfn)
	}
	for i, pfn := range pfns {
		r := r1
		if i%2 == 1 {
			r = r2
		}
		if _, err := r.Page(pfn); err != nil {
			t.Fatal(err)
		}
		held := uint64(0)
		for _, rr := range []*PageReader{r1, r2} {
			for _, w := range rr.wins {
				held += uint64(len(w.b))
			}
		}
		if int64(held) != v.inUse.Load() {
			t.Fatalf("the readers hold %d bytes, the count says %d", held, v.inUse.Load())
		}
		// A reader may map one window past the budget, never more.
		if held > 3*win+win {
			t.Fatalf("%d bytes mapped, budget %d", held, 3*win)
		}
	}
	if n := len(r1.wins) + len(r2.wins); n < 2 {
		t.Errorf("%d windows kept", n)
	}
	if v.MapStats().Windows.Load() <= 3 {
		t.Errorf("%d windows mapped: the budget should have made the readers unmap some", v.MapStats().Windows.Load())
	}
	r1.Close()
	r2.Close()
	if v.inUse.Load() != 0 {
		t.Errorf("%d bytes still counted after Close", v.inUse.Load())
	}
}
