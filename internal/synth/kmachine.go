package synth

// KernelMachine returns a kernel machine of the given era with sizeMiB MiB
// of RAM (at least 64), laid out as a QEMU q35 PC: 632 KiB below the VGA
// hole, then RAM from 1 MiB up to sizeMiB or 2 GiB, whichever is lower,
// and the rest from 4 GiB, leaving the 32-bit PCI hole (and, for big
// machines, absent mem_sections) between. KASLR is on, as in Debian;
// machines of 3 GiB and more get a 1 GiB hugetlb page, 64 GiB ones two;
// machines above 256 GiB are Lean (a GiB of file per TiB).
//
// The memory's classes come from the spec's Seed (TruthOf); page contents
// other than kernel structures follow DefaultMix, free pages being zero
// unless stale (KernelSpec.FreeDirty). An unknown profile makes a spec
// that fails Validate. Change Seed or Kernel freely afterwards: the
// layout, the note and the PT_LOADs follow.
func KernelMachine(profile string, sizeMiB int) Spec {
	gig := 0
	switch {
	case sizeMiB >= 64<<10:
		gig = 2
	case sizeMiB >= 3<<10:
		gig = 1
	}
	return NewKernelMachine(KernelSpec{Profile: profile, KASLR: true, Gigantic: gig, Lean: sizeMiB > 256<<10}, sizeMiB)
}

// NewKernelMachine is KernelMachine with the kernel spec given whole.
func NewKernelMachine(ks KernelSpec, sizeMiB int) Spec {
	sizeMiB = max(sizeMiB, 64)
	const (
		lowStart  = 0x1000
		lowEnd    = 0x9f000
		mainStart = 1 << 20
		mainCap   = 2 << 30
		highStart = 4 << 30
	)
	total := uint64(sizeMiB) << 20
	mainEnd := min(total, mainCap)
	segs := []Segment{ram(lowStart, lowEnd-lowStart), ram(mainStart, mainEnd-mainStart)}
	if total > mainCap {
		segs = append(segs, ram(highStart, total-mainCap))
	}
	s := Spec{
		Segments: segs,
		CPUs:     2,
		Seed:     DefaultSeed,
		Mix:      DefaultMix,
		Layout:   ProcVmcore,
		Kernel:   &ks,
	}
	if sizeMiB >= 512 {
		s.CPUs = 4
	}
	return s
}

// KexecMachine returns a small kernel machine (the 6.1 era, KASLR on, as
// Debian 12) whose file is /proc/vmcore as kexec-tools lays it out in a
// capture kernel, with max_mapnr ≡ residue mod 4: the kernel-text PT_LOAD
// first (aliasing the image's RAM, whose freed init sections the page
// scan may exclude: KernelSpec.FreedInit), low RAM [0x1000, 0x9fc00) ending
// mid-page, RAM from 1 MiB to 24 MiB, none over the crashkernel
// reservation [24 MiB, 28 MiB), and RAM from 28 MiB to 32 MiB plus
// residue pages. The kernel describes the reservation's pages (it is its
// RAM), but no PT_LOAD holds them; here they are no RAM at all, which
// makes no difference to the vmcore: tools look at struct pages only for
// pfns a PT_LOAD holds.
//
// Why: makedumpfile counts a PT_LOAD's partial last page or not depending
// on how it builds its bitmaps, which depends on max_mapnr mod 4 (see
// filter.Cycle); with struct pages the page scan runs too (-d 31), and
// every dump level can be compared with makedumpfile's on the layout that
// users' capture kernels have. Each residue has its own seed.
func KexecMachine(residue uint64) Spec {
	s := NewKernelMachine(KernelSpec{Profile: "6.1", KASLR: true, FreedInit: true}, 64)
	s.Segments = []Segment{
		ram(0x1000, 0x9fc00-0x1000),
		ram(1*mib, 23*mib),
		ram(28*mib, 4*mib+residue%4*PageSize),
	}
	s.Seed = DefaultSeed + 0x6b6578656300 + residue%4 // "kexec"
	return s
}

// FileSegments returns the PT_LOADs the file of s has. For a plain spec
// they are its Segments. For a kernel machine the Segments are the RAM,
// and the file is shaped as kexec-tools makes /proc/vmcore: a kernel-text
// PT_LOAD first (p_vaddr _text, its pages aliasing the image's RAM), then
// the RAM ones at p_vaddr = PAGE_OFFSET + p_paddr, whatever Vaddr the
// Segments hold. Geometry.LoadOff is indexed like FileSegments.
func (s Spec) FileSegments() []Segment { return kernelView(&s).Segments }

// kernelView returns s with FileSegments as its Segments.
func kernelView(s *Spec) Spec {
	v := *s
	if s.Kernel == nil {
		return v
	}
	k, err := kernelOf(s)
	if err != nil {
		return v
	}
	v.Segments = k.fileSegs
	return v
}

