package source

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/kdumpfmt"
)

// smallDump builds a small valid kdump file by hand: 64 pfns, every other
// one dumped, raw pages whose first byte is the pfn.
func smallDump(t testing.TB) []byte {
	return rawDump(4096, 2, func(i uint64, page []byte) { page[0] = byte(2 * i) })
}

// rawDump builds a valid kdump file of 64 pfns with blocks of bs bytes,
// every step-th pfn dumped as a raw page that fill writes (i counts the
// dumped pages).
func rawDump(bs, step uint64, fill func(i uint64, page []byte)) []byte {
	const n = 64
	present, dumpable := bitmap.New(n), bitmap.New(n)
	present.SetRange(0, n)
	for p := uint64(0); p < n; p += step {
		dumpable.Set(p)
	}
	l := kdumpfmt.NewLayout(bs, 0, n, n/step)
	b := make([]byte, l.Data+n/step*bs)
	h := kdumpfmt.Header{HeaderVersion: 6, BlockSize: int32(bs), SubHdrSize: int32(l.SubHdrBlocks), BitmapBlocks: uint32(l.BitmapBlocks), MaxMapnr: n}
	copy(h.Signature[:], kdumpfmt.Signature)
	copy(b, h.Marshal())
	sub := kdumpfmt.SubHeader{MaxMapnr64: n}
	copy(b[bs:], sub.Marshal())
	present.PutBytes(b[l.Bitmap1:l.Bitmap2], 0)
	dumpable.PutBytes(b[l.Bitmap2:l.Descs], 0)
	for i := uint64(0); i < n/step; i++ {
		off := l.Data + i*bs
		kdumpfmt.PageDesc{Offset: int64(off), Size: uint32(bs)}.Put(b[l.Descs+i*kdumpfmt.PageDescSize:])
		fill(i, b[off:off+bs])
	}
	return b
}

// zstdRLEBomb is a zstd frame of n RLE blocks of 128 KiB, 4 bytes each,
// whose header gives no content size: n*128 KiB of output from 6+4n bytes,
// which nothing bounds but the output buffer.
func zstdRLEBomb(n int) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38} // magic; no content size; window 128 KiB
	for i := range n {
		h := uint32(1)<<1 | 128<<10<<3 // Block_Type RLE, Block_Size 128 KiB
		if i == n-1 {
			h |= 1 // Last_Block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	return b
}

// zstdBombDump is rawDump's 64 pfns in 4 KiB blocks, every 8th dumped, but
// every page descriptor points at one stored zstd page of 4090 bytes that
// expands to 128 MiB: before the zstd decoder stopped at the page, reading
// its 8 pages decompressed 1 GiB (issue 14).
func zstdBombDump() []byte {
	const bs, n, step = 4096, 64, 8
	b := rawDump(bs, step, func(uint64, []byte) {})
	l := kdumpfmt.NewLayout(bs, 0, n, n/step)
	bomb := zstdRLEBomb((bs - 6) / 4)
	b = append(b[:l.Data], bomb...)
	for i := range uint64(n / step) {
		kdumpfmt.PageDesc{Offset: int64(l.Data), Size: uint32(len(bomb)), Flags: kdumpfmt.StatusZstd}.Put(b[l.Descs+i*kdumpfmt.PageDescSize:])
	}
	return b
}

// A stored page that expands past the block size is refused, after about
// a page of work: the reader's cost per page is bounded by the block size,
// whatever the page's stream produces.
func TestDumpRefusesDecompressionBomb(t *testing.T) {
	d, err := openBytes(t, zstdBombDump())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	page := make([]byte, 4096)
	for pfn := uint64(0); pfn < 64; pfn += 8 {
		want := fmt.Sprintf("pfn %#x: zstd: page decompresses to more than 4096 bytes", pfn)
		if err := d.ReadPage(pfn, page); err == nil || err.Error() != want {
			t.Errorf("pfn %d: %v, want %q", pfn, err, want)
		}
	}
}

// memDump is a dump held in memory, for the fuzz target: no file to write
// and remove per input.
type memDump struct{ *bytes.Reader }

func (memDump) Close() error { return nil }

func openBytes(t testing.TB, b []byte) (*Dump, error) {
	path := filepath.Join(t.TempDir(), "dump")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return OpenDump(path)
}

func TestDumpReadsPages(t *testing.T) {
	d, err := openBytes(t, smallDump(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	page := make([]byte, 4096)
	for pfn := uint64(0); pfn < 64; pfn++ {
		err := d.ReadPage(pfn, page)
		switch {
		case pfn%2 == 1 && !errors.Is(err, ErrNotDumped):
			t.Fatalf("pfn %d: %v, want not dumped", pfn, err)
		case pfn%2 == 0 && (err != nil || page[0] != byte(pfn)):
			t.Fatalf("pfn %d: %v, first byte %d", pfn, err, page[0])
		}
	}
}

// The kdump reader takes hostile files without panicking or allocating
// without bound, and every page it serves is a whole page.
func FuzzOpenDump(f *testing.F) {
	f.Add(smallDump(f))
	f.Add(smallDump(f)[:5000])
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := readDump(memDump{bytes.NewReader(b)}, int64(len(b)))
		if err != nil {
			return
		}
		defer d.Close()
		page := make([]byte, d.Header.BlockSize)
		for i, pfn := 0, d.Dumpable.NextSet(0); pfn < d.MaxMapnr && i < 256; i, pfn = i+1, d.Dumpable.NextSet(pfn+1) {
			_ = d.ReadPage(pfn, page)
		}
	})
}

// The flattened reader rebuilds what it is given or fails; it never
// panics, and never writes outside the records' ranges.
func FuzzRearrange(f *testing.F) {
	var stream bytes.Buffer
	stream.Write(kdumpfmt.FlatHeader())
	var h [kdumpfmt.FlatRecordSize]byte
	kdumpfmt.PutFlatRecord(h[:], 100, 5)
	stream.Write(h[:])
	stream.WriteString("hello")
	kdumpfmt.PutFlatRecord(h[:], -1, -1)
	stream.Write(h[:])
	f.Add(stream.Bytes())
	f.Add(stream.Bytes()[:4100])
	f.Fuzz(func(t *testing.T, b []byte) {
		var w boundedWriter
		_, _ = kdumpfmt.Unflatten(bytes.NewReader(b), &w)
	})
}

// boundedWriter accepts writes anywhere below 1 GiB without storing them.
type boundedWriter struct{}

func (*boundedWriter) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off > 1<<30 {
		return 0, errors.New("offset out of range")
	}
	return len(p), nil
}
