package sink

import (
	"fmt"
	"sync"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/internal/reorder"
	"pagepipe/kdumpfmt"
)

// PlacedKdump writes a kdump-compressed file whose chunks the copy pass's
// workers write themselves (pipeline.Placer): Place hands out, in order,
// where each chunk goes (its data offset and descriptor slots: only
// arithmetic), and WritePlaced, called by the workers at once and in any
// order, writes a chunk there straight from its buffer, data first, then
// its descriptors. The bytes are those Kdump writes in order.
type PlacedKdump struct {
	*kdumpFile
	places uint64 // chunks placed so far

	landMu sync.Mutex
	// landed holds the descriptors of chunks whose data landed before an
	// earlier chunk's, until the chunks before them landed too.
	landed reorder.Buffer[*descChunk]
	// pend holds the descriptors of the chunks landed in order, not yet
	// written; descsOut is the file offset past the descriptors written.
	pend     []byte
	descsOut uint64
}

// NewPlacedKdump writes the headers, notes and bitmaps and returns a
// writer ready for placed chunks.
func NewPlacedKdump(out Output, m *Meta) (*PlacedKdump, error) {
	f, err := newKdumpFile(out, m)
	if err != nil {
		return nil, err
	}
	return &PlacedKdump{kdumpFile: f, descsOut: f.descNext}, nil
}

// SetPriority makes the file prioritised (priority.go): set holds the
// priority pfns (each dumpable), whose chunks (chunk.Chunk.Priority) come
// before the bulk. Their descriptors are kept until the bulk reaches
// their pfns. Call it before the first chunk.
func (k *PlacedKdump) SetPriority(set *bitmap.Bitmap) error { return k.setPriority(set) }

// Place reserves the space of the next chunk in order: its descriptors'
// slots and its data. It only does arithmetic, but for the first chunk of
// a dump with a zero page, which writes it. It must be called in order
// and not concurrently; WritePlaced may then write the chunk from any
// goroutine.
func (k *PlacedKdump) Place(c chunk.Chunk) (chunk.Place, error) {
	if k.places == 0 {
		k.pend = make([]byte, 0, descBufSize)
		if err := k.writeZeroPage(); err != nil {
			return chunk.Place{}, err
		}
	}
	p := chunk.Place{Seq: k.places, DescOff: k.descNext, DataOff: k.dataNext}
	k.places++
	k.descNext += uint64(len(c.Pages)) * kdumpfmt.PageDescSize
	k.dataNext += uint64(len(c.Data))
	return p, nil
}

// descChunk is one chunk's descriptors on their way to the file, with
// the chunk's pfns and flag when the file is prioritised.
type descChunk struct {
	b        []byte
	pfns     []uint64
	priority bool
}

// descBufs are WritePlaced's descriptor buffers, one chunk's worth each.
var descBufs = sync.Pool{New: func() any { return new(descChunk) }}

// WritePlaced writes a placed chunk's data, then hands its descriptors to
// land, which writes them in order, 256 KiB at a time, once the data of
// every chunk before them landed too: so a descriptor on disk always
// points at data that landed (see Abort), and the descriptors cost a
// write per 42 chunks, not one each.
func (k *PlacedKdump) WritePlaced(at chunk.Place, c chunk.Chunk) error {
	if err := k.writeAt(c.Data, at.DataOff); err != nil {
		return fmt.Errorf("page data: %w", err)
	}
	bp := descBufs.Get().(*descChunk)
	need := len(c.Pages) * kdumpfmt.PageDescSize
	if cap(bp.b) < need {
		bp.b = make([]byte, need)
	}
	bp.pfns, bp.priority = bp.pfns[:0], c.Priority
	if k.prio != nil {
		bp.pfns = append(bp.pfns, c.Pfns...)
	}
	bp.b = bp.b[:need]
	k.putDescs(bp.b, at.DataOff, c.Pages)
	return k.land(at.Seq, bp)
}

// land records that chunk seq's data landed, with its descriptors, and
// moves the landed chunks' descriptors, in order, to the pending ones,
// writing those when they fill the buffer (under the lock: once per
// 256 KiB, and the pipeline's places are not held up by it).
func (k *PlacedKdump) land(seq uint64, bp *descChunk) error {
	k.landMu.Lock()
	defer k.landMu.Unlock()
	k.landed.Put(seq, bp)
	for bp, ok := k.landed.Next(); ok; bp, ok = k.landed.Next() {
		if k.prio != nil {
			k.pend = k.prio.land(k.pend, bp)
		} else {
			k.pend = append(k.pend, bp.b...)
		}
		descBufs.Put(bp)
	}
	if len(k.pend) >= descBufSize {
		return k.flushPending()
	}
	return nil
}

// flushPending writes the pending descriptors (under landMu).
func (k *PlacedKdump) flushPending() error {
	if err := k.writeAt(k.pend, k.descsOut); err != nil {
		return fmt.Errorf("page descriptors: %w", err)
	}
	k.descsOut += uint64(len(k.pend))
	k.pend = k.pend[:0]
	if k.prio != nil {
		k.prio.front = k.prio.pendEnd
	}
	return nil
}

// Close writes the last descriptors (every chunk's data was written by
// WritePlaced) and the ERASEINFO. A dump of no chunk still gets its zero
// page.
func (k *PlacedKdump) Close() error {
	if k.places == 0 {
		if err := k.writeZeroPage(); err != nil {
			return err
		}
	}
	k.landMu.Lock()
	defer k.landMu.Unlock()
	if k.prio != nil {
		k.pend = k.prio.rest(k.pend)
	}
	if err := k.flushPending(); err != nil {
		return err
	}
	return k.writeEraseinfo()
}
