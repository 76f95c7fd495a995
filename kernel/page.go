package kernel

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Version is a kernel release's major.minor.patch, from OSRELEASE.
type Version struct{ Major, Minor, Patch int }

// ParseVersion reads "6.1.0-57-amd64" as 6.1.0.
func ParseVersion(release string) (Version, error) {
	var v Version
	rest := release
	for i, p := range []*int{&v.Major, &v.Minor, &v.Patch} {
		end := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if end < 0 {
			end = len(rest)
		}
		n, err := strconv.Atoi(rest[:end])
		if err != nil {
			if i == 2 {
				break // "6.1" has no patch level
			}
			return v, fmt.Errorf("kernel release %q: no version number", release)
		}
		*p = n
		rest = rest[end:]
		if !strings.HasPrefix(rest, ".") {
			break
		}
		rest = rest[1:]
	}
	return v, nil
}

// AtLeast reports whether v >= major.minor.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// PageDesc is what classification needs of one struct page.
type PageDesc struct {
	Flags        uint64
	Mapping      uint64
	Mapcount     uint32 // _mapcount, which is also page_type
	Private      uint64
	CompoundHead uint64
}

// PageLayout decodes struct page for one kernel and answers the questions
// makedumpfile's page classification asks (spec §6.5–6.6), with the
// kernel-era differences resolved once, at construction.
type PageLayout struct {
	Size uint64 // SIZE(page)

	offFlags, offMapping, offMapcount, offPrivate, offCompoundHead int64
	hasCompoundHead                                                bool

	// Where the compound order of a head page lives, relative to the
	// start of page[1]; orderByte: 1-byte field (else 2-byte).
	orderOff  int64
	orderByte bool
	// Hugetlb marker: a dtor byte in page[1] equal to hugetlbDtor, a bit of
	// page[1].flags, or the head's page type.
	dtorOff           int64
	hugetlbDtor       int64
	hugetlbFlag       int64 // PG_hugetlb, -1 unknown
	hugetlbType       uint32
	hasDtor, hasHtype bool

	pgLRU, pgPrivate, pgSwapcache, pgSwapbacked, pgSlab, pgHwpoison int64
	headMask                                                        uint64

	buddyType, offlineType, slabType, unacceptedType uint32
	hasBuddy, hasOffline, hasSlabType, hasUnaccepted bool
	hasHwpoison                                      bool
	// MaxOrder is LENGTH(zone.free_area): buddy orders are below it.
	MaxOrder uint64
}

