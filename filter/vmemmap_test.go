package filter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/kernel"
	"pagepipe/source"
)

// Which vmemmap pages a pattern of excluded pfns frees, by makedumpfile's
// rule: runs of two or more whole 64-pfn words, cut at 32768-pfn bitmap
// blocks and at group ends, freeing the pages their struct pages cover
// whole.
func TestVmemmapUnused(t *testing.T) {
	two := []VmemmapGroup{{VmapStart: 1000, RepStart: 0, RepEnd: 32768}, {VmapStart: 5000, RepStart: 32768, RepEnd: 65536 - 32768/2}}
	cases := []struct {
		name     string
		groups   []VmemmapGroup
		size     uint64
		excluded [][2]uint64 // pfn ranges left out
		absent   [][2]uint64 // pfn ranges not present
		want     []VmemmapRun
	}{
		{"two words", two, 64, [][2]uint64{{0, 128}}, nil, []VmemmapRun{{1000, 2}}},
		{"one word frees nothing", two, 64, [][2]uint64{{64, 128}}, nil, nil},
		{"partial words", two, 64, [][2]uint64{{63, 256}}, nil, []VmemmapRun{{1001, 3}}},
		{"cut at the bitmap block", two, 64, [][2]uint64{{32768 - 128, 32768 + 192}}, nil, []VmemmapRun{{1510, 2}, {5000, 3}}},
		{"a hole breaks the run", two, 64, [][2]uint64{{0, 320}}, [][2]uint64{{130, 131}}, []VmemmapRun{{1000, 2}, {1003, 2}}},
		{"absent pfns are not excluded ones", two, 64, nil, [][2]uint64{{0, 512}}, nil},
		{"past the last group's end", two, 64, [][2]uint64{{65536 - 32768/2 - 128, 65536}}, nil, nil},
		{"the last group's end", two, 64, [][2]uint64{{65536 - 32768/2 - 256, 65536 - 32768/2}}, nil, []VmemmapRun{{5000 + 252, 4}}},
		{"no group", []VmemmapGroup{{VmapStart: 1000, RepStart: 32768, RepEnd: 65536}}, 64, [][2]uint64{{0, 1024}}, nil, nil},
		{"56-byte struct pages round inwards", []VmemmapGroup{{VmapStart: 7, RepStart: 0, RepEnd: 37449}}, 56, [][2]uint64{{64, 192}}, nil, []VmemmapRun{{8, 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const n = 65536
			present, dumpable := bitmap.New(n), bitmap.New(n)
			present.SetRange(0, n)
			dumpable.SetRange(0, n)
			for _, r := range c.excluded {
				dumpable.ClearRange(r[0], r[1])
			}
			for _, r := range c.absent {
				present.ClearRange(r[0], r[1])
				dumpable.ClearRange(r[0], r[1])
			}
			v := &Vmemmap{groups: c.groups, size: c.size, page: 4096}
			if got := v.Unused(present, dumpable, n); !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// fakeTables is physical memory holding x86_64 page tables, for
// FindVmemmap; only ReadPhys is used.
type fakeTables struct {
	source.Memory
	pages map[uint64]*[4096]byte
	next  uint64
}

func (f *fakeTables) ReadPhys(paddr uint64, p []byte) error {
	pg, ok := f.pages[paddr&^4095]
	if !ok || paddr%4096+uint64(len(p)) > 4096 {
		return fmt.Errorf("physical %#x not in the dump", paddr)
	}
	copy(p, pg[paddr%4096:])
	return nil
}

func (f *fakeTables) table() uint64 {
	f.next += 4096
	f.pages[f.next] = new([4096]byte)
	return f.next
}

func (f *fakeTables) set(table, idx, entry uint64) {
	binary.LittleEndian.PutUint64(f.pages[table][idx*8:], entry)
}

const fakeTop = 0x1000

// fakeKernel maps the vmemmap at base: each block's entry is given by
// pmd(block) (0: none); blocks of PUD entries in noPUD have no PMD table.
func fakeKernel(t *testing.T, base uint64, blocks int, pmd func(b int, f *fakeTables) uint64, noPUD map[int]bool) *Kernel {
	t.Helper()
	f := &fakeTables{pages: map[uint64]*[4096]byte{}, next: fakeTop - 4096}
	top := f.table()
	pud := f.table()
	f.set(top, base>>39&511, pud|3)
	pmds := map[uint64]uint64{}
	for b := range blocks {
		va := base + uint64(b)<<21
		if noPUD[int(va>>30&511)] {
			continue
		}
		pt, ok := pmds[va>>30&511]
		if !ok {
			pt = f.table()
			pmds[va>>30&511] = pt
			f.set(pud, va>>30&511, pt|3)
		}
		if e := pmd(b, f); e != 0 {
			f.set(pt, va>>21&511, e)
		}
	}
	vi, err := kernel.ParseVMCOREINFO([]byte(fmt.Sprintf("OSRELEASE=6.1.0\nPAGESIZE=4096\nSYMBOL(init_top_pgt)=%x\nNUMBER(phys_base)=0\n", kernel.StartKernelMap+fakeTop)))
	if err != nil {
		t.Fatal(err)
	}
	mm := &kernel.MemMap{PageSize: 64, Sections: []kernel.Section{{StartPFN: 0, EndPFN: 32768, MemMap: base}}}
	return &Kernel{VMCOREINFO: vi, MemMap: mm, mem: f}
}

// FindVmemmap groups the vmemmap's 2 MiB blocks by physical contiguity,
// by virtual address across absent PUD entries (where makedumpfile's walk
// loses count), ends the last group at its last block, and gives up on a
// block mapped by 4 KiB pages or on a kernel that is not x86_64's.
func TestFindVmemmap(t *testing.T) {
	const base = 0xffffea0000000000
	const pfnsPerBlock = 2 << 20 / 64
	huge := func(paddr uint64) uint64 { return paddr | 0x80 | 3 }
	contiguous := func(b int, _ *fakeTables) uint64 { return huge(0x40000000 + uint64(b)<<21) }
	cases := []struct {
		name    string
		blocks  int
		pmd     func(int, *fakeTables) uint64
		noPUD   map[int]bool
		want    []VmemmapGroup
		wantErr string
	}{
		{"one group", 4, contiguous, nil,
			[]VmemmapGroup{{VmapStart: 0x40000, VmapLast: 0x40600, RepStart: 0, RepEnd: 3 * pfnsPerBlock}}, ""},
		{"a hole and a jump", 6, func(b int, f *fakeTables) uint64 {
			switch b {
			case 2:
				return 0
			case 4, 5:
				return huge(0x80000000 + uint64(b)<<21)
			}
			return contiguous(b, f)
		}, nil, []VmemmapGroup{
			{VmapStart: 0x40000, VmapLast: 0x40200, RepStart: 0, RepEnd: 2 * pfnsPerBlock},
			{VmapStart: 0x40600, VmapLast: 0x40600, RepStart: 3 * pfnsPerBlock, RepEnd: 4 * pfnsPerBlock},
			{VmapStart: 0x80800, VmapLast: 0x80a00, RepStart: 4 * pfnsPerBlock, RepEnd: 5 * pfnsPerBlock},
		}, ""},
		{"an absent PUD entry", 3 * 512, contiguous, map[int]bool{1: true}, []VmemmapGroup{
			{VmapStart: 0x40000, VmapLast: 0x40000 + 511*512, RepStart: 0, RepEnd: 512 * pfnsPerBlock},
			{VmapStart: 0x40000 + 1024*512, VmapLast: 0x40000 + 1535*512, RepStart: 1024 * pfnsPerBlock, RepEnd: 1535 * pfnsPerBlock},
		}, ""},
		{"4 KiB pages", 3, func(b int, f *fakeTables) uint64 {
			if b == 1 {
				pte := f.table()
				f.set(pte, 0, 0x12345000|3)
				return pte | 3
			}
			return contiguous(b, f)
		}, nil, nil, "not a 2 MiB one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := fakeKernel(t, base, c.blocks, c.pmd, c.noPUD)
			v, err := k.FindVmemmap(uint64(c.blocks) * pfnsPerBlock)
			if c.wantErr != "" {
				if !errors.Is(err, ErrVmemmap) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Base != base || !slices.Equal(v.Groups(), c.want) {
				t.Fatalf("base %#x groups\n%+v, want\n%+v", v.Base, v.Groups(), c.want)
			}
		})
	}
	t.Run("not x86_64", func(t *testing.T) {
		k := fakeKernel(t, base, 1, contiguous, nil)
		vi, err := kernel.ParseVMCOREINFO([]byte("OSRELEASE=6.1.0\nPAGESIZE=4096\nSYMBOL(swapper_pg_dir)=ffff800081000000\nNUMBER(VA_BITS)=48\n"))
		if err != nil {
			t.Fatal(err)
		}
		k.VMCOREINFO = vi
		if _, err := k.FindVmemmap(pfnsPerBlock); !errors.Is(err, ErrVmemmap) {
			t.Fatalf("error %v, want ErrVmemmap", err)
		}
	})
}
