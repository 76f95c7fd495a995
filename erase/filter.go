package erase

import (
	"fmt"
	"slices"
	"strconv"
)

// notMapped is the physical address of a range whose virtual address the
// page tables do not map (makedumpfile's NOT_PADDR): it is never erased.
const notMapped = ^uint64(0)

// Filter is a resolved config: the ranges to erase, sorted by physical
// address, and the erase commands they came from.
type Filter struct {
	nodes []rangeNode
	infos []eraseInfo
}

// rangeNode is one range to erase (makedumpfile's filter_info).
type rangeNode struct {
	vaddr, paddr uint64
	size         int64
	nullify      bool
	info         int // index in Filter.infos
	sizeIdx      int // which of the command's sizes it counts in
}

// eraseInfo is one erase command's ERASEINFO record: one size per range
// it made (one per element of a loop).
type eraseInfo struct {
	expr     string
	numSizes int
}

// add keeps a range found for the command cmd: a range starting where
// another starts only lengthens that one (and counts for no command).
func (f *Filter) add(n rangeNode, cmd *entry) {
	i, found := slices.BinarySearchFunc(f.nodes, n.paddr, func(r rangeNode, p uint64) int {
		switch {
		case r.paddr < p:
			return -1
		case r.paddr > p:
			return 1
		}
		return 0
	})
	if found {
		f.nodes[i].size = max(f.nodes[i].size, n.size)
		return
	}
	if cmd.eraseIdx == 0 {
		f.infos = append(f.infos, eraseInfo{expr: cmd.expr})
		cmd.eraseIdx = len(f.infos)
	}
	info := &f.infos[cmd.eraseIdx-1]
	info.numSizes++
	n.info, n.sizeIdx = cmd.eraseIdx-1, info.numSizes-1
	f.nodes = slices.Insert(f.nodes, i, n)
}

// Len is the number of ranges.
func (f *Filter) Len() int { return len(f.nodes) }

// Range is one range to erase, for messages and tests.
type Range struct {
	Vaddr, Paddr uint64
	Size         int64
	Nullify      bool
	Expr         string // the erase command it came from
}

// Ranges lists the ranges in physical order.
func (f *Filter) Ranges() []Range {
	out := make([]Range, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = Range{n.vaddr, n.paddr, n.size, n.nullify, f.infos[n.info].expr}
	}
	return out
}

// sizeText is a range's ERASEINFO size field.
func sizeText(nullify bool, size int64) string {
	if nullify {
		return "nullify\n"
	}
	return "size " + strconv.FormatInt(size, 10) + "\n"
}

// ELFNoteSize is the ERASEINFO note's descriptor size makedumpfile
// reserves in an ELF dump's headers, before any page is written: one line
// per range (get_size_eraseinfo). The text written after the pages
// (Erasure.Text) may be shorter; the rest is zeros.
func (f *Filter) ELFNoteSize() int {
	n := 0
	for _, r := range f.nodes {
		n += len("erase ") + len(f.infos[r.info].expr) + 1 + len(sizeText(r.nullify, r.size))
	}
	return n
}

// Erasure is a filter as one dump applies it: the bytes overwritten in
// each page it writes, and the ERASEINFO text of what was erased.
type Erasure struct {
	pageSize uint64
	ops      map[uint64][]op
	text     []byte
}

// op overwrites n bytes at off of a page with fill.
type op struct {
	off, n uint32
	fill   byte
}

// Apply decides what a dump that writes the pages written says yes to
// erases, as makedumpfile does while it writes them in pfn order: a range
// is erased where its first page is written, and goes on into the next
// page only if that one is written too; a range whose first page is left
// out is not erased anywhere, nor recorded. The result is the same in
// whatever order the pages are then written.
func (f *Filter) Apply(pageSize uint64, written func(pfn uint64) bool) *Erasure {
	e := &Erasure{pageSize: pageSize, ops: map[uint64][]op{}}
	sizes := make([][]int64, len(f.infos))
	erased := make([]bool, len(f.infos))
	for i, in := range f.infos {
		sizes[i] = make([]int64, in.numSizes)
	}
	var pending []rangeNode // the rest of ranges that go on into the next page
	nodes := f.nodes
	for len(nodes) > 0 || len(pending) > 0 {
		var pfn uint64
		switch {
		case len(pending) > 0:
			pfn = pending[0].paddr / pageSize
		case nodes[0].paddr == notMapped:
			nodes = nil
			continue
		default:
			pfn = nodes[0].paddr / pageSize
		}
		start, end := pfn*pageSize, (pfn+1)*pageSize
		in := pending
		pending = nil
		for len(nodes) > 0 && nodes[0].paddr < end && nodes[0].paddr != notMapped {
			in = append(in, nodes[0])
			nodes = nodes[1:]
		}
		if !written(pfn) {
			continue
		}
		for _, n := range in {
			if n.size > int64(end-n.paddr) {
				rest := n
				rest.paddr, rest.size = end, n.size-int64(end-n.paddr)
				pending = append(pending, rest)
				n.size = int64(end - n.paddr)
			}
			fill := byte('X')
			if n.nullify {
				fill = 0
			}
			e.ops[pfn] = append(e.ops[pfn], op{uint32(n.paddr - start), uint32(n.size), fill})
			erased[n.info] = true
			if n.nullify {
				sizes[n.info][n.sizeIdx] = -1
			} else {
				sizes[n.info][n.sizeIdx] += n.size
			}
		}
	}
	// makedumpfile's write_eraseinfo: a size never counted (a range
	// whose first page was left out) repeats the line before it.
	last := ""
	for i, in := range f.infos {
		if !erased[i] {
			continue
		}
		for _, s := range sizes[i] {
			switch {
			case s > 0:
				last = sizeText(false, s)
			case s == -1:
				last = sizeText(true, 0)
			}
			if last == "" {
				continue // makedumpfile writes what its stack held
			}
			e.text = fmt.Appendf(e.text, "erase %s %s", in.expr, last)
		}
	}
	return e
}

// Text is the ERASEINFO text: "erase EXPR size N" or "erase EXPR nullify"
// lines, one per range erased, by command.
func (e *Erasure) Text() []byte { return e.text }

// Touches tells whether the page pfn has bytes to erase.
func (e *Erasure) Touches(pfn uint64) bool {
	_, ok := e.ops[pfn]
	return ok
}

// Pages is the number of pages with bytes to erase.
func (e *Erasure) Pages() int { return len(e.ops) }

// Erase overwrites the bytes of page pfn, held in page, that the filter
// erases.
func (e *Erasure) Erase(pfn uint64, page []byte) {
	for _, o := range e.ops[pfn] {
		end := min(uint64(o.off)+uint64(o.n), uint64(len(page)))
		b := page[o.off:end]
		for i := range b {
			b[i] = o.fill
		}
	}
}

// Combine joins the erasures of disjoint sets of pages (a split dump's
// parts) into one for the copy pass; their texts are joined in order.
func Combine(es ...*Erasure) *Erasure {
	out := &Erasure{ops: map[uint64][]op{}}
	for _, e := range es {
		out.pageSize = e.pageSize
		for pfn, o := range e.ops {
			out.ops[pfn] = append(out.ops[pfn], o...)
		}
		out.text = append(out.text, e.text...)
	}
	return out
}
