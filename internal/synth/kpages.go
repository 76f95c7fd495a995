package synth

import (
	"encoding/binary"
	"sort"
)

// The page allocator's state, decided per 4 MiB block (order 10, the
// largest buddy order), so that the class of any pfn is a pure function of
// (seed, pfn), computed with a few dozen hashes at most.
//
// Each naturally aligned block of 2^order pages is a node. A node that is
// not wholly available RAM (it touches a hole, the kernel's reservations or
// a gigantic page) is split in two, down to single pages. An available node
// is, by a hash of (seed, first pfn, order): a free buddy block, a folio of
// that order (THP, hugetlb, slab, large page-cache folio), or split. Single
// pages take a class from their 64 KiB neighbourhood's "theme" (page cache,
// anonymous, kernel, slab, mixed, balloon), which gives the runs real
// memory has. Two free buddies of the same order are never left side by
// side, since the kernel would have merged them: the right half of a split
// whose left half is a free leaf is not allowed to be a free leaf.

// leaf is a node that was not split: a folio, a free buddy block, or a run
// of independent pages of one class (holes and reservations).
type leaf struct {
	head  uint64 // first pfn (for a gigantic page, possibly before the block)
	order uint8  // 1<<order pages
	run   bool   // independent order-0 pages, not one folio
	class Class
	v     uint32 // variant bits drawn for the leaf
}

func (l leaf) end() uint64 { return l.head + 1<<l.order }

func (l leaf) isFree() bool { return !l.run && l.class == Free }

// Salts for the allocator's hashes.
const (
	saltNode  uint64 = 0x6e6f6465
	saltTheme uint64 = 0x7468656d
	saltVar   uint64 = 0x76617269
)

func unit(h uint64) float64 { return float64(h>>11) * (1.0 / (1 << 53)) }

// Neighbourhood themes.
const (
	themeCache = iota
	themeAnon
	themeKernel
	themeSlab
	themeMixed
	themeBalloon
)

// theme of the 16-page (order-4) neighbourhood holding pfn.
func (k *kmem) theme(pfn uint64) int {
	u := unit(key(k.seed, pfn>>4, saltTheme))
	switch {
	case u < 0.35:
		return themeCache
	case u < 0.65:
		return themeAnon
	case u < 0.80:
		return themeKernel
	case u < 0.90:
		return themeSlab
	case u < 0.98 || k.prof.offlineType == 0: // no PageOffline before 5.0
		return themeMixed
	}
	return themeBalloon
}

// decide returns the leaf for node (lo, order), or split. forbidFree says
// the left sibling is a free leaf of the same order.
func (k *kmem) decide(lo uint64, order uint, forbidFree bool) (leaf, bool) {
	st, uniform := k.statusOf(lo, lo+1<<order)
	if !uniform {
		return leaf{}, true
	}
	switch st {
	case stHole:
		return leaf{head: lo, order: uint8(order), run: true, class: Hole}, false
	case stReserved:
		return leaf{head: lo, order: uint8(order), run: true, class: Kernel}, false
	case stGigantic:
		i := sort.Search(len(k.gig), func(i int) bool { return k.gig[i]+gigPages > lo })
		g := k.gig[i]
		return leaf{head: g, order: gigOrder, class: Hugetlb, v: uint32(key(k.seed, g, saltVar))}, false
	}
	h := key(k.seed, lo<<5|uint64(order), saltNode)
	u := unit(h)
	v := uint32(mix64(h ^ saltVar))
	folio := func(c Class) (leaf, bool) { return leaf{head: lo, order: uint8(order), class: c, v: v}, false }
	free := func() (leaf, bool) {
		if forbidFree {
			return leaf{}, true
		}
		return folio(Free)
	}
	switch {
	case order == maxOrder:
		if k.unaccepted && u < 0.1 {
			return folio(Unaccepted)
		}
		if u < 1-k.used {
			return free()
		}
	case order == 9:
		switch {
		case u < 0.12:
			return folio(Anon) // THP
		case u < 0.20:
			return folio(Hugetlb)
		case u < 0.24:
			return folio(Cache) // shmem / file THP
		case u < 0.30:
			return free()
		}
	case order >= 4:
		if u < 0.10 {
			return free()
		}
	case order >= 1:
		if u < 0.10 {
			return free()
		}
		if u < 0.24 {
			switch k.theme(lo) {
			case themeKernel, themeSlab, themeMixed:
				return folio(Slab)
			case themeCache:
				if k.prof.largeCacheFolios {
					return folio(Cache)
				}
			case themeAnon:
				if k.prof.anonMTHP {
					return folio(Anon)
				}
			}
		}
	default:
		c := k.smallClass(lo, u, v)
		if c == Free && forbidFree {
			c = Kernel
		}
		return folio(c)
	}
	return leaf{}, true
}

