// Package kdumpfmt holds the on-disk structures of makedumpfile's
// kdump-compressed ("diskdump") format and of its flattened stream form,
// with their byte encodings. It does no I/O policy: the writer lives in
// package sink, the reader in package source.
//
// Layout of a kdump-compressed file (x86_64, header_version 6), in blocks of
// BlockSize bytes (the crashed kernel's page size):
//
//	block 0                      Header (464 bytes; the rest of the block is a hole)
//	block 1                      SubHeader (104 bytes), then the ELF notes copied verbatim
//	block 1+SubHdrSize           1st bitmap (pfn present in memory)
//	... + BitmapBlocks/2         2nd bitmap (pfn dumped)
//	block 1+SubHdrSize+Bitmap    one PageDesc per set bit of the 2nd bitmap, in pfn order
//	right after the descriptors  page data, packed, in pfn order
//
// Everything is little-endian except the flattened stream's record headers,
// which are big-endian on every host.
package kdumpfmt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes and constants of the format.
const (
	Signature        = "KDUMP   "
	HeaderVersion    = 6
	HeaderSize       = 464
	SubHeaderSize    = 104
	PageDescSize     = 24
	UtsnameFieldSize = 65
	UtsnameSize      = 6 * UtsnameFieldSize
)

// Status flags of Header.Status. The compression bits double as
// PageDesc.Flags values.
const (
	StatusZlib            = 0x01
	StatusLZO             = 0x02
	StatusSnappy          = 0x04
	StatusIncomplete      = 0x08
	StatusExcludedVmemmap = 0x10
	StatusZstd            = 0x20
	// StatusLZ4 is a pagepipe extension (no other reader knows it); see
	// docs/format.md. pagepipe converts such dumps to a standard codec.
	StatusLZ4 = 0x40

	// CompressionMask covers every per-page compression flag.
	CompressionMask = StatusZlib | StatusLZO | StatusSnappy | StatusZstd | StatusLZ4
)

// Header is disk_dump_header, as laid out on x86_64.
type Header struct {
	Signature     [8]byte
	HeaderVersion int32
	Utsname       [UtsnameSize]byte // sysname, nodename, release, version, machine, domainname
	TimestampSec  int64             // CRASHTIME from VMCOREINFO
	TimestampUsec int64
	Status        uint32
	BlockSize     int32
	SubHdrSize    int32  // blocks used by the sub header and the notes
	BitmapBlocks  uint32 // blocks used by both bitmaps together
	MaxMapnr      uint32 // min(max_mapnr, 2^32-1); readers use SubHeader.MaxMapnr64
	TotalRAM      uint32 // never set by makedumpfile
	DeviceBlocks  uint32
	WrittenBlocks uint32
	CurrentCPU    uint32
	NrCPUs        int32 // NT_PRSTATUS notes named CORE in the input
}

// Utsfield returns utsname field i (0 sysname … 5 domainname) as a string.
func (h *Header) Utsfield(i int) string {
	f := h.Utsname[i*UtsnameFieldSize : (i+1)*UtsnameFieldSize]
	if n := bytes.IndexByte(f, 0); n >= 0 {
		f = f[:n]
	}
	return string(f)
}

// StatusOffset is where disk_dump_header.status lies in the header: the one
// field rewritten after the fact, when a dump is marked incomplete.
const StatusOffset = 424

// Marshal encodes the header into its 464 on-disk bytes.
func (h *Header) Marshal() []byte {
	b := make([]byte, HeaderSize)
	copy(b[0:8], h.Signature[:])
	le.PutUint32(b[8:], uint32(h.HeaderVersion))
	copy(b[12:402], h.Utsname[:])
	le.PutUint64(b[408:], uint64(h.TimestampSec))
	le.PutUint64(b[416:], uint64(h.TimestampUsec))
	le.PutUint32(b[StatusOffset:], h.Status)
	le.PutUint32(b[428:], uint32(h.BlockSize))
	le.PutUint32(b[432:], uint32(h.SubHdrSize))
	le.PutUint32(b[436:], h.BitmapBlocks)
	le.PutUint32(b[440:], h.MaxMapnr)
	le.PutUint32(b[444:], h.TotalRAM)
	le.PutUint32(b[448:], h.DeviceBlocks)
	le.PutUint32(b[452:], h.WrittenBlocks)
	le.PutUint32(b[456:], h.CurrentCPU)
	le.PutUint32(b[460:], uint32(h.NrCPUs))
	return b
}

