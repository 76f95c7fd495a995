package structpage

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Class is why a dump level leaves a page out; Kept where it does not.
// They are the classes of makedumpfile's report, whose labels Label gives.
type Class uint8

// The classes, in the order the report prints them.
const (
	Kept Class = iota
	Zero
	Cache        // page cache without private data
	CachePrivate // page cache with buffers or other private data
	User         // anonymous or hugetlb
	Free         // in the buddy allocator, or not yet accepted
	Hwpoison
	Offline
)

// Classes is every excluding class, for loops over the report's counts.
var Classes = []Class{Zero, Cache, CachePrivate, User, Free, Hwpoison, Offline}

// Label is the class's line in makedumpfile's (and pagepipe's) report.
func (c Class) Label() string {
	return [...]string{"Kept", "Pages filled with zero", "Non-private cache pages", "Private cache pages",
		"User process data pages", "Free pages", "Hwpoison pages", "Offline pages"}[c]
}

// Dump-level bits (makedumpfile's -d).
const (
	LevelZero         = 1
	LevelCache        = 2
	LevelCachePrivate = 4
	LevelUser         = 8
	LevelFree         = 16
)

// layout is struct page as VMCOREINFO describes it, with the kernel's page
// types and flag numbers.
type layout struct {
	size, flags, mapping, mapcount, private, compound uint64

	lru, privateBit, swapcache, swapbacked, hwpoison uint64 // flag masks
	headMask                                         uint64

	// Page types (6.12+): the top byte of page_type, which shares its
	// word with _mapcount.
	buddy, offline, slab, hugetlb, unaccepted byte
	hasUnaccepted                             bool
	maxOrder                                  uint64 // LENGTH(zone.free_area): free orders are below it
}

func (v *Vmcore) layout() (*layout, error) {
	var err error
	num := func(key string) uint64 {
		if err != nil {
			return 0
		}
		var n int64
		n, err = v.Number(key)
		if err == nil && n < 0 {
			err = fmt.Errorf("VMCOREINFO %s=%d is negative", key, n)
		}
		return uint64(n)
	}
	bit := func(name string) uint64 {
		n := num("NUMBER(" + name + ")")
		if err == nil && n >= 64 {
			err = fmt.Errorf("NUMBER(%s)=%d is not a bit of page.flags", name, n)
		}
		return 1 << n
	}
	l := &layout{
		size:       num("SIZE(page)"),
		flags:      num("OFFSET(page.flags)"),
		mapping:    num("OFFSET(page.mapping)"),
		mapcount:   num("OFFSET(page._mapcount)"),
		private:    num("OFFSET(page.private)"),
		lru:        bit("PG_lru"),
		privateBit: bit("PG_private"),
		swapcache:  bit("PG_swapcache"),
		swapbacked: bit("PG_swapbacked"),
		headMask:   num("NUMBER(PG_head_mask)"),
		maxOrder:   num("LENGTH(zone.free_area)"),
	}
	if err != nil {
		return nil, err
	}
	// PG_hwpoison exists only with CONFIG_MEMORY_FAILURE (Debian's riscv64
	// kernel has none): without it no page is poisoned.
	if _, ok := v.Info["NUMBER(PG_hwpoison)"]; ok {
		l.hwpoison = bit("PG_hwpoison")
	}
	// 7.1 renamed compound_head to compound_info; bit 0 marks a tail in both.
	if _, ok := v.Info["OFFSET(page.compound_info)"]; ok {
		l.compound = num("OFFSET(page.compound_info)")
	} else {
		l.compound = num("OFFSET(page.compound_head)")
	}
	pageType := func(name string) byte {
		if err != nil {
			return 0
		}
		var n int64
		n, err = v.Number("NUMBER(PAGE_" + name + "_MAPCOUNT_VALUE)")
		if err == nil && uint32(n)&0xffffff != 0 {
			err = fmt.Errorf("NUMBER(PAGE_%s_MAPCOUNT_VALUE)=%d is not a type in the top byte: a kernel before 6.12", name, n)
		}
		return byte(uint32(n) >> 24)
	}
	l.buddy = pageType("BUDDY")
	l.offline = pageType("OFFLINE")
	l.slab = pageType("SLAB")
	l.hugetlb = pageType("HUGETLB")
	if _, ok := v.Info["NUMBER(PAGE_UNACCEPTED_MAPCOUNT_VALUE)"]; ok {
		l.unaccepted, l.hasUnaccepted = pageType("UNACCEPTED"), true
	}
	if err != nil {
		return nil, err
	}
	for _, o := range []uint64{l.flags, l.mapping, l.private, l.compound} {
		if o+8 > l.size {
			return nil, fmt.Errorf("a struct page offset %d is outside SIZE(page)=%d", o, l.size)
		}
	}
	if l.mapcount+4 > l.size || l.maxOrder == 0 || l.maxOrder >= 64 {
		return nil, fmt.Errorf("OFFSET(page._mapcount)=%d or LENGTH(zone.free_area)=%d out of range", l.mapcount, l.maxOrder)
	}
	return l, nil
}

