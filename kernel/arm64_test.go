package kernel

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// armTables builds arm64 page tables of one geometry in a memPhys (whose
// pages are 4 KiB: a bigger granule's table spans several).
type armTables struct {
	mem  *memPhys
	f    arm64Format
	top  uint64
	next uint64
}

func newARMTables(mem *memPhys, f arm64Format, base uint64) *armTables {
	pt := &armTables{mem: mem, f: f, top: base, next: base + 1<<f.pageShift}
	mem.write(base, make([]byte, 1<<f.pageShift))
	return pt
}

// encode is the inverse of arm64Format.outputAddr.
func (pt *armTables) encode(pa uint64) uint64 {
	switch f := pt.f; {
	case f.lpa2():
		return pa&(1<<50-1) | (pa>>50&3)<<8
	case f.pa52 && f.pageShift == 16:
		return pa&(1<<48-1) | (pa>>48&0xf)<<12
	}
	return pa
}

// mapAt maps va to pa with a page (level 3) or block descriptor at leaf.
func (pt *armTables) mapAt(va, pa uint64, leaf int) {
	f := pt.f
	table := pt.top
	for level := 4 - f.levels; ; level++ {
		s := f.shift(level)
		idx := va >> s & uint64(f.tableEntries()-1)
		if level == 4-f.levels {
			idx = va >> s & (1<<(f.vaBits-s) - 1)
		}
		ea := table + idx*8
		if level == leaf {
			typ := uint64(1) // block
			if leaf == 3 {
				typ = 3
			}
			pt.mem.put64(ea, pt.encode(pa)|typ|1<<10)
			return
		}
		e := pt.mem.get64(ea)
		if e&1 == 0 {
			n := pt.next
			pt.next += 1 << f.pageShift
			pt.mem.write(n, make([]byte, 1<<f.pageShift))
			e = pt.encode(n) | 3
			pt.mem.put64(ea, e)
		}
		table = f.outputAddr(e)
	}
}

// Every arm64 geometry of arm64Levels translates its pages and blocks,
// including 52-bit physical addresses in both the 64 KiB (LPA) and the
// 4/16 KiB (LPA2) descriptor layouts; the walk reads one table per level.
func TestARM64Lookup(t *testing.T) {
	for geo, levels := range arm64Levels {
		for _, pa52 := range []bool{false, true} {
			pageShift, vaBits := geo[0], geo[1]
			if pa52 && vaBits != 52 && pageShift != 16 {
				continue
			}
			f := arm64Format{pageShift: pageShift, vaBits: vaBits, levels: levels, pa52: pa52}
			t.Run(fmt.Sprintf("%dK-va%d-pa52=%v", 1<<pageShift>>10, vaBits, pa52), func(t *testing.T) {
				mem := newMemPhys()
				pt := newARMTables(mem, f, 0x40000000)
				page := uint64(1) << pageShift
				high := uint64(0x40000000)
				if f.paBits() == 52 {
					high = 0x000c_0000_0000_0000 | 0x40000000 // PA bits 51:50 set
				}
				kstart := f.kernelStart()
				type want struct {
					va, pa, size uint64
					leaf         int
				}
				cases := []want{
					{kstart + 5*page, 0x41230000 &^ (page - 1), page, 3},
					{^uint64(0) - page + 1, high &^ (page - 1), page, 3},
				}
				pmd := uint64(1) << f.shift(2)
				cases = append(cases, want{kstart + 64*pmd, 1 << 40, pmd, 2})
				if f.blockAt(1) && levels >= 3 {
					pud := uint64(1) << f.shift(1)
					if pud < 1<<45 {
						cases = append(cases, want{kstart + 3*pud, pud * 2, pud, 1})
					}
				}
				for _, c := range cases {
					pt.mapAt(c.va, c.pa, c.leaf)
				}
				tr, err := newARM64TranslatorAt(mem, pt.top, pageShift, vaBits, pa52)
				if err != nil {
					t.Fatal(err)
				}
				if tr.Levels() != levels {
					t.Fatalf("levels %d, want %d", tr.Levels(), levels)
				}
				for _, c := range cases {
					off := uint64(0x123) & (c.size - 1)
					mem.reads = 0
					tr = must(newARM64TranslatorAt(mem, pt.top, pageShift, vaBits, pa52))
					m, err := tr.Lookup(c.va + off)
					if err != nil || m.Paddr != c.pa+off || m.PageSize != c.size {
						t.Errorf("Lookup(%#x) = %#x/%#x, %v; want %#x/%#x", c.va+off, m.Paddr, m.PageSize, err, c.pa+off, c.size)
					}
					if mem.reads > levels-c.leaf+3 {
						t.Errorf("Lookup(%#x) read %d tables", c.va, mem.reads)
					}
				}
				// Unmapped, and below the kernel half.
				var te *TranslationError
				if _, err := tr.Lookup(kstart + 1000*pmd); !errors.As(err, &te) || !errors.Is(err, ErrNotPresent) {
					t.Errorf("unmapped: %v", err)
				}
				if _, err := tr.Lookup(kstart - 1); !errors.Is(err, ErrNonCanonical) {
					t.Errorf("below the kernel half: %v", err)
				}
			})
		}
	}
}