// fileSegments builds the kernel machine's PT_LOADs.
func (k *kmem) fileSegments() []Segment {
	segs := make([]Segment, 0, len(k.segs)+1)
	img := (k.imgHi - k.imgLo) * k.ps
	segs = append(segs, Segment{Paddr: k.imgLo * k.ps, FileSize: img, MemSize: img, Vaddr: k.textVA})
	for _, g := range k.segs {
		if g.FileSize > 0 {
			g.Vaddr = k.pageOffset + g.Paddr
			if k.rv != nil {
				g.Vaddr = k.va(g.Paddr)
			}
			segs = append(segs, g)
		}
	}
	return segs
}

// kindStruct marks a page holding generated kernel structures (page
// tables, mem_section, struct pages, init_uts_ns): never all zero.
const kindStruct Kind = 0x80

// pager generates a spec's pages for one goroutine.
type pager interface {
	kind(pfn uint64) Kind
	// fill writes page pfn, of kind k, into b: exactly one page.
	fill(b []byte, pfn uint64, k Kind)
}

type plainPager struct{ s *Spec }

func (p plainPager) kind(pfn uint64) Kind { return contentKind(p.s, pfn) }

func (p plainPager) fill(b []byte, pfn uint64, k Kind) { fill(b, k, p.s.Seed, pfn) }

// newPager returns the pager for s (which has passed Validate).
func newPager(s *Spec) pager {
	if s.Kernel != nil {
		if k, err := kernelOf(s); err == nil {
			return k.newPager(s)
		}
	}
	return plainPager{s}
}

// kpager generates a kernel machine's pages.
type kpager struct {
	k *kmem
	s *Spec
	c blockCache
}

func (k *kmem) newPager(s *Spec) *kpager { return &kpager{k: k, s: s, c: blockCache{k: k}} }

// freeIsDirty reports whether free block lf keeps stale data. Most
// order-10 blocks of a mostly idle machine were never touched since boot,
// so they are dirty only in proportion to the memory in use; smaller free
// blocks were freed by someone and are dirty at the FreeDirty rate.
func (k *kmem) freeIsDirty(lf leaf) bool {
	p := k.freeDirty
	if lf.order == maxOrder {
		p *= k.used
	}
	return float64(lf.v)*(1.0/(1<<32)) < p
}

func (k *kmem) vmEnd() uint64 { return k.vmLo + uint64(len(k.backingSec))*k.backPages }

func (p *kpager) kind(pfn uint64) Kind {
	k := p.k
	if pfn >= k.vmLo && pfn < k.vmEnd() {
		if k.ks.Lean {
			// A page of struct pages of a free block's tail pages only
			// is all zero (leanTail).
			i := pfn - k.vmLo
			first := k.backingSec[i/512]*pagesPerSection + i%512*(PageSize/structPageSize)
			if lf := p.c.leaf(first); k.leanTail(first, lf) && first+PageSize/structPageSize <= lf.end() {
				return Zero
			}
		}
		return kindStruct
	}
	if k.partialPage(pfn) != 0 {
		// What firmware left in the rest of a partial page: never
		// zero, so that a dump which takes the page shows it.
		return Repetitive
	}
	if pfn >= k.imgLo && pfn < k.imgHi || pfn >= k.mbLo && pfn < k.mbHi {
		if _, ok := k.small[pfn]; ok {
			if k.smallZero[pfn] {
				return Zero
			}
			return kindStruct
		}
	}
	lf := p.c.leaf(pfn)
	switch lf.class {
	case Hole, Unaccepted:
		return Zero
	case Free:
		if !k.freeIsDirty(lf) {
			return Zero
		}
	case Hugetlb:
		// Pool pages were never touched; a gigantic page in use has
		// only some of its pages written, which keeps big machines
		// sparse.
		if lf.v&1 == 0 || lf.order == gigOrder && (pfn-lf.head)%64 != 0 {
			return Zero
		}
	}
	kd := contentKind(p.s, pfn)
	if kd == Zero {
		switch lf.class {
		case Free, Offline, Hwpoison:
			kd = Repetitive // stale or poisoned data: never zero
		}
	}
	return kd
}

func (p *kpager) fill(b []byte, pfn uint64, kd Kind) {
	if kd != kindStruct {
		fill(b, kd, p.s.Seed, pfn)
		return
	}
	k := p.k
	if pg, ok := k.small[pfn]; ok {
		copy(b, pg)
		return
	}
	i := pfn - k.vmLo
	perPage := k.ps / structPageSize
	first := k.backingSec[i/k.backPages]*k.pps + i%k.backPages*perPage
	for j := range perPage {
		pfn := first + j
		k.encodePage(b[j*structPageSize:], pfn, p.c.leaf(pfn))
	}
}
