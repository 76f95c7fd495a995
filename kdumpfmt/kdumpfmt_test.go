package kdumpfmt

import (
	"bytes"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{HeaderVersion: 6, TimestampSec: 1733000000, Status: StatusZlib, BlockSize: 4096,
		SubHdrSize: 1, BitmapBlocks: 2, MaxMapnr: 264, NrCPUs: 2}
	copy(h.Signature[:], Signature)
	copy(h.Utsname[2*UtsnameFieldSize:], "6.1.0-57-amd64")
	b := h.Marshal()
	if len(b) != HeaderSize {
		t.Fatalf("header is %d bytes", len(b))
	}
	// Offsets from the spec (§1.2), checked byte by byte.
	for _, c := range []struct {
		off  int
		want []byte
	}{
		{0, []byte("KDUMP   ")},
		{8, []byte{6, 0, 0, 0}},
		{424, []byte{1, 0, 0, 0}},
		{428, []byte{0, 0x10, 0, 0}},
		{440, []byte{8, 1, 0, 0}},
		{460, []byte{2, 0, 0, 0}},
	} {
		if got := b[c.off : c.off+len(c.want)]; !bytes.Equal(got, c.want) {
			t.Errorf("offset %d: % x, want % x", c.off, got, c.want)
		}
	}
	g, err := UnmarshalHeader(b)
	if err != nil || *g != h {
		t.Fatalf("round trip: %+v, %v", g, err)
	}
	if g.Utsfield(2) != "6.1.0-57-amd64" {
		t.Fatalf("release %q", g.Utsfield(2))
	}
}

func TestSubHeaderRoundTrip(t *testing.T) {
	s := SubHeader{PhysBase: 0x1000000, DumpLevel: 31, OffsetVmcoreinfo: 4900, SizeVmcoreinfo: 3300,
		OffsetNote: 4200, SizeNote: 4000, MaxMapnr64: 1 << 40}
	b := s.Marshal()
	if len(b) != SubHeaderSize {
		t.Fatalf("%d bytes", len(b))
	}
	if g, _ := UnmarshalSubHeader(b); *g != s {
		t.Fatalf("round trip: %+v", g)
	}
}

// The worked example of the spec (§1.1): 712 bytes of notes, max_mapnr 264,
// 24 descriptors.
func TestLayoutWorkedExample(t *testing.T) {
	l := NewLayout(4096, 712, 264, 24)
	want := Layout{BlockSize: 4096, SubHdrBlocks: 1, BitmapBlocks: 2, MaxMapnr: 264, BitmapSize: 4096,
		NoteOffset: 4200, Bitmap1: 8192, Bitmap2: 12288, Descs: 16384, Data: 16960}
	if l != want {
		t.Fatalf("layout %+v, want %+v", l, want)
	}
}

// A file's headers, written from a layout, give the same layout back (but
// the data's offset, which they do not hold), for header version 6 and
// for an older one whose max_mapnr is the header's.
func TestLayoutOfHeaders(t *testing.T) {
	for _, c := range []struct {
		bs, notes, maxMapnr, descs uint64
		version                    int32
	}{
		{4096, 712, 264, 24, 6},
		{4096, 9000, 1 << 22, 1000, 6},
		{65536, 100, 1 << 30, 5, 6},
		{4096, 0, 100000, 7, 5},
	} {
		l := NewLayout(c.bs, c.notes, c.maxMapnr, c.descs)
		h := &Header{HeaderVersion: c.version, BlockSize: int32(c.bs), SubHdrSize: int32(l.SubHdrBlocks),
			BitmapBlocks: uint32(l.BitmapBlocks), MaxMapnr: uint32(min(c.maxMapnr, 1<<32-1))}
		s := &SubHeader{MaxMapnr64: c.maxMapnr}
		got := LayoutOf(h, s)
		want := l
		want.Data = 0
		if got != want {
			t.Errorf("%+v: LayoutOf %+v, want %+v", c, got, want)
		}
	}
}

// StatusOffset, the one offset written out, is where the encoding puts
// Status.
func TestStatusOffset(t *testing.T) {
	b := (&Header{Status: 0xdeadbeef}).Marshal()
	if got := le.Uint32(b[StatusOffset:]); got != 0xdeadbeef {
		t.Fatalf("status at %d: %#x", StatusOffset, got)
	}
}

func TestUnmarshalHeaderRejects(t *testing.T) {
	good := (&Header{Signature: [8]byte([]byte(Signature)), BlockSize: 4096, BitmapBlocks: 2}).Marshal()
	for name, mutate := range map[string]func([]byte){
		"signature":    func(b []byte) { b[0] = 'X' },
		"block size":   func(b []byte) { b[428] = 3 },
		"odd bitmap":   func(b []byte) { b[436] = 3 },
		"sub hdr size": func(b []byte) { b[435] = 0x80 },
		"zero bitmaps": func(b []byte) { b[436] = 0 },
	} {
		b := append([]byte(nil), good...)
		mutate(b)
		if _, err := UnmarshalHeader(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := UnmarshalHeader(good[:100]); err == nil {
		t.Error("short header accepted")
	}
}

func TestFlatRecords(t *testing.T) {
	h := FlatHeader()
	if err := CheckFlatHeader(h); err != nil {
		t.Fatal(err)
	}
	if err := CheckFlatHeader(make([]byte, 4096)); err != ErrNotFlattened {
		t.Fatalf("zeros: %v", err)
	}
	var r [FlatRecordSize]byte
	PutFlatRecord(r[:], 4200, 712)
	if off, size, end := FlatRecord(r[:]); off != 4200 || size != 712 || end {
		t.Fatalf("record %d %d %v", off, size, end)
	}
	PutFlatRecord(r[:], -1, -1)
	if !bytes.Equal(r[:], bytes.Repeat([]byte{0xff}, 16)) {
		t.Fatalf("end marker % x", r)
	}
	if _, _, end := FlatRecord(r[:]); !end {
		t.Fatal("end marker not recognised")
	}
}
