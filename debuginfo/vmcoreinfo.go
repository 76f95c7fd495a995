package debuginfo

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// GenerateVMCOREINFO writes the VMCOREINFO text makedumpfile -g writes for
// a vmlinux: OSRELEASE (from the vmlinux's utsname), PAGESIZE (pageSize,
// the running machine's, as makedumpfile takes it), then its symbols,
// structure sizes, member offsets, array lengths, enumerators and a
// typedef's source file, each line only where the vmlinux has it, in
// makedumpfile 1.7.2's order and with its quirks (an array variable's
// LENGTH is LONG_MAX-1; SIZE(pageflags) is looked up as a typedef). Such a
// file is what -i reads for a vmcore without a VMCOREINFO note.
func GenerateVMCOREINFO(d *DWARF, pageSize int64) ([]byte, error) {
	g := &generator{d: d, sym: map[string]uint64{}}
	return g.generate(pageSize)
}

type generator struct {
	d   *DWARF
	b   bytes.Buffer
	sym map[string]uint64
}

// foundArray is makedumpfile's FOUND_ARRAY_TYPE: LONG_MAX-1, what its
// LENGTH(node_data) says for an array it does not measure.
const foundArray = 1<<63 - 2

func (g *generator) symbol(name string) uint64 {
	v, ok := g.d.SymbolValue(name)
	if !ok {
		return 0
	}
	return v
}

func (g *generator) size(name string) int64 {
	n, err := g.d.StructSize(name)
	if err != nil {
		return -1
	}
	return n
}

func (g *generator) offset(s, m string) int64 {
	mm, err := g.d.Member(s, m)
	if err != nil {
		return -1
	}
	return mm.Offset
}

func (g *generator) enum(name string) int64 {
	v, err := g.d.Enumerator(name)
	if err != nil {
		return -1
	}
	return v
}

