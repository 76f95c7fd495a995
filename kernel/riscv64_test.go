package kernel

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// rvTables builds riscv64 page tables of one mode in a memPhys.
type rvTables struct {
	mem    *memPhys
	levels int
	top    uint64
	next   uint64
}

func newRVTables(mem *memPhys, levels int, base uint64) *rvTables {
	mem.write(base, make([]byte, 4096))
	return &rvTables{mem: mem, levels: levels, top: base, next: base + 4096}
}

// rvPTE is an entry for physical address pa with the low bits flags.
func rvPTE(pa, flags uint64) uint64 { return pa>>12<<riscvPFNShift | flags }

// mapAt maps va to pa with a leaf at level (0 the top, levels-1 the
// last), with R, W, A, D and the given high bits (Svpbmt, Svnapot) set.
func (pt *rvTables) mapAt(va, pa uint64, leaf int, high uint64) {
	table := pt.top
	for level := 0; ; level++ {
		shift := uint(12 + 9*(pt.levels-1-level))
		ea := table + (va>>shift&511)*8
		if level == leaf {
			pt.mem.put64(ea, rvPTE(pa, 0xc7)|high) // D A W R V
			return
		}
		e := pt.mem.get64(ea)
		if e&riscvValid == 0 {
			n := pt.next
			pt.next += 4096
			pt.mem.write(n, make([]byte, 4096))
			e = rvPTE(n, riscvValid)
			pt.mem.put64(ea, e)
		}
		table = (e & riscvPTEMask) >> riscvPFNShift << 12
	}
}

// Sv39, Sv48 and Sv57 translate pages and every superpage their upper
// levels hold (2 MiB, 1 GiB, 512 GiB, 256 TiB), with the page offset
// inside the superpage kept (the decoding makedumpfile 1.7.8 got wrong);
// Svpbmt's and Svnapot's bits above the PPN are no address; the walk
// reads at most one table per level.
func TestRISCV64Lookup(t *testing.T) {
	for _, vaBits := range []uint{39, 48, 57} {
		t.Run(fmt.Sprintf("sv%d", vaBits), func(t *testing.T) {
			levels, _ := riscvLevels(vaBits)
			mem := newMemPhys()
			pt := newRVTables(mem, levels, 0x80a00000)
			kstart := ^uint64(0) << (vaBits - 1)
			type want struct {
				va, pa, size uint64
				leaf         int
				high         uint64
			}
			cases := []want{
				{kstart + 5<<12, 0x81234000, 1 << 12, levels - 1, 0},
				{^uint64(0) &^ 0xfff, 0x80200000, 1 << 12, levels - 1, 1 << 61}, // PBMT NC
				{kstart + 64<<21, 0x1_4000_0000, 1 << 21, levels - 2, 0},
				{kstart + 3<<30, 0x40_0000_0000, 1 << 30, levels - 3, 1 << 63},
			}
			if levels >= 4 {
				cases = append(cases, want{kstart + 7<<39, 0x80_0000_0000, 1 << 39, levels - 4, 0})
			}
			if levels == 5 {
				cases = append(cases, want{kstart + 2<<48, 3 << 48, 1 << 48, 0, 0})
			}
			for _, c := range cases {
				pt.mapAt(c.va, c.pa, c.leaf, c.high)
			}
			tr, err := NewRISCV64TranslatorAt(mem, pt.top, vaBits)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Levels() != levels || tr.KernelSpaceStart() != kstart {
				t.Fatalf("levels %d, kernel space from %#x", tr.Levels(), tr.KernelSpaceStart())
			}
			for _, c := range cases {
				off := uint64(0x1234567) & (c.size - 1)
				mem.reads = 0
				tr = must(NewRISCV64TranslatorAt(mem, pt.top, vaBits))
				m, err := tr.Lookup(c.va + off)
				if err != nil || m.Paddr != c.pa+off || m.PageSize != c.size {
					t.Errorf("Lookup(%#x) = %#x/%#x, %v; want %#x/%#x", c.va+off, m.Paddr, m.PageSize, err, c.pa+off, c.size)
				}
				if mem.reads > c.leaf+1 {
					t.Errorf("Lookup(%#x) read %d tables for a leaf at level %d", c.va, mem.reads, c.leaf)
				}
			}
			var te *TranslationError
			if _, err := tr.Lookup(kstart + 1000<<21); !errors.As(err, &te) || !errors.Is(err, ErrNotPresent) || te.Span == 0 {
				t.Errorf("unmapped: %v", err)
			}
			if _, err := tr.Lookup(kstart - 1); !errors.Is(err, ErrNonCanonical) {
				t.Errorf("below the kernel half: %v", err)
			}
			if _, err := tr.Lookup(0x1000); err == nil {
				t.Errorf("a user address translated")
			}
		})
	}
}

