package source

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"pagepipe/bitmap"
	"pagepipe/codec"
	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
)

// Dump is an open kdump-compressed file (pagepipe's or makedumpfile's),
// read through its page descriptors.
type Dump struct {
	Header   *kdumpfmt.Header
	Sub      *kdumpfmt.SubHeader
	Present  *bitmap.Bitmap
	Dumpable *bitmap.Bitmap
	MaxMapnr uint64
	Path     string

	f     dumpFile
	size  int64
	descs uint64      // file offset of the descriptor array
	ranks []uint64    // dumpable pages before each rankStep-pfn block
	notes Info        // the copied ELF notes, walked
	arch  kernel.Arch // decided by checkArch

	mu     sync.Mutex // guards shared, the reader behind ReadPage and ReadPhys
	shared *dumpReader
}

const rankStep = 4096

// dumpFile is what a Dump reads: the open file (or, in the fuzz target,
// the bytes themselves).
type dumpFile interface {
	io.ReaderAt
	io.Closer
}

// OpenDump opens a kdump-compressed file and loads its headers, notes and
// bitmaps.
func OpenDump(path string) (*Dump, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	var d *Dump
	if err == nil {
		d, err = readDump(f, st.Size())
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d.Path = path
	return d, nil
}

// readDump loads the headers, notes and bitmaps of the size-byte dump f.
// Its work is bounded by size: the bitmaps must lie within the file, and
// max_mapnr within them.
func readDump(f dumpFile, size int64) (*Dump, error) {
	d := &Dump{f: f, size: size}
	hb := make([]byte, kdumpfmt.HeaderSize)
	var err error
	if _, err = f.ReadAt(hb, 0); err != nil {
		return nil, fmt.Errorf("read kdump header: %w", err)
	}
	if d.Header, err = kdumpfmt.UnmarshalHeader(hb); err != nil {
		return nil, err
	}
	d.shared = d.newDumpReader()
	bs := uint64(d.Header.BlockSize)
	sb := make([]byte, kdumpfmt.SubHeaderSize)
	if _, err := f.ReadAt(sb, int64(bs)); err != nil {
		return nil, fmt.Errorf("read kdump sub header: %w", err)
	}
	if d.Sub, err = kdumpfmt.UnmarshalSubHeader(sb); err != nil {
		return nil, err
	}
	reg := kdumpfmt.LayoutOf(d.Header, d.Sub)
	d.MaxMapnr = reg.MaxMapnr
	half := reg.BitmapSize
	if d.MaxMapnr > half*8 {
		return nil, fmt.Errorf("kdump header: max_mapnr %d does not fit a %d-byte bitmap", d.MaxMapnr, half)
	}
	bm1 := reg.Bitmap1
	d.descs = reg.Descs
	if d.descs > uint64(d.size) {
		return nil, fmt.Errorf("kdump header: bitmaps end at %d, past the end of the %d-byte file", d.descs, d.size)
	}
	if s := d.Sub; s.SizeNote > 0 && s.SizeNote <= uint64(d.size) && s.OffsetNote <= uint64(d.size)-s.SizeNote {
		d.notes.Notes = make([]byte, s.SizeNote)
		if _, err := f.ReadAt(d.notes.Notes, int64(s.OffsetNote)); err != nil {
			return nil, fmt.Errorf("read notes: %w", err)
		}
		if err := d.notes.walkNotes(0); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, half)
	if _, err := f.ReadAt(buf, int64(bm1)); err != nil {
		return nil, fmt.Errorf("read 1st bitmap: %w", err)
	}
	d.Present = bitmap.FromBytes(buf, d.MaxMapnr)
	if _, err := f.ReadAt(buf, int64(bm1+half)); err != nil {
		return nil, fmt.Errorf("read 2nd bitmap: %w", err)
	}
	d.Dumpable = bitmap.FromBytes(buf, d.MaxMapnr)
	var n uint64
	for pfn := uint64(0); pfn < d.MaxMapnr; pfn += rankStep {
		d.ranks = append(d.ranks, n)
		n += d.Dumpable.Count(pfn, pfn+rankStep)
	}
	return d, nil
}

// Close closes the file.
func (d *Dump) Close() error { return d.f.Close() }

// rank is the number of dumped pfns below pfn.
func (d *Dump) rank(pfn uint64) uint64 {
	if pfn >= d.MaxMapnr {
		return d.NumDumpable()
	}
	return d.ranks[pfn/rankStep] + d.Dumpable.Count(pfn/rankStep*rankStep, pfn)
}

// NumDumpable is the number of page descriptors.
func (d *Dump) NumDumpable() uint64 {
	return d.Dumpable.Count(0, d.MaxMapnr)
}

// ErrNotDumped is returned for a pfn that the dump does not hold.
var ErrNotDumped = errors.New("page not dumped")

// ErrLost is returned for a page whose data was lost (incomplete dump).
var ErrLost = errors.New("page lost: incomplete dump")

// Desc returns the page descriptor of pfn.
func (d *Dump) Desc(pfn uint64) (kdumpfmt.PageDesc, error) {
	start, end := uint64(0), d.MaxMapnr
	if d.Sub.Split != 0 {
		// A split part holds the descriptors of its own pfn range only,
		// counted from its start (both bitmaps cover the whole machine).
		start, end = d.Sub.StartPFN64, min(d.Sub.EndPFN64, d.MaxMapnr)
	}
	if pfn < start || pfn >= end || !d.Dumpable.Test(pfn) {
		return kdumpfmt.PageDesc{}, ErrNotDumped
	}
	k := d.rank(pfn) - d.rank(start)
	var b [kdumpfmt.PageDescSize]byte
	off := d.descs + k*kdumpfmt.PageDescSize
	if _, err := d.f.ReadAt(b[:], int64(off)); err != nil {
		return kdumpfmt.PageDesc{}, fmt.Errorf("read page desc %d of pfn %#x: %w", k, pfn, err)
	}
	return kdumpfmt.UnmarshalPageDesc(b[:]), nil
}

// ReadPage reads pfn's page into dst (block size bytes). Safe for
// concurrent use, but serialised: workers use NewReader.
func (d *Dump) ReadPage(pfn uint64, dst []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.shared.readPage(pfn, dst)
}

// Notes returns the ELF notes copied into the dump.
func (d *Dump) Notes() ([]byte, int, uint64, uint64) {
	return d.notes.Notes, d.notes.NrCPUs, d.notes.VmcoreinfoOff, d.notes.VmcoreinfoSize
}

// Pfns is the dump's max_mapnr.
func (d *Dump) Pfns() uint64 { return d.MaxMapnr }

// Bitmaps returns copies of the dump's bitmaps, cut at maxMapnr: a dump
// being refiltered keeps out what it already left out.
func (d *Dump) Bitmaps(maxMapnr uint64, _ PartialPages) (present, dumpable *bitmap.Bitmap) {
	present, dumpable = d.Present.Cut(maxMapnr), d.Dumpable.Cut(maxMapnr)
	if d.Sub.Split != 0 { // a split part holds its own range only
		dumpable.ClearRange(0, d.Sub.StartPFN64)
		dumpable.ClearRange(d.Sub.EndPFN64, dumpable.Len())
	}
	return present, dumpable
}

// ReadPhys reads physical memory from the dumped pages; pages the dump
// does not hold read as zeros.
func (d *Dump) ReadPhys(paddr uint64, p []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.shared.readPhys(paddr, p)
}

// NewReader returns a reader with its own decompressors, for one worker.
func (d *Dump) NewReader(int, bool) Reader { return d.newDumpReader() }

// dumpReader reads and decompresses pages for one goroutine.
type dumpReader struct {
	d      *Dump
	dec    codec.Decoders
	stored []byte
	page   []byte
	buf    []byte
}

func (d *Dump) newDumpReader() *dumpReader {
	bs := int(d.Header.BlockSize) // a power of two from 512 on: UnmarshalHeader checks it
	return &dumpReader{d: d, dec: codec.Decoders{}, stored: make([]byte, bs), page: make([]byte, bs)}
}

func (r *dumpReader) Page(pfn uint64) ([]byte, error) {
	if err := r.readPage(pfn, r.page); err != nil {
		return nil, err
	}
	return r.page, nil
}

func (r *dumpReader) SlicePhys(paddr uint64, n int) ([]byte, error) {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	return r.buf, r.readPhys(paddr, r.buf)
}

func (r *dumpReader) Close() {}

func (r *dumpReader) readPhys(paddr uint64, p []byte) error {
	bs := uint64(len(r.page))
	for len(p) > 0 {
		pfn, off := paddr/bs, paddr%bs
		n := min(uint64(len(p)), bs-off)
		switch err := r.readPage(pfn, r.page); err {
		case nil:
			copy(p[:n], r.page[off:])
		case ErrNotDumped, ErrLost:
			clear(p[:n])
		default:
			return err
		}
		p, paddr = p[n:], paddr+n
	}
	return nil
}

func (r *dumpReader) readPage(pfn uint64, dst []byte) error {
	d := r.d
	desc, err := d.Desc(pfn)
	if err != nil {
		return err
	}
	bs := uint32(d.Header.BlockSize)
	switch {
	case desc.Offset == 0:
		return ErrLost
	case desc.Size > bs || desc.Offset < 0 || desc.Offset > d.size-int64(desc.Size):
		return fmt.Errorf("pfn %#x: page desc {offset %d, size %d} outside the %d-byte file", pfn, desc.Offset, desc.Size, d.size)
	case desc.Flags&kdumpfmt.CompressionMask == 0 && desc.Size != bs:
		return fmt.Errorf("pfn %#x: raw page of %d bytes, want %d", pfn, desc.Size, bs)
	}
	if desc.Flags&kdumpfmt.CompressionMask == 0 {
		if _, err := d.f.ReadAt(dst[:bs], desc.Offset); err != nil {
			return fmt.Errorf("read pfn %#x: %w", pfn, err)
		}
		return nil
	}
	stored := r.stored[:desc.Size]
	if _, err := d.f.ReadAt(stored, desc.Offset); err != nil && err != io.EOF {
		return fmt.Errorf("read pfn %#x: %w", pfn, err)
	}
	if err := r.dec.Decompress(desc.Flags&kdumpfmt.CompressionMask, dst[:bs], stored); err != nil {
		return fmt.Errorf("pfn %#x: %w", pfn, err)
	}
	return nil
}