func (g *generator) generate(pageSize int64) ([]byte, error) {
	d := g.d
	syms := []string{"mem_map", "vmem_map", "mem_section", "pkmap_count", "pkmap_count_next",
		"system_utsname", "init_uts_ns", "_stext", "swapper_pg_dir", "init_level4_pgt",
		"level4_kernel_pgt", "init_top_pgt", "vmlist", "vmap_area_list", "node_online_map",
		"node_states", "node_data", "pgdat_list", "contig_page_data", "prb", "clear_seq",
		"log_buf", "log_buf_len", "log_end", "log_first_idx", "clear_idx", "log_next_idx",
		"max_pfn", "high_memory", "node_remap_start_vaddr", "node_remap_end_vaddr",
		"node_remap_start_pfn", "vmemmap_list", "mmu_psize_defs", "mmu_vmemmap_psize",
		"cpu_pgd", "demote_segment_4k", "cur_cpu_spec", "free_huge_page"}
	for _, s := range syms {
		if s == "pkmap_count_next" {
			if g.symbol("pkmap_count") != 0 {
				g.sym[s], _ = d.NextSymbolValue("pkmap_count")
			}
			continue
		}
		g.sym[s] = g.symbol(s)
	}
	if g.sym["system_utsname"] == 0 && g.sym["init_uts_ns"] == 0 {
		return nil, errors.New("the vmlinux has neither system_utsname nor init_uts_ns")
	}
	release, err := g.release()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&g.b, "OSRELEASE=%s\n", release)
	fmt.Fprintf(&g.b, "PAGESIZE=%d\n", pageSize)
	for _, s := range syms {
		if v := g.sym[s]; v != 0 {
			fmt.Fprintf(&g.b, "SYMBOL(%s)=%x\n", s, v)
		}
	}

	writeSize := func(key string, n int64) {
		if n != -1 {
			fmt.Fprintf(&g.b, "SIZE(%s)=%d\n", key, n)
		}
	}
	for _, s := range []string{"page", "mem_section", "pglist_data", "zone", "free_area", "list_head", "node_memblk_s"} {
		writeSize(s, g.size(s))
	}
	typedefSize := func(name string) int64 {
		n, err := d.TypedefSize(name)
		if err != nil {
			return -1
		}
		return n
	}
	writeSize("nodemask_t", typedefSize("nodemask_t"))
	// makedumpfile asks for the enumeration's size as a typedef's.
	writeSize("pageflags", typedefSize("pageflags"))
	printk := "log"
	switch {
	case g.size("printk_ringbuffer") != -1:
		printk = "ringbuffer"
		for _, s := range []string{"printk_ringbuffer", "prb_desc", "printk_info", "latched_seq"} {
			writeSize(s, g.size(s))
		}
	case g.size("printk_log") != -1:
		printk = "printk_log"
		writeSize("printk_log", g.size("printk_log"))
	default:
		writeSize("log", g.size("log"))
	}
	writeSize("vmemmap_backing", g.size("vmemmap_backing"))
	writeSize("mmu_psize_def", g.size("mmu_psize_def"))

	writeOffset := func(key string, n int64) {
		if n != -1 {
			fmt.Fprintf(&g.b, "OFFSET(%s)=%d\n", key, n)
		}
	}
	member := func(s, m string) { writeOffset(s+"."+m, g.offset(s, m)) }
	member("page", "flags")
	if n := g.offset("page", "_refcount"); n != -1 {
		writeOffset("page._refcount", n)
	} else {
		writeOffset("page._count", g.offset("page", "_count"))
	}
	for _, m := range [][2]string{
		{"page", "mapping"}, {"page", "lru"}, {"page", "_mapcount"}, {"page", "private"},
		{"page", "compound_dtor"}, {"page", "compound_order"}, {"page", "compound_head"},
		{"mem_section", "section_mem_map"}, {"pglist_data", "node_zones"}, {"pglist_data", "nr_zones"},
		{"pglist_data", "node_mem_map"}, {"pglist_data", "node_start_pfn"},
		{"pglist_data", "node_spanned_pages"}, {"pglist_data", "pgdat_next"},
		{"zone", "free_pages"}, {"zone", "free_area"}, {"zone", "vm_stat"}, {"zone", "spanned_pages"},
		{"free_area", "free_list"}, {"list_head", "next"}, {"list_head", "prev"},
		{"node_memblk_s", "start_paddr"}, {"node_memblk_s", "size"}, {"node_memblk_s", "nid"},
		{"vm_struct", "addr"}, {"vmap_area", "va_start"}, {"vmap_area", "list"},
	} {
		member(m[0], m[1])
	}
	switch printk {
	case "ringbuffer":
		for _, m := range [][2]string{
			{"printk_ringbuffer", "desc_ring"}, {"printk_ringbuffer", "text_data_ring"},
			{"prb_desc_ring", "count_bits"}, {"prb_desc_ring", "descs"}, {"prb_desc_ring", "infos"},
			{"prb_desc_ring", "head_id"}, {"prb_desc_ring", "tail_id"},
			{"prb_desc", "state_var"}, {"prb_desc", "text_blk_lpos"},
			{"prb_data_blk_lpos", "begin"}, {"prb_data_blk_lpos", "next"},
			{"prb_data_ring", "size_bits"}, {"prb_data_ring", "data"},
			{"printk_info", "ts_nsec"}, {"printk_info", "text_len"},
			{"atomic_long_t", "counter"}, {"latched_seq", "val"},
		} {
			member(m[0], m[1])
		}
	case "printk_log":
		for _, m := range []string{"ts_nsec", "len", "text_len"} {
			member("printk_log", m)
		}
	default:
		for _, m := range []string{"ts_nsec", "len", "text_len"} {
			member("log", m)
		}
	}
	for _, m := range [][2]string{
		{"vmemmap_backing", "phys"}, {"vmemmap_backing", "virt_addr"}, {"vmemmap_backing", "list"},
		{"mmu_psize_def", "shift"}, {"cpu_spec", "mmu_features"}, {"uts_namespace", "name"},
	} {
		member(m[0], m[1])
	}

	writeLength := func(key string, n int64) {
		if n != -1 {
			fmt.Fprintf(&g.b, "LENGTH(%s)=%d\n", key, n)
		}
	}
	if g.sym["node_data"] != 0 {
		// makedumpfile only checks that node_data is an array.
		if isArray, _, _ := d.SymbolArray("node_data"); isArray {
			writeLength("node_data", foundArray)
		}
	}
	for _, s := range []string{"pgdat_list", "mem_section", "node_memblk", "node_remap_start_pfn"} {
		if g.symbol(s) == 0 {
			continue
		}
		_, n, _ := d.SymbolArray(s)
		writeLength(s, n)
	}
	for _, m := range [][2]string{{"zone", "free_area"}, {"free_area", "free_list"}} {
		n, _ := d.MemberArrayLength(m[0], m[1])
		writeLength(m[0]+"."+m[1], n)
	}

	writeNumber := func(key string, n int64) {
		if n != -1 {
			fmt.Fprintf(&g.b, "NUMBER(%s)=%d\n", key, n)
		}
	}
	headMask := g.enum("PG_head_mask")
	if headMask == -1 {
		head := g.enum("PG_head")
		if head == -1 {
			head = g.enum("PG_compound")
		}
		if head != -1 {
			headMask = 1 << head
		}
	}
	writeNumber("NR_FREE_PAGES", g.enum("NR_FREE_PAGES"))
	writeNumber("N_ONLINE", g.enum("N_ONLINE"))
	writeNumber("pgtable_l5_enabled", g.enum("pgtable_l5_enabled"))
	for _, n := range []string{"PG_lru", "PG_private"} {
		writeNumber(n, g.enum(n))
	}
	writeNumber("PG_head_mask", headMask)
	for _, n := range []string{"PG_swapcache", "PG_swapbacked", "PG_buddy", "PG_slab", "PG_hwpoison"} {
		writeNumber(n, g.enum(n))
	}
	writeNumber("HUGETLB_PAGE_DTOR", g.enum("HUGETLB_PAGE_DTOR"))

	if f, err := d.TypedefFile("pud_t"); err == nil && f != "" {
		fmt.Fprintf(&g.b, "SRCFILE(pud_t)=%s\n", f)
	}
	return g.b.Bytes(), nil
}

// utsLen is the length of each field of struct new_utsname.
const utsLen = 65

// release reads the kernel release from the vmlinux's utsname:
// system_utsname, else init_uts_ns.name.
func (g *generator) release() (string, error) {
	at := g.sym["system_utsname"]
	if at == 0 {
		off := g.offset("uts_namespace", "name")
		if off == -1 {
			off = 4 // makedumpfile: past the namespace's leading int
		}
		at = g.sym["init_uts_ns"] + uint64(off)
	}
	buf := make([]byte, utsLen)
	if err := g.d.ReadVirt(at+2*utsLen, buf); err != nil {
		return "", fmt.Errorf("the vmlinux's utsname: %w", err)
	}
	rel, _, _ := strings.Cut(string(buf), "\x00")
	if rel == "" {
		return "", errors.New("the vmlinux's utsname has no release")
	}
	return rel, nil
}
