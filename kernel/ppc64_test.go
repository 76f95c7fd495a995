package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// ppcTables builds book3s64 page tables (big-endian entries) of one MMU
// and page size in a memPhys, each table in a 64 KiB block of its own.
type ppcTables struct {
	mem  *memPhys
	f    ppc64Format
	top  uint64
	next uint64
}

func newPPCTables(mem *memPhys, pageSize uint64, radix bool, base uint64) *ppcTables {
	f, err := ppc64Geometry(pageSize, radix)
	if err != nil {
		panic(err)
	}
	mem.write(base, make([]byte, 8<<f.bits[0]))
	return &ppcTables{mem: mem, f: f, top: base, next: base + 0x10000}
}

func (pt *ppcTables) putBE(pa, v uint64) { pt.mem.write(pa, binary.BigEndian.AppendUint64(nil, v)) }
func (pt *ppcTables) getBE(pa uint64) uint64 {
	var b [8]byte
	if err := pt.mem.ReadPhys(pa, b[:]); err != nil {
		return 0
	}
	return binary.BigEndian.Uint64(b[:])
}

// mapAt maps va to pa with a leaf at level leaf (0 PGD .. 3 PTE); extra
// bits are or'ed into the leaf (a hash PTE's bit 55, say).
func (pt *ppcTables) mapAt(va, pa uint64, leaf int, extra uint64) {
	table := pt.top
	for level := 0; ; level++ {
		s := pt.f.shift(level)
		ea := table + (va>>s&(1<<pt.f.bits[level]-1))*8
		if level == leaf {
			pt.putBE(ea, pa|ppc64Present|ppc64Leaf|extra|0x10e) // RWX-ish low bits
			return
		}
		e := pt.getBE(ea)
		if e == 0 {
			n := pt.next
			pt.next += 0x10000
			pt.mem.write(n, make([]byte, 8<<pt.f.bits[level+1]))
			e = n | ppc64Present
			pt.putBE(ea, e)
		}
		table = e & ppc64NextMask
	}
}

// ppcGeometries are the four book3s64 geometries: both MMUs with 64 KiB
// and with 4 KiB pages.
var ppcGeometries = []struct {
	name     string
	pageSize uint64
	radix    bool
}{
	{"radix-64k", 65536, true}, {"hash-64k", 65536, false},
	{"radix-4k", 4096, true}, {"hash-4k", 4096, false},
}