// smallClass picks the class of an order-0 page by its neighbourhood.
func (k *kmem) smallClass(pfn uint64, u float64, v uint32) Class {
	if v%1000 < 3 {
		return Hwpoison
	}
	pick := func(cs []Class, ps []float64) Class {
		for i, p := range ps {
			if u < p {
				return cs[i]
			}
		}
		return cs[len(cs)-1]
	}
	switch k.theme(pfn) {
	case themeCache:
		return pick([]Class{Cache, CachePrivate, SwapCache, Anon, Kernel, Free}, []float64{.55, .80, .85, .90, .95})
	case themeAnon:
		return pick([]Class{Anon, SwapCache, Cache, Kernel, Free}, []float64{.75, .80, .90, .95})
	case themeKernel:
		return pick([]Class{Kernel, Slab, Free}, []float64{.70, .90})
	case themeSlab:
		return pick([]Class{Slab, Kernel, Free}, []float64{.80, .90})
	case themeBalloon:
		return pick([]Class{Offline, Free}, []float64{.90})
	}
	cs := []Class{Kernel, Slab, Cache, CachePrivate, SwapCache, Anon, Free}
	if k.prof.offlineType != 0 { // PageOffline exists (5.0+)
		cs = append(cs, Offline)
	}
	return cs[int(u*float64(len(cs)))]
}

// leafOf returns the leaf holding pfn by walking down from its block.
func (k *kmem) leafOf(pfn uint64) leaf {
	lo, order, forbid := pfn&^(blockPages-1), uint(maxOrder), false
	for {
		lf, split := k.decide(lo, order, forbid)
		if !split {
			return lf
		}
		order--
		half := uint64(1) << order
		forbid = false
		if pfn >= lo+half {
			left, lsplit := k.decide(lo, order, false)
			forbid = !lsplit && left.isFree()
			lo += half
		}
	}
}

// decomp appends the leaves of node (lo, order) in pfn order; it reports
// whether the node is itself a free leaf. It makes the same decisions as
// leafOf.
func (k *kmem) decomp(lo uint64, order uint, forbid bool, out []leaf) ([]leaf, bool) {
	lf, split := k.decide(lo, order, forbid)
	if !split {
		return append(out, lf), lf.isFree()
	}
	half := uint64(1) << (order - 1)
	out, leftFree := k.decomp(lo, order-1, false, out)
	out, _ = k.decomp(lo+half, order-1, leftFree, out)
	return out, false
}

// blockCache holds the leaves of the last block looked at, for callers
// that walk pfns in order. Not safe for concurrent use: one per goroutine.
type blockCache struct {
	k      *kmem
	base   uint64
	valid  bool
	leaves []leaf
	cur    int
}

func (c *blockCache) leaf(pfn uint64) leaf {
	if b := pfn &^ (blockPages - 1); !c.valid || b != c.base {
		c.leaves, _ = c.k.decomp(b, maxOrder, false, c.leaves[:0])
		c.base, c.valid, c.cur = b, true, 0
	}
	if l := c.leaves[c.cur]; pfn >= l.head && pfn < l.end() {
		return l
	}
	c.cur = sort.Search(len(c.leaves), func(i int) bool { return c.leaves[i].end() > pfn })
	return c.leaves[c.cur]
}

// Upper page->flags fields (include/linux/page-flags-layout.h, SPARSEMEM
// VMEMMAP, Debian's NODES_SHIFT 10 and three zone bits): the zone number
// sits just below the node bits.
const zonesPgoff = 64 - 10 - 3

func zoneOf(pfn uint64) uint64 {
	switch {
	case pfn < 4096: // 16 MiB
		return 0 // ZONE_DMA
	case pfn < 1<<20: // 4 GiB
		return 1 // ZONE_DMA32
	}
	return 2 // ZONE_NORMAL
}

// LIST_POISON1/2 (POISON_POINTER_DELTA 0xdead000000000000): what list_del
// leaves in a page that left a free list when its buddy merged.
const listPoison1, listPoison2 = 0xdead000000000100, 0xdead000000000122

// ptr returns a plausible kernel heap pointer (direct map, 64-byte
// aligned) drawn from x.
func (k *kmem) ptr(x uint64) uint64 {
	return k.va(mix64(x) % (k.endPFN * k.ps) &^ 63)
}

func bit(n int) uint64 {
	if n < 0 {
		return 0
	}
	return 1 << n
}

