// Package sink writes the ordered page stream into an output format. The
// writers here know nothing about how pages were chosen; they get bitmaps
// and, in pfn order, each dumped page's stored bytes.
package sink

import (
	"fmt"
	"sync"
	"sync/atomic"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
)

// Output is where a dump's bytes land: a regular file, or a flattened
// stream that turns each positioned write into a record.
type Output interface {
	WriteAt(p []byte, off int64) (int, error)
}

// posWriter writes to an Output at absolute offsets, wrapping errors with
// where they happened and counting the bytes written (the report's "Write
// bytes"). Every writer here embeds one.
type posWriter struct {
	out Output
	n   atomic.Uint64 // a Kdump's placed chunks are written concurrently
}

func (w *posWriter) writeAt(p []byte, off uint64) error {
	if len(p) == 0 {
		return nil
	}
	if _, err := w.out.WriteAt(p, int64(off)); err != nil {
		return fmt.Errorf("write %d bytes at offset %d: %w", len(p), off, err)
	}
	w.n.Add(uint64(len(p)))
	return nil
}

// bitmapBufs hold writeBitmap's pieces. One buffer serves every bitmap of
// a run (a file's two, a split dump's two per part): each fresh page of it
// is a page fault, which on a virtual machine costs tens of microseconds,
// paid before the copy pass starts.
var bitmapBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// writeBitmap writes one bitmap, padded with zeros to size bytes, in
// 64 KiB pieces: small, as it is paid on top of the bitmaps.
func (w *posWriter) writeBitmap(m *bitmap.Bitmap, off, size uint64) error {
	pb := bitmapBufs.Get().(*[64 << 10]byte)
	defer bitmapBufs.Put(pb)
	buf := pb[:min(size, uint64(len(pb)))]
	for done := uint64(0); done < size; {
		n := min(uint64(len(buf)), size-done)
		m.PutBytes(buf[:n], done)
		if err := w.writeAt(buf[:n], off+done); err != nil {
			return fmt.Errorf("bitmap: %w", err)
		}
		done += n
	}
	// A bitmap made in cycles (bitmap.NewWindowed) says here whether a
	// cycle could not be made.
	return m.Err()
}

// Meta is everything in a kdump file besides the pages.
type Meta struct {
	BlockSize uint64
	Utsname   [kdumpfmt.UtsnameSize]byte
	CrashTime int64
	NrCPUs    int32
	PhysBase  uint64
	DumpLevel int32
	// Status holds the compression flag of the whole dump.
	Status uint32
	// Notes is the input's PT_NOTE contents; the VMCOREINFO text is at
	// Notes[VmcoreinfoOff:][:VmcoreinfoSize] (size 0: none).
	Notes                         []byte
	VmcoreinfoOff, VmcoreinfoSize uint64
	MaxMapnr                      uint64
	Present, Dumpable             *bitmap.Bitmap
	NumDumpable                   uint64
	// ZeroPage: dump level bit 1; all zero pages share one raw zero page
	// stored first in the data area.
	ZeroPage bool
	// Split, when set, makes the file one part of a split dump (--split):
	// its sub header says split = 1 with the part's pfn range, and it gets
	// only the pages of that range. Everything else stays the whole dump's
	// (bitmaps, NumDumpable, so the descriptor area is reserved for every
	// dumpable page and page data starts at the same offset in each part).
	Split *SplitRange
	// Eraseinfo, when set, gives the ERASEINFO text of the file (of the
	// whole dump for a nil range, of a split part's range otherwise):
	// what --config erased there, after a refiltered dump's own. It is
	// written after the last page's data and the sub header says where,
	// as makedumpfile writes it.
	Eraseinfo func(*SplitRange) []byte
}

// SplitRange is the pfns [Start, End) one split file holds.
type SplitRange struct{ Start, End uint64 }

// Page is one dumped page as the workers produced it.
type Page struct {
	Size  uint32 // bytes of data for this page in the chunk's data
	Flags uint32 // compression flag, 0 raw
	Zero  bool   // use the shared zero page; no data
}

const (
	dataBufSize = 1 << 20
	descBufSize = 256 << 10
)

// Kdump writes a kdump-compressed file (header_version 6), in one of two
// ways, not both:
//
//   - WritePages takes the pages in order: descriptors and data go
//     through two buffers flushed with large positioned writes, so each
//     region is written sequentially (a flattened stream's records come
//     in one order whatever the workers);
//   - Reserve hands out, in order, where each chunk of pages goes (its
//     data offset and descriptor slots: only arithmetic), and WriteReserved,
//     called by the pipeline's workers at once and in any order, writes a
//     chunk there straight from its buffer, data first, then its
//     descriptors. The bytes, and so the file, are the same.
type Kdump struct {
	posWriter
	layout   kdumpfmt.Layout
	zeroDesc kdumpfmt.PageDesc

	descs    []byte
	descNext uint64 // file offset of the next descriptor
	data     []byte
	dataNext uint64 // file offset of the next data byte

	status uint32 // the header's status, as written
	meta   *Meta

	// Chunks written by Reserve and WriteReserved instead of WritePages.
	placed bool
	places uint64 // chunks placed so far
	landMu sync.Mutex
	landed uint64 // chunks whose data landed, in order from the first
	// early holds the descriptors of chunks whose data landed before an
	// earlier chunk's; pend, those of the landed chunks, in order, not yet
	// written; descsOut is the file offset past the descriptors written.
	early    map[uint64]*descChunk
	pend     []byte
	descsOut uint64

	sub       kdumpfmt.SubHeader // as written at the start
	eraseinfo []byte             // the ERASEINFO text, written by Close

	// prio, when set (SetPriority), holds the priority pages' descriptors
	// as they land (priority.go, ordered.go); scratch is WritePfns's
	// descriptors of one chunk.
	prio    *prioDescs
	scratch descChunk
}