func must(t *Translator, err error) *Translator {
	if err != nil {
		panic(err)
	}
	return t
}

// A block descriptor where the architecture allows none (level 0 of a
// 4 KiB 4-level table) is an error naming the level, not a mapping.
func TestARM64BlockAtTop(t *testing.T) {
	mem := newMemPhys()
	f := arm64Format{pageShift: 12, vaBits: 48, levels: 4}
	pt := newARMTables(mem, f, 0x40000000)
	va := f.kernelStart()
	pt.mem.put64(pt.top, 0x80000000|1)
	tr := must(newARM64TranslatorAt(mem, pt.top, 12, 48, false))
	if _, err := tr.Lookup(va); err == nil || !strings.Contains(err.Error(), "PGD entry") || !strings.Contains(err.Error(), "cannot hold a block") {
		t.Fatalf("Lookup = %v", err)
	}
}

// The translator comes from VMCOREINFO as makedumpfile reads it: the
// top table at SYMBOL(swapper_pg_dir) - kimage_voffset (an unsigned value
// above 2^63), vabits_actual from TCR_EL1_T1SZ, 52-bit PAs from
// MAX_PHYSMEM_BITS; missing or impossible values are errors naming them.
func TestARM64FromVMCOREINFO(t *testing.T) {
	const head = "OSRELEASE=6.1.0-57-arm64\nPAGESIZE=4096\n"
	const voff = 0xffffb03beb800000
	swapper := uint64(0x41a30000) + voff
	base := fmt.Sprintf("SYMBOL(swapper_pg_dir)=%x\nNUMBER(kimage_voffset)=0x%x\nNUMBER(PHYS_OFFSET)=0xffffb1a200000000\n", swapper, uint64(voff))
	for _, tc := range []struct {
		name, text string
		levels     int
		vaBits     uint
		pa52       bool
		want       string
	}{
		{"debian", head + "NUMBER(VA_BITS)=48\n" + base + "NUMBER(TCR_EL1_T1SZ)=0x10\n", 4, 48, false, ""},
		{"52-on-48", head + "NUMBER(VA_BITS)=52\n" + base + "NUMBER(TCR_EL1_T1SZ)=0x10\nNUMBER(MAX_PHYSMEM_BITS)=52\n", 4, 48, true, ""},
		{"52", head + "NUMBER(VA_BITS)=52\n" + base + "NUMBER(TCR_EL1_T1SZ)=0xc\n", 5, 52, false, ""},
		{"39 no T1SZ", head + "NUMBER(VA_BITS)=39\n" + base, 3, 39, false, ""},
		{"16K 47", "OSRELEASE=6.1\nPAGESIZE=16384\nNUMBER(VA_BITS)=47\n" + base, 3, 47, false, ""},
		{"64K 42", "OSRELEASE=6.1\nPAGESIZE=65536\nNUMBER(VA_BITS)=42\n" + base, 2, 42, false, ""},
		{"no swapper", head + "NUMBER(VA_BITS)=48\nNUMBER(kimage_voffset)=0x1\nNUMBER(PHYS_OFFSET)=0x0\n", 0, 0, false, "missing SYMBOL(swapper_pg_dir)"},
		{"no VA_BITS", head + base, 0, 0, false, "missing NUMBER(VA_BITS)"},
		{"4K 47", head + "NUMBER(VA_BITS)=47\n" + base, 0, 0, false, "4096-byte pages with 47-bit virtual addresses"},
		{"bad voffset", head + "NUMBER(VA_BITS)=48\n" + strings.Replace(base, "0xffffb03beb800000", "0xfffffffffffffffff", 1), 0, 0, false, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vi, err := ParseVMCOREINFO([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			checkErr := ARM64.Check(vi)
			tr, err := ARM64.NewTranslator(newMemPhys(), vi)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || checkErr == nil || !strings.Contains(checkErr.Error(), tc.want) {
					t.Fatalf("NewTranslator = %v, Check = %v, want %q", err, checkErr, tc.want)
				}
				return
			}
			if err != nil || checkErr != nil {
				t.Fatalf("NewTranslator = %v, Check = %v", err, checkErr)
			}
			f := tr.format.(arm64Format)
			if tr.TopTable() != 0x41a30000 || tr.Levels() != tc.levels || f.vaBits != tc.vaBits || f.pa52 != tc.pa52 {
				t.Fatalf("top %#x levels %d va %d pa52 %v", tr.TopTable(), tr.Levels(), f.vaBits, f.pa52)
			}
			if pb, from, ok := ARM64.PhysBase(vi, nil); !ok || pb != 0xffffb1a200000000 || from != "vmcoreinfo" {
				t.Fatalf("PhysBase = %#x %s %v", pb, from, ok)
			}
			if ArchOf(vi) != ARM64 {
				t.Fatalf("ArchOf = %s", ArchOf(vi).Name())
			}
		})
	}
}

