package synth

import (
	"fmt"
	"strconv"
	"strings"
)

// The VMCOREINFO text of a kernel machine, written line by line in the
// order crash_save_vmcoreinfo_init and arch_crash_save_vmcoreinfo emit
// them for the profile's era, in the kernel's formats: SYMBOL() and
// KERNELOFFSET as "%lx" (lowercase hex, no 0x), NUMBER() as "%ld" (signed
// decimal: phys_base and the page-type values can be negative), SIZE(),
// OFFSET() and LENGTH() as "%lu", NUMBER(VMALLOC_START) as "0x%lx", and
// CRASHTIME appended last, as crash_save_vmcoreinfo does at panic time.

func viSym(name string, addr uint64) kv {
	return kv{"SYMBOL(" + name + ")", strconv.FormatUint(addr, 16)}
}

func viNum(name string, v int64) kv { return kv{"NUMBER(" + name + ")", strconv.FormatInt(v, 10)} }

func viSize(name string, v int) kv { return kv{"SIZE(" + name + ")", strconv.Itoa(v)} }

func viOff(name string, v int) kv { return kv{"OFFSET(" + name + ")", strconv.Itoa(v)} }

func viLen(name string, v int) kv { return kv{"LENGTH(" + name + ")", strconv.Itoa(v)} }

// pageTypeNumber is how NUMBER(PAGE_*_MAPCOUNT_VALUE) prints a page type:
// as a signed 32-bit value widened to long (-129 for ~PG_buddy; PGTY_x << 24
// overflows int, so 6.12's buddy prints as -268435456).
func pageTypeNumber(t uint32) int64 { return int64(int32(t)) }

// Values makedumpfile never reads on the mem_map path, copied from the 6.1
// fixture for every era (see profiles.go).
const (
	sizePglistData   = 174208
	sizeZone         = 1536
	offNrZones       = 171552
	offNodeStartPFN  = 171560
	offNodeSpanned   = 171576
	offNodeID        = 171584
	offZoneFreeArea  = 256
	offZoneVMStat    = 1344
	offZoneSpanned   = 144
	kernelImageSize  = 1 << 30 // NUMBER(KERNEL_IMAGE_SIZE), KASLR's 1 GiB
	lenNodeData      = 1024    // MAX_NUMNODES with Debian's NODES_SHIFT=10
	lenFreeAreaOrder = 11      // MAX_ORDER 11 (≤ 6.3), MAX_ORDER+1 (6.4+), NR_PAGE_ORDERS (6.8+)
	lenFreeList      = 5       // MIGRATE_TYPES without CMA (fixture)
)

func viHead(k *kmem, buildID bool) []kv {
	l := []kv{{"OSRELEASE", k.prof.osrelease}}
	if buildID { // 5.9+: "kdump: append kernel build-id string to VMCOREINFO"
		l = append(l, kv{"BUILD-ID", k.buildID})
	}
	return append(l, kv{"PAGESIZE", fmt.Sprint(k.ps)})
}

func memSection(k *kmem, sectionBits, physBits bool) []kv {
	l := []kv{
		viSym("mem_section", k.memSectionVA),
		viLen("mem_section", int(k.nrRoots())),
		viSize("mem_section", memSectionSize),
		viOff("mem_section.section_mem_map", 0),
	}
	if sectionBits { // 5.13+
		l = append(l, viNum("SECTION_SIZE_BITS", int64(k.sectionBits)))
	}
	if physBits { // 5.9+
		l = append(l, viNum("MAX_PHYSMEM_BITS", int64(k.physBits())))
	}
	return l
}

func structSizes() []kv {
	return []kv{
		viSize("page", structPageSize), viSize("pglist_data", sizePglistData), viSize("zone", sizeZone),
		viSize("free_area", 88), viSize("list_head", 16), viSize("nodemask_t", 128),
		viOff("page.flags", offFlags), viOff("page._refcount", offRefcount), viOff("page.mapping", offMapping),
		viOff("page.lru", offLRU), viOff("page._mapcount", offMapcount), viOff("page.private", offPrivate),
	}
}

