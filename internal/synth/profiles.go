package synth

import (
	"fmt"
	"sort"
)

// This file holds what the generator knows about each kernel era: the
// struct page layout, the page-flag numbers, how compound pages record their
// order and their hugetlb-ness, the page-type values, and which VMCOREINFO
// keys the kernel writes. Each value names where it comes from:
//
//   - "fixture": the VMCOREINFO note of a real Debian 12 kernel
//     (6.1.0-57-amd64, 6.1.192-3) made by fixtures/make-vmcore.sh; copied
//     key for key and in order for the 6.1 profile.
//   - "page-flags.h": enum pageflags of include/linux/page-flags.h at that
//     version (4.19: a 4.19 tree; 5.10: 5.10.13; 6.6: v6.6 after "mm:
//     Rearrange page flags" moved PG_writeback/PG_head to bits 1 and 6;
//     6.12: after "mm: Remove PG_error", "mm: Rename PG_mappedtodisk to
//     PG_owner_2" and "mm: Remove PG_uncached", all merged for 6.12). Debian
//     builds x86_64 with CONFIG_MMU, CONFIG_MEMORY_FAILURE,
//     CONFIG_PAGE_IDLE_FLAG and CONFIG_X86_PAT (hence PG_uncached before
//     6.12), which fixes the numbering.
//   - "crash_core.c"/"vmcore_info.c": crash_save_vmcoreinfo_init and
//     arch_crash_save_vmcoreinfo (arch/x86/kernel/crash_core_64.c) at that
//     version; kernel/vmcore_info.c from 6.9 on.
//   - "mm_types.h": struct page / struct folio / struct slab.
//
// Values that makedumpfile never reads on the mem_map path (SIZE(zone),
// OFFSET(pglist_data.*), the printk ones) are the 6.1 fixture's for every
// era: they are plausible, not authoritative.

// pgFlags are page-flag bit numbers (enum pageflags); -1 means the kernel
// has no such flag.
type pgFlags struct {
	locked, referenced, uptodate, dirty, lru, head, waiters, active int
	workingset, slab, ownerPriv1, reserved, private, writeback      int
	mappedToDisk, reclaim, swapBacked, unevictable, mlocked         int
	hwpoison                                                        int
}

// orderStyle says where a compound page's order and hugetlb marker live.
type orderStyle uint8

const (
	// orderPage1Fields: page[1].compound_dtor (offset 16) and
	// page[1].compound_order (offset 17), each a byte (4.16 – 6.2; also
	// folio._folio_dtor/_folio_order at the same place on 6.3 – 6.5).
	// Hugetlb folios have compound_dtor == HUGETLB_PAGE_DTOR.
	orderPage1Fields orderStyle = iota
	// orderFlags1: the low byte of page[1].flags (folio._flags_1), since
	// 6.6 ("mm: free up a word in the first tail page").
	orderFlags1
)

// hugetlbStyle says how a hugetlb folio is marked.
type hugetlbStyle uint8

const (
	hugetlbDtor     hugetlbStyle = iota // page[1].compound_dtor == 2 (≤ 6.5)
	hugetlbPage1Bit                     // PG_hugetlb in page[1].flags (6.6 – 6.8)
	hugetlbPageType                     // page type of the head (6.9+)
)

// Compound destructor ids (enum compound_dtor_id, mm.h, 4.4 – 6.5; the
// fixture's NUMBER(HUGETLB_PAGE_DTOR)=2 confirms the numbering).
const (
	compoundPageDtor  = 1
	hugetlbPageDtor   = 2
	transhugePageDtor = 3
)

// Fixed struct page layout (x86_64, 64 bytes) shared by every profile:
// OFFSET(page.*) in the fixture, and the same in the 4.19, 5.10, 6.6 and
// 6.12 mm_types.h (flags; a 40-byte union whose first word is
// lru.next/compound_head, mapping at 24, index 32, private 40;
// _mapcount/page_type 48; _refcount 52; memcg_data 56).
const (
	structPageSize = 64
	offFlags       = 0
	offLRU         = 8 // lru.next, compound_head, slab_list/slab_cache
	offLRUPrev     = 16
	offMapping     = 24
	offIndex       = 32
	offPrivate     = 40
	offMapcount    = 48
	offRefcount    = 52
	offMemcg       = 56
	offDtor        = 16 // page[1].compound_dtor (≤ 6.5)
	offOrder       = 17 // page[1].compound_order (≤ 6.5)
	offCompMapcnt  = 20 // page[1].compound_mapcount (≤ 6.2)
)

