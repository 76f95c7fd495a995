package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
)

// KernelSpec asks for kernel memory laid out after a kernel era: page
// tables, the mem_section tree, struct page arrays describing every page
// frame, init_uts_ns and a VMCOREINFO note, so that makedumpfile (and
// pagepipe) can filter the vmcore by page class.
//
// Why: the plain generator's memory holds no kernel structures, so only
// zero-page filtering could be tested. A kernel machine makes dump levels 2
// to 31 testable against a known truth (TruthOf) on any machine size, for
// eras whose real vmcores the project cannot make (it has only a 6.1
// kernel to boot).
//
// A KernelSpec is compared by value when its derived layout is cached, so
// it holds only plain values; change a Spec's Kernel, Segments or Seed
// freely and the layout follows.
type KernelSpec struct {
	// Profile names the kernel era: one of Profiles() ("4.19", "5.10",
	// "6.1", "6.6", "6.9", "6.12").
	Profile string
	// KASLR randomizes, from the spec's Seed, the kernel's virtual slide
	// (KERNELOFFSET), its physical load address (so phys_base is usually
	// non-zero, often negative), and the 1 GiB-aligned bases of the direct
	// map and of the vmemmap, as CONFIG_RANDOMIZE_BASE/MEMORY do.
	KASLR bool
	// DirectMap2M maps the direct map with 2 MiB pages instead of 1 GiB
	// pages, so that page-table walks go one level deeper.
	DirectMap2M bool
	// Used is the fraction of 4 MiB (order-10) blocks that are not wholly
	// free: the rest are free buddy blocks, zero-filled but for the stale
	// ones (FreeDirty). 0 picks a default by size (about 1 GiB of used
	// memory, at most 60%); big machines are mostly free, which keeps
	// their vmcores sparse.
	Used float64
	// FreeDirty is the fraction of free buddy blocks that keep stale,
	// non-zero contents, so that excluding free pages matters. 0 means
	// the default 0.25; negative means none.
	FreeDirty float64
	// Gigantic is the number of 1 GiB hugetlb pages (order 18) to place in
	// 1 GiB-aligned RAM clear of the kernel. Each crosses 512-entry
	// struct page batches and eight mem_sections, which is where range
	// exclusion goes wrong if anywhere.
	Gigantic int
	// FreedInit gives the kernel image's init sections back to the page
	// allocator after boot, as the kernel does ("Freeing unused kernel
	// image (initmem) memory"): a range in the image's second half, left
	// of the data tools read, is ordinary memory (free or in use) rather
	// than reserved. kexec-tools' kernel-text PT_LOAD covers it, so the
	// page scan excludes pages of that PT_LOAD too.
	FreedInit bool
	// Unaccepted adds order-10 blocks of unaccepted memory
	// (PGTY_unaccepted, exported as PAGE_UNACCEPTED_MAPCOUNT_VALUE as 6.16+
	// kernels do). 6.12 profile only.
	Unaccepted bool
	// VABits is an arm64 machine's VA_BITS: 39, 48 (0: Debian's) or 52
	// (karm64.go). VABitsActual is vabits_actual (64 - TCR_EL1_T1SZ): 0
	// means VA_BITS; a 52-bit kernel on hardware without LVA runs at 48.
	// PA52 sets MAX_PHYSMEM_BITS to 52: with 4 KiB pages for 52-bit VA
	// kernels only (LPA2 descriptors when 52-bit VAs are in use), with
	// 64 KiB pages for any (FEAT_LPA descriptors); 6.1 has none with
	// 16 KiB pages. x86_64 machines ignore them.
	VABits, VABitsActual int
	PA52                 bool
	// VmemmapPages maps a riscv64 machine's vmemmap in 4 KiB pages
	// instead of 2 MiB superpages, as the kernel does where it cannot
	// allocate a whole 2 MiB block for a section's struct pages
	// (vmemmap_populate_hugepages falls back to base pages).
	VmemmapPages bool
	// Lean makes machines of several TiB cheap (KernelMachine sets it
	// above 256 GiB): the struct pages of a free block's pages past its
	// head are all zero, and a page of struct pages that holds nothing
	// else is a hole in the sparse file, so that the file holds a 4 KiB
	// page per free 4 MiB block (a GiB per TiB) and the used memory's
	// pages; by default Used is then 1 GiB's worth, however big the
	// machine. The tools never look at those struct pages at a level that
	// excludes free pages (the head takes its block out), and at others a
	// zero struct page is, like theirs, a page in no class.
	Lean bool
}

