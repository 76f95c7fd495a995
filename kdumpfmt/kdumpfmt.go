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

// Header is disk_dump_header, as laid out on x86_64: its fields, in order
// and with the padding before the timestamp, are the 464 bytes on disk
// (encoding/binary encodes it; no offset is written out but StatusOffset,
// which TestHeaderRoundTrip checks against the encoding).
type Header struct {
	Signature     [8]byte
	HeaderVersion int32
	Utsname       [UtsnameSize]byte // sysname, nodename, release, version, machine, domainname
	_             [6]byte           // the timeval's alignment
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
func (h *Header) Marshal() []byte { return marshal(h, HeaderSize) }

// UnmarshalHeader decodes and sanity-checks a main header.
func UnmarshalHeader(b []byte) (*Header, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("kdump header: %d bytes, want %d", len(b), HeaderSize)
	}
	h := &Header{}
	unmarshal(b, h)
	if string(h.Signature[:]) != Signature && string(h.Signature[:]) != "DISKDUMP" {
		return nil, fmt.Errorf("kdump header: bad signature %q", h.Signature[:])
	}
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

// SubHeader is kdump_sub_header for 64-bit hosts: its fields, in order,
// are the 104 bytes on disk.
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
func (s *SubHeader) Marshal() []byte { return marshal(s, SubHeaderSize) }

// UnmarshalSubHeader decodes a sub header.
func UnmarshalSubHeader(b []byte) (*SubHeader, error) {
	if len(b) < SubHeaderSize {
		return nil, fmt.Errorf("kdump sub header: %d bytes, want %d", len(b), SubHeaderSize)
	}
	s := &SubHeader{}
	unmarshal(b, s)
	return s, nil
}

// marshal encodes a header struct of size bytes, little-endian.
func marshal(v any, size int) []byte {
	b, err := binary.Append(make([]byte, 0, size), le, v)
	if err != nil || len(b) != size {
		panic(fmt.Sprintf("kdumpfmt: %T encodes to %d bytes (%v), want %d", v, len(b), err, size))
	}
	return b
}

// unmarshal decodes a header struct from b, which holds enough bytes.
func unmarshal(b []byte, v any) {
	if _, err := binary.Decode(b, le, v); err != nil {
		panic(fmt.Sprintf("kdumpfmt: decode %T from %d bytes: %v", v, len(b), err))
	}
}

// PageDesc locates one dumped page's data.
type PageDesc struct {
	Offset    int64  // absolute file offset; 0 = page lost in an incomplete dump
	Size      uint32 // stored bytes, <= block size
	Flags     uint32 // 0 raw, else one compression flag
	PageFlags uint64 // unused, always 0
}

// The offsets of PageDesc's fields on disk. (A descriptor is encoded once
// per page, too often for encoding/binary's reflection.)
const (
	descOffset    = 0
	descSize      = 8
	descFlags     = 12
	descPageFlags = 16
)

// Put encodes d into b[:24].
func (d PageDesc) Put(b []byte) {
	le.PutUint64(b[descOffset:], uint64(d.Offset))
	le.PutUint32(b[descSize:], d.Size)
	le.PutUint32(b[descFlags:], d.Flags)
	le.PutUint64(b[descPageFlags:], d.PageFlags)
}

// UnmarshalPageDesc decodes b[:24].
func UnmarshalPageDesc(b []byte) PageDesc {
	return PageDesc{
		Offset:    int64(le.Uint64(b[descOffset:])),
		Size:      le.Uint32(b[descSize:]),
		Flags:     le.Uint32(b[descFlags:]),
		PageFlags: le.Uint64(b[descPageFlags:]),
	}
}

// Layout is where each region of a kdump file starts; see the package
// doc. One calculation places them, from the file's header and sub
// header (LayoutOf: a file read back, makedumpfile's or cut short) or
// from what a dump holds (NewLayout: a file to write).
type Layout struct {
	BlockSize    uint64
	SubHdrBlocks uint64 // ceil((104 + notes) / block)
	BitmapBlocks uint64 // both bitmaps
	MaxMapnr     uint64 // the pfns the bitmaps cover
	BitmapSize   uint64 // bytes of each bitmap
	NoteOffset   uint64 // block + 104
	Bitmap1      uint64
	Bitmap2      uint64
	Descs        uint64
	Data         uint64 // first byte after the descriptor array (LayoutOf: 0, unknown)
}

// NewLayout computes the layout for a dump of maxMapnr pfns, noteSize bytes
// of notes and numDescs page descriptors.
func NewLayout(blockSize, noteSize, maxMapnr, numDescs uint64) Layout {
	l := Layout{BlockSize: blockSize, MaxMapnr: maxMapnr,
		SubHdrBlocks: (SubHeaderSize + noteSize + blockSize - 1) / blockSize,
		BitmapBlocks: 2 * BitmapBlocksPerHalf(blockSize, maxMapnr)}
	l.place()
	l.Data = l.Descs + numDescs*PageDescSize
	return l
}

// LayoutOf reads the layout off a file's header and sub header; how many
// descriptors it holds they do not say (Data is 0).
func LayoutOf(h *Header, s *SubHeader) Layout {
	l := Layout{BlockSize: uint64(h.BlockSize), MaxMapnr: uint64(h.MaxMapnr),
		SubHdrBlocks: uint64(h.SubHdrSize), BitmapBlocks: uint64(h.BitmapBlocks)}
	if h.HeaderVersion >= 6 {
		l.MaxMapnr = s.MaxMapnr64
	}
	l.place()
	return l
}

// place computes the regions' offsets from the block size and the blocks
// of the sub header and of the bitmaps.
func (l *Layout) place() {
	bs := l.BlockSize
	l.NoteOffset = bs + SubHeaderSize
	l.BitmapSize = l.BitmapBlocks / 2 * bs
	l.Bitmap1 = (1 + l.SubHdrBlocks) * bs
	l.Bitmap2 = l.Bitmap1 + l.BitmapSize
	l.Descs = l.Bitmap2 + l.BitmapSize
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