// profile is one kernel era.
type profile struct {
	name      string
	osrelease string
	version   string // utsname.version
	// major, minor: the kernel version, for version checks here.
	major, minor int

	pg pgFlags
	// hugetlbFlag1 is PG_hugetlb, a page[1] flag (6.6 – 6.8), else -1.
	hugetlbFlag1 int
	// largeRmappable is PG_large_rmappable, a page[1] flag (6.6+), else -1.
	largeRmappable int

	orders  orderStyle
	hugetlb hugetlbStyle

	// Page types, the values the kernel stores in page->page_type
	// (which overlays _mapcount). Before 6.12 a type is the bit cleared
	// from -1 (~PG_buddy etc.); from 6.12 it is PGTY_x << 24 with the low
	// 24 bits zero. 0 means the type does not exist in that kernel.
	buddyType, offlineType, tableType, hugetlbType, slabType uint32

	// slabMappingCount: struct slab puts slab.slabs (an int) where
	// page.mapping is, so mapping can be odd (6.2+, "mm/slub: ...",
	// noted by makedumpfile 1.7.3).
	slabMappingCount bool
	// slabCacheAtLRU: slab.slab_cache is the word at offset 8 (6.2+);
	// before it is at offset 24 (page.mapping).
	slabCacheAtLRU bool

	// utsNameOff is offsetof(struct uts_namespace, name): 4 while the
	// struct began with a kref (≤ 5.10), 0 after (fixture).
	utsNameOff uint64

	// largeCacheFolios: the era has large page-cache folios (5.17+) and, from
	// 6.8, anonymous mTHP.
	largeCacheFolios, anonMTHP bool

	vmcoreinfo func(k *kmem) []kv
}

// kv is one VMCOREINFO line.
type kv struct{ k, v string }

// Page-type constants.
const (
	// Before 6.12 (include/linux/page-flags.h): PG_buddy 0x80,
	// PG_offline 0x100, PG_table 0x200, PG_hugetlb 0x800 (6.9); a page
	// has the type when the bit is clear in page_type, which is -1
	// otherwise, so the stored value is ^bit.
	oldBuddy   = ^uint32(0x80)
	oldOffline = ^uint32(0x100)
	oldTable   = ^uint32(0x200)
	oldHugetlb = ^uint32(0x800)
	// 6.12 (enum pagetype): PGTY_buddy 0xf0, offline 0xf1, table 0xf2,
	// guard 0xf3, hugetlb 0xf4, slab 0xf5, zsmalloc 0xf6, unaccepted
	// 0xf7, stored as PGTY_x << 24.
	pgtyBuddy      = uint32(0xf0) << 24
	pgtyOffline    = uint32(0xf1) << 24
	pgtyTable      = uint32(0xf2) << 24
	pgtyHugetlb    = uint32(0xf4) << 24
	pgtySlab       = uint32(0xf5) << 24
	pgtyUnaccepted = uint32(0xf7) << 24
)

// Flag numbers per era (see the file comment for sources).
var (
	// 4.19: locked error referenced uptodate dirty lru active waiters
	// slab owner_priv_1 arch_1 reserved private private_2 writeback head
	// mappedtodisk reclaim swapbacked unevictable mlocked uncached
	// hwpoison; no PG_workingset yet (4.20).
	flags419 = pgFlags{locked: 0, referenced: 2, uptodate: 3, dirty: 4, lru: 5, active: 6,
		waiters: 7, slab: 8, ownerPriv1: 9, reserved: 11, private: 12, writeback: 14,
		head: 15, mappedToDisk: 16, reclaim: 17, swapBacked: 18, unevictable: 19,
		mlocked: 20, hwpoison: 22, workingset: -1}
	// 5.10 and 6.1: locked referenced uptodate dirty lru active
	// workingset waiters error slab owner_priv_1 arch_1 reserved private
	// private_2 writeback head mappedtodisk reclaim swapbacked
	// unevictable mlocked uncached hwpoison. The fixture confirms
	// PG_lru 4, PG_private 13, PG_swapcache 10, PG_swapbacked 19,
	// PG_slab 9, PG_hwpoison 23, PG_head_mask 1<<16.
	flags510 = pgFlags{locked: 0, referenced: 1, uptodate: 2, dirty: 3, lru: 4, active: 5,
		workingset: 6, waiters: 7, slab: 9, ownerPriv1: 10, reserved: 12, private: 13,
		writeback: 15, head: 16, mappedToDisk: 17, reclaim: 18, swapBacked: 19,
		unevictable: 20, mlocked: 21, hwpoison: 23}
	// 6.6 – 6.9: locked writeback referenced uptodate dirty lru head
	// waiters active workingset error slab owner_priv_1 arch_1 reserved
	// private private_2 mappedtodisk reclaim swapbacked unevictable
	// mlocked uncached hwpoison.
	flags66 = pgFlags{locked: 0, writeback: 1, referenced: 2, uptodate: 3, dirty: 4, lru: 5,
		head: 6, waiters: 7, active: 8, workingset: 9, slab: 11, ownerPriv1: 12,
		reserved: 14, private: 15, mappedToDisk: 17, reclaim: 18, swapBacked: 19,
		unevictable: 20, mlocked: 21, hwpoison: 23}
	// 6.12: locked writeback referenced uptodate dirty lru head waiters
	// active workingset owner_priv_1 owner_2 arch_1 reserved private
	// private_2 reclaim swapbacked unevictable mlocked hwpoison; PG_slab
	// became a page type in 6.10 and PG_error went in 6.12.
	flags612 = pgFlags{locked: 0, writeback: 1, referenced: 2, uptodate: 3, dirty: 4, lru: 5,
		head: 6, waiters: 7, active: 8, workingset: 9, ownerPriv1: 10, mappedToDisk: 11,
		reserved: 13, private: 14, reclaim: 16, swapBacked: 17, unevictable: 18,
		mlocked: 19, hwpoison: 20, slab: -1}
)