// leanTail reports whether pfn's struct page is all zero: a page of a free
// block past its head, on a Lean machine.
func (k *kmem) leanTail(pfn uint64, lf leaf) bool {
	return k.ks.Lean && !lf.run && (lf.class == Free || lf.class == Unaccepted) && pfn != lf.head
}

// encodePage writes the 64-byte struct page of pfn, which lies in leaf lf.
func (k *kmem) encodePage(b []byte, pfn uint64, lf leaf) {
	b = b[:structPageSize]
	clear(b)
	if k.leanTail(pfn, lf) {
		return
	}
	le := binary.LittleEndian
	p := &k.prof.pg
	zone := zoneOf(pfn) << zonesPgoff
	self := k.pageVA(pfn)
	put := func(off int, x uint64) { le.PutUint64(b[off:], x) }
	put32 := func(off int, x uint32) { le.PutUint32(b[off:], x) }
	put32(offMapcount, 0xffffffff)
	if lf.run {
		// A hole or a reserved page: __init_single_page (lru pointing
		// at itself, refcount 1) and SetPageReserved.
		put(offFlags, zone|bit(p.reserved))
		put(offLRU, self+offLRU)
		put(offLRUPrev, self+offLRU)
		put32(offRefcount, 1)
		return
	}
	idx := pfn - lf.head
	v := uint64(lf.v)<<32 | pfn
	switch lf.class {
	case Free, Unaccepted:
		put(offFlags, zone)
		if idx != 0 {
			if idx&(idx-1) == 0 { // once a buddy head itself
				put(offLRU, listPoison1)
				put(offLRUPrev, listPoison2)
			}
			return
		}
		if lf.class == Unaccepted {
			put32(offMapcount, pgtyUnaccepted)
			return
		}
		// Buddy head: on a free list, page type buddy, order in private.
		put(offLRU, k.pageVA(mix64(v)%k.endPFN)+offLRU)
		put(offLRUPrev, k.pageVA(mix64(v+1)%k.endPFN)+offLRU)
		put(offPrivate, uint64(lf.order))
		put32(offMapcount, k.prof.buddyType)
		return
	}
	if idx > 0 {
		k.encodeTail(b, pfn, idx, lf)
		return
	}
	flags := zone
	if lf.order > 0 {
		flags |= bit(p.head)
	}
	lv := lf.v
	refs := uint32(1)
	switch lf.class {
	case Kernel:
		if lv%4 == 0 && k.prof.tableType != 0 {
			put32(offMapcount, k.prof.tableType) // a user page-table page
			put(offPrivate, k.ptr(v+2))          // ptl
		} else {
			put(offLRU, k.ptr(v)) // on some driver's list
			put(offLRUPrev, k.ptr(v+1))
		}
	case Slab:
		flags |= bit(p.slab)
		if k.prof.slabType != 0 {
			put32(offMapcount, k.prof.slabType)
		}
		cache := k.ptr(v + 3)
		if k.prof.slabCacheAtLRU {
			put(offLRU, cache)
			put(offLRUPrev, k.ptr(v+4)) // slab_list.next / next
			if k.prof.slabMappingCount && lv%2 == 1 {
				// On a per-cpu partial list: slab.slabs, an int,
				// where page.mapping is. Odd counts set bit 0,
				// which must not make the page anonymous.
				put(offMapping, uint64(lv>>8%64*2+1))
			} else {
				put(offMapping, k.ptr(v+5)) // slab_list.prev
			}
		} else {
			put(offLRU, k.ptr(v+4)) // slab_list
			put(offLRUPrev, k.ptr(v+5))
			put(offMapping, cache) // slab_cache
		}
		put(offIndex, k.ptr(v+6))                                      // freelist
		put(offPrivate, uint64(0x80000000|lv>>4&0x7fff<<16|lv&0x7fff)) // counters
	case Cache, CachePrivate:
		flags |= bit(p.lru) | bit(p.uptodate)
		flags |= cond(lv&1 != 0, bit(p.referenced)) | cond(lv&2 != 0, bit(p.active)) |
			cond(lv&4 != 0, bit(p.dirty)) | cond(lv&16 != 0, bit(p.workingset))
		if lv&32 != 0 && lf.class == Cache {
			flags |= bit(p.swapBacked) // shmem/tmpfs: page cache all the same
		} else if lv&8 != 0 {
			flags |= bit(p.mappedToDisk)
		}
		put(offMapping, k.ptr(v+7)) // struct address_space
		put(offIndex, uint64(lv>>8&0xffff)<<lf.order)
		if lf.class == CachePrivate {
			flags |= bit(p.private)
			put(offPrivate, k.ptr(v+8)) // buffer heads
			refs++
		}
		mapped := lv >> 6 & 3
		put32(offMapcount, mapped-1)
		refs += mapped
		put(offMemcg, k.ptr(v+9))
	case SwapCache:
		// Read ahead from swap, not yet mapped: no ->mapping, the
		// swap entry in ->private, PG_swapcache only counts with
		// PG_swapbacked.
		flags |= bit(p.ownerPriv1) | bit(p.swapBacked) | bit(p.uptodate) | cond(lv&1 != 0, bit(p.lru))
		put(offPrivate, 1+uint64(lv>>4&0xfffff))
		put(offIndex, 1+uint64(lv>>4&0xfffff))
	case Anon:
		flags |= bit(p.lru) | bit(p.swapBacked) | bit(p.uptodate)
		flags |= cond(lv&1 != 0, bit(p.referenced)) | cond(lv&2 != 0, bit(p.active)) |
			cond(lv&4 != 0, bit(p.dirty))
		if k.prof.atLeast(5, 19) && lv&8 != 0 {
			flags |= bit(p.mappedToDisk) // PG_anon_exclusive
		}
		if lv&64 != 0 {
			flags |= bit(p.ownerPriv1) // also in the swap cache
			put(offPrivate, 1+uint64(lv>>12&0xfffff))
			refs++
		}
		anon := k.ptr(v+10) | 1 // PAGE_MAPPING_ANON
		if lf.order == 0 && lv%32 == 0 {
			anon |= 2 // KSM: PAGE_MAPPING_KSM
		}
		put(offMapping, anon)
		put(offIndex, 0x7f0000000+uint64(lv>>8&0xfffff)<<lf.order)
		if lf.order == 0 {
			put32(offMapcount, lv>>10&1) // mapped once or twice
			refs += lv >> 10 & 1
		}
		put(offMemcg, k.ptr(v+9))
	case Hugetlb:
		inUse := lv&1 != 0
		if inUse {
			flags |= bit(p.uptodate)
			put(offMapping, k.ptr(v+11)) // hugetlbfs inode
			put(offIndex, uint64(lv>>8&0xff)<<lf.order)
		} else {
			refs = 0 // free in the pool
		}
		if k.prof.hugetlb == hugetlbPageType {
			put32(offMapcount, k.prof.hugetlbType)
		}
	case Offline:
		put32(offMapcount, k.prof.offlineType)
	case Hwpoison:
		flags |= bit(p.hwpoison)
	}
	put(offFlags, flags)
	put32(offRefcount, refs)
}

