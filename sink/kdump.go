// Package sink writes the copy pass's chunks (pagepipe/chunk) into an
// output format. The writers here know nothing about how pages were chosen
// or read; they get bitmaps and each dumped page's stored bytes, and they
// satisfy the pipeline's interfaces themselves: Kdump, Split and ELF take
// the chunks in order (pipeline.Writer), PlacedKdump has the workers write
// them at the places it hands out (pipeline.Placer). Each has its own
// Close and Abort; the kdump writers share the header writer (kdumpFile).
package sink

import (
	"fmt"
	"sync"
	"sync/atomic"

	"pagepipe/bitmap"
	"pagepipe/chunk"
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
	n   atomic.Uint64 // a PlacedKdump's chunks are written concurrently
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
	return m.WriteOut(buf, size, func(p []byte, at uint64) error { return w.writeAt(p, off+at) })
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

const (
	dataBufSize = 1 << 20
	descBufSize = 256 << 10
)

// kdumpFile is what both ways of writing a kdump-compressed file
// (header_version 6) share: the headers, notes and bitmaps written at the
// start, the descriptor loop, the ERASEINFO at the end, and, for a dump
// that cannot finish, the cut bitmap and the INCOMPLETE mark
// (incomplete.go).
type kdumpFile struct {
	posWriter
	layout   kdumpfmt.Layout
	zeroDesc kdumpfmt.PageDesc

	// descNext and dataNext are the file offsets of the next descriptor
	// and the next data byte: written (Kdump) or handed out (PlacedKdump).
	descNext, dataNext uint64

	status uint32 // the header's status, as written
	meta   *Meta

	sub       kdumpfmt.SubHeader // as written at the start
	eraseinfo []byte             // the ERASEINFO text, written by Close

	// prio, when set (SetPriority), holds the priority pages'
	// descriptors as they land (priority.go).
	prio *prioDescs
}

// newKdumpFile writes the headers, notes and bitmaps.
func newKdumpFile(out Output, m *Meta) (*kdumpFile, error) {
	bs := m.BlockSize
	l := kdumpfmt.NewLayout(bs, uint64(len(m.Notes)), m.MaxMapnr, m.NumDumpable)
	k := &kdumpFile{
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
	if err := k.writeBitmap(m.Present, l.Bitmap1, l.BitmapSize); err != nil {
		return nil, err
	}
	if err := k.writeBitmap(m.Dumpable, l.Bitmap2, l.BitmapSize); err != nil {
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

// Written returns the number of bytes written so far.
func (k *kdumpFile) Written() uint64 { return k.n.Load() }

// putDescs fills d with the descriptors of pages whose data starts at
// file offset off: the one descriptor loop of both writers.
func (k *kdumpFile) putDescs(d []byte, off uint64, pages []chunk.Page) {
	for i, p := range pages {
		desc := k.zeroDesc
		if !p.Zero {
			desc = kdumpfmt.PageDesc{Offset: int64(off), Size: p.Size, Flags: p.Flags}
			off += uint64(p.Size)
		}
		desc.Put(d[i*kdumpfmt.PageDescSize:])
	}
}

// writeZeroPage writes the shared zero page (dump level bit 1) where the
// data begins, ahead of a file's first data written without a buffer.
func (k *kdumpFile) writeZeroPage() error {
	if !k.meta.ZeroPage || k.dataNext != k.layout.Data {
		return nil
	}
	if err := k.writeAt(make([]byte, k.meta.BlockSize), k.dataNext); err != nil {
		return fmt.Errorf("zero page: %w", err)
	}
	k.dataNext += k.meta.BlockSize
	return nil
}

// writeEraseinfo writes the ERASEINFO text past the last page's data and
// the sub header again with its place (makedumpfile's
// write_kdump_eraseinfo and update_eraseinfo_of_sub_header).
func (k *kdumpFile) writeEraseinfo() error {
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
