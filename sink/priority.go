package sink

import (
	"cmp"
	"fmt"
	"slices"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
)

// A prioritised kdump file (--priority) gets the pages in the copy pass's
// order — the priority pages first, then the rest in pfn order — so its
// data comes in that order, while its descriptors stay in pfn order, each
// pointing at its page's data wherever it lies. A complete prioritised
// file holds the same bitmaps and descriptors' sizes and flags as the
// pfn-order one; only the data offsets differ.
//
// Descriptors still reach the file only after their data, and only in
// pfn order from the first: the priority pages' descriptors are kept in
// memory as their chunks land (24 bytes a page; the priority set is
// small) and merged into the bulk's, in pfn order, as the bulk lands.
// A dump cut short keeps every page whose descriptor is on disk (all
// below a pfn, the front) and the landed priority pages above it, whose
// descriptors Abort writes after the front's (abortPrioritised).

// prioDescs are the landed priority pages' descriptors.
type prioDescs struct {
	set    *bitmap.Bitmap
	descs  []pfnDesc // in landing order, then sorted by pfn
	sorted bool
	merged int // descs[:merged] are in pend or on disk
	// pendEnd is the pfn past the last descriptor put in pend; front,
	// past the last one written.
	pendEnd, front uint64
	// lo and hi are the pfns the file holds (a split part's range).
	lo, hi uint64
	// slots are the priority pfns in [lo, hi), sorted, with the index of
	// each one's descriptor (slotOf); made by SetPriority for a file
	// written in order.
	slotPfns, slotIdx []uint64
}

type pfnDesc struct {
	pfn  uint64
	desc [kdumpfmt.PageDescSize]byte
}

// setPriority makes the file prioritised: set holds the priority pfns
// (each dumpable); a split part takes those in its own range.
func (k *kdumpFile) setPriority(set *bitmap.Bitmap) error {
	if set.Len() > k.meta.Dumpable.Len() {
		return fmt.Errorf("priority: a set of %d pfns for a dump of %d", set.Len(), k.meta.Dumpable.Len())
	}
	lo, hi := k.pfnRange()
	hi = min(hi, set.Len())
	lo = min(lo, hi)
	k.prio = &prioDescs{set: set, lo: lo, hi: hi, descs: make([]pfnDesc, 0, set.Count(lo, hi))}
	return nil
}

// land takes a chunk that landed in order: a priority chunk's descriptors
// are kept, a bulk chunk's go to pend (returned) with the priority ones
// below each of its pages before it.
func (p *prioDescs) land(pend []byte, c *descChunk) []byte {
	if len(c.pfns) == 0 {
		return pend
	}
	if c.priority {
		for i, pfn := range c.pfns {
			d := pfnDesc{pfn: pfn}
			copy(d.desc[:], c.b[i*kdumpfmt.PageDescSize:])
			p.descs = append(p.descs, d)
		}
		return pend
	}
	p.sort()
	last := c.pfns[len(c.pfns)-1]
	if p.merged == len(p.descs) || p.descs[p.merged].pfn > last {
		// No priority page among this chunk's pfns: the usual case.
		p.pendEnd = last + 1
		return append(pend, c.b[:len(c.pfns)*kdumpfmt.PageDescSize]...)
	}
	for i, pfn := range c.pfns {
		pend = p.mergeBelow(pend, pfn)
		pend = append(pend, c.b[i*kdumpfmt.PageDescSize:(i+1)*kdumpfmt.PageDescSize]...)
		p.pendEnd = pfn + 1
	}
	return pend
}

// sort orders the priority descriptors by pfn, once the bulk begins.
func (p *prioDescs) sort() {
	if !p.sorted {
		slices.SortFunc(p.descs, func(a, b pfnDesc) int { return cmp.Compare(a.pfn, b.pfn) })
		p.sorted = true
	}
}

// mergeBelow appends to pend the priority descriptors of pfns below pfn
// not yet merged.
func (p *prioDescs) mergeBelow(pend []byte, pfn uint64) []byte {
	for p.merged < len(p.descs) && p.descs[p.merged].pfn < pfn {
		pend = append(pend, p.descs[p.merged].desc[:]...)
		p.pendEnd = p.descs[p.merged].pfn + 1
		p.merged++
	}
	return pend
}

// rest appends the priority descriptors above the last bulk page (the
// complete dump's end).
func (p *prioDescs) rest(pend []byte) []byte {
	p.sort()
	return p.mergeBelow(pend, ^uint64(0))
}

// abortPrioritised is Abort for a prioritised placed file: the pages below
// the front (descriptors on disk) stay, and so do the priority pages that
// landed above it, their descriptors written next; every other page is
// taken out of the 2nd bitmap.
func (k *PlacedKdump) abortPrioritised() error {
	p := k.prio
	p.sort()
	front := p.front
	var tail []byte
	var above []uint64
	for _, d := range p.descs {
		if d.pfn >= front {
			tail = append(tail, d.desc[:]...)
			above = append(above, d.pfn)
		}
	}
	m := k.meta.Dumpable.Clone()
	if front < m.Len() {
		m.ClearRange(front, m.Len())
	}
	if len(tail) > 0 && k.writeAt(tail, k.descsOut) == nil {
		for _, pfn := range above {
			m.Set(pfn)
		}
	}
	if err := k.writeBitmap(m, k.layout.Bitmap2, k.layout.BitmapSize); err != nil {
		return fmt.Errorf("take the lost pages out of the bitmap: %w", err)
	}
	return k.markIncomplete()
}
