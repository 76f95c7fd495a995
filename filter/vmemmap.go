package filter

import (
	"errors"
	"fmt"
	"sort"

	"pagepipe/bitmap"
	"pagepipe/kernel"
)

// -e: the struct pages of excluded pages are themselves left out.
//
// Why: a struct page is 64 bytes per 4 KiB page, 1.6 % of memory; on a
// mostly free 32 TiB machine the struct pages of its free pages are most
// of what -d 31 still dumps. The rule is makedumpfile 1.7.2's
// (find_vmemmap_x86_64, find_unused_vmemmap_pages), so that the two make
// the same dump:
//
//   - The vmemmap is walked in 2 MiB blocks from its base (the mem_map of
//     pfn 0, which KASLR moves), block k holding the struct pages of pfns
//     from k*2MiB/SIZE(page), while that pfn is below the end of the
//     highest PT_LOAD. Every mapped block must be a 2 MiB page (a PMD
//     leaf); a vmemmap mapped with 4 KiB pages (hotplugged memory,
//     HugeTLB vmemmap optimisation) makes makedumpfile give -e up, and
//     FindVmemmap returns an error for it.
//   - Blocks whose pages follow each other physically form a group. The
//     last group's last block (the one holding the highest pfn walked) is
//     never freed: makedumpfile's group ends where that block starts.
//   - The bitmaps are read in 4 KiB blocks (32768 pfns) and 64-pfn words:
//     a word qualifies when its 64 pfns are all present (1st bitmap) and
//     all excluded (2nd). A run of at least two qualifying words within one
//     bitmap block, lying within one group, frees the vmemmap pages wholly
//     covered by its struct pages; a single word, a run split by a bitmap
//     block or a group boundary frees nothing more.
//
// pagepipe walks the page tables by virtual address, through the
// translator. makedumpfile walks PMD tables in the order it meets them and
// skips absent PGD and PUD entries without counting their blocks, so on a
// machine whose vmemmap has a hole of 1 GiB or more (a 64 GiB gap in
// physical memory) it attributes every later block to the wrong pfns and
// frees pages that hold live struct pages; without such holes the two
// walks are the same.

// vmemmapBlock is the size of the vmemmap's pages (PMD_SIZE).
const vmemmapBlock = 2 << 20

// bitmapWordPfns and makedumpfile's bitmap block (PFN_BUFBITMAP: one page
// of bits, Vmemmap.blockPfns) cut the runs of excluded pfns.
const bitmapWordPfns = 64

// ErrVmemmap is the root of every reason FindVmemmap gives up: the dump
// is then made without -e, as makedumpfile makes it.
var ErrVmemmap = errors.New("cannot find vmemmap pages")

// Vmemmap is where the struct page array lies in physical memory, in the
// groups makedumpfile's -e works with.
type Vmemmap struct {
	// Base is the vmemmap's virtual start (makedumpfile's vmemmap_start).
	Base   uint64
	groups []VmemmapGroup
	size   uint64 // SIZE(page)
	page   uint64 // the page size
	// Blocks is the number of 2 MiB blocks walked, Mapped how many of
	// them are mapped.
	Blocks, Mapped uint64
}

// VmemmapGroup is a run of vmemmap blocks that are physically contiguous:
// the struct pages of pfns [RepStart, RepEnd) lie from pfn VmapStart on
// (VmapLast is the pfn of its last block's first page). RepEnd is where
// makedumpfile ends the group: the last group's is the start of the last
// block walked.
type VmemmapGroup struct {
	VmapStart, VmapLast uint64
	RepStart, RepEnd    uint64
}

// Groups are the groups, in pfn order.
func (v *Vmemmap) Groups() []VmemmapGroup { return v.groups }

// FindVmemmap walks the crashed kernel's page tables over the struct pages
// of pfns below highPFN (the end of the highest PT_LOAD, in pages) and
// groups them. It fails (wrapping ErrVmemmap) where makedumpfile's -e
// cannot work: a kernel that is not x86_64's, no VMEMMAP, a block not
// mapped by a 2 MiB page, page tables that cannot be read.
func (k *Kernel) FindVmemmap(highPFN uint64) (*Vmemmap, error) {
	vi := k.VMCOREINFO
	if !vi.Has("SYMBOL(init_top_pgt)") && !vi.Has("SYMBOL(init_level4_pgt)") {
		return nil, fmt.Errorf("%w: the vmemmap walk is x86_64's, and VMCOREINFO has no init_top_pgt (makedumpfile's -e is for x86_64 only)", ErrVmemmap)
	}
	size := k.MemMap.PageSize
	base, err := vmemmapBase(k.MemMap)
	if err != nil {
		return nil, err
	}
	if size == 0 || size > vmemmapBlock {
		return nil, fmt.Errorf("%w: SIZE(page) %d", ErrVmemmap, size)
	}
	tr, err := kernel.NewTranslator(k.mem, vi)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrVmemmap, err)
	}
	ps := uint64(vi.PageSize())
	v := &Vmemmap{Base: base, size: size, page: ps}
	// Block b is walked while floor(b*2MiB/size) < highPFN.
	v.Blocks = (highPFN*size + vmemmapBlock - 1) / vmemmapBlock
	type span struct{ first, end, paddr uint64 } // blocks [first, end) from paddr
	var spans []span
	for b := uint64(0); b < v.Blocks; {
		va := base + b*vmemmapBlock
		m, err := tr.Lookup(va)
		var te *kernel.TranslationError
		switch {
		case errors.As(err, &te) && errors.Is(err, kernel.ErrNotPresent):
			// Nothing mapped up to the end of the entry's span.
			next := b + 1
			if te.Span > vmemmapBlock {
				next = b + ((va|(te.Span-1))+1-va)/vmemmapBlock
			}
			b = next
			continue
		case err != nil:
			return nil, fmt.Errorf("%w: vmemmap block at %#x: %w", ErrVmemmap, va, err)
		case m.PageSize != vmemmapBlock:
			return nil, fmt.Errorf("%w: the vmemmap at %#x is mapped by a %d KiB page, not a 2 MiB one (makedumpfile: vmemmap pmd not huge, abort)", ErrVmemmap, va, m.PageSize>>10)
		}
		v.Mapped++
		if n := len(spans); n > 0 && spans[n-1].end == b && spans[n-1].paddr+(b-spans[n-1].first)*vmemmapBlock == m.Paddr {
			spans[n-1].end++
		} else {
			spans = append(spans, span{b, b + 1, m.Paddr})
		}
		b++
	}
	for _, s := range spans {
		end := s.end
		if end == v.Blocks {
			end-- // the last block walked ends makedumpfile's last group
		}
		g := VmemmapGroup{
			VmapStart: s.paddr / ps,
			VmapLast:  (s.paddr + (s.end-1-s.first)*vmemmapBlock) / ps,
			RepStart:  s.first * vmemmapBlock / size,
			RepEnd:    end * vmemmapBlock / size,
		}
		v.groups = append(v.groups, g)
	}
	return v, nil
}

