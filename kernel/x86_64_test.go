package kernel

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// memPhys is a sparse physical memory made of 4 KiB pages; reading a page
// that was never written is an error, as reading outside a dump is.
type memPhys struct {
	pages map[uint64][]byte
	reads int
}

func newMemPhys() *memPhys { return &memPhys{pages: make(map[uint64][]byte)} }

func (m *memPhys) ReadPhys(paddr uint64, p []byte) error {
	m.reads++
	for len(p) > 0 {
		pg, ok := m.pages[paddr&^0xfff]
		if !ok {
			return fmt.Errorf("physical %#x not in memory", paddr)
		}
		n := copy(p, pg[paddr&0xfff:])
		p = p[n:]
		paddr += uint64(n)
	}
	return nil
}

func (m *memPhys) page(paddr uint64) []byte {
	pg, ok := m.pages[paddr&^0xfff]
	if !ok {
		pg = make([]byte, 4096)
		m.pages[paddr&^0xfff] = pg
	}
	return pg
}

func (m *memPhys) write(paddr uint64, b []byte) {
	for len(b) > 0 {
		n := copy(m.page(paddr)[paddr&0xfff:], b)
		b = b[n:]
		paddr += uint64(n)
	}
}

func (m *memPhys) put64(paddr, v uint64) {
	binary.LittleEndian.PutUint64(m.page(paddr)[paddr&0xfff:], v)
}

func (m *memPhys) get64(paddr uint64) uint64 {
	return binary.LittleEndian.Uint64(m.page(paddr)[paddr&0xfff:])
}

// pageTables builds x86_64 page tables in a memPhys. Tables are allocated
// from a bump pointer in a physical region reserved for them.
type pageTables struct {
	mem    *memPhys
	top    uint64
	levels int
	next   uint64
	sme    uint64 // set in every entry written, as an SME kernel does
}

func newPageTables(mem *memPhys, levels int, tableBase uint64) *pageTables {
	pt := &pageTables{mem: mem, levels: levels, top: tableBase, next: tableBase + 4096}
	mem.page(tableBase)
	return pt
}

func (pt *pageTables) alloc() uint64 {
	a := pt.next
	pt.next += 4096
	pt.mem.page(a)
	return a
}

// mapPage maps one page of the given size (4K, 2M or 1G) at va to pa.
func (pt *pageTables) mapPage(va, pa, size uint64) {
	shifts := []uint{48, 39, 30, 21, 12}[5-pt.levels:]
	leaf := map[uint64]uint{1 << 12: 12, 1 << 21: 21, 1 << 30: 30}[size]
	table := pt.top
	for _, s := range shifts {
		ea := table + ((va>>s)&511)*8
		if s == leaf {
			e := pa | ptePresent | 2 | pt.sme
			if s != 12 {
				e |= ptePSE
			}
			pt.mem.put64(ea, e)
			return
		}
		e := pt.mem.get64(ea)
		if e&ptePresent == 0 {
			e = pt.alloc() | ptePresent | 2 | pt.sme
			pt.mem.put64(ea, e)
		}
		table = e & pteAddrMask &^ pt.sme
	}
}

