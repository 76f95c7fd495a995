package sink

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/kdumpfmt"
)

// smallPagesDump is a dump whose pages compress to a few bytes each, so
// that the descriptor buffer fills (and is flushed) while page data is
// still buffered: the case where a descriptor could reach the disk before
// its data.
func smallPagesDump(seed uint64, maxMapnr uint64) *splitDump {
	r := rand.New(rand.NewPCG(seed, 2))
	dumpable := bitmap.New(maxMapnr)
	for pfn := range maxMapnr {
		if r.IntN(5) != 0 {
			dumpable.Set(pfn)
		}
	}
	present := bitmap.New(maxMapnr)
	present.SetRange(0, maxMapnr)
	notes, viOff, viSize := splitNotes(r)
	m := &Meta{
		BlockSize: 4096, NrCPUs: 1, DumpLevel: 31, Status: kdumpfmt.StatusZlib,
		Notes: notes, VmcoreinfoOff: viOff, VmcoreinfoSize: viSize,
		MaxMapnr: maxMapnr, Present: present, Dumpable: dumpable,
		NumDumpable: dumpable.Count(0, maxMapnr), ZeroPage: true,
	}
	d := &splitDump{meta: m}
	var pages []chunk.Page
	var data []byte
	for pfn := dumpable.NextSet(0); pfn < maxMapnr; pfn = dumpable.NextSet(pfn + 1) {
		if r.IntN(4) == 0 {
			pages = append(pages, chunk.Page{Zero: true})
		} else {
			n := 1 + r.IntN(48)
			pages = append(pages, chunk.Page{Size: uint32(n), Flags: kdumpfmt.StatusZlib})
			data = append(data, randBytes(r, n)...)
		}
		if len(pages) == 256 {
			d.chunks, d.data = append(d.chunks, pages), append(d.data, data)
			pages, data = nil, nil
		}
	}
	if len(pages) > 0 {
		d.chunks, d.data = append(d.chunks, pages), append(d.data, data)
	}
	return d
}

// TestAbortKeepsOnlyLandedPages stops a dump after every chunk, as a
// signal does (the disk takes what is buffered: every page written so far
// is kept) and as a full disk does (a size limit: some are lost), and
// checks the file left behind: INCOMPLETE, and every page the cut 2nd
// bitmap still holds has the descriptor a complete dump has and data that
// landed.
func TestAbortKeepsOnlyLandedPages(t *testing.T) {
	d := smallPagesDump(1, 40000)
	whole := d.unsplit(t)
	layout := kdumpfmt.NewLayout(4096, uint64(len(d.meta.Notes)), d.meta.MaxMapnr, d.meta.NumDumpable)
	for stop := range len(d.chunks) + 1 {
		checkAbort(t, d, whole, layout, stop, 0)
	}
	// The disk fills at every 2 KiB of the data.
	for limit := int64(layout.Data); limit < int64(len(whole)); limit += 2048 {
		checkAbort(t, d, whole, layout, len(d.chunks), limit)
	}
}

// checkAbort writes stop chunks of d, with a size limit unless it is 0,
// aborts and checks the result.
func checkAbort(t *testing.T, d *splitDump, whole []byte, layout kdumpfmt.Layout, stop int, limit int64) {
	t.Helper()
	var mem splitMem
	k, err := NewKdump(&mem, d.meta)
	if err != nil {
		t.Fatal(err)
	}
	limited := limit > 0
	if limited {
		k.out = Limit{Output: &mem, Max: limit}
	}
	for i := range stop {
		if err := k.WriteChunk(chunk.Chunk{Pages: d.chunks[i], Data: d.data[i]}); err != nil {
			if !limited {
				t.Fatal(err)
			}
			break
		}
	}
	if err := k.Abort(); err != nil {
		t.Fatal(err)
	}
	b := mem.b
	h, err := kdumpfmt.UnmarshalHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status&kdumpfmt.StatusIncomplete == 0 {
		t.Fatalf("status %#x lacks INCOMPLETE", h.Status)
	}
	bm := bitmap.FromBytes(b[layout.Bitmap2:], d.meta.MaxMapnr)
	kept := bm.Count(0, d.meta.MaxMapnr)
	var written uint64
	for _, c := range d.chunks[:stop] {
		written += uint64(len(c))
	}
	if kept > written || !limited && kept != written {
		t.Fatalf("stopped after %d chunks (%d pages), size limit %d: %d pages kept", stop, written, limit, kept)
	}
	for i := range kept {
		off := layout.Descs + i*kdumpfmt.PageDescSize
		got := kdumpfmt.UnmarshalPageDesc(b[off:])
		want := kdumpfmt.UnmarshalPageDesc(whole[off:])
		end := uint64(got.Offset) + uint64(got.Size)
		if got != want || end > uint64(len(b)) || !bytes.Equal(b[got.Offset:end], whole[want.Offset:end]) {
			t.Fatalf("stopped after %d chunks, size limit %d: page %d of %d kept: descriptor %+v, want %+v; file %d bytes",
				stop, limit, i, kept, got, want, len(b))
		}
	}
}

