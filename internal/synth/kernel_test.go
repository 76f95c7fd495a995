package synth

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pagepipe/internal/integration"
	"pagepipe/kernel"
	"pagepipe/source"
)

// memReader reads a kernel machine's physical memory through Page: the
// in-memory stand-in for a vmcore file.
type memReader struct {
	s     Spec
	k     *kmem
	pages map[uint64][]byte
}

func newMemReader(t testing.TB, s Spec) *memReader {
	t.Helper()
	k, err := kernelOf(&s)
	if err != nil {
		t.Fatal(err)
	}
	return &memReader{s: s, k: k, pages: map[uint64][]byte{}}
}

func (r *memReader) ReadPhys(pa uint64, p []byte) error {
	for len(p) > 0 {
		pfn := pa / PageSize
		if !r.k.inRAM(pfn, pfn+1) {
			return fmt.Errorf("physical %#x is not RAM", pa)
		}
		pg := r.pages[pfn]
		if pg == nil {
			pg = make([]byte, PageSize)
			Page(r.s, pfn, pg)
			r.pages[pfn] = pg
		}
		n := copy(p, pg[pa%PageSize:])
		p, pa = p[n:], pa+uint64(n)
	}
	return nil
}

// kernelVariants are small machines of every profile, plus variants with
// KASLR off and a 2 MiB direct map, and one with unaccepted memory.
func kernelVariants() map[string]Spec {
	m := map[string]Spec{}
	for _, p := range Profiles() {
		m[p] = KernelMachine(p, 256)
		s := NewKernelMachine(KernelSpec{Profile: p, DirectMap2M: true}, 96)
		s.Seed = 7
		m[p+"-nokaslr-2M"] = s
	}
	u := NewKernelMachine(KernelSpec{Profile: "6.12", KASLR: true, Unaccepted: true}, 192)
	u.Seed = 3
	m["6.12-unaccepted"] = u
	return m
}

// kernelTranslator is s's VMCOREINFO, its memory, and the kernel
// package's page-table walk over both.
func kernelTranslator(t testing.TB, s Spec) (*kernel.VMCOREINFO, *memReader, *kernel.Translator) {
	t.Helper()
	vi := parseVI(t, s)
	r := newMemReader(t, s)
	tr, err := kernel.NewTranslator(r, vi)
	if err != nil {
		t.Fatal(err)
	}
	return vi, r, tr
}