// FuzzARM64VtoP walks arbitrary tables of every arm64 geometry: no panic,
// no more table reads than levels, and a translation keeps the page
// offset and names a page or block size of the granule.
func FuzzARM64VtoP(f *testing.F) {
	var seed []byte
	for _, r := range []struct {
		page byte
		idx  uint16
		v    uint64
	}{
		{0, 511, 0x1000 | 3}, {1, 511, 0x2000 | 3}, {2, 0, 0x3000 | 3}, {3, 1, 0x5000 | 3 | 1<<10},
		{2, 8, 0x200000 | 1}, {1, 0, 0x40000000 | 1}, {0, 0, 0x4000 | 3}, {4, 0, 0x6000 | 3 | 1<<8},
		{6, 0, 0x0 | 1}, {7, 0, 0x3000 | 3 | 0xf<<12},
	} {
		seed = append(seed, fuzzRecord(r.page, r.idx, r.v)...)
	}
	f.Add(seed, uint8(1), uint64(0xffffffffffe01234))
	f.Add(seed, uint8(0), uint64(0xffff000000001234))
	f.Add(seed, uint8(2), uint64(0xfff0000000201234))
	f.Add(seed, uint8(9), uint64(0xffffff8000000000))
	f.Fuzz(func(t *testing.T, recs []byte, geo uint8, vaddr uint64) {
		if len(recs) > 11*256 {
			recs = recs[:11*256]
		}
		geos := []struct {
			shift, va uint
			pa52      bool
		}{{12, 48, false}, {12, 39, false}, {12, 52, true}, {12, 52, false}, {14, 47, false},
			{14, 48, false}, {14, 52, true}, {14, 36, false}, {16, 42, false}, {16, 48, false}, {16, 52, true}}
		g := geos[int(geo)%len(geos)]
		phys := &fuzzPhys{b: fuzzMemory(recs)}
		tr, err := newARM64TranslatorAt(phys, 0, g.shift, g.va, g.pa52)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.Lookup(vaddr)
		if phys.reads > tr.Levels() {
			t.Fatalf("one walk read %d tables with %d levels", phys.reads, tr.Levels())
		}
		if err != nil {
			var te *TranslationError
			if !errors.As(err, &te) || te.Vaddr != vaddr {
				t.Fatalf("Lookup(%#x): %v is not a TranslationError for the address", vaddr, err)
			}
			return
		}
		if m.Paddr >= 1<<52 || m.PageSize < 1<<g.shift || m.PageSize&(m.PageSize-1) != 0 {
			t.Fatalf("Lookup(%#x) = %#x, page size %#x", vaddr, m.Paddr, m.PageSize)
		}
		if m.Paddr&(m.PageSize-1) != vaddr&(m.PageSize-1) {
			t.Fatalf("Lookup(%#x) = %#x: page offset not preserved", vaddr, m.Paddr)
		}
		_ = tr.ReadVirt(vaddr, make([]byte, 64))
	})
}

// newARM64TranslatorAt builds an arm64 Translator for an explicit
// top-level table, granule (pageShift 12, 14 or 16), kernel VA size and
// 52-bit physical addressing.
func newARM64TranslatorAt(r PhysReader, top uint64, pageShift, vaBits uint, pa52 bool) (*Translator, error) {
	if r == nil {
		return nil, errors.New("nil PhysReader")
	}
	levels, ok := arm64Levels[[2]uint{pageShift, vaBits}]
	if !ok {
		return nil, fmt.Errorf("%d-byte pages with %d-bit virtual addresses are not a geometry arm64 Linux has", 1<<pageShift, vaBits)
	}
	return newARM64Translator(r, top, arm64Format{pageShift: pageShift, vaBits: vaBits, levels: levels, pa52: pa52, pgdBits: vaBits})
}
