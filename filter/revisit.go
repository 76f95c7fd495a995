package filter

import (
	"fmt"
	"slices"
	"sync"

	"pagepipe/bitmap"
	"pagepipe/kernel"
	"pagepipe/source"
)

// Excluded is what a page scan left out that Revisit needs
// (Kernel.Record): the blocks of more than one page it left out as free,
// cache or user pages, each its first pfn and length as the struct page of
// that first pfn said, and the pfns it left out as anything else
// (hwpoison, offline), never revisited. A pfn left out alone as free,
// cache or user memory is its own block: it is not recorded, so that the
// record stays small (a block of a machine's free memory is most often
// of order 10).
type Excluded struct {
	mu     sync.Mutex
	blocks []excludedBlock
	never  []uint64
	sorted bool
}

type excludedBlock struct{ head, n uint64 }

func (e *Excluded) add(head, n uint64, never bool) {
	e.mu.Lock()
	if never {
		for p := head; p < head+n; p++ {
			e.never = append(e.never, p)
		}
	} else {
		e.blocks = append(e.blocks, excludedBlock{head, n})
		e.sorted = false
	}
	e.mu.Unlock()
}

// sort orders the blocks by first pfn (the scan's workers add them in any
// order); the blocks do not overlap (a pfn left out is not classified
// again).
func (e *Excluded) sort() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.sorted {
		slices.SortFunc(e.blocks, func(a, b excludedBlock) int {
			switch {
			case a.head < b.head:
				return -1
			case a.head > b.head:
				return 1
			}
			return 0
		})
		e.sorted = true
	}
}

// Revisit sets in plan's 2nd bitmap (held whole) every present pfn the
// page scan left out as free, cache or user memory (every one it left out
// but those recorded as never), and returns them as a bitmap: a live dump
// dumps them, and its copy pass asks a Revisitor of each whether its
// block's struct page still leaves it out (then it is stored as zeros) or
// not (a page that became kernel memory after the scan: copied). Call it
// after the pages the dump holds whatever the scan said (the kernel
// image) are set.
func (e *Excluded) Revisit(plan *Plan) (*bitmap.Bitmap, uint64) {
	e.sort()
	m := bitmap.New(plan.MaxMapnr)
	var added uint64
	for pfn := uint64(0); pfn < plan.MaxMapnr; pfn++ {
		if plan.Present.Test(pfn) && !plan.Dumpable.Test(pfn) {
			plan.Dumpable.Set(pfn)
			m.Set(pfn)
			added++
		}
	}
	for _, pfn := range e.never {
		if pfn < plan.MaxMapnr && m.Test(pfn) {
			m.Clear(pfn)
			plan.Dumpable.Clear(pfn)
			added--
		}
	}
	plan.NumDumpable += added
	return m, added
}

// Revisitor reads struct pages again, for one copy-pass worker.
type Revisitor struct {
	k       *Kernel
	level   Level
	e       *Excluded
	revisit *bitmap.Bitmap
	tr      *kernel.Translator
	r       kernel.PhysSlicer
	reader  source.Reader
	buf     []byte
	// the last block read again that still left its pages out
	lastHead uint64
	last     bool
	// the struct pages of the largest buddy block being copied (window)
	win            []byte
	winOK          bool
	winBase, winLo uint64
}

// NewRevisitor makes a worker's Revisitor of the pfns in revisit (from
// Revisit), with its own reader of the memory.
func (k *Kernel) NewRevisitor(level Level, e *Excluded, revisit *bitmap.Bitmap) (*Revisitor, error) {
	tr, err := k.mem.Arch().NewTranslator(k.mem, k.VMCOREINFO)
	if err != nil {
		return nil, err
	}
	r := k.mem.NewReader(0, false)
	return &Revisitor{k: k, level: level, e: e, revisit: revisit, tr: tr, r: r, reader: r}, nil
}

// Close closes the reader.
func (v *Revisitor) Close() { v.reader.Close() }

// Forget drops what the last read said: a chunk of pages begins.
func (v *Revisitor) Forget() { v.last, v.winOK = false, false }