// page is the fields of one struct page that say what the page is.
type page struct {
	flags, mapping, private, compound uint64
	pageType                          uint32
}

func (l *layout) decode(b []byte) page {
	le := binary.LittleEndian
	return page{
		flags:    le.Uint64(b[l.flags:]),
		mapping:  le.Uint64(b[l.mapping:]),
		private:  le.Uint64(b[l.private:]),
		compound: le.Uint64(b[l.compound:]),
		pageType: le.Uint32(b[l.mapcount:]),
	}
}

// typ is the page's type byte; the kernel's PageBuddy() and the like are
// page_type >> 24 == PGTY_buddy (6.12's "one page_type per page").
func (p page) typ() byte { return byte(p.pageType >> 24) }

// what a struct page (the head, for a compound page) says of its unit.
type what uint8

const (
	isBuddy what = 1 << iota
	isUnaccepted
	isCache   // on an LRU list, or in the swap cache
	isPrivate // PG_private
	isAnon    // PAGE_MAPPING_ANON in mapping
	isHugetlb
)

// describe says what page p is, by the kernel's definitions:
//   - free: the buddy page type, the head of a block of 2^private pages;
//   - unaccepted: its type, a block of 2^(MAX_PAGE_ORDER) pages;
//   - page cache: PG_lru, or PG_swapcache with PG_swapbacked (the kernel's
//     folio_test_swapcache: PG_swapcache is PG_owner_priv_1 otherwise);
//   - anonymous: bit 0 of mapping, except on pages with a page type
//     other than hugetlb, whose mapping word holds other data (slab's);
//   - hugetlb: the head's hugetlb page type.
func (l *layout) describe(p page) what {
	var w what
	t := p.typ()
	switch {
	case t == l.buddy:
		w |= isBuddy
	case l.hasUnaccepted && t == l.unaccepted:
		w |= isUnaccepted
	case t == l.hugetlb:
		w |= isHugetlb
	}
	typed := t == l.buddy || t == l.offline || t == l.slab || t == l.hugetlb || l.hasUnaccepted && t == l.unaccepted
	if p.flags&l.lru != 0 || p.flags&l.swapcache != 0 && p.flags&l.swapbacked != 0 {
		w |= isCache
	}
	if p.flags&l.privateBit != 0 {
		w |= isPrivate
	}
	if p.mapping&1 != 0 && (!typed || t == l.hugetlb) {
		w |= isAnon
	}
	return w
}

// unit is a run of pfns the kernel treats as one: a free block, a
// compound page (head and tails), or a single page.
type unit struct {
	pfn, n uint64
	w      what
}

// Machine is what the kernel made of every page of a vmcore.
type Machine struct {
	v *Vmcore
	l *layout
	// MaxPFN ends the pages with a struct page: the end of the last
	// present section, or of RAM if that is lower. A kdump file holds
	// no page above it (its max_mapnr), so nor do the Level results: a
	// PT_LOAD past it (QEMU's BIOS ROM) is not classified.
	MaxPFN uint64
	// VMemmap is the struct page array, decoded from mem_section and
	// checked against SYMBOL(vmemmap); Sections counts those present.
	VMemmap  uint64
	Sections int
	ram      []bool
	units    []unit
	// perPage: hwpoison or offline, for pages that are not tails (a tail
	// goes with its head).
	hwpoison, offline map[uint64]bool
	// Anomalies are struct pages that contradict each other (a tail
	// outside any compound page, a misaligned head, a free order out of
	// range): none in a consistent snapshot.
	Anomalies []string
}