func cond(c bool, x uint64) uint64 {
	if c {
		return x
	}
	return 0
}

// encodeTail writes tail page idx of compound folio lf.
func (k *kmem) encodeTail(b []byte, pfn, idx uint64, lf leaf) {
	le := binary.LittleEndian
	le.PutUint64(b[offFlags:], zoneOf(pfn)<<zonesPgoff)
	le.PutUint64(b[offLRU:], k.pageVA(lf.head)|1) // compound_head
	le.PutUint64(b[offMapping:], tailMapping)
	if idx != 1 {
		return
	}
	// The first tail page records the order and what the folio is.
	p := k.prof
	switch p.orders {
	case orderPage1Fields:
		dtor := byte(compoundPageDtor)
		switch {
		case lf.class == Hugetlb:
			dtor = hugetlbPageDtor
		case lf.order >= 2 && (lf.class == Anon || lf.class == Cache):
			dtor = transhugePageDtor // prep_transhuge_page
		}
		b[offDtor], b[offOrder] = dtor, lf.order
		le.PutUint32(b[offCompMapcnt:], 0xffffffff) // compound_mapcount
		if lf.class == Anon && lf.order == 9 {
			le.PutUint32(b[offCompMapcnt:], 0) // PMD-mapped once
		}
		switch {
		case p.atLeast(6, 0): // compound_pincount, compound_nr
			le.PutUint64(b[offMapping:], uint64(1)<<lf.order<<32)
		case p.atLeast(5, 7): // compound_nr over the low half of TAIL_MAPPING
			le.PutUint32(b[offMapping:], 1<<lf.order)
		}
	case orderFlags1:
		f := le.Uint64(b[offFlags:]) | uint64(lf.order)
		if lf.class == Hugetlb && p.hugetlbFlag1 >= 0 {
			f |= 1 << p.hugetlbFlag1
		}
		if (lf.class == Anon || lf.class == Cache) && p.largeRmappable >= 0 {
			f |= 1 << p.largeRmappable
		}
		le.PutUint64(b[offFlags:], f)
		le.PutUint32(b[offMapping:], 0xffffffff)  // _entire_mapcount
		le.PutUint32(b[offIndex+4:], 1<<lf.order) // _folio_nr_pages
	}
}