func pgdatOffsets() []kv {
	return []kv{
		viOff("pglist_data.node_zones", 0), viOff("pglist_data.nr_zones", offNrZones),
		viOff("pglist_data.node_start_pfn", offNodeStartPFN), viOff("pglist_data.node_spanned_pages", offNodeSpanned),
		viOff("pglist_data.node_id", offNodeID),
		viOff("zone.free_area", offZoneFreeArea), viOff("zone.vm_stat", offZoneVMStat),
		viOff("zone.spanned_pages", offZoneSpanned), viOff("free_area.free_list", 0),
		viOff("list_head.next", 0), viOff("list_head.prev", 8),
	}
}

// printkRing is log_buf_vmcoreinfo_setup for the lockless ring buffer
// (5.10+); latchedSeq adds the 5.13+ clear_seq type.
func printkRing(k *kmem, latchedSeq bool) []kv {
	l := []kv{
		viSym("prb", k.sym["prb"]), viSym("printk_rb_static", k.sym["printk_rb_static"]),
		viSym("clear_seq", k.sym["clear_seq"]),
		viSize("printk_ringbuffer", 88), viOff("printk_ringbuffer.desc_ring", 0),
		viOff("printk_ringbuffer.text_data_ring", 48), viOff("printk_ringbuffer.fail", 80),
		viSize("prb_desc_ring", 48), viOff("prb_desc_ring.count_bits", 0), viOff("prb_desc_ring.descs", 8),
		viOff("prb_desc_ring.infos", 16), viOff("prb_desc_ring.head_id", 24), viOff("prb_desc_ring.tail_id", 32),
		viSize("prb_desc", 24), viOff("prb_desc.state_var", 0), viOff("prb_desc.text_blk_lpos", 8),
		viSize("prb_data_blk_lpos", 16), viOff("prb_data_blk_lpos.begin", 0), viOff("prb_data_blk_lpos.next", 8),
		viSize("printk_info", 88), viOff("printk_info.seq", 0), viOff("printk_info.ts_nsec", 8),
		viOff("printk_info.text_len", 16), viOff("printk_info.caller_id", 20), viOff("printk_info.dev_info", 24),
		viSize("dev_printk_info", 64), viOff("dev_printk_info.subsystem", 0), viLen("printk_info_subsystem", 16),
		viOff("dev_printk_info.device", 16), viLen("printk_info_device", 48),
		viSize("prb_data_ring", 32), viOff("prb_data_ring.size_bits", 0), viOff("prb_data_ring.data", 8),
		viOff("prb_data_ring.head_lpos", 16), viOff("prb_data_ring.tail_lpos", 24),
		viSize("atomic_long_t", 8), viOff("atomic_long_t.counter", 0),
	}
	if latchedSeq {
		l = append(l, viSize("latched_seq", 24), viOff("latched_seq.val", 8))
	}
	return l
}

func kallsyms(k *kmem) []kv { // 6.0+
	var l []kv
	for _, n := range []string{"kallsyms_names", "kallsyms_num_syms", "kallsyms_token_table",
		"kallsyms_token_index", "kallsyms_offsets", "kallsyms_relative_base"} {
		l = append(l, viSym(n, k.sym[n]))
	}
	return l
}

// archX86 is arch_crash_save_vmcoreinfo (x86_64); sme_mask arrived in 5.x.
// An arm64 or riscv64 machine gets its own instead (archARM64,
// archRISCV64).
func archX86(k *kmem, smeMask bool) []kv {
	if k.arm != nil {
		return archARM64(k)
	}
	if k.rv != nil {
		return archRISCV64(k)
	}
	l := []kv{
		viNum("phys_base", k.physBase),
		viSym("init_top_pgt", k.sym["init_top_pgt"]),
		viNum("pgtable_l5_enabled", 0),
		viSym("node_data", k.sym["node_data"]),
		viLen("node_data", lenNodeData),
		{"KERNELOFFSET", strconv.FormatUint(k.kaslrOffset, 16)},
		viNum("KERNEL_IMAGE_SIZE", kernelImageSize),
	}
	if smeMask {
		l = append(l, viNum("sme_mask", 0))
	}
	return l
}

func join(parts ...[]kv) []kv {
	var l []kv
	for _, p := range parts {
		l = append(l, p...)
	}
	return l
}

// viUTS is SYMBOL(init_uts_ns) through SYMBOL(swapper_pg_dir); utsName
// adds OFFSET(uts_namespace.name) (6.0+).
func viUTS(k *kmem, utsName bool) []kv {
	l := []kv{viSym("init_uts_ns", k.sym["init_uts_ns"])}
	if utsName {
		l = append(l, viOff("uts_namespace.name", 0))
	}
	return append(l,
		viSym("node_online_map", k.sym["node_online_map"]),
		viSym("swapper_pg_dir", k.sym["swapper_pg_dir"]))
}