func (pt *pageTables) translator(t *testing.T) *Translator {
	t.Helper()
	tr, err := NewTranslatorAt(pt.mem, pt.top, pt.levels, pt.sme)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestVtoP(t *testing.T) {
	for _, levels := range []int{4, 5} {
		for _, sme := range []uint64{0, 1 << 47} {
			t.Run(fmt.Sprintf("%d-level/sme=%#x", levels, sme), func(t *testing.T) {
				mem := newMemPhys()
				pt := newPageTables(mem, levels, 0x100000)
				pt.sme = sme
				base := PageOffsetBaseL4
				if levels == 5 {
					base = PageOffsetBaseL5
				}
				pt.mapPage(base, 0, 1<<30)                              // 1 GiB page
				pt.mapPage(StartKernelMap+0x1000000, 0x3a000000, 1<<21) // 2 MiB page
				pt.mapPage(0xffffc90000001000, 0x7654000, 1<<12)        // 4 KiB page
				pt.mapPage(0xffffc90000002000, 0x1234000, 1<<12)        // next, elsewhere
				pt.mapPage(0x00007f0000000000, 0x5000, 1<<12)           // user half
				tr := pt.translator(t)

				tests := []struct {
					va, pa, size uint64
				}{
					{base, 0, 1 << 30},
					{base + 0x3fffffff, 0x3fffffff, 1 << 30},
					{base + 0x12345678, 0x12345678, 1 << 30},
					{StartKernelMap + 0x1000000, 0x3a000000, 1 << 21},
					{StartKernelMap + 0x11fffff, 0x3a1fffff, 1 << 21},
					{0xffffc90000001abc, 0x7654abc, 1 << 12},
					{0xffffc90000002000, 0x1234000, 1 << 12},
					{0x00007f0000000fff, 0x5fff, 1 << 12},
				}
				for _, tt := range tests {
					m, err := tr.Lookup(tt.va)
					if err != nil {
						t.Errorf("Lookup(%#x): %v", tt.va, err)
						continue
					}
					if m.Paddr != tt.pa || m.PageSize != tt.size {
						t.Errorf("Lookup(%#x) = %#x/%#x, want %#x/%#x", tt.va, m.Paddr, m.PageSize, tt.pa, tt.size)
					}
					if pa, err := tr.VtoP(tt.va); err != nil || pa != tt.pa {
						t.Errorf("VtoP(%#x) = %#x, %v", tt.va, pa, err)
					}
				}
			})
		}
	}
}

func TestVtoPErrors(t *testing.T) {
	mem := newMemPhys()
	pt := newPageTables(mem, 4, 0x100000)
	pt.mapPage(0xffffc90000001000, 0x7654000, 1<<12)
	pt.mapPage(StartKernelMap, 0x200000, 1<<21)
	tr := pt.translator(t)

	// A PUD entry pointing at a table outside memory.
	pt.mapPage(0xffffea0000000000, 0x1000, 1<<12)
	pgd := mem.get64(pt.top+((0xffffea0000000000>>39)&511)*8) & pteAddrMask
	mem.put64(pgd+((0xffffea0000000000>>30)&511)*8, 0xdead000|ptePresent)
	// A PGD entry with the reserved page-size bit.
	mem.put64(pt.top+((0xffff888000000000>>39)&511)*8, 0x200000|ptePresent|ptePSE)

	tests := []struct {
		va      uint64
		want    string
		is      error
		level   string
		span    uint64
		notMine bool
	}{
		{0xffffc90000000000, "vtop 0xffffc90000000000: PTE entry not present", ErrNotPresent, "PTE", 1 << 12, false},
		{0xffffc90000200000, "vtop 0xffffc90000200000: PMD entry not present", ErrNotPresent, "PMD", 1 << 21, false},
		{0xffffc90040000000, "vtop 0xffffc90040000000: PUD entry not present", ErrNotPresent, "PUD", 1 << 30, false},
		{0xffff900000000000, "vtop 0xffff900000000000: PGD entry not present", ErrNotPresent, "PGD", 1 << 39, false},
		{0x0000800000000000, "vtop 0x800000000000: non-canonical address", ErrNonCanonical, "", 0, false},
		{0xffff7fffffffffff, "vtop 0xffff7fffffffffff: non-canonical address", ErrNonCanonical, "", 0, false},
		{0xffffea0000000000, "reading the table at physical 0xdead000: physical 0xdead000 not in memory", nil, "PMD", 1 << 21, true},
		{0xffff888000000000, "page-size bit set at a level that cannot map a page", nil, "PGD", 1 << 39, true},
	}
	for _, tt := range tests {
		_, err := tr.VtoP(tt.va)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("VtoP(%#x) = %v, want %q", tt.va, err, tt.want)
			continue
		}
		var te *TranslationError
		if !errors.As(err, &te) {
			t.Errorf("VtoP(%#x): %T is not a *TranslationError", tt.va, err)
			continue
		}
		if te.Level != tt.level || te.Span != tt.span || te.Vaddr != tt.va {
			t.Errorf("VtoP(%#x): level %q span %#x vaddr %#x", tt.va, te.Level, te.Span, te.Vaddr)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("VtoP(%#x) = %v, want errors.Is %v", tt.va, err, tt.is)
		}
		if tt.notMine && (errors.Is(err, ErrNotPresent) || errors.Is(err, ErrNonCanonical)) {
			t.Errorf("VtoP(%#x) = %v must not look like an unmapped address", tt.va, err)
		}
	}

	// 5-level canonical boundary.
	tr5, err := NewTranslatorAt(mem, pt.top, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr5.VtoP(0x0100000000000000); !errors.Is(err, ErrNonCanonical) {
		t.Errorf("5-level VtoP of a non-canonical address: %v", err)
	}
	if _, err := tr5.VtoP(0x00ff000000000000); errors.Is(err, ErrNonCanonical) {
		t.Errorf("5-level VtoP of a canonical address: %v", err)
	}
}

func TestNewTranslatorAtErrors(t *testing.T) {
	mem := newMemPhys()
	for _, tc := range []struct {
		r      PhysReader
		top    uint64
		levels int
		want   string
	}{
		{nil, 0, 4, "nil PhysReader"},
		{mem, 0, 3, "paging depth 3"},
		{mem, 0x1008, 4, "not a page-aligned"},
		{mem, 1 << 52, 4, "not a page-aligned"},
	} {
		if _, err := NewTranslatorAt(tc.r, tc.top, tc.levels, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewTranslatorAt(%#x, %d) = %v, want %q", tc.top, tc.levels, err, tc.want)
		}
	}
}

func TestReadVirt(t *testing.T) {
	mem := newMemPhys()
	pt := newPageTables(mem, 4, 0x100000)
	// Three virtually contiguous pages, physically scattered and out of order.
	va := uint64(0xffffc90000010000)
	pas := []uint64{0x9000, 0x3000, 0x7000}
	var want []byte
	for i, pa := range pas {
		pt.mapPage(va+uint64(i)*4096, pa, 1<<12)
		chunk := bytes.Repeat([]byte{byte('a' + i)}, 4096)
		chunk[0], chunk[4095] = byte(i), byte(0xf0+i)
		mem.write(pa, chunk)
		want = append(want, chunk...)
	}
	tr := pt.translator(t)

	for _, tc := range []struct{ off, n int }{{0, 12288}, {4000, 200}, {4095, 4098}, {100, 0}, {12287, 1}} {
		got := make([]byte, tc.n)
		if err := tr.ReadVirt(va+uint64(tc.off), got); err != nil {
			t.Errorf("ReadVirt(+%d, %d): %v", tc.off, tc.n, err)
			continue
		}
		if !bytes.Equal(got, want[tc.off:tc.off+tc.n]) {
			t.Errorf("ReadVirt(+%d, %d): wrong bytes", tc.off, tc.n)
		}
	}
	err := tr.ReadVirt(va+12000, make([]byte, 500))
	if !errors.Is(err, ErrNotPresent) || !strings.Contains(err.Error(), "read 500 bytes at virtual 0xffffc90000012ee0") {
		t.Errorf("ReadVirt past the mapping: %v", err)
	}
	if err := tr.ReadVirt(0xfffffffffffff000, make([]byte, 8192)); err == nil {
		t.Errorf("ReadVirt wrapping the address space succeeded")
	}

	// A large page is read in one piece, not page by page.
	pt.mapPage(StartKernelMap+0x1000000, 0x400000, 1<<21)
	for a := uint64(0x400000); a < 0x600000; a += 4096 {
		mem.page(a)
	}
	tr = pt.translator(t) // the old one has the top table cached
	mem.reads = 0
	if err := tr.ReadVirt(StartKernelMap+0x1000000, make([]byte, 1<<21)); err != nil {
		t.Fatal(err)
	}
	if mem.reads > 4 {
		t.Errorf("reading one 2 MiB page took %d physical reads", mem.reads)
	}
}

func TestTableCache(t *testing.T) {
	mem := newMemPhys()
	pt := newPageTables(mem, 4, 0x100000)
	pt.mapPage(0xffffc90000001000, 0x7654000, 1<<12)
	tr := pt.translator(t)
	if _, err := tr.VtoP(0xffffc90000001000); err != nil {
		t.Fatal(err)
	}
	mem.reads = 0
	for i := 0; i < 10; i++ {
		if _, err := tr.VtoP(0xffffc90000001000 + uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if mem.reads != 0 {
		t.Errorf("repeated walks read %d tables, want all from the cache", mem.reads)
	}
}

// vmcoreinfoFor makes the VMCOREINFO a kernel with these page tables would
// export, with the top table at topPA.
func vmcoreinfoFor(t *testing.T, topVA uint64, physBase int64, extra string) *VMCOREINFO {
	t.Helper()
	vi, err := ParseVMCOREINFO([]byte(fmt.Sprintf("OSRELEASE=6.1.0\nPAGESIZE=4096\nSYMBOL(init_top_pgt)=%x\nNUMBER(phys_base)=%d\n%s",
		topVA, physBase, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return vi
}

func TestNewTranslator(t *testing.T) {
	mem := newMemPhys()
	const topPA = 0x2c10000
	pt := newPageTables(mem, 4, topPA)
	pt.mapPage(0xffffc90000001000, 0x7654000, 1<<12)

	// Negative phys_base, as in the real 6.1 KASLR fixture: the kernel text
	// is mapped 0xc00000 higher virtually than physically.
	physBase := int64(-0xc00000)
	topVA := StartKernelMap + topPA + 0xc00000
	tr, err := NewTranslator(mem, vmcoreinfoFor(t, topVA, physBase, "NUMBER(pgtable_l5_enabled)=0\nNUMBER(sme_mask)=0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tr.TopTable() != topPA || tr.Levels() != 4 {
		t.Errorf("top %#x levels %d", tr.TopTable(), tr.Levels())
	}
	if pa, err := tr.VtoP(0xffffc90000001234); err != nil || pa != 0x7654234 {
		t.Errorf("VtoP = %#x, %v", pa, err)
	}

	// init_level4_pgt, when present, wins over init_top_pgt.
	tr, err = NewTranslator(mem, vmcoreinfoFor(t, 0xffffffff8dead000, 0,
		fmt.Sprintf("SYMBOL(init_level4_pgt)=%x\n", StartKernelMap+topPA)))
	if err != nil || tr.TopTable() != topPA {
		t.Errorf("init_level4_pgt: %v", err)
	}

	// 5-level and SME are read from VMCOREINFO.
	tr, err = NewTranslator(mem, vmcoreinfoFor(t, StartKernelMap+topPA, 0,
		"NUMBER(pgtable_l5_enabled)=1\nNUMBER(sme_mask)=140737488355328\n"))
	if err != nil || tr.Levels() != 5 || tr.smeMask != 1<<47 {
		t.Errorf("5-level/SME: %v", err)
	}

	for _, tc := range []struct{ text, want string }{
		{"OSRELEASE=6.1\nPAGESIZE=4096\nNUMBER(phys_base)=0\n", "missing SYMBOL(init_top_pgt)"},
		{"OSRELEASE=6.1\nPAGESIZE=4096\nSYMBOL(init_top_pgt)=ffffffff82c10000\n", "missing NUMBER(phys_base)"},
		{"OSRELEASE=6.1\nPAGESIZE=4096\nSYMBOL(init_top_pgt)=ffffffff82c10000\nNUMBER(phys_base)=x\n", "NUMBER(phys_base)"},
		{"OSRELEASE=6.1\nPAGESIZE=4096\nSYMBOL(init_top_pgt)=ffff888000000000\nNUMBER(phys_base)=0\n", "below the kernel text mapping"},
		{"OSRELEASE=6.1\nPAGESIZE=4096\nSYMBOL(init_top_pgt)=ffffffff82c10008\nNUMBER(phys_base)=0\n", "not a page-aligned"},
	} {
		vi, err := ParseVMCOREINFO([]byte(tc.text))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewTranslator(mem, vi); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewTranslator(%q) = %v, want %q", tc.text, err, tc.want)
		}
	}
}

func TestFindPageOffset(t *testing.T) {
	tests := []struct {
		name       string
		levels     int
		pageOffset uint64
		pageSize   uint64
		decoys     bool
	}{
		{"4-level nokaslr 1G pages", 4, PageOffsetBaseL4, 1 << 30, false},
		{"4-level kaslr 2M pages", 4, 0xffff9a4b40000000, 1 << 21, true},
		{"4-level kaslr 4K pages", 4, 0xffff8d9000000000, 1 << 12, true},
		{"5-level kaslr", 5, 0xff3a5c0080000000, 1 << 21, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMemPhys()
			const topPA = 0x2c10000
			pt := newPageTables(mem, tt.levels, topPA)
			// The direct map of the first 64 MiB (all of "RAM").
			for pa := uint64(0); pa < 64<<20; pa += tt.pageSize {
				pt.mapPage(tt.pageOffset+pa, pa, tt.pageSize)
			}
			// The kernel text mapping, which maps physical 0 at its start on
			// a freshly booted kernel, and a vmalloc alias of physical 0:
			// both above the direct map, so neither may be chosen.
			if tt.decoys {
				pt.mapPage(StartKernelMap, 0, 1<<21)
				pt.mapPage(tt.pageOffset+(1<<40), 0, 1<<12)
				// A present kernel-half entry below the direct map whose
				// aligned start maps something else.
				pt.mapPage(tt.pageOffset-(1<<30), 0x5000, 1<<12)
			}
			tr := pt.translator(t)
			mem.reads = 0
			got, err := tr.FindPageOffset()
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.pageOffset {
				t.Errorf("FindPageOffset = %#x, want %#x", got, tt.pageOffset)
			}
			if mem.reads > 64 {
				t.Errorf("FindPageOffset read %d tables", mem.reads)
			}
		})
	}

	t.Run("none", func(t *testing.T) {
		mem := newMemPhys()
		pt := newPageTables(mem, 4, 0x100000)
		pt.mapPage(PageOffsetBaseL4, 0x200000, 1<<21)
		if _, err := pt.translator(t).FindPageOffset(); err == nil || !strings.Contains(err.Error(), "no 1 GiB-aligned") {
			t.Errorf("FindPageOffset = %v", err)
		}
	})
	t.Run("inconsistent", func(t *testing.T) {
		// Physical 0 is mapped, but the "direct map" does not map the
		// page tables where a direct map must.
		mem := newMemPhys()
		pt := newPageTables(mem, 4, 0x100000)
		pt.mapPage(PageOffsetBaseL4, 0, 1<<12)
		if _, err := pt.translator(t).FindPageOffset(); err == nil || !strings.Contains(err.Error(), "direct map candidate 0xffff888000000000") {
			t.Errorf("FindPageOffset = %v", err)
		}
	})
}

// fuzzPhys is physical memory backed by one byte slice starting at 0.
type fuzzPhys struct {
	b     []byte
	reads int
}

func (f *fuzzPhys) ReadPhys(paddr uint64, p []byte) error {
	f.reads++
	if paddr > uint64(len(f.b)) || uint64(len(p)) > uint64(len(f.b))-paddr {
		return fmt.Errorf("physical %#x+%d outside memory", paddr, len(p))
	}
	copy(p, f.b[paddr:])
	return nil
}

// fuzzMemory builds an 8-page physical memory from compact records of 11
// bytes: table page (1 byte, mod 8), entry index (2 bytes, mod 512) and the
// entry's value (8 bytes). Compact inputs let the fuzzer explore table
// shapes far better than raw 32 KiB images would.
func fuzzMemory(recs []byte) []byte {
	mem := make([]byte, 8*4096)
	for ; len(recs) >= 11; recs = recs[11:] {
		page := uint64(recs[0] % 8)
		idx := uint64(binary.LittleEndian.Uint16(recs[1:]) % 512)
		copy(mem[page*4096+idx*8:], recs[3:11])
	}
	return mem
}

func fuzzRecord(page byte, idx uint16, v uint64) []byte {
	r := []byte{page, byte(idx), byte(idx >> 8)}
	return binary.LittleEndian.AppendUint64(r, v)
}

func FuzzVtoP(f *testing.F) {
	// Seed: a small valid 4-level table set mapping one 4K page, one 2M page
	// and one 1G page (with the PAT bit set in its entry).
	var seed []byte
	for _, r := range []struct {
		page byte
		idx  uint16
		v    uint64
	}{
		{0, 511, 0x1000 | 1},    // PGD[511] -> PUD at 0x1000
		{1, 510, 0x2000 | 1},    // PUD[510] -> PMD at 0x2000
		{2, 0, 0x3000 | 1},      // PMD[0] -> PTE at 0x3000
		{3, 1, 0x5000 | 1},      // 4K page
		{2, 8, 0x200000 | 0x81}, // 2M page
		{1, 0, 0x40000000 | 0x81 | 1<<12},
		{0, 273, 0x4000 | 1}, // a direct map at 0xffff888000000000
		{4, 0, 0x6000 | 1},
		{6, 0, 0x7000 | 1},
		{7, 0, 0x0 | 1},
	} {
		seed = append(seed, fuzzRecord(r.page, r.idx, r.v)...)
	}
	f.Add(seed, false, uint64(0xffffffff80001234), uint64(0))
	f.Add(seed, false, uint64(0xffffffff81000000), uint64(0))
	f.Add(seed, true, uint64(0xffffffff80001234), uint64(1<<47))
	f.Add(seed, false, uint64(0xffffff8000000000), uint64(0))
	f.Add(seed, false, uint64(0xffff888000000000), uint64(0))
	f.Fuzz(func(t *testing.T, recs []byte, five bool, vaddr, sme uint64) {
		if len(recs) > 11*256 {
			recs = recs[:11*256]
		}
		phys := &fuzzPhys{b: fuzzMemory(recs)}
		levels := 4
		if five {
			levels = 5
		}
		tr, err := NewTranslatorAt(phys, 0, levels, sme)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.Lookup(vaddr)
		if phys.reads > levels {
			t.Fatalf("one walk read %d tables with %d levels", phys.reads, levels)
		}
		if err == nil {
			if m.Paddr >= 1<<52 {
				t.Fatalf("Lookup(%#x) = %#x, beyond 52 bits", vaddr, m.Paddr)
			}
			switch m.PageSize {
			case 1 << 12, 1 << 21, 1 << 30:
			default:
				t.Fatalf("Lookup(%#x): page size %#x", vaddr, m.PageSize)
			}
			if m.Paddr&(m.PageSize-1) != vaddr&(m.PageSize-1) {
				t.Fatalf("Lookup(%#x) = %#x: page offset not preserved", vaddr, m.Paddr)
			}
		} else {
			var te *TranslationError
			if !errors.As(err, &te) || te.Vaddr != vaddr {
				t.Fatalf("Lookup(%#x): %v is not a TranslationError for the address", vaddr, err)
			}
		}
		_ = tr.ReadVirt(vaddr, make([]byte, 64))
		if po, err := tr.FindPageOffset(); err == nil {
			if pa, err := tr.VtoP(po); err != nil || pa != 0 {
				t.Fatalf("FindPageOffset = %#x, which maps to %#x, %v", po, pa, err)
			}
		}
	})
}