// Every geometry translates its pages and huge leaves by the walk, the
// linear map by subtraction without reading a table, and the vmemmap by
// vmemmap_list when it has entries (by the walk when it is empty, as on
// 6.6+ radix kernels); bit 55 of a hash PTE is not address. Radix with
// 4 KiB pages indexes a top table of 8192 entries (64 KiB: past its first
// page, which makedumpfile's walk reads alone); hash with 4 KiB pages has
// vmalloc at 0xc0003d0000000000 and the vmemmap at 0xc0003f0000000000,
// in 46-bit tables.
func TestPPC64Lookup(t *testing.T) {
	for _, g := range ppcGeometries {
		t.Run(g.name, func(t *testing.T) {
			mem := newMemPhys()
			pt := newPPCTables(mem, g.pageSize, g.radix, 0x2740000)
			f := pt.f
			ps := g.pageSize
			pmd := uint64(1) << f.shift(2) // 2 MiB radix, 16 MiB hash 64K, 2 MiB hash 4K
			pud := uint64(1) << f.shift(1)
			vm, io, vmemmap := f.tablesStart, f.tablesStart+(f.tablesEnd-f.tablesStart)/2, f.vmemmapStart
			if g.pageSize == 4096 && !g.radix {
				io = f.tablesStart + 1<<40 // H_KERN_IO_START
			}
			pt.mapAt(vm+2*ps, 0x4380000, 3, 0)
			pt.mapAt(vm+3*ps, 0x3110000, 3, 1<<55)
			pt.mapAt(io, 8*pmd, 2, 0)
			if g.radix { // under hash the tables never map the vmemmap
				pt.mapAt(vmemmap, 0x36000000&^(pmd-1), 2, 0)
			}
			pt.mapAt(vm+pud*3, 3*pud, 1, 0)
			list := []VmemmapBacking{{Virt: vmemmap + ps, Phys: 0x7770000, Size: ps}, {Virt: vmemmap, Phys: 0x5000000, Size: ps}}
			top := uint64(1) << f.shift(0)
			for _, tc := range []struct {
				list       []VmemmapBacking
				va, pa, sz uint64
				reads      int
			}{
				{nil, vm + 2*ps + 0xabc, 0x4380abc, ps, 4},
				{nil, vm + 3*ps + 0x234, 0x3110234, ps, 4},
				{nil, io + pmd - 8, 9*pmd - 8, pmd, 3},
				{nil, vm + pud*3 + 12345, 3*pud + 12345, pud, 2},
				{nil, vmemmap + 0x40, 0x36000000&^(pmd-1) + 0x40, pmd, 3}, // radix 6.6+: no list
				{list, vmemmap + ps + 0x40, 0x7770040, ps, 0},
				{list, vmemmap, 0x5000000, ps, 0},
				{nil, PPC64PageOffset + 0x2740008, 0x2740008, top, 0},
				{nil, PPC64PageOffset, 0, top, 0},
			} {
				if tc.va == vmemmap+0x40 && !g.radix {
					continue
				}
				tr, err := NewPPC64TranslatorAt(mem, pt.top, g.pageSize, g.radix, tc.list)
				if err != nil {
					t.Fatal(err)
				}
				mem.reads = 0
				m, err := tr.Lookup(tc.va)
				if err != nil || m.Paddr != tc.pa || m.PageSize != tc.sz {
					t.Errorf("Lookup(%#x) = %#x size %#x, %v; want %#x size %#x", tc.va, m.Paddr, m.PageSize, err, tc.pa, tc.sz)
				}
				if mem.reads != tc.reads {
					t.Errorf("Lookup(%#x) read %d tables, want %d", tc.va, mem.reads, tc.reads)
				}
			}
			tr, _ := NewPPC64TranslatorAt(mem, pt.top, g.pageSize, g.radix, list)
			for _, tc := range []struct {
				va    uint64
				level string
				err   error
			}{
				{vm + 4*ps, "PTE", ErrNotPresent},
				{vm + 4*pmd, "PMD", ErrNotPresent},
				{vm + top*5, "PGD", ErrNotPresent},
				{vmemmap + 5*ps, "vmemmap_list", ErrNotPresent},
				{vmemmap + 2*ps, "vmemmap_list", ErrNotPresent},
				{0x00007fff00000000, "", ErrNonCanonical},
				{PPC64PageOffset - 1, "", ErrNonCanonical},
				{f.vmemmapEnd, "", ErrNonCanonical},
			} {
				_, err := tr.Lookup(tc.va)
				var te *TranslationError
				if !errors.As(err, &te) || te.Level != tc.level || !errors.Is(err, tc.err) || te.Vaddr != tc.va {
					t.Errorf("Lookup(%#x) = %v, want %s %v", tc.va, err, tc.level, tc.err)
				}
			}
			if !g.radix {
				// Under hash the vmemmap has no table walk: without a
				// list it is not mapped.
				tr, _ := NewPPC64TranslatorAt(mem, pt.top, g.pageSize, g.radix, nil)
				if _, err := tr.Lookup(vmemmap + 0x40); !errors.Is(err, ErrNotPresent) {
					t.Errorf("hash vmemmap without a list: %v", err)
				}
			}
			if g.pageSize == 4096 && !g.radix {
				for _, va := range []uint64{f.vmemmapEnd, 0xd000000000000000, 0xf000000000000000, PPC64VmallocStart} {
					if _, err := tr.Lookup(va); !errors.Is(err, ErrNonCanonical) {
						t.Errorf("Lookup(%#x) = %v, want non-canonical", va, err)
					}
				}
			}
			// A ReadVirt across two vmalloc pages that are not contiguous.
			pt.mapAt(vm+4*ps, 0x9990000, 3, 0)
			pt.mapAt(vm+5*ps, 0x8880000, 3, 0)
			mem.write(0x9990000+ps-16, []byte("0123456789abcdef"))
			mem.write(0x8880000, []byte("ghijklmnopqrstuv"))
			buf := make([]byte, 32)
			tr, _ = NewPPC64TranslatorAt(mem, pt.top, g.pageSize, g.radix, list) // a fresh table cache
			if err := tr.ReadVirt(vm+5*ps-16, buf); err != nil || string(buf) != "0123456789abcdefghijklmnopqrstuv" {
				t.Errorf("ReadVirt = %q, %v", buf, err)
			}
			// Overlapping or misplaced vmemmap_list entries are refused.
			for _, bad := range [][]VmemmapBacking{
				{{Virt: vmemmap, Phys: 0, Size: 2 * ps}, {Virt: vmemmap + ps, Phys: 0x100000, Size: ps}},
				{{Virt: vm, Phys: 0, Size: ps}},
			} {
				if _, err := NewPPC64TranslatorAt(mem, pt.top, g.pageSize, g.radix, bad); err == nil {
					t.Errorf("vmemmap_list %+v accepted", bad)
				}
			}
		})
	}
}

