package sink

import (
	"fmt"
	"slices"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
)

// A prioritised file written in order (WritePfns: a flattened stream, whose
// records must come in one order, or a split part) gets each priority
// chunk's data and then at once its descriptors, at their slots in the
// descriptor table (a record per run of consecutive slots in a stream);
// the bulk follows in pfn order as in WritePages, its descriptors with the
// priority ones merged back in at their pfns (the same bytes, written a
// second time: 24 bytes a priority page). So a descriptor never comes
// before its data, and any prefix of the stream, or a file stopped at any
// point, holds a consistent dump: every page whose descriptor landed, the
// landed priority pages among them (sink.FinishCut, Abort).

// slots computes the descriptor index of every priority pfn in [lo, hi):
// its rank among the file's dumpable pfns, in one forward sweep (which a
// bitmap made in cycles allows). Called before the copy pass, as the
// bitmap is not read while the pass's cursor runs over it.
func (p *prioDescs) slots(dumpable *bitmap.Bitmap) {
	last, rank := p.lo, uint64(0)
	for pfn := p.set.NextSet(p.lo); pfn < p.hi; pfn = p.set.NextSet(pfn + 1) {
		rank += dumpable.Count(last, pfn)
		p.slotPfns = append(p.slotPfns, pfn)
		p.slotIdx = append(p.slotIdx, rank)
		last = pfn
	}
}

// slotOf is the descriptor index of priority pfn pfn.
func (p *prioDescs) slotOf(pfn uint64) (uint64, error) {
	i, ok := slices.BinarySearch(p.slotPfns, pfn)
	if !ok {
		return 0, fmt.Errorf("priority: pfn %#x is not a priority page of this file", pfn)
	}
	return p.slotIdx[i], nil
}

// WritePfns is WritePages for a file that may be prioritised: pfns are the
// pages' pfns. A priority chunk (SetPriority's set, handed over before the
// bulk) goes out at once, data then descriptors; a bulk chunk as in
// WritePages, with the priority descriptors below its pages merged in.
func (k *Kdump) WritePfns(pfns []uint64, pages []Page, data []byte) error {
	p := k.prio
	if p == nil || len(pages) == 0 {
		return k.WritePages(pages, data)
	}
	if len(pfns) != len(pages) {
		return fmt.Errorf("priority: %d pfns for %d pages", len(pfns), len(pages))
	}
	if !p.sorted && p.set.Test(pfns[0]) {
		return k.writePriority(pfns, pages, data)
	}
	k.buffers()
	off := k.dataNext + uint64(len(k.data))
	if err := k.appendData(data); err != nil {
		return err
	}
	c := k.chunkDescs(off, pages)
	c.pfns = pfns
	k.descs = p.land(k.descs, c)
	if len(k.descs) >= descBufSize {
		return k.flushDescs()
	}
	return nil
}

// writePriority writes a priority chunk: its data (after the shared zero
// page, for the file's first data), then its descriptors at their slots,
// one write per run of consecutive slots. The descriptors written are
// kept, to be merged into the bulk's and, when the dump stops, to say
// which priority pages landed.
func (k *Kdump) writePriority(pfns []uint64, pages []Page, data []byte) error {
	if len(k.data) > 0 {
		if err := k.flushData(); err != nil {
			return err
		}
	}
	if err := k.writeZeroPage(); err != nil {
		return err
	}
	off := k.dataNext
	if err := k.writeData(data); err != nil {
		return err
	}
	b := k.chunkDescs(off, pages).b
	// start and first: the run of consecutive slots being gathered.
	start, first := 0, uint64(0)
	for i, pfn := range pfns {
		s, err := k.prio.slotOf(pfn)
		if err != nil {
			return err
		}
		if i > start && s != first+uint64(i-start) {
			if err := k.writeSlots(b[start*kdumpfmt.PageDescSize:i*kdumpfmt.PageDescSize], first); err != nil {
				return err
			}
			start = i
		}
		if i == start {
			first = s
		}
		d := pfnDesc{pfn: pfn}
		copy(d.desc[:], b[i*kdumpfmt.PageDescSize:])
		k.prio.descs = append(k.prio.descs, d)
	}
	return k.writeSlots(b[start*kdumpfmt.PageDescSize:], first)
}

// writeSlots writes the descriptors b at the descriptor table's slots from
// first on.
func (k *Kdump) writeSlots(b []byte, first uint64) error {
	if err := k.writeAt(b, k.layout.Descs+first*kdumpfmt.PageDescSize); err != nil {
		return fmt.Errorf("page descriptors: %w", err)
	}
	return nil
}

// chunkDescs fills the scratch chunk with the descriptors of pages whose
// data starts at file offset off: reused from chunk to chunk, as what
// takes them (land, writeSlots) copies them.
func (k *Kdump) chunkDescs(off uint64, pages []Page) *descChunk {
	need := len(pages) * kdumpfmt.PageDescSize
	if cap(k.scratch.b) < need {
		k.scratch.b = make([]byte, need)
	}
	k.scratch.b, k.scratch.pfns = k.scratch.b[:need], nil
	k.putDescs(k.scratch.b, off, pages)
	return &k.scratch
}

// putDescs fills d with the descriptors of pages whose data starts at
// file offset off.
func (k *Kdump) putDescs(d []byte, off uint64, pages []Page) {
	for i, p := range pages {
		desc := k.zeroDesc
		if !p.Zero {
			desc = kdumpfmt.PageDesc{Offset: int64(off), Size: p.Size, Flags: p.Flags}
			off += uint64(p.Size)
		}
		desc.Put(d[i*kdumpfmt.PageDescSize:])
	}
}