// Memory model constants (x86_64 4-level paging, Debian config): the
// fixture's NUMBER(SECTION_SIZE_BITS)=27, NUMBER(MAX_PHYSMEM_BITS)=46,
// SIZE(mem_section)=32 and LENGTH(mem_section)=4096. The ones counted in
// pages are for 4 KiB pages; kmem's fields give them for its page size.
const (
	sectionSizeBits  = 27
	maxPhysmemBits   = 46
	pagesPerSection  = 1 << (sectionSizeBits - 12)
	memSectionSize   = 32
	sectionsPerRoot  = PageSize / memSectionSize
	nrSectionRoots   = (1 << (maxPhysmemBits - sectionSizeBits)) / sectionsPerRoot
	maxOrder         = 10 // LENGTH(zone.free_area) - 1
	blockPages       = 1 << maxOrder
	gigOrder         = 18
	gigPages         = 1 << gigOrder
	startKernelMap   = 0xffffffff80000000
	defaultPhysStart = 0x1000000 // LOAD_PHYSICAL_ADDR
	directMapBase    = 0xffff888000000000
	vmemmapBaseL4    = 0xffffea0000000000
	vmallocBaseL4    = 0xffffc90000000000
	tailMapping      = 0xdead000000000400 // TAIL_MAPPING (POISON_POINTER_DELTA + 0x400)
	bigPage2M        = 2 << 20
	bigPage1G        = 1 << 30
)

// Page-table entry bits (arch/x86/include/asm/pgtable_types.h).
const (
	ptePresent  = 1 << 0
	pteRW       = 1 << 1
	pteAccessed = 1 << 5
	pteDirty    = 1 << 6
	ptePSE      = 1 << 7
	pteGlobal   = 1 << 8
	pteNX       = 1 << 63
	kernTable   = ptePresent | pteRW | pteAccessed | pteDirty              // _KERNPG_TABLE
	kernLarge   = kernTable | ptePSE | pteGlobal | pteNX                   // __PAGE_KERNEL_LARGE
	kernLargeRX = ptePresent | pteAccessed | pteDirty | ptePSE | pteGlobal // text
)

// pfnRange is a half-open range of page frame numbers.
type pfnRange struct{ lo, hi uint64 }

// status of a page frame, before any allocation is decided.
type status uint8

const (
	stHole     status = iota // not RAM (no PT_LOAD)
	stReserved               // kernel image, boot allocations, low 1 MiB
	stGigantic               // part of a 1 GiB hugetlb page
	stAvail                  // for the page allocator: decided by the block decomposition
)

type statusRange struct {
	lo, hi uint64
	st     status
}

// kmem is everything derived from a kernel Spec: where each structure lives,
// the page tables, the symbol values. It is immutable once built.
type kmem struct {
	prof       *profile
	arm        *arm64Layout // nil: x86_64
	rv         *riscvLayout // nil: not riscv64
	ks         KernelSpec
	seed       uint64
	segs       []Segment // the spec's (RAM)
	fileSegs   []Segment // the file's PT_LOADs (FileSegments)
	used       float64
	freeDirty  float64
	unaccepted bool

	// The page size and what follows from it: SECTION_SIZE_BITS, the
	// pages per section, SECTIONS_PER_ROOT (a page of mem_sections) and
	// the pages of struct pages one section has.
	ps                      uint64
	shift, sectionBits      uint
	pps, perRoot, backPages uint64

	ram      []pfnRange // merged RAM
	partial  []uint64   // ends of the segments that end mid-page (that page is no RAM)
	endPFN   uint64     // one past the highest RAM pfn
	nsec     uint64     // sections up to endPFN
	present  []bool     // per section: holds some RAM
	statuses []statusRange
	gig      []uint64 // gigantic page heads, sorted

	pageOffset   uint64
	vmemmap      uint64
	vmallocStart uint64
	textVA       uint64 // _text = _stext
	kaslrOffset  uint64
	physBase     int64

	imgLo, imgHi uint64 // kernel image pfns
	mbLo, mbHi   uint64 // small boot (memblock) allocations
	vmLo         uint64 // first pfn of the struct page backing (vmEnd: its end)
	mbNext       uint64 // next free page of the boot allocations
	secBacking   []uint64
	backingSec   []uint64          // section of each 2 MiB backing chunk
	small        map[uint64][]byte // whole pages
	smallZero    map[uint64]bool

	sym          map[string]uint64
	memSectionVA uint64
	buildID      string
	crashTime    int64
	vmcoreinfo   string
}

// kernelCache maps a *KernelSpec to the layouts derived for it. A spec
// copied and changed (another Seed, say) shares the pointer, so each entry
// keeps the last few layouts and checks the spec's current values against
// them. Entries are never evicted: a process makes a handful.
var kernelCache sync.Map // *KernelSpec -> *kernelCacheEntry

type kernelCacheEntry struct {
	mu  sync.Mutex
	kms []*kmem // most recent last
}

const kernelCacheWays = 4