// TestAbortPlacedKeepsOnlyLandedPages is TestAbortKeepsOnlyLandedPages for
// a file written by placed chunks (PlacedKdump: Place, WritePlaced), as the copy
// pass's workers write it: the chunks are reserved in order but written in
// a shuffled order, a write past the size limit fails and the others go
// on, then Abort. Every page the cut bitmap keeps must have its complete
// dump's descriptor and data, and without a limit every page is kept.
func TestAbortPlacedKeepsOnlyLandedPages(t *testing.T) {
	d := smallPagesDump(3, 40000)
	whole := d.unsplit(t)
	layout := kdumpfmt.NewLayout(4096, uint64(len(d.meta.Notes)), d.meta.MaxMapnr, d.meta.NumDumpable)
	r := rand.New(rand.NewPCG(3, 3))
	for _, stop := range []int{0, 1, len(d.chunks) / 2, len(d.chunks)} {
		checkAbortPlaced(t, d, whole, layout, stop, 0, r)
	}
	for limit := int64(layout.Data); limit < int64(len(whole)); limit += 4096 {
		checkAbortPlaced(t, d, whole, layout, len(d.chunks), limit, r)
	}
}

func checkAbortPlaced(t *testing.T, d *splitDump, whole []byte, layout kdumpfmt.Layout, stop int, limit int64, r *rand.Rand) {
	t.Helper()
	var mem splitMem
	k, err := NewPlacedKdump(&mem, d.meta)
	if err != nil {
		t.Fatal(err)
	}
	if limit > 0 {
		k.out = Limit{Output: &mem, Max: limit}
	}
	places := make([]chunk.Place, stop)
	for i := range stop {
		if places[i], err = k.Place(chunk.Chunk{Pages: d.chunks[i], Data: d.data[i]}); err != nil {
			break // the zero page did not fit
		}
	}
	if err == nil {
		for _, i := range r.Perm(stop) {
			if werr := k.WritePlaced(places[i], chunk.Chunk{Pages: d.chunks[i], Data: d.data[i]}); werr != nil && limit == 0 {
				t.Fatal(werr)
			}
		}
	}
	if err := k.Abort(); err != nil {
		t.Fatal(err)
	}
	b := mem.b
	h, err := kdumpfmt.UnmarshalHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status&kdumpfmt.StatusIncomplete == 0 {
		t.Fatalf("status %#x lacks INCOMPLETE", h.Status)
	}
	kept := bitmap.FromBytes(b[layout.Bitmap2:], d.meta.MaxMapnr).Count(0, d.meta.MaxMapnr)
	var written uint64
	for _, c := range d.chunks[:stop] {
		written += uint64(len(c))
	}
	if kept > written || limit == 0 && kept != written {
		t.Fatalf("placed, %d chunks, size limit %d: %d pages kept of %d", stop, limit, kept, written)
	}
	for i := range kept {
		off := layout.Descs + i*kdumpfmt.PageDescSize
		got := kdumpfmt.UnmarshalPageDesc(b[off:])
		want := kdumpfmt.UnmarshalPageDesc(whole[off:])
		end := uint64(got.Offset) + uint64(got.Size)
		if got != want || end > uint64(len(b)) || !bytes.Equal(b[got.Offset:end], whole[want.Offset:end]) {
			t.Fatalf("placed, size limit %d: page %d of %d kept: descriptor %+v, want %+v", limit, i, kept, got, want)
		}
	}
	// The descriptor slots past the kept pages hold nothing: a chunk that
	// landed after one that did not never had its descriptors written.
	for off := layout.Descs + kept*kdumpfmt.PageDescSize; off+kdumpfmt.PageDescSize <= min(layout.Data, uint64(len(b))); off += kdumpfmt.PageDescSize {
		if d := kdumpfmt.UnmarshalPageDesc(b[off:]); d != (kdumpfmt.PageDesc{}) {
			t.Fatalf("placed, %d chunks: a descriptor past the %d pages kept: %+v", stop, kept, d)
		}
	}
}
