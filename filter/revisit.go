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
	// the last block read again: its head, and whether it was still
	// left out
	lastHead uint64
	lastOut  bool
	last     bool
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
func (v *Revisitor) Forget() { v.last = false }

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
		return v.lastOut, nil
	}
	out, err := v.leftOut(head, pfn)
	if err != nil {
		return false, err
	}
	v.last, v.lastHead, v.lastOut = true, head, out
	return out, nil
}

// leftOut reads head's struct page (and the next) and decides again.
func (v *Revisitor) leftOut(head, pfn uint64) (bool, error) {
	secs := v.k.MemMap.Sections
	j, ok := slices.BinarySearchFunc(secs, head, func(s kernel.Section, p uint64) int {
		switch {
		case s.EndPFN <= p:
			return -1
		case s.StartPFN > p:
			return 1
		}
		return 0
	})
	if !ok {
		return false, nil
	}
	sec := secs[j]
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