// viMM is the part from SYMBOL(_stext) through LENGTH(free_area.free_list).
// sec is the mem_section block; compoundDtor adds page.compound_dtor and
// page.compound_order (gone in 6.6, the order is in page[1].flags);
// vmapList is OFFSET(vmap_area.list), or 0 from 6.9 on, where
// vmap_area_list and the vmap_area offsets gave way to
// NUMBER(VMALLOC_START) ("mm: vmalloc: remove vmap_area_list"); ring is
// the printk buffer's block.
func viMM(k *kmem, sec []kv, compoundDtor bool, vmapList int, ring []kv) []kv {
	l := []kv{viSym("_stext", k.textVA)}
	if vmapList == 0 {
		l = append(l, kv{"NUMBER(VMALLOC_START)", fmt.Sprintf("0x%x", k.vmallocStart)})
	} else {
		l = append(l, viSym("vmap_area_list", k.sym["vmap_area_list"]))
	}
	l = append(append(l, sec...), structSizes()...)
	if compoundDtor {
		l = append(l, viOff("page.compound_dtor", offDtor), viOff("page.compound_order", offOrder))
	}
	l = append(append(l, viOff("page.compound_head", offLRU)), pgdatOffsets()...)
	if vmapList != 0 {
		l = append(l, viOff("vmap_area.va_start", 0), viOff("vmap_area.list", vmapList))
	}
	l = append(append(l, viLen("zone.free_area", lenFreeAreaOrder)), ring...)
	freeList := lenFreeList
	if k.arm != nil {
		freeList++ // arm64 has MIGRATE_CMA (the arm64 6.1 vmcore: 6)
	}
	return append(l, viLen("free_area.free_list", freeList))
}

// printkLog is log_buf_vmcoreinfo_setup for the printk_log ring buffer
// (before 5.10).
func printkLog(k *kmem) []kv {
	return []kv{
		viSym("log_buf", k.sym["log_buf"]), viSym("log_buf_len", k.sym["log_buf_len"]),
		viSym("log_first_idx", k.sym["log_first_idx"]), viSym("clear_idx", k.sym["clear_idx"]),
		viSym("log_next_idx", k.sym["log_next_idx"]),
		viSize("printk_log", 16), viOff("printk_log.ts_nsec", 0), viOff("printk_log.len", 8),
		viOff("printk_log.text_len", 10), viOff("printk_log.dict_len", 12),
	}
}

// pageFlagNumbers is NR_FREE_PAGES through PAGE_BUDDY_MAPCOUNT_VALUE;
// slabType says PG_slab is a page type (6.10+), exported as
// PAGE_SLAB_MAPCOUNT_VALUE after PG_swapbacked.
func pageFlagNumbers(k *kmem, slabType bool) []kv {
	p := k.prof
	l := []kv{
		viNum("NR_FREE_PAGES", 0),
		viNum("PG_lru", int64(p.pg.lru)), viNum("PG_private", int64(p.pg.private)),
		viNum("PG_swapcache", int64(p.pg.ownerPriv1)), viNum("PG_swapbacked", int64(p.pg.swapBacked)),
	}
	if slabType {
		l = append(l, viNum("PAGE_SLAB_MAPCOUNT_VALUE", pageTypeNumber(p.slabType)))
	} else {
		l = append(l, viNum("PG_slab", int64(p.pg.slab)))
	}
	return append(l,
		viNum("PG_hwpoison", int64(p.pg.hwpoison)),
		viNum("PG_head_mask", 1<<p.pg.head),
		viNum("PAGE_BUDDY_MAPCOUNT_VALUE", pageTypeNumber(p.buddyType)))
}

// offlineNumber is NUMBER(PAGE_OFFLINE_MAPCOUNT_VALUE) (5.0+).
func offlineNumber(k *kmem) kv {
	return viNum("PAGE_OFFLINE_MAPCOUNT_VALUE", pageTypeNumber(k.prof.offlineType))
}