// UnmarshalHeader decodes and sanity-checks a main header.
func UnmarshalHeader(b []byte) (*Header, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("kdump header: %d bytes, want %d", len(b), HeaderSize)
	}
	h := &Header{}
	copy(h.Signature[:], b[0:8])
	if string(h.Signature[:]) != Signature && string(h.Signature[:]) != "DISKDUMP" {
		return nil, fmt.Errorf("kdump header: bad signature %q", h.Signature[:])
	}
	h.HeaderVersion = int32(le.Uint32(b[8:]))
	copy(h.Utsname[:], b[12:402])
	h.TimestampSec = int64(le.Uint64(b[408:]))
	h.TimestampUsec = int64(le.Uint64(b[416:]))
	h.Status = le.Uint32(b[StatusOffset:])
	h.BlockSize = int32(le.Uint32(b[428:]))
	h.SubHdrSize = int32(le.Uint32(b[432:]))
	h.BitmapBlocks = le.Uint32(b[436:])
	h.MaxMapnr = le.Uint32(b[440:])
	h.TotalRAM = le.Uint32(b[444:])
	h.DeviceBlocks = le.Uint32(b[448:])
	h.WrittenBlocks = le.Uint32(b[452:])
	h.CurrentCPU = le.Uint32(b[456:])
	h.NrCPUs = int32(le.Uint32(b[460:]))
	switch {
	case h.BlockSize < 512 || h.BlockSize > 1<<20 || h.BlockSize&(h.BlockSize-1) != 0:
		return nil, fmt.Errorf("kdump header: bad block size %d", h.BlockSize)
	case h.SubHdrSize < 0 || h.SubHdrSize > 1<<20:
		return nil, fmt.Errorf("kdump header: bad sub header size %d blocks", h.SubHdrSize)
	case h.BitmapBlocks == 0 || h.BitmapBlocks%2 != 0:
		return nil, fmt.Errorf("kdump header: bad bitmap size %d blocks", h.BitmapBlocks)
	}
	return h, nil
}

// SubHeader is kdump_sub_header for 64-bit hosts.
type SubHeader struct {
	PhysBase         uint64
	DumpLevel        int32
	Split            int32
	StartPFN         uint64 // deprecated 32-bit-clipped copies
	EndPFN           uint64
	OffsetVmcoreinfo uint64 // file offset of the VMCOREINFO note's text
	SizeVmcoreinfo   uint64
	OffsetNote       uint64
	SizeNote         uint64
	OffsetEraseinfo  uint64
	SizeEraseinfo    uint64
	StartPFN64       uint64 // split files only; end exclusive
	EndPFN64         uint64
	MaxMapnr64       uint64
}

// Marshal encodes the sub header into its 104 on-disk bytes.
func (s *SubHeader) Marshal() []byte {
	b := make([]byte, SubHeaderSize)
	le.PutUint64(b[0:], s.PhysBase)
	le.PutUint32(b[8:], uint32(s.DumpLevel))
	le.PutUint32(b[12:], uint32(s.Split))
	for i, v := range []uint64{s.StartPFN, s.EndPFN, s.OffsetVmcoreinfo, s.SizeVmcoreinfo,
		s.OffsetNote, s.SizeNote, s.OffsetEraseinfo, s.SizeEraseinfo,
		s.StartPFN64, s.EndPFN64, s.MaxMapnr64} {
		le.PutUint64(b[16+8*i:], v)
	}
	return b
}

// UnmarshalSubHeader decodes a sub header.
func UnmarshalSubHeader(b []byte) (*SubHeader, error) {
	if len(b) < SubHeaderSize {
		return nil, fmt.Errorf("kdump sub header: %d bytes, want %d", len(b), SubHeaderSize)
	}
	s := &SubHeader{
		PhysBase:  le.Uint64(b[0:]),
		DumpLevel: int32(le.Uint32(b[8:])),
		Split:     int32(le.Uint32(b[12:])),
	}
	for i, p := range []*uint64{&s.StartPFN, &s.EndPFN, &s.OffsetVmcoreinfo, &s.SizeVmcoreinfo,
		&s.OffsetNote, &s.SizeNote, &s.OffsetEraseinfo, &s.SizeEraseinfo,
		&s.StartPFN64, &s.EndPFN64, &s.MaxMapnr64} {
		*p = le.Uint64(b[16+8*i:])
	}
	return s, nil
}

// PageDesc locates one dumped page's data.
type PageDesc struct {
	Offset    int64  // absolute file offset; 0 = page lost in an incomplete dump
	Size      uint32 // stored bytes, <= block size
	Flags     uint32 // 0 raw, else one compression flag
	PageFlags uint64 // unused, always 0
}

// Put encodes d into b[:24].
func (d PageDesc) Put(b []byte) {
	le.PutUint64(b[0:], uint64(d.Offset))
	le.PutUint32(b[8:], d.Size)
	le.PutUint32(b[12:], d.Flags)
	le.PutUint64(b[16:], d.PageFlags)
}

// UnmarshalPageDesc decodes b[:24].
func UnmarshalPageDesc(b []byte) PageDesc {
	return PageDesc{
		Offset:    int64(le.Uint64(b[0:])),
		Size:      le.Uint32(b[8:]),
		Flags:     le.Uint32(b[12:]),
		PageFlags: le.Uint64(b[16:]),
	}
}