// LeftOut tells whether pfn is one of the revisited pages whose block's
// struct page, read now, still leaves it out (as free, cache or user
// memory). A pfn not revisited is not left out.
func (v *Revisitor) LeftOut(pfn uint64) (bool, error) {
	if pfn >= v.revisit.Len() || !v.revisit.Test(pfn) {
		return false, nil
	}
	bl := v.e.blocks
	i, _ := slices.BinarySearchFunc(bl, pfn, func(b excludedBlock, p uint64) int {
		switch {
		case b.head+b.n <= p:
			return -1
		case b.head > p:
			return 1
		}
		return 0
	})
	head := pfn // a page left out alone
	if i < len(bl) && bl[i].head <= pfn && pfn < bl[i].head+bl[i].n {
		head = bl[i].head
	}
	if v.last && v.lastHead == head {
		return true, nil
	}
	out, byHead, err := v.leftOut(head, pfn)
	if err != nil {
		return false, err
	}
	if byHead {
		v.last, v.lastHead = true, head
	}
	return out, nil
}

// window returns the struct pages of the largest buddy block (2^(MaxOrder-1)
// pages, aligned) holding pfn, from its first pfn lo, as read once a chunk.
func (v *Revisitor) window(pfn uint64) (uint64, []byte, error) {
	span := uint64(1) << (v.k.Layout.MaxOrder - 1)
	base := pfn &^ (span - 1)
	if v.winOK && v.winBase == base {
		return v.winLo, v.win, nil
	}
	sec, ok := v.section(pfn)
	if !ok {
		return 0, nil, nil
	}
	size := v.k.Layout.Size
	lo, hi := max(base, sec.StartPFN), min(base+span, sec.EndPFN)
	b, err := v.tr.SliceVirt(v.r, sec.MemMap+(lo-sec.StartPFN)*size, int((hi-lo)*size), &v.buf)
	if err != nil {
		return 0, nil, fmt.Errorf("read the struct pages of pfns %#x-%#x again: %w", lo, hi-1, err)
	}
	v.win = append(v.win[:0], b...)
	v.winOK, v.winBase, v.winLo = true, base, lo
	return lo, v.win, nil
}

func (v *Revisitor) section(pfn uint64) (kernel.Section, bool) {
	secs := v.k.MemMap.Sections
	j, ok := slices.BinarySearchFunc(secs, pfn, func(s kernel.Section, p uint64) int {
		switch {
		case s.EndPFN <= p:
			return -1
		case s.StartPFN > p:
			return 1
		}
		return 0
	})
	if !ok {
		return kernel.Section{}, false
	}
	return secs[j], true
}

// leftOut reads the struct pages again and decides: pfn is left out if
// the block the scan left it out with (from head) still leaves it out
// (byHead), or if another block holds it now, aligned to its order (its
// block was merged, split or freed since the scan: a free block of any
// order, or an order-0 page of its own).
func (v *Revisitor) leftOut(head, pfn uint64) (out, byHead bool, err error) {
	lo, win, err := v.window(pfn)
	if err != nil {
		return false, false, err
	}
	l, size := v.k.Layout, v.k.Layout.Size
	at := func(h uint64) (bool, bool) {
		if h < lo || h >= lo+uint64(len(win))/size {
			return false, false
		}
		i := (h - lo) * size
		n, c := decide(l, v.level, h, win[i:min(i+2*size, uint64(len(win)))])
		return n > 0 && c <= classUser && pfn < h+n, true
	}
	if covered, ok := at(head); ok {
		if covered {
			return true, true, nil
		}
	} else if covered, err := v.readDecide(head, pfn); err != nil || covered {
		return covered, covered, err // a block larger than a buddy block (hugetlb)
	}
	for o := uint64(0); o < l.MaxOrder; o++ {
		if h := pfn &^ (1<<o - 1); h != head {
			if covered, _ := at(h); covered {
				return true, false, nil
			}
		}
	}
	return false, false, nil
}

// readDecide reads head's struct page (and the next) alone and decides.
func (v *Revisitor) readDecide(head, pfn uint64) (bool, error) {
	sec, ok := v.section(head)
	if !ok {
		return false, nil
	}
	size := v.k.Layout.Size
	n := size
	if head+1 < sec.EndPFN {
		n *= 2
	}
	b, err := v.tr.SliceVirt(v.r, sec.MemMap+(head-sec.StartPFN)*size, int(n), &v.buf)
	if err != nil {
		return false, fmt.Errorf("read the struct page of pfn %#x again: %w", head, err)
	}
	n2, class := decide(v.k.Layout, v.level, head, b)
	return n2 > 0 && class <= classUser && pfn < head+n2, nil
}