// profiles are the supported eras, by name.
var profiles = map[string]*profile{
	"4.19": {
		name: "4.19", osrelease: "4.19.0-27-amd64", major: 4, minor: 19,
		version: "#1 SMP Debian 4.19.316-1 (2024-06-25)",
		pg:      flags419, hugetlbFlag1: -1, largeRmappable: -1,
		orders: orderPage1Fields, hugetlb: hugetlbDtor,
		// page_type arrived in 4.18 with PG_buddy and PG_table; no
		// PG_offline until 5.0.
		buddyType: oldBuddy, tableType: oldTable,
		utsNameOff: 4,
		vmcoreinfo: vmcoreinfo419,
	},
	"5.10": {
		name: "5.10", osrelease: "5.10.0-35-amd64", major: 5, minor: 10,
		version: "#1 SMP Debian 5.10.237-1 (2025-05-19)",
		pg:      flags510, hugetlbFlag1: -1, largeRmappable: -1,
		orders: orderPage1Fields, hugetlb: hugetlbDtor,
		buddyType: oldBuddy, offlineType: oldOffline, tableType: oldTable,
		utsNameOff: 4,
		vmcoreinfo: vmcoreinfo510,
	},
	"6.1": {
		name: "6.1", osrelease: "6.1.0-57-amd64", major: 6, minor: 1,
		version: "#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (2025-05-20)",
		pg:      flags510, hugetlbFlag1: -1, largeRmappable: -1,
		orders: orderPage1Fields, hugetlb: hugetlbDtor,
		buddyType: oldBuddy, offlineType: oldOffline, tableType: oldTable,
		utsNameOff: 0, largeCacheFolios: true,
		vmcoreinfo: vmcoreinfo61,
	},
	"6.6": {
		name: "6.6", osrelease: "6.6.15-amd64", major: 6, minor: 6,
		version: "#1 SMP PREEMPT_DYNAMIC Debian 6.6.15-2 (2024-02-04)",
		// PG_hugetlb = PG_active and PG_large_rmappable = PG_workingset,
		// both stored in the first tail page (page-flags.h, 6.6).
		pg: flags66, hugetlbFlag1: 8, largeRmappable: 9,
		orders: orderFlags1, hugetlb: hugetlbPage1Bit,
		buddyType: oldBuddy, offlineType: oldOffline, tableType: oldTable,
		slabMappingCount: true, slabCacheAtLRU: true,
		utsNameOff: 0, largeCacheFolios: true,
		vmcoreinfo: vmcoreinfo66,
	},
	"6.9": {
		name: "6.9", osrelease: "6.9.12-amd64", major: 6, minor: 9,
		version: "#1 SMP PREEMPT_DYNAMIC Debian 6.9.12-1 (2024-07-27)",
		// "mm: turn folio_test_hugetlb into a PageType" (d99e3140a4d3,
		// 6.9): PG_hugetlb = 0x800 in page_type; PG_slab still a flag.
		pg: flags66, hugetlbFlag1: -1, largeRmappable: 9,
		orders: orderFlags1, hugetlb: hugetlbPageType,
		buddyType: oldBuddy, offlineType: oldOffline, tableType: oldTable, hugetlbType: oldHugetlb,
		slabMappingCount: true, slabCacheAtLRU: true,
		utsNameOff: 0, largeCacheFolios: true, anonMTHP: true,
		vmcoreinfo: vmcoreinfo69,
	},
	"6.12": {
		name: "6.12", osrelease: "6.12.48+deb13-amd64", major: 6, minor: 12,
		version: "#1 SMP PREEMPT_DYNAMIC Debian 6.12.48-1 (2025-09-20)",
		pg:      flags612, hugetlbFlag1: -1, largeRmappable: 9,
		orders: orderFlags1, hugetlb: hugetlbPageType,
		buddyType: pgtyBuddy, offlineType: pgtyOffline, tableType: pgtyTable,
		hugetlbType: pgtyHugetlb, slabType: pgtySlab,
		slabMappingCount: true, slabCacheAtLRU: true,
		utsNameOff: 0, largeCacheFolios: true, anonMTHP: true,
		vmcoreinfo: vmcoreinfo612,
	},
}

// Profiles returns the names of the supported kernel-era profiles, in
// version order.
func Profiles() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := profiles[names[i]], profiles[names[j]]
		if a.major != b.major {
			return a.major < b.major
		}
		return a.minor < b.minor
	})
	return names
}

func lookupProfile(name string) (*profile, error) {
	p, ok := profiles[name]
	if !ok {
		return nil, fmt.Errorf("synth: unknown kernel profile %q (have %v)", name, Profiles())
	}
	return p, nil
}

// atLeast reports whether the profile's kernel is at least major.minor.
func (p *profile) atLeast(major, minor int) bool {
	return p.major > major || p.major == major && p.minor >= minor
}