// kernelOf returns the derived layout of a kernel spec, building it on
// first use.
func kernelOf(s *Spec) (*kmem, error) {
	if s.Kernel == nil {
		return nil, errors.New("synth: not a kernel spec")
	}
	v, _ := kernelCache.LoadOrStore(s.Kernel, &kernelCacheEntry{})
	e := v.(*kernelCacheEntry)
	e.mu.Lock()
	for _, k := range slices.Backward(e.kms) {
		if k.ks == *s.Kernel && k.seed == s.Seed && (k.arm != nil) == (s.Arch == AArch64) && (k.rv != nil) == (s.Arch == RISCV64) && k.ps == s.PageBytes() &&
			(slices.Equal(k.segs, s.Segments) || slices.Equal(k.fileSegs, s.Segments)) {
			e.mu.Unlock()
			return k, nil
		}
	}
	e.mu.Unlock()
	k, err := buildKernel(s)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.kms) == kernelCacheWays {
		e.kms = e.kms[1:]
	}
	e.kms = append(e.kms, k)
	e.mu.Unlock()
	return k, nil
}

// saltKernel keeps the kernel layout's draws apart from the content streams.
const saltKernel uint64 = 0x6b65726e

// draw returns a deterministic pseudo-random number for decision i.
func (k *kmem) draw(i uint64) uint64 { return key(k.seed, i, saltKernel) }

// Decision numbers for draw.
const (
	drawPhysSlide = iota + 1
	drawVirtSlide
	drawPageOffset
	drawVmemmap
	drawBuildID
	drawCrashTime
)

func buildKernel(s *Spec) (*kmem, error) {
	ks := *s.Kernel
	prof, err := lookupProfile(ks.Profile)
	if err != nil {
		return nil, err
	}
	if ks.VmemmapPages && s.Arch != RISCV64 {
		return nil, errors.New("synth: VmemmapPages is for riscv64 machines")
	}
	if ks.Unaccepted && prof.name != "6.12" {
		return nil, fmt.Errorf("synth: unaccepted memory needs the 6.12 profile, not %s", prof.name)
	}
	k := &kmem{
		prof: prof, ks: ks, seed: s.Seed, segs: slices.Clone(s.Segments),
		unaccepted: ks.Unaccepted, small: map[uint64][]byte{},
		smallZero: map[uint64]bool{}, sym: map[string]uint64{},
		ps: s.PageBytes(), sectionBits: sectionSizeBits,
	}
	k.shift = uint(bits.TrailingZeros64(k.ps))
	if s.Arch == AArch64 {
		if k.arm, err = newARM64Layout(ks, k.shift); err != nil {
			return nil, err
		}
		if k.shift == 16 {
			k.sectionBits = 29 // arch/arm64/include/asm/sparsemem.h: 64 KiB pages
		}
		// arm64 has no PG_uncached (x86's PAT flag, gone in 6.12): the
		// flags after it are one lower (the arm64 6.1 vmcore's
		// PG_hwpoison is 22, amd64's 23).
		p := *prof
		if !p.atLeast(6, 12) {
			p.pg.hwpoison--
		}
		p.osrelease = strings.Replace(p.osrelease, "-amd64", "-arm64", 1)
		k.prof = &p
	}
	if s.Arch == RISCV64 {
		if k.rv, err = newRISCVLayout(ks, k.shift); err != nil {
			return nil, err
		}
		// riscv64 has no PG_uncached either (x86's, gone in 6.12).
		p := *prof
		if !p.atLeast(6, 12) {
			p.pg.hwpoison--
		}
		p.osrelease = strings.Replace(p.osrelease, "-amd64", "-riscv64", 1)
		k.prof = &p
	}
	k.pps = 1 << (k.sectionBits - k.shift)
	k.perRoot = k.ps / memSectionSize
	k.backPages = k.pps * structPageSize / k.ps
	if err := k.ramFromSegments(); err != nil {
		return nil, err
	}
	k.used = ks.Used
	if k.used == 0 {
		ramMiB := float64(k.ramPages()*k.ps) / (1 << 20)
		k.used = min(0.6, max(0.02, 1024/ramMiB))
		if ks.Lean {
			k.used = min(0.6, 1024/ramMiB)
		}
	}
	if !(k.used >= 0 && k.used <= 1) {
		return nil, fmt.Errorf("synth: KernelSpec.Used %v not in [0, 1]", ks.Used)
	}
	k.freeDirty = ks.FreeDirty
	switch {
	case k.freeDirty == 0:
		k.freeDirty = 0.25
	case k.freeDirty < 0:
		k.freeDirty = 0
	case k.freeDirty > 1:
		return nil, fmt.Errorf("synth: KernelSpec.FreeDirty %v > 1", ks.FreeDirty)
	}
	k.virtualLayout()
	if err := k.place(); err != nil {
		return nil, err
	}
	if err := k.placeGigantic(ks.Gigantic); err != nil {
		return nil, err
	}
	k.paintStatuses()
	k.buildTables()
	k.buildMemSection()
	k.buildGlobals()
	for pfn, pg := range k.small {
		k.smallZero[pfn] = isZeroPage(pg)
	}
	k.vmcoreinfo = renderVMCOREINFO(prof.vmcoreinfo(k), k.crashTime)
	k.fileSegs = k.fileSegments()
	return k, nil
}