// ppcVI is VMCOREINFO as Debian's 6.1 ppc64le kernel writes it (the keys
// the port reads; values from a real radix vmcore), with extra lines.
func ppcVI(t *testing.T, extra ...string) *VMCOREINFO {
	t.Helper()
	lines := []string{
		"OSRELEASE=6.1.0-57-powerpc64le", "PAGESIZE=65536",
		"SYMBOL(swapper_pg_dir)=c000000002740000", "SYMBOL(_stext)=c000000000000000",
		"SYMBOL(vmemmap_list)=c0000000027591c0", "SYMBOL(mmu_vmemmap_psize)=c0000000027593c0",
		"SYMBOL(mmu_psize_defs)=c0000000027593c8", "SIZE(vmemmap_backing)=24",
		"OFFSET(vmemmap_backing.list)=0", "OFFSET(vmemmap_backing.phys)=8", "OFFSET(vmemmap_backing.virt_addr)=16",
		"SIZE(mmu_psize_def)=96", "OFFSET(mmu_psize_def.shift)=0", "KERNELOFFSET=0",
	}
	var filtered []string
	drop := map[string]bool{}
	for _, e := range extra {
		if k, ok := strings.CutPrefix(e, "-"); ok {
			drop[k] = true
			continue
		}
		filtered = append(filtered, e)
	}
	var out []string
	for _, l := range lines {
		if k, _, _ := strings.Cut(l, "="); !drop[k] {
			out = append(out, l)
		}
	}
	out = append(out, filtered...)
	vi, err := ParseVMCOREINFO([]byte(strings.Join(out, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return vi
}

// ppcKernelMem writes what NewTranslator reads of a 6.1 kernel: the
// vmemmap_list (n entries of 2 MiB, radix's psize 7 with shift 21) and
// mmu_psize_defs.
func ppcKernelMem(mem *memPhys, n int) {
	le := func(pa, v uint64, size int) {
		b := binary.LittleEndian.AppendUint64(nil, v)
		mem.write(pa, b[:size])
	}
	le(0x27593c0, 7, 4)       // mmu_vmemmap_psize = MMU_PAGE_2M
	le(0x27593c8+7*96, 21, 4) // mmu_psize_defs[7].shift
	le(0x27591c0, 0, 8)       // empty list
	prev := uint64(0x27591c0) // where the next pointer goes
	for i := 0; i < n; i++ {
		e := 0x3000000 + uint64(i)*24
		le(prev, PPC64PageOffset+e, 8)
		le(e+8, 0x36000000+uint64(i)<<21, 8)
		le(e+16, PPC64VmemmapStart+uint64(i)<<21, 8)
		le(e, 0, 8)
		prev = e
	}
}

// NewTranslator reads the MMU and vmemmap_list from the kernel's memory as
// makedumpfile does, and refuses what it cannot translate right.
func TestPPC64NewTranslator(t *testing.T) {
	mem := newMemPhys()
	ppcKernelMem(mem, 3)
	newPPCTables(mem, 65536, true, 0x2740000)
	// cur_cpu_spec -> a cpu_spec with mmu_features at 24.
	mem.write(0x2800000, binary.LittleEndian.AppendUint64(nil, PPC64PageOffset+0x2810000))
	mem.write(0x2810000+24, binary.LittleEndian.AppendUint32(nil, 0x40|0x1))
	cpuSpec := []string{"SYMBOL(cur_cpu_spec)=c000000002800000", "OFFSET(cpu_spec.mmu_features)=24"}
	for _, tc := range []struct {
		name  string
		extra []string
		radix bool
	}{
		{"6.1: no MMU key, hash as makedumpfile 1.7.2 assumes", nil, false},
		{"RADIX_MMU=1", []string{"NUMBER(RADIX_MMU)=1"}, true},
		{"RADIX_MMU=0 wins over cpu_spec", append([]string{"NUMBER(RADIX_MMU)=0"}, cpuSpec...), false},
		{"cur_cpu_spec radix feature", cpuSpec, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vi := ppcVI(t, tc.extra...)
			if ArchOf(vi) != PPC64LE {
				t.Fatalf("ArchOf = %s", ArchOf(vi).Name())
			}
			tr, err := PPC64LE.NewTranslator(mem, vi)
			if err != nil {
				t.Fatal(err)
			}
			f := tr.format.(ppc64Format)
			if f.radix != tc.radix || tr.TopTable() != 0x2740000 || len(f.vmemmap) != 1 || f.vmemmap[0].Size != 3<<21 || f.vmemmap[0].Block != 1<<21 || tr.KernelSpaceStart() != PPC64PageOffset {
				t.Fatalf("radix %v top %#x vmemmap %+v", f.radix, tr.TopTable(), f.vmemmap)
			}
			// pfn p's struct page is at 0xc00c000000000000 + 64p.
			for pfn, want := range map[uint64]uint64{0: 0x36000000, 0x8000: 0x36200000, 0x17fff: 0x365fffc0} {
				if pa, err := tr.VtoP(PPC64VmemmapStart + pfn*64); err != nil || pa != want {
					t.Errorf("struct page of pfn %#x at %#x, %v; want %#x", pfn, pa, err, want)
				}
			}
		})
	}
	for _, tc := range []struct {
		name  string
		vi    *VMCOREINFO
		want  string
		setup func(*memPhys)
	}{
		{"no VMCOREINFO", nil, "needs its VMCOREINFO", nil},
		{"no swapper_pg_dir", ppcVI(t, "-SYMBOL(swapper_pg_dir)"), "SYMBOL(swapper_pg_dir)", nil},
		{"16 KiB pages", ppcVI(t, "-PAGESIZE", "PAGESIZE=16384"), "4 KiB or 64 KiB pages", nil},
		{"swapper_pg_dir not linear", ppcVI(t, "-SYMBOL(swapper_pg_dir)", "SYMBOL(swapper_pg_dir)=c008000000000000"), "not a linear-map address", nil},
		{"vmemmap key missing", ppcVI(t, "-OFFSET(vmemmap_backing.phys)"), "OFFSET(vmemmap_backing.phys)", nil},
		{"bad psize", ppcVI(t), "not plausible", func(m *memPhys) { m.write(0x27593c0, []byte{99, 0, 0, 0}) }},
		{"misaligned entry", ppcVI(t), "not an aligned vmemmap block", func(m *memPhys) {
			m.write(0x3000000+8, binary.LittleEndian.AppendUint64(nil, 0x36001000))
		}},
		{"list loop", ppcVI(t), "a loop", func(m *memPhys) {
			m.write(0x3000000+2*24, binary.LittleEndian.AppendUint64(nil, PPC64PageOffset+0x3000000))
		}},
		{"list outside memory", ppcVI(t), "entry 3", func(m *memPhys) {
			m.write(0x3000000+2*24, binary.LittleEndian.AppendUint64(nil, PPC64PageOffset+0x7000000))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemPhys()
			ppcKernelMem(mem, 3)
			newPPCTables(mem, 65536, true, 0x2740000)
			if tc.setup != nil {
				tc.setup(mem)
			}
			_, err := PPC64LE.NewTranslator(mem, tc.vi)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewTranslator = %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(tc.name, "VMCOREINFO") || strings.Contains(tc.name, "swapper") || strings.Contains(tc.name, "16 KiB") {
				if PPC64LE.Check(tc.vi) == nil {
					t.Fatal("Check accepted it")
				}
			}
		})
	}
	if err := PPC64LE.Check(ppcVI(t)); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if pb, _, ok := PPC64LE.PhysBase(ppcVI(t), nil); ok || pb != 0 {
		t.Fatalf("PhysBase = %#x %v, want none (makedumpfile writes 0)", pb, ok)
	}
	// An empty vmemmap_list (6.6+ radix) leaves the vmemmap to the walk.
	mem = newMemPhys()
	ppcKernelMem(mem, 0)
	pt := newPPCTables(mem, 65536, true, 0x2740000)
	pt.mapAt(PPC64VmemmapStart, 0x36000000, 2, 0)
	tr, err := PPC64LE.NewTranslator(mem, ppcVI(t, "NUMBER(RADIX_MMU)=1"))
	if err != nil {
		t.Fatal(err)
	}
	if pa, err := tr.VtoP(PPC64VmemmapStart + 0x1040); err != nil || pa != 0x36001040 {
		t.Fatalf("vmemmap by the walk: %#x, %v", pa, err)
	}
}

// ppcFuzzMemory builds an 8-page (64 KiB pages) physical memory from
// records of 11 bytes: page (mod 8), entry index (mod 8192) and the
// entry's 8 bytes as they lie in memory (big-endian for a table entry).
func ppcFuzzMemory(recs []byte) []byte {
	mem := make([]byte, 8<<16)
	for ; len(recs) >= 11; recs = recs[11:] {
		page := uint64(recs[0] % 8)
		idx := uint64(binary.LittleEndian.Uint16(recs[1:]) % 8192)
		copy(mem[page<<16+idx*8:], recs[3:11])
	}
	return mem
}

func ppcFuzzRecord(page byte, idx uint16, v uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{page, byte(idx), byte(idx >> 8)}, v)
}

// ppcFuzzSeed is a radix table set at 0 mapping c008000000020000 to a
// 64 KiB page and c00a000000000000 with a 2 MiB leaf.
func ppcFuzzSeed() []byte {
	var seed []byte
	for _, r := range []struct {
		page byte
		idx  uint16
		v    uint64
	}{
		{0, 0x800, 0x10000 | ppc64Present}, {1, 0, 0x20000 | ppc64Present}, {2, 0, 0x30000 | ppc64Present},
		{3, 2, 0x4380000 | ppc64Present | ppc64Leaf}, {0, 0xa00, 0x40000 | ppc64Present}, {4, 0, 0x50000 | ppc64Present},
		{5, 0, 0x200000 | ppc64Present | ppc64Leaf | 1<<55}, {0, 0xc00, 0x0 | ppc64Present},
	} {
		seed = append(seed, ppcFuzzRecord(r.page, r.idx, r.v)...)
	}
	return seed
}

// FuzzPPC64VtoP walks arbitrary tables of every geometry (both MMUs, 4 KiB
// and 64 KiB pages: small): no panic, at most one table read per level,
// and a translation keeps the page offset, names a power-of-two page of at
// least the page size and a 53-bit address.
func FuzzPPC64VtoP(f *testing.F) {
	seed := ppcFuzzSeed()
	f.Add(seed, true, false, uint64(0xc008000000021234))
	f.Add(seed, true, false, uint64(0xc00a000000001234))
	f.Add(seed, false, false, uint64(0xc008000000021234))
	f.Add(seed, true, false, uint64(0xc000000012345678))
	f.Add(seed, true, true, uint64(0xc00c000000001234))
	f.Add(seed, false, true, uint64(0xc0003d0000001234))
	f.Add(seed, false, true, uint64(0xc0003f0000001234))
	f.Fuzz(func(t *testing.T, recs []byte, radix, small bool, vaddr uint64) {
		if len(recs) > 11*512 {
			recs = recs[:11*512]
		}
		pageSize := uint64(65536)
		if small {
			pageSize = 4096
		}
		phys := &fuzzPhys{b: ppcFuzzMemory(recs)}
		tr, err := NewPPC64TranslatorAt(phys, 0, pageSize, radix, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.Lookup(vaddr)
		if phys.reads > 4 {
			t.Fatalf("one walk read %d tables", phys.reads)
		}
		if err != nil {
			var te *TranslationError
			if !errors.As(err, &te) || te.Vaddr != vaddr {
				t.Fatalf("Lookup(%#x): %v is not a TranslationError for the address", vaddr, err)
			}
			return
		}
		if m.Paddr >= 1<<53 || m.PageSize < pageSize || m.PageSize&(m.PageSize-1) != 0 {
			t.Fatalf("Lookup(%#x) = %#x, page size %#x", vaddr, m.Paddr, m.PageSize)
		}
		if m.Paddr&(m.PageSize-1) != vaddr&(m.PageSize-1) {
			t.Fatalf("Lookup(%#x) = %#x: page offset not preserved", vaddr, m.Paddr)
		}
		_ = tr.ReadVirt(vaddr, make([]byte, 64))
	})
}

// mem_map discovery on a 64 KiB-page ppc64le 6.1 kernel, as Debian's
// VMCOREINFO describes it: SPARSEMEM_EXTREME with 65536 roots of 2048
// sections (SECTIONS_PER_ROOT is a page of 32-byte mem_sections), 16 MiB
// sections of 256 pfns, the struct pages in the vmemmap reached through
// vmemmap_list. A 1 GiB machine has 64 sections.
func TestPPC64FindMemMap(t *testing.T) {
	mem := newMemPhys()
	ppcKernelMem(mem, 1) // one 2 MiB vmemmap block at physical 0x36000000
	newPPCTables(mem, 65536, true, 0x2740000)
	const roots, root0 = 0x4000000, 0x4100000
	mem.write(roots, binary.LittleEndian.AppendUint64(nil, PPC64PageOffset+root0))
	for n := uint64(0); n < 64; n++ {
		mem.write(root0+n*32, binary.LittleEndian.AppendUint64(nil, PPC64VmemmapStart|3))
	}
	vi := ppcVI(t, "SYMBOL(mem_section)=c000000004000000", "LENGTH(mem_section)=65536", "SIZE(mem_section)=32",
		"OFFSET(mem_section.section_mem_map)=0", "NUMBER(SECTION_SIZE_BITS)=24", "NUMBER(MAX_PHYSMEM_BITS)=51", "SIZE(page)=64")
	tr, err := PPC64LE.NewTranslator(mem, vi)
	if err != nil {
		t.Fatal(err)
	}
	mm, err := FindMemMap(vi, tr, 16384)
	if err != nil {
		t.Fatal(err)
	}
	if len(mm.Sections) != 64 || mm.MaxPFN() != 16384 {
		t.Fatalf("%d sections up to pfn %d, want 64 up to 16384", len(mm.Sections), mm.MaxPFN())
	}
	for i, s := range mm.Sections {
		if s.StartPFN != uint64(i)*256 || s.EndPFN != s.StartPFN+256 || s.MemMap != PPC64VmemmapStart+s.StartPFN*64 {
			t.Fatalf("section %d: %+v", i, s)
		}
	}
	// pfn 0x1234's struct page is at 0x36000000 + 0x1234 * 64.
	mem.write(0x36000000+0x1234*64, []byte("struct page 0x1234"))
	b := make([]byte, 18)
	if err := tr.ReadVirt(mm.Sections[0x1234/256].MemMap+0x34*64, b); err != nil || string(b) != "struct page 0x1234" {
		t.Fatalf("struct page of pfn 0x1234: %q, %v", b, err)
	}
}

// Debian 13's default ppc64el kernel: 4 KiB pages, 6.12. Under radix its
// vmemmap_list is empty and the struct pages are found by the walk, whose
// vmemmap entry is in the 13th page of the 64 KiB top table; under hash
// the list holds the vmemmap at 0xc0003f0000000000, in pieces of the base
// page (the list is searched in address order, whatever its own order).
func TestPPC64NewTranslator4K(t *testing.T) {
	const psizeDefs, psizeVar, head = 0x27593c8, 0x27593c0, 0x27591c0
	le := func(mem *memPhys, pa, v uint64, size int) {
		mem.write(pa, binary.LittleEndian.AppendUint64(nil, v)[:size])
	}
	vi := func(radix int) *VMCOREINFO {
		return ppcVI(t, "-PAGESIZE", "PAGESIZE=4096", fmt.Sprintf("NUMBER(RADIX_MMU)=%d", radix))
	}

	mem := newMemPhys()
	le(mem, psizeVar, 7, 4) // MMU_PAGE_2M, as radix has it
	le(mem, psizeDefs+7*96, 21, 4)
	le(mem, head, 0, 8)
	pt := newPPCTables(mem, 4096, true, 0x2740000)
	pt.mapAt(PPC64VmemmapStart, 0x36000000, 2, 0)
	if idx := PPC64VmemmapStart >> pt.f.shift(0) & (1<<pt.f.bits[0] - 1); idx*8 < 4096 {
		t.Fatalf("the vmemmap's top-level entry %d lies in the table's first page", idx)
	}
	tr, err := PPC64LE.NewTranslator(mem, vi(1))
	if err != nil {
		t.Fatal(err)
	}
	if pa, err := tr.VtoP(PPC64VmemmapStart + 0x1040); err != nil || pa != 0x36001040 {
		t.Fatalf("radix vmemmap by the walk: %#x, %v", pa, err)
	}

	mem = newMemPhys()
	le(mem, psizeVar, 0, 4) // MMU_PAGE_4K
	le(mem, psizeDefs, 12, 4)
	newPPCTables(mem, 4096, false, 0x2740000)
	prev := uint64(head)
	for i := uint64(0); i < 3; i++ { // pushed at the head: the highest first
		e := 0x3000000 + i*24
		le(mem, prev, PPC64PageOffset+e, 8)
		le(mem, e+8, 0x5000000+(2-i)<<12, 8)
		le(mem, e+16, PPC64Hash4KVmemmapStart+(2-i)<<12, 8)
		le(mem, e, 0, 8)
		prev = e
	}
	tr, err = PPC64LE.NewTranslator(mem, vi(0))
	if err != nil {
		t.Fatal(err)
	}
	if runs := tr.format.(ppc64Format).vmemmap; len(runs) != 1 || runs[0].Size != 0x3000 || runs[0].Block != 0x1000 {
		t.Errorf("three contiguous entries: runs %+v, want one of 0x3000 bytes in 0x1000 blocks", runs)
	}
	for va, want := range map[uint64]uint64{PPC64Hash4KVmemmapStart: 0x5000000, PPC64Hash4KVmemmapStart + 0x2fc0: 0x5002fc0} {
		if pa, err := tr.VtoP(va); err != nil || pa != want {
			t.Errorf("hash vmemmap %#x: %#x, %v; want %#x", va, pa, err, want)
		}
	}
	if _, err := tr.VtoP(PPC64Hash4KVmemmapStart + 0x3000); !errors.Is(err, ErrNotPresent) {
		t.Errorf("past the list: %v", err)
	}
	// Past the list, Step's span is the largest aligned block in the gap,
	// so that a walk of the address space passes the vmemmap quickly.
	for off, want := range map[uint64]uint64{0x3000: 0x1000, 0x3800: 0x1000, 0x4000: 0x4000, 0x5000: 0x4000, 1 << 39: 1 << 39} {
		if _, span, err := tr.Step(PPC64Hash4KVmemmapStart + off); !errors.Is(err, ErrNotPresent) || span != want {
			t.Errorf("Step(vmemmap + %#x) = span %#x, %v; want %#x not present", off, span, err, want)
		}
	}
	// A 64 KiB-page list's vmemmap address is not in hash's 4 KiB layout.
	le(mem, 0x3000000+16, PPC64VmemmapStart, 8)
	if _, err := PPC64LE.NewTranslator(mem, vi(0)); err == nil || !strings.Contains(err.Error(), "outside the vmemmap") {
		t.Errorf("a list entry at %#x: %v", PPC64VmemmapStart, err)
	}
}