// Read reads every struct page of v's RAM.
func Read(v *Vmcore) (*Machine, error) {
	l, err := v.layout()
	if err != nil {
		return nil, err
	}
	m := &Machine{v: v, l: l, hwpoison: map[uint64]bool{}, offline: map[uint64]bool{}}
	sections, err := m.sections()
	if err != nil {
		return nil, err
	}
	m.MaxPFN = min(v.MaxPFN(), sections[len(sections)-1].hi)
	m.ram = make([]bool, m.MaxPFN)
	for pfn := range m.ram {
		m.ram[pfn] = v.InRAM(uint64(pfn))
	}
	anomaly := func(format string, a ...any) {
		if len(m.Anomalies) < 20 {
			m.Anomalies = append(m.Anomalies, fmt.Sprintf(format, a...))
		}
	}
	var end uint64 // of the current unit
	for _, s := range sections {
		for pfn := s.lo; pfn < min(s.hi, m.MaxPFN); pfn++ {
			if !m.ram[pfn] {
				continue // makedumpfile and pagepipe classify only what the vmcore holds
			}
			b, err := v.ReadVirt(m.VMemmap+pfn*l.size, l.size)
			if err != nil {
				return nil, fmt.Errorf("struct page of pfn %#x: %w", pfn, err)
			}
			p := l.decode(b)
			tail := p.compound&1 != 0
			if pfn < end {
				if u := m.units[len(m.units)-1]; u.w&isBuddy != 0 && (tail || p.flags&l.headMask != 0) {
					anomaly("pfn %#x: a compound page inside the free block at %#x", pfn, u.pfn)
				} else if u.w&isBuddy == 0 && !tail {
					anomaly("pfn %#x: not a tail, inside the compound page at %#x", pfn, u.pfn)
				}
				if !tail {
					m.perPage(pfn, p)
				}
				continue
			}
			if tail {
				anomaly("pfn %#x: a tail page outside any compound page", pfn)
				continue
			}
			m.perPage(pfn, p)
			u := unit{pfn: pfn, n: 1, w: l.describe(p)}
			switch {
			case u.w&isBuddy != 0:
				if p.private >= l.maxOrder {
					anomaly("pfn %#x: free block of order %d, LENGTH(zone.free_area)=%d", pfn, p.private, l.maxOrder)
					u.w &^= isBuddy
				} else {
					u.n = 1 << p.private
				}
			case u.w&isUnaccepted != 0:
				u.n = 1 << (l.maxOrder - 1)
			case p.flags&l.headMask != 0:
				// folio_order(): the low byte of the first tail's flags
				// (6.6+; _flags_1).
				b1, err := v.ReadVirt(m.VMemmap+(pfn+1)*l.size, l.size)
				if err != nil {
					return nil, fmt.Errorf("struct page of pfn %#x: %w", pfn+1, err)
				}
				order := binary.LittleEndian.Uint64(b1[l.flags:]) & 0xff
				if order == 0 || pfn&(1<<order-1) != 0 {
					anomaly("pfn %#x: compound head of order %d", pfn, order)
				} else {
					u.n = 1 << order
				}
			}
			m.units = append(m.units, u)
			end = pfn + u.n
		}
	}
	return m, nil
}

func (m *Machine) perPage(pfn uint64, p page) {
	if p.flags&m.l.hwpoison != 0 {
		m.hwpoison[pfn] = true
	}
	if p.typ() == m.l.offline {
		m.offline[pfn] = true
	}
}

// section is the pfns [lo, hi) of one present memory section.
type section struct{ lo, hi uint64 }

