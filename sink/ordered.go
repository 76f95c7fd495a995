package sink

import (
	"fmt"
	"slices"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/kdumpfmt"
)

// Kdump writes a kdump-compressed file whose chunks come in order, one at
// a time (pipeline.Writer): a flattened stream, whose records must come
// in one order, or a split part. Descriptors and data go through two
// buffers flushed with large positioned writes, so each region is written
// sequentially. (A regular file is written by the workers themselves:
// PlacedKdump. The bytes are the same.)
type Kdump struct {
	*kdumpFile
	descs []byte // buffered descriptors, to land at descNext
	data  []byte // buffered data, to land at dataNext
	// scratch is one chunk's descriptors on their way to descs.
	scratch descChunk
}

// NewKdump writes the headers, notes and bitmaps and returns a writer ready
// for chunks in order.
func NewKdump(out Output, m *Meta) (*Kdump, error) {
	f, err := newKdumpFile(out, m)
	if err != nil {
		return nil, err
	}
	return &Kdump{kdumpFile: f}, nil
}

// SetPriority makes the file prioritised (priority.go): set holds the
// priority pfns (each dumpable), whose chunks (chunk.Chunk.Priority) come
// before the bulk. A priority chunk goes out at once, its data and then
// its descriptors at their slots in the descriptor table (a record per
// run of consecutive slots in a stream); the bulk follows in pfn order,
// its descriptors with the priority ones merged back in at their pfns
// (the same bytes, written a second time: 24 bytes a priority page). So a
// descriptor never comes before its data, and any prefix of the stream,
// or a file stopped at any point, holds a consistent dump: every page
// whose descriptor landed, the landed priority pages among them (FinishCut,
// Abort). The slots are found here, before the copy pass; a split part
// takes the set's pfns in its own range. Call it before the first chunk.
func (k *Kdump) SetPriority(set *bitmap.Bitmap) error {
	if err := k.setPriority(set); err != nil {
		return err
	}
	k.prio.slots(k.meta.Dumpable)
	return nil
}

// buffers allocates the write buffers on first use, with the zero page
// (dump level bit 1) first in the data: a split dump opens every part at
// the start, but fills one at a time. release frees them again.
func (k *Kdump) buffers() {
	if k.data != nil {
		return
	}
	k.descs = make([]byte, 0, descBufSize)
	k.data = make([]byte, 0, dataBufSize)
	if k.meta.ZeroPage && k.dataNext == k.layout.Data {
		k.data = k.data[:k.meta.BlockSize]
		clear(k.data)
	}
}

func (k *Kdump) release() { k.descs, k.data = nil, nil }

// WriteChunk appends the descriptors and data of the next chunk in
// order. Large data goes straight to the output, small data through the
// buffer. The data is placed before the descriptors: a descriptor buffer
// that fills on the way is flushed after the data it points at
// (flushDescs), so no descriptor reaches the disk before its page (see
// Abort). In a prioritised file a priority chunk goes out at once
// (writePriority) and a bulk chunk's descriptors get the priority ones
// below its pages merged in.
func (k *Kdump) WriteChunk(c chunk.Chunk) error {
	p := k.prio
	if p != nil && len(c.Pages) > 0 {
		if len(c.Pfns) != len(c.Pages) {
			return fmt.Errorf("priority: %d pfns for %d pages", len(c.Pfns), len(c.Pages))
		}
		if c.Priority {
			return k.writePriority(c)
		}
	}
	k.buffers()
	off := k.dataNext + uint64(len(k.data)) // file offset of c.Data[0]
	if err := k.appendData(c.Data); err != nil {
		return err
	}
	d := k.chunkDescs(off, c.Pages)
	if p == nil || len(c.Pages) == 0 {
		return k.appendDescs(d.b)
	}
	d.pfns = c.Pfns
	k.descs = p.land(k.descs, d)
	if len(k.descs) >= descBufSize {
		return k.flushDescs()
	}
	return nil
}

// appendDescs buffers the descriptors b, flushing the buffer whenever the
// next descriptor does not fit.
func (k *Kdump) appendDescs(b []byte) error {
	for {
		room := (cap(k.descs) - len(k.descs)) / kdumpfmt.PageDescSize * kdumpfmt.PageDescSize
		n := min(room, len(b))
		k.descs = append(k.descs, b[:n]...)
		if b = b[n:]; len(b) == 0 {
			return nil
		}
		if err := k.flushDescs(); err != nil {
			return err
		}
	}
}

// appendData buffers data, or writes it straight out when it is large; it
// lands at the file offset dataNext+len(k.data) had on entry either way.
func (k *Kdump) appendData(data []byte) error {
	if len(k.data)+len(data) <= cap(k.data) {
		k.data = append(k.data, data...)
		return nil
	}
	if err := k.flushData(); err != nil {
		return err
	}
	if len(data) < cap(k.data)/4 {
		k.data = append(k.data, data...)
		return nil
	}
	return k.writeData(data)
}

// writeData writes p at dataNext, past the buffered data.
func (k *Kdump) writeData(p []byte) error {
	if err := k.writeAt(p, k.dataNext); err != nil {
		return fmt.Errorf("page data: %w", err)
	}
	k.dataNext += uint64(len(p))
	return nil
}

func (k *Kdump) flushData() error {
	if err := k.writeData(k.data); err != nil {
		return err
	}
	k.data = k.data[:0]
	return nil
}

// flushDescs writes the buffered descriptors, after the data they point
// at: a descriptor on disk always describes data that landed, which is
// what makes a dump cut short by a full disk analysable (see Abort).
func (k *Kdump) flushDescs() error {
	if err := k.flushData(); err != nil {
		return err
	}
	if err := k.writeAt(k.descs, k.descNext); err != nil {
		return fmt.Errorf("page descriptors: %w", err)
	}
	k.descNext += uint64(len(k.descs))
	k.descs = k.descs[:0]
	if k.prio != nil {
		k.prio.front = k.prio.pendEnd
	}
	return nil
}

// Close flushes the data, then the descriptors (flushDescs does both), as
// makedumpfile does, frees the buffers and writes the ERASEINFO.
func (k *Kdump) Close() error {
	k.buffers()
	if k.prio != nil {
		k.descs = k.prio.rest(k.descs)
	}
	if err := k.flushDescs(); err != nil {
		return err
	}
	k.release()
	return k.writeEraseinfo()
}

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

// writePriority writes a priority chunk: its data (after the shared zero
// page, for the file's first data), then its descriptors at their slots,
// one write per run of consecutive slots. The descriptors written are
// kept, to be merged into the bulk's and, when the dump stops, to say
// which priority pages landed.
func (k *Kdump) writePriority(c chunk.Chunk) error {
	if len(k.data) > 0 {
		if err := k.flushData(); err != nil {
			return err
		}
	}
	if err := k.writeZeroPage(); err != nil {
		return err
	}
	off := k.dataNext
	if err := k.writeData(c.Data); err != nil {
		return err
	}
	b := k.chunkDescs(off, c.Pages).b
	// start and first: the run of consecutive slots being gathered.
	start, first := 0, uint64(0)
	for i, pfn := range c.Pfns {
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
// takes them (appendDescs, land, writeSlots) copies them.
func (k *Kdump) chunkDescs(off uint64, pages []chunk.Page) *descChunk {
	need := len(pages) * kdumpfmt.PageDescSize
	if cap(k.scratch.b) < need {
		k.scratch.b = make([]byte, need)
	}
	k.scratch.b, k.scratch.pfns, k.scratch.priority = k.scratch.b[:need], nil, false
	k.putDescs(k.scratch.b, off, pages)
	return &k.scratch
}