func parseVI(t testing.TB, s Spec) *kernel.VMCOREINFO {
	t.Helper()
	text, err := KernelVMCOREINFO(s)
	if err != nil {
		t.Fatal(err)
	}
	vi, err := kernel.ParseVMCOREINFO([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return vi
}

// TestVMCOREINFOMatchesFixture: the 6.1 profile writes the real kernel's
// keys in the real kernel's order, with its values for everything that is
// not an address or a KASLR value, and CRASHTIME last.
func TestVMCOREINFOMatchesFixture(t *testing.T) {
	gen := parseVI(t, KernelMachine("6.1", 256))
	fix, err := kernel.ParseVMCOREINFO([]byte(fixtureVMCOREINFO61))
	if err != nil {
		t.Fatal(err)
	}
	gk, fk := gen.Keys(), fix.Keys()
	if gk[len(gk)-1] != "CRASHTIME" {
		t.Errorf("last key %s, want CRASHTIME", gk[len(gk)-1])
	}
	if !slices.Equal(gk[:len(gk)-1], fk) {
		t.Fatalf("keys differ from the fixture:\n got %v\nwant %v", gk, fk)
	}
	for _, key := range fk {
		if strings.HasPrefix(key, "SYMBOL(") || key == "KERNELOFFSET" || key == "BUILD-ID" || key == "NUMBER(phys_base)" {
			continue
		}
		g, _ := gen.Raw(key)
		f, _ := fix.Raw(key)
		if g != f {
			t.Errorf("%s=%s, fixture has %s", key, g, f)
		}
	}
}

// TestVMCOREINFOEras checks each era's distinguishing keys.
func TestVMCOREINFOEras(t *testing.T) {
	type want struct {
		has, lacks []string
		numbers    map[string]int64
	}
	tab := map[string]want{
		"4.19": {
			has:   []string{"OFFSET(page.compound_order)", "NUMBER(HUGETLB_PAGE_DTOR)", "SYMBOL(log_buf)", "NUMBER(PG_slab)"},
			lacks: []string{"BUILD-ID", "OFFSET(uts_namespace.name)", "NUMBER(MAX_PHYSMEM_BITS)", "NUMBER(PAGE_OFFLINE_MAPCOUNT_VALUE)", "NUMBER(sme_mask)"},
			numbers: map[string]int64{"PG_lru": 5, "PG_private": 12, "PG_swapcache": 9, "PG_swapbacked": 18,
				"PG_slab": 8, "PG_hwpoison": 22, "PG_head_mask": 1 << 15, "PAGE_BUDDY_MAPCOUNT_VALUE": -129},
		},
		"5.10": {
			has:     []string{"BUILD-ID", "NUMBER(MAX_PHYSMEM_BITS)", "SYMBOL(prb)", "NUMBER(PAGE_OFFLINE_MAPCOUNT_VALUE)"},
			lacks:   []string{"OFFSET(uts_namespace.name)", "NUMBER(SECTION_SIZE_BITS)", "SIZE(latched_seq)", "SYMBOL(kallsyms_names)"},
			numbers: map[string]int64{"PG_lru": 4, "PG_head_mask": 1 << 16, "PAGE_OFFLINE_MAPCOUNT_VALUE": -257},
		},
		"6.6": {
			has:   []string{"NUMBER(PG_hugetlb)", "SYMBOL(vmap_area_list)"},
			lacks: []string{"OFFSET(page.compound_order)", "OFFSET(folio._folio_order)", "NUMBER(HUGETLB_PAGE_DTOR)"},
			numbers: map[string]int64{"PG_lru": 5, "PG_private": 15, "PG_swapcache": 12, "PG_swapbacked": 19,
				"PG_slab": 11, "PG_hwpoison": 23, "PG_head_mask": 64, "PG_hugetlb": 8},
		},
		"6.9": {
			has:     []string{"NUMBER(VMALLOC_START)", "NUMBER(PAGE_HUGETLB_MAPCOUNT_VALUE)", "NUMBER(PG_slab)"},
			lacks:   []string{"SYMBOL(vmap_area_list)", "OFFSET(vmap_area.list)", "NUMBER(PG_hugetlb)"},
			numbers: map[string]int64{"PAGE_HUGETLB_MAPCOUNT_VALUE": -2049, "PAGE_BUDDY_MAPCOUNT_VALUE": -129},
		},
		"6.12": {
			has:   []string{"NUMBER(PAGE_SLAB_MAPCOUNT_VALUE)"},
			lacks: []string{"NUMBER(PG_slab)", "NUMBER(PAGE_UNACCEPTED_MAPCOUNT_VALUE)"},
			numbers: map[string]int64{"PG_lru": 5, "PG_private": 14, "PG_swapcache": 10, "PG_swapbacked": 17,
				"PG_hwpoison": 20, "PG_head_mask": 64,
				"PAGE_BUDDY_MAPCOUNT_VALUE": -0x10000000, "PAGE_OFFLINE_MAPCOUNT_VALUE": -0x0f000000,
				"PAGE_HUGETLB_MAPCOUNT_VALUE": -0x0c000000, "PAGE_SLAB_MAPCOUNT_VALUE": -0x0b000000},
		},
	}
	for p, w := range tab {
		t.Run(p, func(t *testing.T) {
			vi := parseVI(t, KernelMachine(p, 256))
			for _, key := range w.has {
				if !vi.Has(key) {
					t.Errorf("no %s", key)
				}
			}
			for _, key := range w.lacks {
				if vi.Has(key) {
					t.Errorf("has %s", key)
				}
			}
			for n, v := range w.numbers {
				if got, ok := vi.Number(n); !ok || got != v {
					t.Errorf("NUMBER(%s)=%d (%v), want %d", n, got, ok, v)
				}
			}
			if vi.OSRelease() != profiles[p].osrelease {
				t.Errorf("OSRELEASE %s", vi.OSRelease())
			}
		})
	}
	u := parseVI(t, kernelVariants()["6.12-unaccepted"])
	if v, ok := u.Number("PAGE_UNACCEPTED_MAPCOUNT_VALUE"); !ok || v != -0x09000000 {
		t.Errorf("PAGE_UNACCEPTED_MAPCOUNT_VALUE=%d (%v)", v, ok)
	}
}

// utsAddress is where makedumpfile reads utsname: init_uts_ns plus
// OFFSET(uts_namespace.name), or plus sizeof(int) (the kref) when the
// kernel does not export the offset.
func utsAddress(t testing.TB, vi *kernel.VMCOREINFO) uint64 {
	t.Helper()
	uts, err := vi.RequireSymbol("init_uts_ns")
	if err != nil {
		t.Fatal(err)
	}
	off, ok := vi.Offset("uts_namespace.name")
	if !ok {
		off = 4
	}
	return uts + uint64(off)
}

// TestKernelTranslator: through the kernel package's page-table walk,
// init_uts_ns holds sysname "Linux", release OSRELEASE and machine
// "x86_64"; the direct map found by FindPageOffset is where the PT_LOADs
// say; SYMBOL(mem_section) leads to sections whose mem_map is the vmemmap
// base, for present sections only.
func TestKernelTranslator(t *testing.T) {
	runSorted(t, kernelVariants(), func(t *testing.T, s Spec) {
		vi, _, tr := kernelTranslator(t, s)
		uts := make([]byte, 6*utsLen)
		if err := tr.ReadVirt(utsAddress(t, vi), uts); err != nil {
			t.Fatal(err)
		}
		field := func(i int) string { return string(bytes.TrimRight(uts[i*utsLen:(i+1)*utsLen], "\x00")) }
		if field(0) != "Linux" || field(2) != vi.OSRelease() || field(4) != "x86_64" {
			t.Errorf("utsname %q %q %q", field(0), field(2), field(4))
		}
		po, err := tr.FindPageOffset()
		if err != nil {
			t.Fatal(err)
		}
		segs := s.FileSegments()
		if ram := segs[len(segs)-1]; ram.Vaddr-ram.Paddr != po {
			t.Errorf("PAGE_OFFSET %#x, PT_LOAD says %#x", po, ram.Vaddr-ram.Paddr)
		}
		if stext, _ := vi.Symbol("_stext"); segs[0].Vaddr != stext {
			t.Errorf("kernel-text PT_LOAD at %#x, _stext %#x", segs[0].Vaddr, stext)
		}
		if pa, err := tr.VtoP(segs[0].Vaddr); err != nil || pa != segs[0].Paddr {
			t.Errorf("_stext translates to %#x (%v), PT_LOAD paddr %#x", pa, err, segs[0].Paddr)
		}
		checkMemSection(t, s, vi, tr)
	})
}

func checkMemSection(t *testing.T, s Spec, vi *kernel.VMCOREINFO, tr *kernel.Translator) {
	ms, _ := vi.Symbol("mem_section")
	roots := make([]byte, 8*nrSectionRoots)
	if err := tr.ReadVirt(ms, roots); err != nil {
		t.Fatal(err)
	}
	k := newMemReader(t, s).k
	var vmemmap uint64
	for n := uint64(0); n < k.nsec+sectionsPerRoot; n++ {
		root := binary.LittleEndian.Uint64(roots[n/sectionsPerRoot*8:])
		present := n < k.nsec && k.present[n]
		if root == 0 {
			if present {
				t.Fatalf("section %d present but its root is empty", n)
			}
			continue
		}
		var e [memSectionSize]byte
		if err := tr.ReadVirt(root+n%sectionsPerRoot*memSectionSize, e[:]); err != nil {
			t.Fatal(err)
		}
		smm := binary.LittleEndian.Uint64(e[:])
		if present != (smm&1 != 0) {
			t.Fatalf("section %d: section_mem_map %#x, present %v", n, smm, present)
		}
		if !present {
			if smm != 0 {
				t.Errorf("absent section %d: section_mem_map %#x, want 0", n, smm)
			}
			continue
		}
		if vmemmap == 0 {
			vmemmap = smm &^ 0x1f
		}
		if smm&^0x1f != vmemmap {
			t.Errorf("section %d: mem_map base %#x, others %#x", n, smm&^0x1f, vmemmap)
		}
		// The section's last struct page is mapped.
		last := vmemmap + ((n+1)*pagesPerSection-1)*structPageSize
		if _, err := tr.VtoP(last); err != nil {
			t.Errorf("section %d: %v", n, err)
		}
	}
}

// headRules is a small re-implementation of makedumpfile's page scan
// (__exclude_unnecessary_pages, as of upstream 1.7.7+: exact page-type
// comparisons, compound order per era), driven only by VMCOREINFO and the
// struct pages read through the page tables. It checks the encodings of
// the eras no installed makedumpfile understands against the truth.
type headRules struct {
	vi    *kernel.VMCOREINFO
	num   func(string) (int64, bool)
	level int
	// oddSlabs counts slab heads whose mapping word is odd: the pages
	// that a scan without the slab check in isAnon takes for anonymous.
	oddSlabs int
}

func (h *headRules) n(name string) int64 {
	v, ok := h.num(name)
	if !ok {
		return -1 << 40
	}
	return v
}

// scan returns the 2nd bitmap and counters for pfns [0, end) given
// readPages(pfn, n) returning n struct pages from pfn.
func (h *headRules) scan(end uint64, inRAM func(uint64) bool, readPages func(pfn, n uint64) []byte) ([]byte, FilterCounts) {
	vi := h.vi
	sz, _ := vi.Size("page")
	o := func(name string) int64 { v, _ := vi.Offset(name); return v }
	offFl, offMap, offMc, offPriv, offHead := o("page.flags"), o("page.mapping"), o("page._mapcount"), o("page.private"), o("page.compound_head")
	le := binary.LittleEndian
	pgLRU, pgPriv, pgSwapc, pgSwapb := h.n("PG_lru"), h.n("PG_private"), h.n("PG_swapcache"), h.n("PG_swapbacked")
	pgSlab, ok := vi.Number("PG_slab")
	if !ok {
		pgSlab = 7 // get_value_for_old_linux
	}
	pgHW, headMask := h.n("PG_hwpoison"), uint64(h.n("PG_head_mask"))
	buddy, offline, slabT := h.n("PAGE_BUDDY_MAPCOUNT_VALUE"), h.n("PAGE_OFFLINE_MAPCOUNT_VALUE"), h.n("PAGE_SLAB_MAPCOUNT_VALUE")
	hugeT, unacc, pgHuge := h.n("PAGE_HUGETLB_MAPCOUNT_VALUE"), h.n("PAGE_UNACCEPTED_MAPCOUNT_VALUE"), h.n("PG_hugetlb")
	dtorHuge := h.n("HUGETLB_PAGE_DTOR")
	lenFA, _ := vi.Length("zone.free_area")
	ordOff, dtorOff := int64(-1), int64(-1)
	if v, ok := vi.Offset("folio._folio_order"); ok {
		ordOff, dtorOff = v-sz, o("folio._folio_dtor")-sz
	} else if v, ok := vi.Offset("page.compound_order"); ok {
		ordOff, dtorOff = v, o("page.compound_dtor")
	}
	var fc FilterCounts
	bm := make([]byte, (end+7)/8)
	for pfn := uint64(0); pfn < end; pfn++ {
		if inRAM(pfn) {
			bm[pfn/8] |= 1 << (pfn % 8)
		}
	}
	clearRange := func(lo, hi uint64, ctr *uint64) {
		for p := lo; p < hi && p < end; p++ {
			bm[p/8] &^= 1 << (p % 8)
			*ctr++
		}
	}
	for pfn := uint64(0); pfn < end; pfn++ {
		if !inRAM(pfn) {
			continue
		}
		// The next struct page too, as makedumpfile's 512-entry
		// batches have it, except at a batch's end.
		n := uint64(2)
		if pfn%512 == 511 {
			n = 1
		}
		pg := readPages(pfn, n)
		flags, mapping, private := le.Uint64(pg[offFl:]), le.Uint64(pg[offMap:]), le.Uint64(pg[offPriv:])
		mc := int64(int32(le.Uint32(pg[offMc:])))
		isSlab := mc == slabT || flags&(1<<pgSlab) != 0
		order, huge := uint64(0), false
		if flags&headMask != 0 && pfn%512 != 511 {
			next := pg[sz:]
			f1 := le.Uint64(next[offFl:])
			switch {
			case hugeT != -1<<40:
				order, huge = f1&0xff, mc == hugeT
			case pgHuge != -1<<40:
				order, huge = f1&0xff, f1&(1<<pgHuge) != 0
			case ordOff >= 0:
				order, huge = uint64(next[ordOff]), int64(next[dtorOff]) == dtorHuge
			}
			if order >= 64 || pfn&(1<<order-1) != 0 {
				order = 0
			}
		}
		nr := uint64(1) << order
		isAnon := mapping&1 != 0 && !isSlab
		if isSlab && mapping&1 != 0 {
			h.oddSlabs++
		}
		isCache := flags&(1<<pgLRU) != 0 || flags&(1<<pgSwapc) != 0 && flags&(1<<pgSwapb) != 0
		isPriv := flags&(1<<pgPriv) != 0
		var ctr *uint64
		switch {
		case le.Uint64(pg[offHead:])&1 != 0:
			continue
		case h.level&DLFree != 0 && !isSlab && mc == buddy:
			if private >= uint64(lenFA) {
				continue
			}
			nr, ctr = 1<<private, &fc.Free
		case h.level&DLFree != 0 && mc == unacc:
			nr, ctr = 1<<(lenFA-1), &fc.Free
		case h.level&DLCache != 0 && isCache && !isPriv && !isAnon:
			ctr = &fc.Cache
		case h.level&DLCachePriv != 0 && isCache && !isAnon:
			ctr = &fc.Cache
			if isPriv {
				ctr = &fc.CachePrivate
			}
		case h.level&DLUser != 0 && (isAnon || huge):
			ctr = &fc.User
		case flags&(1<<pgHW) != 0:
			ctr = &fc.Hwpoison
		case !isSlab && mc == offline:
			ctr = &fc.Offline
		default:
			continue
		}
		clearRange(pfn, pfn+nr, ctr)
		pfn += nr - 1
	}
	for pfn := uint64(0); pfn < end; pfn++ {
		if bm[pfn/8]&(1<<(pfn%8)) != 0 {
			fc.Dumpable++
		}
	}
	return bm, fc
}

// TestKernelStructPagesHeadRules runs headRules over every variant at the
// dump levels that matter and compares with ExpectedFilter.
func TestKernelStructPagesHeadRules(t *testing.T) {
	runSorted(t, kernelVariants(), func(t *testing.T, s Spec) {
		vi, r, tr := kernelTranslator(t, s)
		k := r.k
		vmemmap := k.vmemmap
		buf := make([]byte, 2*structPageSize)
		read := func(pfn, n uint64) []byte {
			if err := tr.ReadVirt(vmemmap+pfn*structPageSize, buf[:n*structPageSize]); err != nil {
				t.Fatalf("struct page of pfn %#x: %v", pfn, err)
			}
			return buf
		}
		inRAM := func(pfn uint64) bool { return k.inRAM(pfn, pfn+1) }
		for _, level := range []int{2, 4, 8, 16, 30} {
			h := &headRules{vi: vi, num: vi.Number, level: level}
			got, gfc := h.scan(k.endPFN, inRAM, read)
			want, wfc, err := ExpectedFilter(s, level)
			if err != nil {
				t.Fatal(err)
			}
			if gfc != wfc {
				t.Errorf("level %d: scan counts %+v, truth %+v", level, gfc, wfc)
			}
			if d := firstDiff(got, want); d >= 0 {
				t.Errorf("level %d: bitmaps differ first at pfn %#x (%s)", level, d, TruthOf(s, uint64(d)))
			}
			if odd := h.oddSlabs > 0; odd != k.prof.slabMappingCount {
				t.Errorf("level %d: %d slab pages with an odd mapping", level, h.oddSlabs)
			}
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if x := a[i] ^ b[i]; x != 0 {
			for j := range 8 {
				if x&(1<<j) != 0 {
					return i*8 + j
				}
			}
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b)) * 8
	}
	return -1
}

// TestTruthConsistency: TruthOf (a walk down to one pfn) agrees with the
// block decompositions behind TruthRuns and the struct pages; every class
// the brief asks for occurs; folios are aligned and whole.
func TestTruthConsistency(t *testing.T) {
	runSorted(t, kernelVariants(), func(t *testing.T, s Spec) {
		runs, err := TruthRuns(s)
		if err != nil {
			t.Fatal(err)
		}
		var n [NumClasses]uint64
		next := uint64(0)
		for _, r := range runs {
			if r.Start != next {
				t.Fatalf("run at %#x, want %#x", r.Start, next)
			}
			next = r.Start + r.Count
			n[r.Class] += r.Count
			for _, pfn := range []uint64{r.Start, r.Start + r.Count/2, r.Start + r.Count - 1} {
				if c := TruthOf(s, pfn); c != r.Class {
					t.Fatalf("pfn %#x: TruthOf %s, run says %s", pfn, c, r.Class)
				}
			}
		}
		wantCls := []Class{Hole, Kernel, Slab, Cache, CachePrivate, SwapCache, Anon, Free, Hwpoison}
		if s.Kernel.KASLR { // the 256 MiB ones
			wantCls = append(wantCls, Hugetlb)
		}
		if s.Kernel.Profile != "4.19" {
			wantCls = append(wantCls, Offline)
		}
		if s.Kernel.Unaccepted {
			wantCls = append(wantCls, Unaccepted)
		}
		for _, c := range wantCls {
			if n[c] == 0 {
				t.Errorf("no %s pages", c)
			}
		}
		t.Logf("%v", n)
	})
}

// TestTruthFile round-trips WriteTruth through ReadTruth.
func TestTruthFile(t *testing.T) {
	s := KernelMachine("6.6", 128)
	path := filepath.Join(t.TempDir(), "truth")
	if err := WriteTruth(path, s); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadTruth(f)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := TruthRuns(s)
	if !slices.Equal(got, want) {
		t.Errorf("read %d runs, want %d", len(got), len(want))
	}
	if _, err := ReadTruth(strings.NewReader("nope\n")); err == nil {
		t.Error("ReadTruth accepted a non-truth file")
	}
}

// TestKernelSpecValidate: specs that cannot be laid out are refused.
func TestKernelSpecValidate(t *testing.T) {
	bad := map[string]func(*Spec){
		"profile":    func(s *Spec) { s.Kernel.Profile = "2.6" },
		"unaligned":  func(s *Spec) { s.Segments[1].Paddr += 100 },
		"memsz-tail": func(s *Spec) { s.Segments[1].MemSize += PageSize },
		"used":       func(s *Spec) { s.Kernel.Used = 2 },
		"unaccepted": func(s *Spec) { s.Kernel.Unaccepted = true },
		"gigantic":   func(s *Spec) { s.Kernel.Gigantic = 1 },
		"tiny": func(s *Spec) {
			s.Segments = s.Segments[:1]
		},
	}
	for name, f := range bad {
		s := KernelMachine("6.1", 256)
		f(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A spec changed after KernelMachine follows: the PT_LOADs move.
	s := KernelMachine("6.1", 256)
	a := s.FileSegments()[0]
	s.Seed++
	if b := s.FileSegments()[0]; a == b {
		t.Errorf("kernel-text segment %+v did not move with the seed", a)
	}
}

// TestKernelDenseEqualsSparse: a kernel machine written densely and as a
// sparse file is the same bytes, and Page agrees with the file.
func TestKernelDenseEqualsSparse(t *testing.T) {
	s := NewKernelMachine(KernelSpec{Profile: "6.9", KASLR: true}, 64)
	g, dense, fb := denseAndFile(t, s)
	if d := firstDiff(dense, fb); d >= 0 {
		t.Fatalf("Write and WriteFile differ at byte %#x", d/8)
	}
	buf := make([]byte, PageSize)
	segs := s.FileSegments()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		i := 1 + rng.IntN(len(segs)-1)
		pfn := segs[i].Paddr/PageSize + rng.Uint64N(segs[i].FileSize/PageSize)
		Page(s, pfn, buf)
		off := g.LoadOff[i] + int64(pfn*PageSize-segs[i].Paddr)
		if !bytes.Equal(buf, fb[off:off+PageSize]) {
			t.Fatalf("pfn %#x (%s): file differs from Page", pfn, TruthOf(s, pfn))
		}
		if (KindOf(s, pfn) == Zero) != allZero(buf) {
			t.Fatalf("pfn %#x: KindOf %v, page zero %v", pfn, KindOf(s, pfn), allZero(buf))
		}
	}
}

// bigDir returns a directory for multi-GiB sparse files: under /dev/shm
// when it has room (tmpfs keeps the test off the disk), else TempDir.
func bigDir(t testing.TB, need uint64) string {
	t.Helper()
	var st syscall.Statfs_t
	if syscall.Statfs("/dev/shm", &st) == nil && st.Bavail*uint64(st.Bsize) > 2*need {
		if d, err := os.MkdirTemp("/dev/shm", "synth-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// TestKernelMachine64G writes the 64 GiB 6.1 machine (1 GiB of struct
// pages, two gigantic pages, about 2 GiB of data in all) as a sparse file
// and checks a sample: the ELF headers and note, the translation of
// init_uts_ns and of struct pages through the file's own page tables,
// random pages against Page, and the truth file. Timing is logged, not
// asserted. With PAGEPIPE_SYNTH_MDF64=1 it also runs makedumpfile -d 31
// (about 20 s and 1.2 GB of output) and compares everything.
func TestKernelMachine64G(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 GiB sparse file")
	}
	s := KernelMachine("6.1", 64<<10)
	k, err := kernelOf(&s)
	if err != nil {
		t.Fatal(err)
	}
	dir := bigDir(t, 3<<30)
	path := filepath.Join(dir, "vmcore")
	t0 := time.Now()
	if err := WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err == nil {
		t.Logf("wrote %.1f GiB of RAM in %v to %s: %d MiB file, %d MiB allocated",
			float64(k.ramPages())/(1<<18), took, dir, st.Size>>20, st.Blocks*512>>20)
	}
	if err := WriteTruth(path+".truth", s); err != nil {
		t.Fatal(err)
	}
	v, err := source.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.MaxMapnr != k.endPFN || string(v.Vmcoreinfo()) != k.vmcoreinfo {
		t.Fatalf("max_mapnr %#x (want %#x), VMCOREINFO matches %v", v.MaxMapnr, k.endPFN, string(v.Vmcoreinfo()) == k.vmcoreinfo)
	}
	vi := parseVI(t, s)
	tr, err := kernel.NewTranslator(v, vi)
	if err != nil {
		t.Fatal(err)
	}
	uts := make([]byte, 6*utsLen)
	if err := tr.ReadVirt(utsAddress(t, vi)+utsRelease, uts[:utsLen]); err != nil || string(bytes.TrimRight(uts[:utsLen], "\x00")) != vi.OSRelease() {
		t.Fatalf("release through the file's page tables: %q, %v", uts[:utsLen], err)
	}
	rng := rand.New(rand.NewPCG(64, 64))
	got, want := make([]byte, PageSize), make([]byte, PageSize)
	sp, wp := make([]byte, structPageSize), make([]byte, structPageSize)
	for i := range 3000 {
		r := k.ram[rng.IntN(len(k.ram))]
		pfn := r.lo + rng.Uint64N(r.hi-r.lo)
		if i%3 == 0 { // look at the gigantic pages and the kernel too
			pfn = []uint64{k.gig[0], k.gig[1] + 1, k.gig[1] + gigPages - 1, k.imgLo + 5, k.vmLo + 77}[i/3%5]
		}
		if err := v.ReadPhys(pfn*PageSize, got); err != nil {
			t.Fatal(err)
		}
		Page(s, pfn, want)
		if !bytes.Equal(got, want) {
			t.Fatalf("pfn %#x (%s): file differs from Page", pfn, TruthOf(s, pfn))
		}
		if err := tr.ReadVirt(k.vmemmap+pfn*structPageSize, sp); err != nil {
			t.Fatalf("struct page of pfn %#x: %v", pfn, err)
		}
		k.encodePage(wp, pfn, k.leafOf(pfn))
		if !bytes.Equal(sp, wp) {
			t.Fatalf("struct page of pfn %#x (%s) read through the vmemmap differs", pfn, TruthOf(s, pfn))
		}
	}
	if os.Getenv("PAGEPIPE_SYNTH_MDF64") == "" {
		return
	}
	integration.Require(t, "makedumpfile on the 64 GiB machine (PAGEPIPE_SYNTH_MDF64)")
	makedumpfileAgrees64(t, s, path, dir)
}

// makedumpfileAgrees64 runs makedumpfile -d 31 on the 64 GiB machine s at
// path and compares its dump with the truth; set by
// kernel_integration_test.go.
var makedumpfileAgrees64 func(t *testing.T, s Spec, path, dir string)

// BenchmarkKernelMachine64G reports the speed of writing the 64 GiB
// machine as RAM bytes per second.
func BenchmarkKernelMachine64G(b *testing.B) {
	s := KernelMachine("6.1", 64<<10)
	k, err := kernelOf(&s)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(bigDir(b, 3<<30), "vmcore")
	b.SetBytes(int64(k.ramPages() * PageSize))
	for b.Loop() {
		if err := WriteFile(path, s); err != nil {
			b.Fatal(err)
		}
	}
}