// Entries the MMU faults on are errors naming the level: a superpage whose
// PPN is not aligned to its size, a last-level entry pointing to a table.
func TestRISCV64BadEntries(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		entry      uint64
		level      int // where the entry sits, Sv39
	}{
		{"misaligned 1G", "PGD entry", rvPTE(0x80200000, 0xc7), 0},
		{"misaligned 2M", "PMD entry", rvPTE(0x80201000, 0xc7), 1},
		{"table at PTE", "last-level entry without R, W or X", rvPTE(0x80203000, riscvValid), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMemPhys()
			pt := newRVTables(mem, 3, 0x80a00000)
			va := uint64(0xffffffc000000000) // Sv39 kernel half
			pt.mapAt(va, 0x80000000, 2, 0)
			idx := func(l int) uint64 { return va >> (12 + 9*(2-l)) & 511 }
			table := pt.top
			for l := 0; l < tc.level; l++ {
				table = (mem.get64(table+idx(l)*8) & riscvPTEMask) >> riscvPFNShift << 12
			}
			mem.put64(table+idx(tc.level)*8, tc.entry)
			_, err := must(NewRISCV64TranslatorAt(mem, pt.top, 39)).Lookup(va)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Lookup = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := NewRISCV64TranslatorAt(newMemPhys(), 0, 47); err == nil || !strings.Contains(err.Error(), "VA_BITS 47") {
		t.Fatalf("Sv47: %v", err)
	}
	if _, err := NewRISCV64TranslatorAt(newMemPhys(), 0x80a00800, 39); err == nil {
		t.Fatal("a top table off a page was taken")
	}
}

// rvVMCOREINFO is arch_crash_save_vmcoreinfo's text of Debian 13's
// riscv64 6.12 under QEMU's rv64 (Sv57), with the generic
// swapper_pg_dir: phys_ram_base and VA_BITS in decimal, the rest in hex.
const rvVMCOREINFO = "OSRELEASE=6.12.118+deb13-riscv64\nPAGESIZE=4096\n" +
	"SYMBOL(swapper_pg_dir)=ffffffff81dcb000\n" +
	"NUMBER(phys_ram_base)=2147483648\n" +
	"NUMBER(PAGE_OFFSET)=0xff60000000000000\n" +
	"NUMBER(VMALLOC_START)=0xff20000000000000\n" +
	"NUMBER(VMALLOC_END)=0xff60000000000000\n" +
	"NUMBER(VA_BITS)=57\n" +
	"NUMBER(VMEMMAP_START)=0xff1c000000000000\n" +
	"NUMBER(VMEMMAP_END)=0xff20000000000000\n" +
	"NUMBER(MODULES_VADDR)=0xffffffff01e6c000\n" +
	"NUMBER(MODULES_END)=0xffffffff80000000\n" +
	"NUMBER(KERNEL_LINK_ADDR)=0xffffffff80000000\n" +
	"NUMBER(va_kernel_pa_offset)=0xfffffffeffe00000\n"

// The translator comes from VMCOREINFO as makedumpfile reads it: the top
// table at SYMBOL(swapper_pg_dir) - va_kernel_pa_offset, the mode from
// VA_BITS, phys_base = phys_ram_base; a missing or impossible value is an
// error naming it, from Check and NewTranslator alike.
func TestRISCV64FromVMCOREINFO(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		levels     int
		want       string
	}{
		{"debian sv57", rvVMCOREINFO, 5, ""},
		{"sv39", strings.Replace(rvVMCOREINFO, "VA_BITS)=57", "VA_BITS)=39", 1), 3, ""},
		{"sv48", strings.Replace(rvVMCOREINFO, "VA_BITS)=57", "VA_BITS)=48", 1), 4, ""},
		{"sv47", strings.Replace(rvVMCOREINFO, "VA_BITS)=57", "VA_BITS)=47", 1), 0, "VA_BITS 47 is none of"},
		{"xip", strings.Replace(rvVMCOREINFO, "NUMBER(va_kernel_pa_offset)", "NUMBER(xip_offset)", 1), 0, "missing NUMBER(va_kernel_pa_offset)"},
		{"no swapper", strings.Replace(rvVMCOREINFO, "SYMBOL(swapper_pg_dir)", "SYMBOL(init_mm)", 1), 0, "missing SYMBOL(swapper_pg_dir)"},
		{"swapper below the image", strings.Replace(rvVMCOREINFO, "=ffffffff81dcb000", "=ff60000001dcb000", 1), 0, "not in the kernel image"},
		{"64k pages", strings.Replace(rvVMCOREINFO, "PAGESIZE=4096", "PAGESIZE=65536", 1), 0, "4096-byte pages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vi, err := ParseVMCOREINFO([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if ArchOf(vi) != RISCV64 {
				t.Fatalf("ArchOf = %s", ArchOf(vi).Name())
			}
			checkErr := RISCV64.Check(vi)
			tr, err := RISCV64.NewTranslator(newMemPhys(), vi)
			if tc.want != "" {
				if checkErr == nil || !strings.Contains(checkErr.Error(), tc.want) {
					t.Fatalf("Check = %v, want %q", checkErr, tc.want)
				}
				if err == nil && !strings.Contains(tc.name, "pages") {
					t.Fatalf("NewTranslator took it")
				}
				return
			}
			if err != nil || checkErr != nil {
				t.Fatalf("NewTranslator = %v, Check = %v", err, checkErr)
			}
			if tr.TopTable() != 0x81fcb000 || tr.Levels() != tc.levels || tr.KernelSpaceStart() != 0xff1c000000000000 {
				t.Fatalf("top %#x levels %d kernel space from %#x", tr.TopTable(), tr.Levels(), tr.KernelSpaceStart())
			}
			if pb, from, ok := RISCV64.PhysBase(vi, nil); !ok || pb != 0x80000000 || from != "vmcoreinfo" {
				t.Fatalf("PhysBase = %#x %s %v", pb, from, ok)
			}
		})
	}
	if err := RISCV64.Check(nil); err == nil {
		t.Fatal("Check(nil) passed")
	}
}