// NewKdump writes the headers, notes and bitmaps and returns a writer ready
// for pages.
func NewKdump(out Output, m *Meta) (*Kdump, error) {
	bs := m.BlockSize
	l := kdumpfmt.NewLayout(bs, uint64(len(m.Notes)), m.MaxMapnr, m.NumDumpable)
	k := &Kdump{
		posWriter: posWriter{out: out}, layout: l,
		descNext: l.Descs, dataNext: l.Data,
		status: m.Status, meta: m,
	}
	h := kdumpfmt.Header{
		HeaderVersion: kdumpfmt.HeaderVersion,
		Utsname:       m.Utsname,
		TimestampSec:  m.CrashTime,
		Status:        m.Status,
		BlockSize:     int32(bs),
		SubHdrSize:    int32(l.SubHdrBlocks),
		BitmapBlocks:  uint32(l.BitmapBlocks),
		MaxMapnr:      uint32(min(m.MaxMapnr, 1<<32-1)),
		NrCPUs:        m.NrCPUs,
	}
	copy(h.Signature[:], kdumpfmt.Signature)
	sub := kdumpfmt.SubHeader{
		PhysBase:   m.PhysBase,
		DumpLevel:  m.DumpLevel,
		OffsetNote: l.NoteOffset,
		SizeNote:   uint64(len(m.Notes)),
		MaxMapnr64: m.MaxMapnr,
	}
	if m.VmcoreinfoSize != 0 {
		sub.OffsetVmcoreinfo = l.NoteOffset + m.VmcoreinfoOff
		sub.SizeVmcoreinfo = m.VmcoreinfoSize
	}
	if r := m.Split; r != nil {
		sub.Split = 1
		sub.StartPFN, sub.EndPFN = min(r.Start, 1<<32-1), min(r.End, 1<<32-1)
		sub.StartPFN64, sub.EndPFN64 = r.Start, r.End
	}
	k.sub = sub
	if m.Eraseinfo != nil {
		k.eraseinfo = m.Eraseinfo(m.Split)
	}
	// makedumpfile's order: header, notes, sub header (it matters only for
	// the record order of a flattened stream).
	if err := k.writeAt(h.Marshal(), 0); err != nil {
		return nil, err
	}
	if err := k.writeAt(m.Notes, l.NoteOffset); err != nil {
		return nil, err
	}
	if err := k.writeAt(sub.Marshal(), bs); err != nil {
		return nil, err
	}
	if err := k.writeBitmap(m.Present, l.Bitmap1, l.BitmapBlocks/2*bs); err != nil {
		return nil, err
	}
	if err := k.writeBitmap(m.Dumpable, l.Bitmap2, l.BitmapBlocks/2*bs); err != nil {
		return nil, err
	}
	n := m.NumDumpable
	if r := m.Split; r != nil {
		n = m.Dumpable.Count(r.Start, r.End)
	}
	reserve(out, int64(l.Descs), int64(n*kdumpfmt.PageDescSize))
	if m.ZeroPage {
		k.zeroDesc = kdumpfmt.PageDesc{Offset: int64(l.Data), Size: uint32(bs)}
	}
	return k, nil
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

// Layout returns where each region of the file is.
func (k *Kdump) Layout() kdumpfmt.Layout { return k.layout }

// Written returns the number of bytes written so far.
func (k *Kdump) Written() uint64 { return k.n.Load() }

// WritePages appends the descriptors and data of consecutive dumped pages;
// data holds the stored bytes of the non-zero pages, back to back. Large
// data goes straight to the output, small data through the buffer. The
// data is placed before the descriptors: a descriptor buffer that fills on
// the way is flushed after the data it points at (flushDescs), so no
// descriptor reaches the disk before its page (see Abort).
func (k *Kdump) WritePages(pages []Page, data []byte) error {
	k.buffers()
	off := k.dataNext + uint64(len(k.data)) // file offset of data[0]
	if err := k.appendData(data); err != nil {
		return err
	}
	var d [kdumpfmt.PageDescSize]byte
	for _, p := range pages {
		desc := k.zeroDesc
		if !p.Zero {
			desc = kdumpfmt.PageDesc{Offset: int64(off), Size: p.Size, Flags: p.Flags}
			off += uint64(p.Size)
		}
		desc.Put(d[:])
		if len(k.descs)+len(d) > cap(k.descs) {
			if err := k.flushDescs(); err != nil {
				return err
			}
		}
		k.descs = append(k.descs, d[:]...)
	}
	return nil
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
// makedumpfile does, and frees the buffers.
func (k *Kdump) Close() error {
	if k.placed {
		// Every chunk's data was written by WriteReserved: the last
		// descriptors are left.
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

// writeEraseinfo writes the ERASEINFO text past the last page's data and
// the sub header again with its place (makedumpfile's
// write_kdump_eraseinfo and update_eraseinfo_of_sub_header).
func (k *Kdump) writeEraseinfo() error {
	if len(k.eraseinfo) == 0 {
		return nil
	}
	if err := k.writeAt(k.eraseinfo, k.dataNext); err != nil {
		return fmt.Errorf("eraseinfo: %w", err)
	}
	k.sub.OffsetEraseinfo, k.sub.SizeEraseinfo = k.dataNext, uint64(len(k.eraseinfo))
	k.dataNext += uint64(len(k.eraseinfo))
	if err := k.writeAt(k.sub.Marshal(), k.meta.BlockSize); err != nil {
		return fmt.Errorf("sub header: %w", err)
	}
	return nil
}

// Place is where one chunk of pages goes in a kdump file (Kdump.Reserve).
type Place struct {
	seq     uint64 // the chunk's number in order
	descOff uint64 // file offset of its first descriptor
	dataOff uint64 // file offset of its first data byte
}

// Reserve reserves the space of the next chunk of pages in order: their
// descriptors' slots and dataLen bytes of data. It only does arithmetic,
// but for the first chunk of a dump with a zero page, which writes it. It
// must be called in order and not concurrently; WriteReserved may then
// write the chunk from any goroutine.
func (k *Kdump) Reserve(pages []Page, dataLen int) (Place, error) {
	if !k.placed {
		k.placed, k.descsOut = true, k.descNext
		k.pend = make([]byte, 0, descBufSize)
		if err := k.writeZeroPage(); err != nil {
			return Place{}, err
		}
	}
	p := Place{seq: k.places, descOff: k.descNext, dataOff: k.dataNext}
	k.places++
	k.descNext += uint64(len(pages)) * kdumpfmt.PageDescSize
	k.dataNext += uint64(dataLen)
	return p, nil
}

// writeZeroPage writes the shared zero page (dump level bit 1) where the
// data begins, ahead of a file's first data written without the buffer.
func (k *Kdump) writeZeroPage() error {
	if !k.meta.ZeroPage || k.dataNext != k.layout.Data {
		return nil
	}
	if err := k.writeAt(make([]byte, k.meta.BlockSize), k.dataNext); err != nil {
		return fmt.Errorf("zero page: %w", err)
	}
	k.dataNext += k.meta.BlockSize
	return nil
}

// descChunk is one chunk's descriptors on their way to the file, with
// the chunk's pfns when the file is prioritised.
type descChunk struct {
	b    []byte
	pfns []uint64
}

// descBufs are WriteReserved's descriptor buffers, one chunk's worth each.
var descBufs = sync.Pool{New: func() any { return new(descChunk) }}

// WriteReserved writes a reserved chunk's data, then hands its descriptors to
// land, which writes them in order, 256 KiB at a time, once the data of
// every chunk before them landed too: so a descriptor on disk always
// points at data that landed (see Abort), and the descriptors cost a
// write per 42 chunks, not one each.
//
// pfns are the chunk's pfns; only a prioritised file uses them.
func (k *Kdump) WriteReserved(at Place, pfns []uint64, pages []Page, data []byte) error {
	if err := k.writeAt(data, at.dataOff); err != nil {
		return fmt.Errorf("page data: %w", err)
	}
	bp := descBufs.Get().(*descChunk)
	need := len(pages) * kdumpfmt.PageDescSize
	if cap(bp.b) < need {
		bp.b = make([]byte, need)
	}
	if k.prio != nil {
		bp.pfns = append(bp.pfns[:0], pfns...)
	}
	bp.b = bp.b[:need]
	k.putDescs(bp.b, at.dataOff, pages)
	return k.land(at.seq, bp)
}

// land records that chunk seq's data landed, with its descriptors, and
// moves the landed chunks' descriptors, in order, to the pending ones,
// writing those when they fill the buffer (under the lock: once per
// 256 KiB, and the pipeline's places are not held up by it).
func (k *Kdump) land(seq uint64, bp *descChunk) error {
	k.landMu.Lock()
	defer k.landMu.Unlock()
	if seq != k.landed {
		if k.early == nil {
			k.early = map[uint64]*descChunk{}
		}
		k.early[seq] = bp
		return nil
	}
	for ok := true; ok; {
		if k.prio != nil {
			k.pend = k.prio.land(k.pend, bp)
		} else {
			k.pend = append(k.pend, bp.b...)
		}
		descBufs.Put(bp)
		k.landed++
		if bp, ok = k.early[k.landed]; ok {
			delete(k.early, k.landed)
		}
	}
	if len(k.pend) >= descBufSize {
		return k.flushPending()
	}
	return nil
}

// flushPending writes the pending descriptors (under landMu).
func (k *Kdump) flushPending() error {
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