// NewPageLayout reads the struct page layout and page-flag numbers from
// VMCOREINFO. Keys that old kernels lack get makedumpfile's defaults for
// them; keys that the layout cannot do without give an error naming them.
func NewPageLayout(vi *VMCOREINFO) (*PageLayout, error) {
	ver, err := ParseVersion(vi.OSRelease())
	if err != nil {
		return nil, err
	}
	l := &PageLayout{hugetlbFlag: -1}
	size, err := vi.RequireSize("page")
	if err != nil {
		return nil, err
	}
	l.Size = uint64(size)
	req := func(name string) int64 {
		if err != nil {
			return 0
		}
		var v int64
		v, err = vi.RequireOffset(name)
		if err == nil && (v < 0 || uint64(v)+8 > l.Size) {
			err = fmt.Errorf("OFFSET(%s)=%d outside a %d-byte struct page", name, v, l.Size)
		}
		return v
	}
	l.offFlags = req("page.flags")
	l.offMapping = req("page.mapping")
	l.offMapcount = req("page._mapcount")
	l.offPrivate = req("page.private")
	if err != nil {
		return nil, fmt.Errorf("struct page: %w", err)
	}
	l.offCompoundHead, l.hasCompoundHead = vi.Offset("page.compound_head")
	if !l.hasCompoundHead {
		l.offCompoundHead, l.hasCompoundHead = vi.Offset("page.compound_info") // 7.1+
	}

	// Compound order and hugetlb marker, by era (spec §6.6).
	switch {
	case vi.Has("OFFSET(page.compound_order)"):
		l.orderOff, _ = vi.Offset("page.compound_order")
		l.orderByte = ver.AtLeast(4, 16)
		l.dtorOff, l.hasDtor = vi.Offset("page.compound_dtor")
	case vi.Has("OFFSET(folio._folio_order)"):
		o, _ := vi.Offset("folio._folio_order")
		l.orderOff, l.orderByte = o-int64(l.Size), true
		if d, ok := vi.Offset("folio._folio_dtor"); ok {
			l.dtorOff, l.hasDtor = d-int64(l.Size), true
		}
	default: // 6.6+: the order is the low byte of page[1].flags
		l.orderOff, l.orderByte = l.offFlags, true
	}
	if l.hasDtor {
		l.hugetlbDtor, l.hasDtor = vi.Number("HUGETLB_PAGE_DTOR")
	}
	if v, ok := vi.Number("PG_hugetlb"); ok {
		l.hugetlbFlag = v
	}
	if v, ok := vi.Number("PAGE_HUGETLB_MAPCOUNT_VALUE"); ok {
		l.hugetlbType, l.hasHtype = uint32(v), true
	}

	num := func(name string, def int64) int64 {
		if v, ok := vi.Number(name); ok {
			return v
		}
		return def
	}
	l.pgLRU = num("PG_lru", 5)
	l.pgPrivate = num("PG_private", 11)
	l.pgSwapcache = num("PG_swapcache", 15)
	l.pgSwapbacked = num("PG_swapbacked", -1)
	if l.pgSwapbacked < 0 && l.pgSwapcache < l.pgPrivate {
		l.pgSwapbacked = l.pgPrivate + 6
	}
	// makedumpfile defaults PG_slab to 7 when it is missing, which on 6.10+
	// (where slab is a page type) tests PG_waiters instead; pagepipe applies
	// the default only to kernels that had the flag.
	l.pgSlab = num("PG_slab", -1)
	if l.pgSlab < 0 && !ver.AtLeast(6, 10) {
		l.pgSlab = 7
	}
	l.pgHwpoison, l.hasHwpoison = vi.Number("PG_hwpoison")
	l.headMask = uint64(num("PG_head_mask", 1<<14))

	if v, ok := vi.Number("PAGE_BUDDY_MAPCOUNT_VALUE"); ok {
		l.buddyType, l.hasBuddy = uint32(v), true
	} else if ver.AtLeast(2, 6) {
		l.buddyType, l.hasBuddy = uint32(0xffffff80), true // -128
	}
	if v, ok := vi.Number("PAGE_OFFLINE_MAPCOUNT_VALUE"); ok {
		l.offlineType, l.hasOffline = uint32(v), true
	}
	if v, ok := vi.Number("PAGE_SLAB_MAPCOUNT_VALUE"); ok {
		l.slabType, l.hasSlabType = uint32(v), true
	}
	if v, ok := vi.Number("PAGE_UNACCEPTED_MAPCOUNT_VALUE"); ok {
		l.unacceptedType, l.hasUnaccepted = uint32(v), true
	}
	if v, ok := vi.Length("zone.free_area"); ok && v > 0 && v < 64 {
		l.MaxOrder = uint64(v)
	} else {
		l.MaxOrder = 11
	}
	return l, nil
}

// Decode reads the fields of the struct page at the start of b.
func (l *PageLayout) Decode(b []byte) PageDesc {
	le := binary.LittleEndian
	d := PageDesc{
		Flags:    le.Uint64(b[l.offFlags:]),
		Mapping:  le.Uint64(b[l.offMapping:]),
		Mapcount: le.Uint32(b[l.offMapcount:]),
		Private:  le.Uint64(b[l.offPrivate:]),
	}
	if l.hasCompoundHead {
		d.CompoundHead = le.Uint64(b[l.offCompoundHead:])
	}
	return d
}

// testBit is makedumpfile's test_bit: a 32-bit int mask 1 << (nr & 31),
// sign-extended, so flag numbers wrap at 32 (harmless for today's flags,
// and kept so the same pages are chosen).
func testBit(nr int64, flags uint64) bool {
	if nr < 0 {
		return false
	}
	mask := uint64(int64(int32(uint32(1) << (nr & 31))))
	return flags&mask != 0
}