// rvFuzzSeed is a small Sv39/48/57 table set in fuzzMemory's records: page
// 0 the top table, a 4 KiB page, a 2 MiB and a 1 GiB superpage, and an
// entry with Svpbmt's bits.
func rvFuzzSeed() []byte {
	var b []byte
	for _, r := range []struct {
		page byte
		idx  uint16
		v    uint64
	}{
		{0, 511, rvPTE(0x1000, 1)}, {1, 511, rvPTE(0x2000, 1)}, {2, 511, rvPTE(0x3000, 1)},
		{3, 0, rvPTE(0x4000, 1)}, {4, 1, rvPTE(0x5000, 0xcf)},
		{3, 1, rvPTE(0x200000, 0xc7)}, {2, 0, rvPTE(0x40000000, 0xc7|1<<62)},
		{0, 256, rvPTE(0x6000, 1)}, {6, 0, rvPTE(0x7000, 1)}, {7, 0, rvPTE(0x0, 1)},
	} {
		b = append(b, fuzzRecord(r.page, r.idx, r.v)...)
	}
	return b
}

// FuzzRISCV64VtoP walks arbitrary tables in each mode: no panic, no more
// table reads than levels, and a translation keeps the page offset, names
// a page or superpage size and a physical address of at most 56 bits.
func FuzzRISCV64VtoP(f *testing.F) {
	seed := rvFuzzSeed()
	f.Add(seed, uint8(0), uint64(0xffffffffffe01234))
	f.Add(seed, uint8(1), uint64(0xffffffffffe01234))
	f.Add(seed, uint8(2), uint64(0xff00000000000000))
	f.Fuzz(func(t *testing.T, recs []byte, mode uint8, vaddr uint64) {
		if len(recs) > 11*256 {
			recs = recs[:11*256]
		}
		vaBits := []uint{39, 48, 57}[int(mode)%3]
		phys := &fuzzPhys{b: fuzzMemory(recs)}
		tr, err := NewRISCV64TranslatorAt(phys, 0, vaBits)
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
		if m.Paddr >= 1<<riscvPABits || m.PageSize < 4096 || m.PageSize > 1<<48 || m.PageSize&(m.PageSize-1) != 0 {
			t.Fatalf("Lookup(%#x) = %#x, page size %#x", vaddr, m.Paddr, m.PageSize)
		}
		if m.Paddr&(m.PageSize-1) != vaddr&(m.PageSize-1) {
			t.Fatalf("Lookup(%#x) = %#x: page offset not preserved", vaddr, m.Paddr)
		}
		_ = tr.ReadVirt(vaddr, make([]byte, 64))
	})
}