// vmcoreinfo419: 4.19's crash_core.c. No BUILD-ID, no
// OFFSET(uts_namespace.name) (makedumpfile then reads the name at
// init_uts_ns + sizeof(int), after the kref), no SECTION_SIZE_BITS or
// MAX_PHYSMEM_BITS (makedumpfile's x86_64 defaults are 27 and 46), the
// printk_log ring buffer, and no PAGE_OFFLINE_MAPCOUNT_VALUE (5.0).
func vmcoreinfo419(k *kmem) []kv {
	// vmap_area.list 48: after va_start, va_end, flags, rb_node.
	return join(viHead(k, false), viUTS(k, false),
		viMM(k, memSection(k, false, false), true, 48, printkLog(k)),
		pageFlagNumbers(k, false), []kv{
			viNum("HUGETLB_PAGE_DTOR", hugetlbPageDtor),
		}, archX86(k, false))
}

// vmcoreinfo510: 5.10.13's crash_core.c: BUILD-ID, MAX_PHYSMEM_BITS, the
// lockless printk ring buffer without latched_seq (5.13), PG_offline, and
// sme_mask from x86.
func vmcoreinfo510(k *kmem) []kv {
	return join(viHead(k, true), viUTS(k, false),
		viMM(k, memSection(k, false, true), true, 40, printkRing(k, false)),
		pageFlagNumbers(k, false), []kv{
			viNum("HUGETLB_PAGE_DTOR", hugetlbPageDtor), offlineNumber(k),
		}, archX86(k, true))
}

// vmcoreinfo61 reproduces the fixture's key set and order exactly.
func vmcoreinfo61(k *kmem) []kv {
	return join(viHead(k, true), viUTS(k, true),
		viMM(k, memSection(k, true, true), true, 40, printkRing(k, true)),
		pageFlagNumbers(k, false), []kv{
			viNum("HUGETLB_PAGE_DTOR", hugetlbPageDtor), offlineNumber(k),
		}, kallsyms(k), archX86(k, true))
}

// vmcoreinfo66: 6.6's crash_core.c: no compound_dtor/compound_order (the
// order is in page[1].flags), NUMBER(PG_hugetlb) instead of
// HUGETLB_PAGE_DTOR.
func vmcoreinfo66(k *kmem) []kv {
	return join(viHead(k, true), viUTS(k, true),
		viMM(k, memSection(k, true, true), false, 40, printkRing(k, true)),
		pageFlagNumbers(k, false), []kv{
			viNum("PG_hugetlb", int64(k.prof.hugetlbFlag1)), offlineNumber(k),
		}, kallsyms(k), archX86(k, true))
}

// vmcoreinfo69: kernel/vmcore_info.c at 6.9: the hugetlb page type
// (PAGE_HUGETLB_MAPCOUNT_VALUE, no longer under CONFIG_HUGETLB_PAGE), and
// NUMBER(VMALLOC_START) instead of vmap_area_list.
func vmcoreinfo69(k *kmem) []kv {
	return vmcoreinfo69on(k, false)
}

// vmcoreinfo612: 6.12: PG_slab gone (PAGE_SLAB_MAPCOUNT_VALUE instead) and
// every page type PGTY_x << 24. With Unaccepted set, the 6.16+ export of
// PAGE_UNACCEPTED_MAPCOUNT_VALUE is added, as a newer kernel would.
func vmcoreinfo612(k *kmem) []kv {
	return vmcoreinfo69on(k, true)
}

// vmcoreinfo69on is 6.9 and later; slabType is 6.10+ (see pageFlagNumbers).
func vmcoreinfo69on(k *kmem, slabType bool) []kv {
	l := join(viHead(k, true), viUTS(k, true),
		viMM(k, memSection(k, true, true), false, 0, printkRing(k, true)),
		pageFlagNumbers(k, slabType), []kv{
			viNum("PAGE_HUGETLB_MAPCOUNT_VALUE", pageTypeNumber(k.prof.hugetlbType)), offlineNumber(k),
		})
	if k.unaccepted {
		l = append(l, viNum("PAGE_UNACCEPTED_MAPCOUNT_VALUE", pageTypeNumber(pgtyUnaccepted)))
	}
	return join(l, kallsyms(k), archX86(k, true))
}

// renderVMCOREINFO writes the lines as the kernel does, "KEY=VALUE\n" each.
func renderVMCOREINFO(l []kv, crashTime int64) string {
	var b strings.Builder
	for _, e := range l {
		b.WriteString(e.k)
		b.WriteByte('=')
		b.WriteString(e.v)
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "CRASHTIME=%d\n", crashTime)
	return b.String()
}