// IsTail reports a tail page of a compound page: tails go with their head.
func (l *PageLayout) IsTail(d PageDesc) bool { return d.CompoundHead&1 != 0 }

// IsHead reports the head of a compound page.
func (l *PageLayout) IsHead(d PageDesc) bool { return d.Flags&l.headMask != 0 }

// IsSlab reports a slab page: the slab page type (6.10+) or PG_slab.
func (l *PageLayout) IsSlab(d PageDesc) bool {
	return l.hasSlabType && d.Mapcount == l.slabType || testBit(l.pgSlab, d.Flags)
}

// IsBuddy reports the head of a free buddy block; its order is Private.
func (l *PageLayout) IsBuddy(d PageDesc) bool {
	return l.hasBuddy && !l.IsSlab(d) && d.Mapcount == l.buddyType
}

// IsUnaccepted reports a block of unaccepted memory (6.16+).
func (l *PageLayout) IsUnaccepted(d PageDesc) bool {
	return l.hasUnaccepted && d.Mapcount == l.unacceptedType
}

// IsCache reports a page-cache page: on the LRU, or in the swap cache.
func (l *PageLayout) IsCache(d PageDesc) bool {
	if testBit(l.pgLRU, d.Flags) {
		return true
	}
	return testBit(l.pgSwapcache, d.Flags) && (l.pgSwapbacked < 0 || testBit(l.pgSwapbacked, d.Flags))
}

// IsPrivate reports PG_private: buffers or filesystem data attached.
func (l *PageLayout) IsPrivate(d PageDesc) bool { return testBit(l.pgPrivate, d.Flags) }

// IsAnon reports an anonymous page (PAGE_MAPPING_ANON). Slab pages on 6.2+
// keep other data in mapping, so they never count.
func (l *PageLayout) IsAnon(d PageDesc) bool { return d.Mapping&1 != 0 && !l.IsSlab(d) }

// IsHwpoison reports a page with a memory error (when the kernel exports
// PG_hwpoison).
func (l *PageLayout) IsHwpoison(d PageDesc) bool {
	return l.hasHwpoison && testBit(l.pgHwpoison, d.Flags)
}

// IsOffline reports a logically offline page (ballooned out, hot-removed).
func (l *PageLayout) IsOffline(d PageDesc) bool {
	return l.hasOffline && !l.IsSlab(d) && d.Mapcount == l.offlineType
}

// HasHwpoison reports whether the kernel exports PG_hwpoison; with it,
// makedumpfile scans struct pages even at dump levels 0 and 1.
func (l *PageLayout) HasHwpoison() bool { return l.hasHwpoison }

// HasBuddy reports whether free pages can be told from struct page alone.
func (l *PageLayout) HasBuddy() bool { return l.hasBuddy }

// Compound returns the order of the compound page whose head is at the
// start of b and whether it is hugetlb, from page[1] (which must follow in
// b). An order that is 64 or more, or that pfn is not aligned to, is 0, as
// in makedumpfile.
func (l *PageLayout) Compound(head PageDesc, b []byte, pfn uint64) (order uint64, hugetlb bool) {
	if uint64(len(b)) < 2*l.Size {
		return 0, false
	}
	p1 := b[l.Size:]
	if l.orderByte {
		order = uint64(p1[l.orderOff])
	} else {
		order = uint64(binary.LittleEndian.Uint16(p1[l.orderOff:]))
	}
	switch {
	case l.hasHtype:
		hugetlb = head.Mapcount == l.hugetlbType
	case l.hugetlbFlag >= 0:
		hugetlb = testBit(l.hugetlbFlag, binary.LittleEndian.Uint64(p1[l.offFlags:]))
	case l.hasDtor:
		hugetlb = int64(p1[l.dtorOff]) == l.hugetlbDtor
	}
	if order >= 64 || pfn&(1<<order-1) != 0 {
		order = 0
	}
	return order, hugetlb
}