// sections walks mem_section (SPARSEMEM_EXTREME: SYMBOL(mem_section) is
// the array of roots, each a page of struct mem_section) and decodes each
// present section's mem_map, which with SPARSEMEM_VMEMMAP is the same for
// all: vmemmap, the address of pfn 0's struct page.
func (m *Machine) sections() ([]section, error) {
	v := m.v
	var err error
	num := func(key string) uint64 {
		if err != nil {
			return 0
		}
		var n int64
		n, err = v.Number(key)
		return uint64(n)
	}
	roots := num("LENGTH(mem_section)")
	size := num("SIZE(mem_section)")
	off := num("OFFSET(mem_section.section_mem_map)")
	sectionBits := num("NUMBER(SECTION_SIZE_BITS)")
	physBits := num("NUMBER(MAX_PHYSMEM_BITS)")
	if err != nil {
		return nil, err
	}
	if size == 0 || off+8 > size || sectionBits < 12 || physBits <= sectionBits || physBits > 56 {
		return nil, fmt.Errorf("mem_section: SIZE %d, OFFSET(section_mem_map) %d, SECTION_SIZE_BITS %d, MAX_PHYSMEM_BITS %d", size, off, sectionBits, physBits)
	}
	perRoot := v.PageSize / size
	if want := (uint64(1)<<(physBits-sectionBits) + perRoot - 1) / perRoot; roots != want {
		return nil, fmt.Errorf("LENGTH(mem_section)=%d, want %d roots of %d sections: not SPARSEMEM_EXTREME", roots, want, perRoot)
	}
	vmemmap, err := v.Symbol("vmemmap")
	if err != nil {
		return nil, err
	}
	base, err := v.Symbol("mem_section")
	if err != nil {
		return nil, err
	}
	rootPtrs, err := v.ReadVirt(base, roots*8)
	if err != nil {
		return nil, fmt.Errorf("mem_section roots: %w", err)
	}
	pagesPerSection := uint64(1) << (sectionBits - 12)
	var out []section
	for r := range roots {
		root := binary.LittleEndian.Uint64(rootPtrs[r*8:])
		if root == 0 {
			continue
		}
		secs, err := v.ReadVirt(root, perRoot*size)
		if err != nil {
			return nil, fmt.Errorf("mem_section root %d: %w", r, err)
		}
		for i := range perRoot {
			coded := binary.LittleEndian.Uint64(secs[i*size+off:])
			// SECTION_MARKED_PRESENT and SECTION_HAS_MEM_MAP; the flags
			// sit in bits below the page-aligned mem_map.
			if coded&3 != 3 {
				continue
			}
			// The coded map is mem_map less the section's first pfn's
			// worth of struct pages: pfn 0's struct page.
			mm := coded &^ (v.PageSize - 1)
			if mm != vmemmap {
				return nil, fmt.Errorf("section %d: mem_map %#x, SYMBOL(vmemmap)=%#x", r*perRoot+i, mm, vmemmap)
			}
			lo := (r*perRoot + i) * pagesPerSection
			out = append(out, section{lo, lo + pagesPerSection})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no present section in mem_section")
	}
	m.VMemmap, m.Sections = vmemmap, len(out)
	return out, nil
}

// RAM reports whether the vmcore holds page pfn whole.
func (m *Machine) RAM(pfn uint64) bool { return pfn < m.MaxPFN && m.ram[pfn] }

// Level is what dump level level leaves out: for each pfn below MaxPFN
// the class that excludes it (Kept for the pages kept, and for those not
// in RAM), and the pages of each class, as the report counts them.
//
// Per unit, the first rule that applies wins, as makedumpfile documents
// them: free (16), page cache without private data (2), page cache (4:
// counted as private or not), anonymous or hugetlb (8); a unit's rule
// leaves out all of its pages in RAM. Then any page not left out that is
// poisoned or offline is left out at every level, and at level 1 any page
// left whose bytes are all zero.
func (m *Machine) Level(level int) ([]Class, map[Class]uint64) {
	out := make([]Class, m.MaxPFN)
	counts := map[Class]uint64{}
	for _, u := range m.units {
		c := Kept
		switch w := u.w; {
		case level&LevelFree != 0 && w&(isBuddy|isUnaccepted) != 0:
			c = Free
		case level&LevelCache != 0 && w&isCache != 0 && w&(isPrivate|isAnon) == 0:
			c = Cache
		case level&LevelCachePrivate != 0 && w&isCache != 0 && w&isAnon == 0:
			c = Cache
			if w&isPrivate != 0 {
				c = CachePrivate
			}
		case level&LevelUser != 0 && w&(isAnon|isHugetlb) != 0:
			c = User
		}
		if c == Kept {
			continue
		}
		for pfn := u.pfn; pfn < min(u.pfn+u.n, m.MaxPFN); pfn++ {
			if m.ram[pfn] && out[pfn] == Kept {
				out[pfn] = c
				counts[c]++
			}
		}
	}
	for pfn := range m.MaxPFN {
		if !m.ram[pfn] || out[pfn] != Kept {
			continue
		}
		switch {
		case m.hwpoison[pfn]:
			out[pfn] = Hwpoison
		case m.offline[pfn]:
			out[pfn] = Offline
		case level&LevelZero != 0 && m.zero(pfn):
			out[pfn] = Zero
		default:
			continue
		}
		counts[out[pfn]]++
	}
	return out, counts
}

var zeroPage = make([]byte, 4096)

func (m *Machine) zero(pfn uint64) bool {
	b, _ := m.v.Page(pfn)
	return bytes.Equal(b, zeroPage)
}

// Kinds counts the units by what their struct pages say, for a test's
// log: how many free blocks, compound pages and so on the machine has.
func (m *Machine) Kinds() map[string]int {
	k := map[string]int{}
	for _, u := range m.units {
		switch w := u.w; {
		case w&isBuddy != 0:
			k["free blocks"]++
		case w&isUnaccepted != 0:
			k["unaccepted blocks"]++
		case w&isHugetlb != 0:
			k["hugetlb folios"]++
		case w&isAnon != 0:
			k["anonymous"]++
		case w&isCache != 0 && w&isPrivate != 0:
			k["page cache, private"]++
		case w&isCache != 0:
			k["page cache"]++
		default:
			k["other"]++
		}
		if u.n > 1 && u.w&(isBuddy|isUnaccepted) == 0 {
			k["compound pages"]++
		}
	}
	return k
}