// vmemmapBase is the virtual address of pfn 0's struct page, which every
// section's mem_map must agree on under VMEMMAP.
func vmemmapBase(mm *kernel.MemMap) (uint64, error) {
	if len(mm.Sections) == 0 {
		return 0, fmt.Errorf("%w: no mem_map", ErrVmemmap)
	}
	s0 := mm.Sections[0]
	base := s0.MemMap - s0.StartPFN*mm.PageSize
	for _, s := range mm.Sections {
		if s.MemMap-s.StartPFN*mm.PageSize != base {
			return 0, fmt.Errorf("%w: the mem_map of pfn %#x is not in one virtual array with pfn %#x's (no SPARSEMEM_VMEMMAP)", ErrVmemmap, s.StartPFN, s0.StartPFN)
		}
	}
	return base, nil
}

// VmemmapRun is the vmemmap pages [Start, Start+Pages) freed by one run of
// excluded pfns.
type VmemmapRun struct{ Start, Pages uint64 }

// Unused returns the vmemmap pages that describe only pfns excluded in
// dumpable among those present, below maxMapnr, by the rule above; what it
// returns is found before any of it is cleared.
func (v *Vmemmap) Unused(present, dumpable *bitmap.Bitmap, maxMapnr uint64) []VmemmapRun {
	var runs []VmemmapRun
	blockPfns := v.page * 8
	words := (maxMapnr + blockPfns - 1) / blockPfns * (blockPfns / bitmapWordPfns)
	words = min(words, (present.Len()+bitmapWordPfns-1)/bitmapWordPfns, (dumpable.Len()+bitmapWordPfns-1)/bitmapWordPfns)
	perBlock := blockPfns / bitmapWordPfns
	start := int64(-1) // first qualifying word of the current run
	flush := func(end uint64) {
		if start >= 0 && end-uint64(start) > 1 {
			s := uint64(start) * bitmapWordPfns
			if r, ok := v.pages(s, end*bitmapWordPfns-1); ok {
				runs = append(runs, r)
			}
		}
		start = -1
	}
	for w := uint64(0); w < words; w++ {
		if w%perBlock == 0 {
			flush(w) // runs end with makedumpfile's bitmap block
		}
		if present.Word(w) == ^uint64(0) && dumpable.Word(w) == 0 {
			if start < 0 {
				start = int64(w)
			}
			continue
		}
		flush(w)
	}
	flush(words)
	return runs
}

// pages maps the excluded pfns [s, e] (e inclusive) to the vmemmap pages
// wholly covered by their struct pages, within the one group holding them.
func (v *Vmemmap) pages(s, e uint64) (VmemmapRun, bool) {
	i := sort.Search(len(v.groups), func(i int) bool { return v.groups[i].RepEnd >= e })
	if i == len(v.groups) || s < v.groups[i].RepStart {
		return VmemmapRun{}, false
	}
	g := v.groups[i]
	first := ((s-g.RepStart)*v.size + v.page - 1) / v.page // rounded up
	end := (e + 1 - g.RepStart) * v.size / v.page          // rounded down
	if end <= first {
		return VmemmapRun{}, false
	}
	return VmemmapRun{g.VmapStart + first, end - first}, true
}

// ExcludeVmemmap leaves out of the plan the vmemmap pages that describe
// only excluded pages (-e), after the page scan, and returns how many
// pages that is, as makedumpfile counts them ("Excluded N unused vmemmap
// pages"). dumpable is the bitmap to clear: the plan's, or an ELF dump's
// after its zero scan; nil means the plan's.
func (p *Plan) ExcludeVmemmap(v *Vmemmap, dumpable *bitmap.Bitmap) uint64 {
	own := dumpable == nil
	if own {
		dumpable = p.Dumpable
	}
	var n uint64
	for _, r := range v.Unused(p.Present, dumpable, p.MaxMapnr) {
		n += r.Pages
		hi := min(r.Start+r.Pages, dumpable.Len())
		if r.Start < hi {
			c := clearCount(dumpable, r.Start, hi)
			if own {
				p.NumDumpable -= c
			}
		}
	}
	p.VmemmapExcluded = n
	return n
}
