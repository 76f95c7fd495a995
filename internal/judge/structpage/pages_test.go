package structpage

import (
	"encoding/binary"
	"testing"
)

// 7.2's layout, as its VMCOREINFO gives it.
var testLayout = &layout{
	size: 64, flags: 0, mapping: 24, mapcount: 48, private: 40, compound: 8,
	lru: 1 << 5, privateBit: 1 << 14, swapcache: 1 << 10, swapbacked: 1 << 17, hwpoison: 1 << 21,
	headMask: 1 << 6,
	buddy:    0xf0, offline: 0xf1, slab: 0xf5, hugetlb: 0xf4, unaccepted: 0xf7, hasUnaccepted: true,
	maxOrder: 11,
}

const noType = 0xffffffff // page_type of a page without one (_mapcount -1)

func TestDescribe(t *testing.T) {
	l := testLayout
	for _, c := range []struct {
		name string
		p    page
		want what
	}{
		{"free block head", page{pageType: 0xf0000000, private: 3}, isBuddy},
		{"buddy with owner bits in the low 24", page{pageType: 0xf0000005}, isBuddy},
		{"unaccepted", page{pageType: 0xf7000000}, isUnaccepted},
		{"page cache", page{flags: l.lru, mapping: 0xffff888000001000, pageType: noType}, isCache},
		{"page cache with buffers", page{flags: l.lru | l.privateBit, mapping: 0xffff888000001000, pageType: noType}, isCache | isPrivate},
		{"anonymous on the LRU", page{flags: l.lru, mapping: 0xffff888000002001, pageType: 0}, isCache | isAnon},
		{"swap cache", page{flags: l.swapcache | l.swapbacked, mapping: 0xffff888000002001, pageType: noType}, isCache | isAnon},
		{"PG_owner_priv_1 without PG_swapbacked", page{flags: l.swapcache, pageType: noType}, 0},
		{"slab, its mapping word odd", page{mapping: 0x1235, pageType: 0xf5000000}, 0},
		{"offline", page{mapping: 1, pageType: 0xf1000000}, 0},
		{"hugetlb, private anonymous", page{flags: l.headMask, mapping: 0xffff888000002001, pageType: 0xf4000000}, isHugetlb | isAnon},
		{"hugetlb, hugetlbfs", page{flags: l.headMask, mapping: 0xffff888000001000, pageType: 0xf4000000}, isHugetlb},
		{"kernel page", page{pageType: noType}, 0},
	} {
		if got := l.describe(c.p); got != c.want {
			t.Errorf("%s: %b, want %b", c.name, got, c.want)
		}
	}
}

// testMachine is 16 pfns of RAM: a free block of 4 at 0, page cache at 4,
// page cache with buffers at 5, an anonymous THP of 2 at 6, a slab page
// at 8, hugetlb of 2 at 10, a poisoned page at 12, an offline one at 13,
// zeros at 14 and data at 15; pfn 9 is not in RAM.
func testMachine() *Machine {
	data := make([]byte, 16*4096)
	for pfn := range 16 {
		if pfn != 14 {
			binary.LittleEndian.PutUint64(data[pfn*4096:], 0xdead)
		}
	}
	v := &Vmcore{data: data, PageSize: 4096, loads: []load{{0, 9 * 4096, 0}, {10 * 4096, 6 * 4096, 10 * 4096}}}
	m := &Machine{v: v, l: testLayout, MaxPFN: 16, hwpoison: map[uint64]bool{12: true}, offline: map[uint64]bool{13: true}}
	m.ram = make([]bool, 16)
	for pfn := range m.ram {
		m.ram[pfn] = v.InRAM(uint64(pfn))
	}
	m.units = []unit{
		{0, 4, isBuddy}, {4, 1, isCache}, {5, 1, isCache | isPrivate}, {6, 2, isCache | isAnon},
		{8, 1, 0}, {10, 2, isHugetlb}, {12, 1, 0}, {13, 1, 0}, {14, 1, 0}, {15, 1, 0},
	}
	return m
}