// Regions is where a kdump file's bitmaps and descriptors lie as its own
// header and sub header say (a file read back: makedumpfile's, or cut
// short), and how many pfns its bitmaps cover.
type Regions struct {
	MaxMapnr   uint64 // max_mapnr_64 from header version 6 on, else max_mapnr
	BitmapSize uint64 // bytes of each bitmap
	Bitmap1    uint64
	Bitmap2    uint64
	Descs      uint64
}

// RegionsOf reads the regions off a file's header and sub header.
func RegionsOf(h *Header, s *SubHeader) Regions {
	bs := uint64(h.BlockSize)
	r := Regions{MaxMapnr: uint64(h.MaxMapnr), BitmapSize: uint64(h.BitmapBlocks) / 2 * bs}
	if h.HeaderVersion >= 6 {
		r.MaxMapnr = s.MaxMapnr64
	}
	r.Bitmap1 = (1 + uint64(h.SubHdrSize)) * bs
	r.Bitmap2 = r.Bitmap1 + r.BitmapSize
	r.Descs = r.Bitmap2 + r.BitmapSize
	return r
}

// Layout is where each region of a kdump file starts, all derived from four
// numbers; see the package doc.
type Layout struct {
	BlockSize    uint64
	SubHdrBlocks uint64 // ceil((104 + notes) / block)
	BitmapBlocks uint64 // both bitmaps
	NoteOffset   uint64 // block + 104
	Bitmap1      uint64
	Bitmap2      uint64
	Descs        uint64
	Data         uint64 // first byte after the descriptor array
}

// NewLayout computes the layout for a dump of maxMapnr pfns, noteSize bytes
// of notes and numDescs page descriptors.
func NewLayout(blockSize, noteSize, maxMapnr, numDescs uint64) Layout {
	l := Layout{BlockSize: blockSize}
	l.SubHdrBlocks = (SubHeaderSize + noteSize + blockSize - 1) / blockSize
	l.BitmapBlocks = 2 * BitmapBlocksPerHalf(blockSize, maxMapnr)
	l.NoteOffset = blockSize + SubHeaderSize
	l.Bitmap1 = (1 + l.SubHdrBlocks) * blockSize
	l.Bitmap2 = l.Bitmap1 + l.BitmapBlocks/2*blockSize
	l.Descs = l.Bitmap1 + l.BitmapBlocks*blockSize
	l.Data = l.Descs + numDescs*PageDescSize
	return l
}

// BitmapBlocksPerHalf is the number of blocks one bitmap of maxMapnr bits takes.
func BitmapBlocksPerHalf(blockSize, maxMapnr uint64) uint64 {
	return ((maxMapnr+7)/8 + blockSize - 1) / blockSize
}

// Flattened stream constants (-F): a 4096-byte header, then records of a
// 16-byte big-endian {offset, size} header and size payload bytes, then an
// end marker of offset = size = -1.
const (
	FlatSignature  = "makedumpfile"
	FlatHeaderSize = 4096
	FlatRecordSize = 16
	FlatType       = 1
	FlatVersion    = 1
)

// FlatHeader returns the 4096-byte header of a flattened stream.
func FlatHeader() []byte {
	b := make([]byte, FlatHeaderSize)
	copy(b, FlatSignature)
	binary.BigEndian.PutUint64(b[16:], FlatType)
	binary.BigEndian.PutUint64(b[24:], FlatVersion)
	return b
}

// CheckFlatHeader reports whether b begins a flattened stream, as
// makedumpfile -R checks it: the signature and type 1 (version unchecked).
func CheckFlatHeader(b []byte) error {
	if len(b) < 32 || !bytes.Equal(b[:len(FlatSignature)], []byte(FlatSignature)) {
		return ErrNotFlattened
	}
	if t := binary.BigEndian.Uint64(b[16:]); t != FlatType {
		return fmt.Errorf("flattened header: type %d, want %d", t, FlatType)
	}
	return nil
}

// ErrNotFlattened is returned for input that has no flattened header.
var ErrNotFlattened = errors.New("not a flattened dump (no makedumpfile flat header)")

// PutFlatRecord encodes a record header for size bytes at offset.
func PutFlatRecord(b []byte, offset, size int64) {
	binary.BigEndian.PutUint64(b[0:], uint64(offset))
	binary.BigEndian.PutUint64(b[8:], uint64(size))
}

// FlatRecord decodes a record header. end is true for the end marker.
func FlatRecord(b []byte) (offset, size int64, end bool) {
	offset = int64(binary.BigEndian.Uint64(b[0:]))
	size = int64(binary.BigEndian.Uint64(b[8:]))
	return offset, size, offset == -1 && size == -1
}

var le = binary.LittleEndian