func isZeroPage(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ramFromSegments merges the segments into RAM ranges. Kernel machines
// need segments that start on a page and have data for all of memory, as
// /proc/vmcore gives. A segment may end mid-page, as kexec-tools' low RAM
// does at 0x9fc00 (the end of e820's first usable range): the kernel
// rounds such a range down to whole pages, so that page is no RAM here
// (a Hole), and the file holds its bytes up to the end as /proc/vmcore does.
func (k *kmem) ramFromSegments() error {
	var r []pfnRange
	for i, g := range k.segs {
		if g.Paddr%k.ps != 0 || g.MemSize != g.FileSize {
			return fmt.Errorf("synth: kernel machine segment %d does not start on a page with data to its end", i)
		}
		if g.End()%k.ps != 0 {
			k.partial = append(k.partial, g.End())
		}
		if g.End()/k.ps == g.Paddr/k.ps {
			continue
		}
		r = append(r, pfnRange{g.Paddr / k.ps, g.End() / k.ps})
	}
	if len(r) == 0 {
		return errors.New("synth: kernel machine has no RAM")
	}
	sort.Slice(r, func(i, j int) bool { return r[i].lo < r[j].lo })
	out := r[:1]
	for _, x := range r[1:] {
		last := &out[len(out)-1]
		if x.lo <= last.hi {
			last.hi = max(last.hi, x.hi)
		} else {
			out = append(out, x)
		}
	}
	k.ram = out
	k.endPFN = out[len(out)-1].hi
	if k.endPFN > 1<<(uint(k.physBits())-k.shift) {
		return errors.New("synth: kernel machine memory beyond MAX_PHYSMEM_BITS")
	}
	k.nsec = (k.endPFN + k.pps - 1) / k.pps
	k.present = make([]bool, k.nsec)
	for _, x := range k.ram {
		for n := x.lo / k.pps; n*k.pps < x.hi; n++ {
			k.present[n] = true
		}
	}
	return nil
}

// partialPage returns how many bytes of page pfn a segment ending mid-page
// holds, or 0.
func (k *kmem) partialPage(pfn uint64) uint64 {
	for _, end := range k.partial {
		if end/k.ps == pfn {
			return end % k.ps
		}
	}
	return 0
}

func (k *kmem) ramPages() uint64 {
	var n uint64
	for _, x := range k.ram {
		n += x.hi - x.lo
	}
	return n
}

// inRAM reports whether [lo, hi) lies within one RAM range.
func (k *kmem) inRAM(lo, hi uint64) bool {
	i := sort.Search(len(k.ram), func(i int) bool { return k.ram[i].hi > lo })
	return i < len(k.ram) && k.ram[i].lo <= lo && hi <= k.ram[i].hi
}

// physBits is MAX_PHYSMEM_BITS.
func (k *kmem) physBits() int {
	if k.arm != nil {
		return k.arm.physBits()
	}
	if k.rv != nil {
		return rvMaxPhysmemBits
	}
	return maxPhysmemBits
}

// nrRoots is NR_SECTION_ROOTS, LENGTH(mem_section).
func (k *kmem) nrRoots() uint64 {
	return (1 << (uint(k.physBits()) - k.sectionBits)) / k.perRoot
}

// rootPages is the pages the root array takes (memblock allocates whole
// pages).
func (k *kmem) rootPages() uint64 { return (k.nrRoots()*8 + k.ps - 1) / k.ps }

// vmAlign is the alignment of the struct page backing, in pages: 2 MiB,
// what a PMD maps with 4 KiB pages.
func (k *kmem) vmAlign() uint64 { return bigPage2M / k.ps }

// gigPages is the pages of a 1 GiB hugetlb page.
func (k *kmem) gigPages() uint64 { return bigPage1G / k.ps }

// lowPages is the first MiB in pages (reserved on x86).
func (k *kmem) lowPages() uint64 { return 1 << 20 / k.ps }

// virtualLayout picks the kernel's virtual addresses.
func (k *kmem) virtualLayout() {
	k.pageOffset, k.vmemmap, k.vmallocStart = directMapBase, vmemmapBaseL4, vmallocBaseL4
	if k.arm != nil {
		k.virtualLayoutARM64()
	} else if k.rv != nil {
		k.virtualLayoutRISCV64()
	} else if k.ks.KASLR {
		// kernel_randomize_memory moves each region up in PUD (1 GiB)
		// steps; the direct map stays below vmalloc and vmemmap.
		k.pageOffset += (k.draw(drawPageOffset) % 4096) << 30
		k.vmallocStart = 0xffffc90000000000 + (k.draw(drawVmemmap)%2048)<<30
		k.vmemmap = 0xffffe00000000000 + (k.draw(drawVmemmap)>>16%8192)<<30
		// The virtual slide: 2 MiB steps, leaving room for the image in
		// the 1 GiB kernel text mapping.
		k.kaslrOffset = (1 + k.draw(drawVirtSlide)%256) * bigPage2M
	}
	var b [20]byte
	binary.LittleEndian.PutUint64(b[0:], k.draw(drawBuildID))
	binary.LittleEndian.PutUint64(b[8:], k.draw(drawBuildID+100))
	binary.LittleEndian.PutUint32(b[16:], uint32(k.draw(drawBuildID+200)))
	k.buildID = fmt.Sprintf("%x", b)
	k.crashTime = 1733000000 + int64(k.draw(drawCrashTime)%10_000_000)
}

// imageSize is the kernel image size (text, data and bss) for the machine:
// Debian's 6.1 image is 54 MiB; small machines get a smaller one (the
// capture-kernel shapes of KexecMachine, a few tens of MiB, 4 MiB).
func (k *kmem) imageSize() uint64 {
	switch mib := k.ramPages() * k.ps >> 20; {
	case mib >= 512:
		return 32 << 20
	case mib >= 128:
		return 16 << 20
	case mib >= 48:
		return 8 << 20
	}
	return 4 << 20
}

// place puts the kernel image and the boot allocations in physical memory:
// the image at LOAD_PHYSICAL_ADDR (16 MiB) or, with KASLR, a few 2 MiB steps
// above it; the small boot allocations (mem_section, page tables) right
// after it; the struct page backing (2 MiB per present section, 2 MiB
// aligned) after those when it fits below the end of that RAM range, else
// at the top of the highest RAM range that holds it, as memblock's top-down
// allocation puts it on big machines.
func (k *kmem) place() error {
	img := k.imageSize()
	var nPresent uint64
	rootUsed := map[uint64]bool{}
	for n, p := range k.present {
		if p {
			nPresent++
			rootUsed[uint64(n)/k.perRoot] = true
		}
	}
	// Page tables: PUD tables for the direct map and the vmemmap (one per
	// 512 GiB, plus one for a misaligned start), PMD tables for the
	// vmemmap (one per GiB of it) and, with 2 MiB pages, for the direct
	// map; text tables live in the image.
	dmGiB := (k.endPFN*k.ps + bigPage1G - 1) / bigPage1G
	vmGiB := (k.nsec*bigPage2M+bigPage1G-1)/bigPage1G + 1
	tables := dmGiB/512 + 2 + vmGiB/512 + 2 + vmGiB
	if k.ks.DirectMap2M {
		tables += dmGiB
	}
	const misc = 1 // mem_section_usage and pgdat (left zero)
	rootPages := k.rootPages()
	mbPages := rootPages + uint64(len(rootUsed)) + tables + misc
	vmPages := nPresent * k.backPages
	var armImg uint64
	if k.arm != nil {
		armImg, mbPages = k.placeARM64(img, rootPages+uint64(len(rootUsed))+misc, nPresent)
	}
	if k.rv != nil {
		armImg, mbPages = k.placeRISCV64(rootPages + uint64(len(rootUsed)) + misc)
	}

	slides := []uint64{0}
	if k.ks.KASLR {
		slides = nil
		for j := range uint64(8) {
			slides = append(slides, (k.draw(drawPhysSlide)+j)%8)
		}
		slides = append(slides, 0)
	}
	if k.arm != nil || k.rv != nil {
		slides = []uint64{0}
	}
	for _, j := range slides {
		imgLo := (defaultPhysStart + j*bigPage2M) / k.ps
		if k.arm != nil || k.rv != nil {
			imgLo = armImg
		}
		imgHi := imgLo + img/k.ps
		if k.inRAM(imgLo, imgHi+mbPages) {
			k.imgLo, k.imgHi, k.mbLo, k.mbHi = imgLo, imgHi, imgHi, imgHi+mbPages
			break
		}
	}
	if k.imgHi == 0 {
		return fmt.Errorf("synth: no room for a %d MiB kernel image in RAM from 16 MiB", img>>20)
	}
	al := k.vmAlign()
	if vm := (k.mbHi + al - 1) &^ (al - 1); k.inRAM(vm, vm+vmPages) {
		k.vmLo = vm
	} else {
		for i := len(k.ram) - 1; i >= 0 && k.vmLo == 0; i-- {
			r := k.ram[i]
			if r.hi-r.lo < vmPages+al {
				continue
			}
			if vm := (r.hi - vmPages) &^ (al - 1); vm >= r.lo && (vm >= k.mbHi || vm+vmPages <= k.imgLo) {
				k.vmLo = vm
			}
		}
		if k.vmLo == 0 {
			return fmt.Errorf("synth: no room for %d MiB of struct pages in RAM", vmPages*k.ps>>20)
		}
	}
	k.mbNext = k.mbLo
	// phys_base is the physical address of __START_KERNEL_map's mapping:
	// _text = __START_KERNEL + slide is at physical imgLo.
	k.textVA = startKernelMap + defaultPhysStart + k.kaslrOffset
	k.physBase = int64(k.imgLo*k.ps) - int64(defaultPhysStart+k.kaslrOffset)
	if k.arm != nil {
		k.textVA = k.arm.modulesEnd + k.kaslrOffset // KIMAGE_VADDR + KERNELOFFSET
		k.arm.kimageVoffset = k.textVA - k.imgLo*k.ps
	}
	if r := k.rv; r != nil {
		k.textVA = rvKernelLinkAddr
		r.vaKernelPAOff = rvKernelLinkAddr - k.imgLo*k.ps
		r.modulesEnd = rvKernelLinkAddr                       // PFN_ALIGN(_start)
		r.modulesVaddr = rvKernelLinkAddr + img - bigPage1G*2 // PFN_ALIGN(_end) - SZ_2G
	}

	// One chunk of struct pages per present section (2 MiB with 4 KiB
	// pages, PMD-mapped into the vmemmap), in section order.
	k.secBacking = make([]uint64, k.nsec)
	next := k.vmLo
	for n, p := range k.present {
		if p {
			k.secBacking[n] = next
			k.backingSec = append(k.backingSec, uint64(n))
			next += k.backPages
		}
	}
	return nil
}

// allocPages takes n pages from the boot allocations.
func (k *kmem) allocPages(n uint64) uint64 {
	p := k.mbNext
	k.mbNext += n
	if k.mbNext > k.mbHi {
		panic("synth: internal error: boot allocations overflow")
	}
	return p
}

// placeGigantic picks n 1 GiB-aligned RAM ranges clear of the kernel, from
// the top of memory down, as hugetlb pages reserved at boot.
func (k *kmem) placeGigantic(n int) error {
	if n < 0 {
		return fmt.Errorf("synth: negative Gigantic %d", n)
	}
	gp := k.gigPages()
	for g := k.endPFN &^ (gp - 1); len(k.gig) < n && g >= gp; g -= gp {
		lo := g - gp
		if k.inRAM(lo, g) && lo >= k.lowPages() && !overlaps(lo, g, k.imgLo, k.mbHi) && !overlaps(lo, g, k.vmLo, k.vmEnd()) {
			k.gig = append(k.gig, lo)
		}
	}
	if len(k.gig) < n {
		return fmt.Errorf("synth: room for %d of %d gigantic pages", len(k.gig), n)
	}
	slices.Sort(k.gig)
	return nil
}

func overlaps(alo, ahi, blo, bhi uint64) bool { return alo < bhi && blo < ahi }

// paintStatuses builds the status map over [0, nsec*pps).
func (k *kmem) paintStatuses() {
	end := k.nsec * k.pps
	r := []statusRange{{0, end, stHole}}
	for _, x := range k.ram {
		r = paint(r, x.lo, x.hi, stAvail)
	}
	// The first MiB: BIOS, real-mode trampoline and friends are
	// reserved by memblock on x86.
	for _, x := range k.ram {
		if x.lo < k.lowPages() {
			r = paint(r, x.lo, min(x.hi, k.lowPages()), stReserved)
		}
	}
	r = paint(r, k.imgLo, k.imgHi, stReserved)
	if k.ks.FreedInit {
		lo, hi := k.initRange()
		r = paint(r, lo, hi, stAvail)
	}
	r = paint(r, k.mbLo, k.mbHi, stReserved)
	r = paint(r, k.vmLo, k.vmEnd(), stReserved)
	for _, g := range k.gig {
		r = paint(r, g, g+k.gigPages(), stGigantic)
	}
	k.statuses = r
}

// initRange is the image's init sections, freed with FreedInit: between
// the data that tools read (page tables and globals at 5/8, vmap_area_list
// at 0.70) and the bss (clear_seq and log indices at 0.90), widened to
// whole 64 KiB.
func (k *kmem) initRange() (lo, hi uint64) {
	n := k.imgHi - k.imgLo
	return (k.imgLo + n*72/100 + 15) &^ 15, (k.imgLo + n*89/100) &^ 15
}

// paint sets [lo, hi) to st in a sorted, gapless list of ranges.
func paint(r []statusRange, lo, hi uint64, st status) []statusRange {
	if lo >= hi {
		return r
	}
	out := make([]statusRange, 0, len(r)+2)
	for _, x := range r {
		if x.hi <= lo || x.lo >= hi {
			out = append(out, x)
			continue
		}
		if x.lo < lo {
			out = append(out, statusRange{x.lo, lo, x.st})
		}
		if x.hi > hi {
			out = append(out, statusRange{hi, x.hi, x.st})
		}
	}
	out = append(out, statusRange{lo, hi, st})
	sort.Slice(out, func(i, j int) bool { return out[i].lo < out[j].lo })
	// Merge neighbours of equal status.
	m := out[:1]
	for _, x := range out[1:] {
		if last := &m[len(m)-1]; last.st == x.st && last.hi == x.lo {
			last.hi = x.hi
		} else {
			m = append(m, x)
		}
	}
	return m
}

// statusOf reports the status of [lo, hi) and whether it is uniform.
func (k *kmem) statusOf(lo, hi uint64) (status, bool) {
	r := k.statuses
	i := sort.Search(len(r), func(i int) bool { return r[i].hi > lo })
	if i == len(r) {
		return stHole, true
	}
	return r[i].st, hi <= r[i].hi
}

// va of a physical address in the direct map; kva in the kernel text map.
// On arm64 the linear map is (pa - PHYS_OFFSET) | PAGE_OFFSET and the
// image pa + kimage_voffset.
func (k *kmem) va(pa uint64) uint64 {
	if k.arm != nil {
		return (pa - k.arm.physOffset) | k.pageOffset
	}
	if k.rv != nil {
		return pa - k.rv.physRAMBase + k.pageOffset
	}
	return k.pageOffset + pa
}

func (k *kmem) kva(pa uint64) uint64 {
	if k.arm != nil {
		return pa + k.arm.kimageVoffset
	}
	if k.rv != nil {
		return pa + k.rv.vaKernelPAOff
	}
	return startKernelMap + pa - uint64(k.physBase)
}

// pageVA is the vmemmap address of pfn's struct page.
func (k *kmem) pageVA(pfn uint64) uint64 { return k.vmemmap + pfn*structPageSize }

// ptBuilder builds x86_64 4-level page tables in memory.
type ptBuilder struct {
	k      *kmem
	tables map[uint64]*[512]uint64
}

func (b *ptBuilder) table(pa uint64) *[512]uint64 {
	t := b.tables[pa]
	if t == nil {
		t = new([512]uint64)
		b.tables[pa] = t
	}
	return t
}

// mapLarge maps one large page (shift 30 or 21) at va to pa, allocating
// missing tables from the boot allocations.
func (b *ptBuilder) mapLarge(top, va, pa uint64, shift uint, flags uint64) {
	t := b.table(top)
	for _, s := range []uint{39, 30, 21} {
		i := va >> s & 511
		if s == shift {
			t[i] = pa | flags
			return
		}
		if t[i]&ptePresent == 0 {
			next := b.k.allocPages(1) * PageSize
			t[i] = next | kernTable
		}
		t = b.table(t[i] & 0x000ffffffffff000)
	}
}

// buildTables makes init_top_pgt and everything below it: the kernel text
// mapping (level3_kernel_pgt/level2_kernel_pgt in the image, as in
// head_64.S), the direct map of all memory up to the highest RAM (1 GiB or
// 2 MiB pages; it starts at physical 0, as FindPageOffset and the kernel
// assume), and the vmemmap of every present section (2 MiB pages, as
// vmemmap_populate does with PSE).
func (k *kmem) buildTables() {
	if k.arm != nil {
		k.buildTablesARM64()
		return
	}
	if k.rv != nil {
		k.buildTablesRISCV64()
		return
	}
	top := k.imgLo + (k.imgHi-k.imgLo)*5/8
	l3, l2 := top+1, top+2
	k.sym["init_top_pgt"] = k.kva(top * PageSize)
	k.sym["swapper_pg_dir"] = k.sym["init_top_pgt"]
	b := &ptBuilder{k: k, tables: map[uint64]*[512]uint64{}}
	b.table(top * PageSize)[511] = l3*PageSize | kernTable
	b.table(l3 * PageSize)[510] = l2*PageSize | kernTable
	for pa := k.imgLo * PageSize; pa < k.imgHi*PageSize; pa += bigPage2M {
		b.mapLarge(top*PageSize, k.kva(pa), pa, 21, kernLargeRX)
	}
	dmEnd := (k.endPFN*PageSize + bigPage1G - 1) &^ (bigPage1G - 1)
	for pa := uint64(0); pa < dmEnd; {
		if k.ks.DirectMap2M {
			b.mapLarge(top*PageSize, k.va(pa), pa, 21, kernLarge)
			pa += bigPage2M
		} else {
			b.mapLarge(top*PageSize, k.va(pa), pa, 30, kernLarge)
			pa += bigPage1G
		}
	}
	for n, p := range k.present {
		if p {
			b.mapLarge(top*PageSize, k.pageVA(uint64(n)*k.pps), k.secBacking[n]*PageSize, 21, kernLarge)
		}
	}
	for pa, t := range b.tables {
		pg := make([]byte, PageSize)
		for i, e := range t {
			binary.LittleEndian.PutUint64(pg[i*8:], e)
		}
		k.small[pa/PageSize] = pg
	}
}

// Section flags in section_mem_map (include/linux/mmzone.h):
// SECTION_MARKED_PRESENT, SECTION_HAS_MEM_MAP, SECTION_IS_ONLINE, and
// SECTION_IS_EARLY (boot memory; added in the 5.x series, so left out for
// 4.19). All lie below SECTION_MAP_LAST_BIT, masked off by makedumpfile
// with ~0x1f.
const sectionFlagsOld, sectionFlags = 0x7, 0xf

// buildMemSection lays out the SPARSEMEM_EXTREME tree: the root array of
// NR_SECTION_ROOTS pointers (memblock-allocated since 4.15, so
// SYMBOL(mem_section) is its direct-map address), one page of 128 struct
// mem_section per root in use, and for each present section
// section_mem_map = vmemmap | flags: the kernel encodes
// mem_map - section_start_pfn, which under VMEMMAP is the vmemmap base.
func (k *kmem) buildMemSection() {
	nRootPages := k.rootPages()
	root := k.allocPages(nRootPages)
	usage := k.allocPages(1) // mem_section_usage and pgdat live here (zeros)
	k.memSectionVA = k.va(root * k.ps)
	rootPages := make([][]byte, nRootPages)
	for i := range rootPages {
		rootPages[i] = make([]byte, k.ps)
		k.small[root+uint64(i)] = rootPages[i]
	}
	perPage := k.ps / 8 // root pointers in a page
	flags := uint64(sectionFlags)
	if !k.prof.atLeast(5, 0) {
		flags = sectionFlagsOld
	}
	for r := uint64(0); r*k.perRoot < k.nsec; r++ {
		var pg []byte
		for i := uint64(0); i < k.perRoot; i++ {
			n := r*k.perRoot + i
			if n >= k.nsec || !k.present[n] {
				continue
			}
			if pg == nil {
				pa := k.allocPages(1)
				pg = make([]byte, k.ps)
				k.small[pa] = pg
				binary.LittleEndian.PutUint64(rootPages[r/perPage][r%perPage*8:], k.va(pa*k.ps))
			}
			e := pg[i*memSectionSize:]
			binary.LittleEndian.PutUint64(e[0:], k.vmemmap|flags)
			binary.LittleEndian.PutUint64(e[8:], k.va(usage*k.ps)+n%64*64) // ->usage
		}
	}
	k.sym["node_data_pgdat"] = k.va(usage * k.ps)
}

// uts field offsets in struct new_utsname (65-byte fields).
const (
	utsLen     = 65
	utsRelease = 2 * utsLen
)

// buildGlobals writes the image's data pages that tools read:
// init_uts_ns (sysname "Linux", release = OSRELEASE, machine "x86_64"),
// node_online_map (node 0) and node_data[] (node 0's pgdat); and picks
// addresses in the image for the other exported symbols.
func (k *kmem) buildGlobals() {
	top := k.imgLo + (k.imgHi-k.imgLo)*5/8
	globals, nodeData := top+3, top+4
	pg := make([]byte, k.ps)
	k.small[globals] = pg
	base := k.prof.utsNameOff
	if base == 4 {
		binary.LittleEndian.PutUint32(pg[0:], 3) // kref
	}
	for i, s := range []string{"Linux", fmt.Sprintf("synth-%04x", k.seed&0xffff), k.prof.osrelease,
		k.prof.version, k.machine(), "(none)"} {
		copy(pg[base+uint64(i)*utsLen:], s)
	}
	k.sym["init_uts_ns"] = k.kva(globals * k.ps)
	binary.LittleEndian.PutUint64(pg[0x800:], 1) // node_online_map: node 0
	k.sym["node_online_map"] = k.kva(globals*k.ps + 0x800)
	nd := make([]byte, k.ps)
	binary.LittleEndian.PutUint64(nd[0:], k.sym["node_data_pgdat"])
	k.small[nodeData] = nd
	k.small[nodeData+1] = make([]byte, k.ps)
	k.sym["node_data"] = k.kva(nodeData * k.ps)
	// Other symbols: somewhere in the image's text, rodata and data,
	// in the order the fixture has them (kallsyms in rodata, printk and
	// vmap_area_list in data, clear_seq in bss).
	img := (k.imgHi - k.imgLo) * k.ps
	at := func(frac float64, off uint64) uint64 {
		return k.kva(k.imgLo*k.ps + uint64(float64(img)*frac)&^0xfff + off)
	}
	for i, n := range []string{"kallsyms_offsets", "kallsyms_relative_base", "kallsyms_num_syms",
		"kallsyms_names", "kallsyms_token_table", "kallsyms_token_index"} {
		k.sym[n] = at(0.45+float64(i)*0.01, 0x4c8)
	}
	k.sym["prb"] = at(0.66, 0x3e0)
	k.sym["printk_rb_static"] = at(0.66, 0x400)
	k.sym["vmap_area_list"] = at(0.70, 0x430)
	k.sym["clear_seq"] = at(0.90, 0xd20)
	k.sym["log_buf"] = at(0.66, 0x808)
	k.sym["log_buf_len"] = at(0.66, 0x810)
	k.sym["log_first_idx"] = at(0.90, 0x2d4)
	k.sym["clear_idx"] = at(0.90, 0x320)
	k.sym["log_next_idx"] = at(0.90, 0x2e0)
}

// machine is utsname's machine: the architecture as uname -m names it.
func (k *kmem) machine() string {
	switch {
	case k.arm != nil:
		return "aarch64"
	case k.rv != nil:
		return "riscv64"
	}
	return "x86_64"
}