func TestLevel(t *testing.T) {
	m := testMachine()
	const K, Z, C, P, U, F, H, O = Kept, Zero, Cache, CachePrivate, User, Free, Hwpoison, Offline
	for _, c := range []struct {
		level int
		want  [16]Class
	}{
		{0, [16]Class{K, K, K, K, K, K, K, K, K, K, K, K, H, O, K, K}},
		{1, [16]Class{K, K, K, K, K, K, K, K, K, K, K, K, H, O, Z, K}},
		{2, [16]Class{K, K, K, K, C, K, K, K, K, K, K, K, H, O, K, K}},
		{4, [16]Class{K, K, K, K, C, P, K, K, K, K, K, K, H, O, K, K}},
		{8, [16]Class{K, K, K, K, K, K, U, U, K, K, U, U, H, O, K, K}},
		{16, [16]Class{F, F, F, F, K, K, K, K, K, K, K, K, H, O, K, K}},
		{31, [16]Class{F, F, F, F, C, P, U, U, K, K, U, U, H, O, Z, K}},
		{11, [16]Class{K, K, K, K, C, K, U, U, K, K, U, U, H, O, Z, K}},
	} {
		got, counts := m.Level(c.level)
		want := map[Class]uint64{}
		for pfn, cl := range c.want {
			if got[pfn] != cl {
				t.Errorf("-d %d: pfn %d %s, want %s", c.level, pfn, got[pfn].Label(), cl.Label())
			}
			if cl != Kept {
				want[cl]++
			}
		}
		for _, cl := range Classes {
			if counts[cl] != want[cl] {
				t.Errorf("-d %d: %s %d, want %d", c.level, cl.Label(), counts[cl], want[cl])
			}
		}
	}
}

// TestVirt walks hand-made 4-level page tables: a 4 KiB page, a 2 MiB
// page, a 1 GiB page and a hole.
func TestVirt(t *testing.T) {
	const ps = 4096
	data := make([]byte, 8*ps)
	put := func(table, index int, e uint64) { binary.LittleEndian.PutUint64(data[table*ps+index*8:], e) }
	// Tables in pages 1 (PGD), 2 (PUD), 3 (PMD), 4 (PTE).
	const va = 0xffff888000000000 // PGD 273, PUD 0
	put(1, 273, 2*ps|ptePresent)
	put(2, 0, 3*ps|ptePresent)
	put(2, 1, 0x40000000|ptePresent|ptePageSize|1<<12|1<<63) // PAT and NX bits are not address
	put(3, 0, 4*ps|ptePresent)
	put(3, 1, 0x200000|ptePresent|ptePageSize)
	put(4, 5, 6*ps|ptePresent)
	v := &Vmcore{data: data, PageSize: ps, loads: []load{{0, 8 * ps, 0}}, top: 1 * ps, levels: 4, physBase: 0x1000000}
	for _, c := range []struct {
		va, pa uint64
		err    bool
	}{
		{va + 5*ps + 0x123, 6*ps + 0x123, false},
		{va + 0x200000 + 0x12345, 0x200000 + 0x12345, false},
		{va + 0x40000000 + 0x1234567, 0x40000000 + 0x1234567, false},
		{va + 6*ps, 0, true},
		{0xffffffff81000010, 0x2000010, false},
	} {
		pa, err := v.Virt(c.va)
		if (err != nil) != c.err || !c.err && pa != c.pa {
			t.Errorf("Virt(%#x) = %#x, %v; want %#x, error %v", c.va, pa, err, c.pa, c.err)
		}
	}
}

func TestParseInfo(t *testing.T) {
	note := make([]byte, 0, 64)
	le := binary.LittleEndian
	desc := "OSRELEASE=7.2.13\nNUMBER(PAGE_BUDDY_MAPCOUNT_VALUE)=-268435456\nSYMBOL(vmemmap)=fffff40080000000\n"
	note = le.AppendUint32(note, 11)
	note = le.AppendUint32(note, uint32(len(desc)))
	note = le.AppendUint32(note, 0)
	note = append(note, "VMCOREINFO\x00\x00"...)
	note = append(note, desc...)
	v := &Vmcore{Info: parseInfo(findNote(note, "VMCOREINFO"))}
	if n, err := v.Number("NUMBER(PAGE_BUDDY_MAPCOUNT_VALUE)"); err != nil || uint32(n)>>24 != 0xf0 {
		t.Errorf("buddy type %d, %v", n, err)
	}
	if s, err := v.Symbol("vmemmap"); err != nil || s != 0xfffff40080000000 {
		t.Errorf("vmemmap %#x, %v", s, err)
	}
	if _, err := v.Number("SIZE(page)"); err == nil {
		t.Error("a missing key read without an error")
	}
}
