package sink

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/kdumpfmt"
)

// prioDump is a splitDump rewritten in prioritised order: the priority
// pages' chunks first (in an order of their own, as the classes give it),
// then the rest in pfn order, no chunk mixing the two.
type prioDump struct {
	set    *bitmap.Bitmap
	pfns   [][]uint64
	chunks [][]chunk.Page
	data   [][]byte
	// first is how many of the chunks are priority pages.
	first int
}

// chunk is chunk i as the copy pass hands it over.
func (pd *prioDump) chunk(i int) chunk.Chunk {
	return chunk.Chunk{Pfns: pd.pfns[i], Pages: pd.chunks[i], Data: pd.data[i], Priority: i < pd.first}
}

func newPrioDump(d *splitDump, r *rand.Rand) *prioDump {
	type page struct {
		pfn  uint64
		p    chunk.Page
		data []byte
	}
	var all []page
	pfn := d.meta.Dumpable.NextSet(0)
	for i, c := range d.chunks {
		off := 0
		for _, p := range c {
			all = append(all, page{pfn, p, d.data[i][off : off+int(p.Size)]})
			off += int(p.Size)
			pfn = d.meta.Dumpable.NextSet(pfn + 1)
		}
	}
	pd := &prioDump{set: bitmap.New(d.meta.MaxMapnr)}
	var first, bulk []page
	// Runs of priority pages, in a shuffled run order.
	var runs [][]page
	for i := 0; i < len(all); {
		n := 1 + r.IntN(40)
		if r.IntN(6) == 0 {
			runs = append(runs, all[i:min(i+n, len(all))])
		} else {
			bulk = append(bulk, all[i:min(i+n, len(all))]...)
		}
		i += n
	}
	r.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
	for _, run := range runs {
		for _, p := range run {
			pd.set.Set(p.pfn)
		}
		first = append(first, run...)
	}
	cut := func(ps []page) {
		for len(ps) > 0 {
			n := min(len(ps), 1+r.IntN(256))
			var pfns []uint64
			var pages []chunk.Page
			var data []byte
			for _, p := range ps[:n] {
				pfns, pages, data = append(pfns, p.pfn), append(pages, p.p), append(data, p.data...)
			}
			pd.pfns, pd.chunks, pd.data = append(pd.pfns, pfns), append(pd.chunks, pages), append(pd.data, data)
			ps = ps[n:]
		}
	}
	cut(first)
	pd.first = len(pd.chunks)
	cut(bulk)
	return pd
}

// write reserves the first stop chunks in order and writes them in a
// shuffled order through out (a Limit, or not), then closes the file
// (stop = every chunk, no limit) or aborts it.
func (pd *prioDump) write(t *testing.T, meta *Meta, stop int, limit int64, r *rand.Rand) (b []byte, fits int) {
	t.Helper()
	var mem splitMem
	k, err := NewPlacedKdump(&mem, meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.SetPriority(pd.set); err != nil {
		t.Fatal(err)
	}
	if limit > 0 {
		k.out = Limit{Output: &mem, Max: limit}
	}
	places := make([]chunk.Place, stop)
	fits = stop
	for i := range stop {
		if places[i], err = k.Place(chunk.Chunk{Pages: pd.chunks[i], Data: pd.data[i]}); err != nil {
			t.Fatal(err)
		}
		if limit > 0 && fits == stop && int64(places[i].DataOff)+int64(len(pd.data[i])) > limit {
			fits = i
		}
	}
	for _, i := range r.Perm(stop) {
		if err := k.WritePlaced(places[i], pd.chunk(i)); err != nil && limit == 0 {
			t.Fatal(err)
		}
	}
	if stop == len(pd.chunks) && limit == 0 {
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	} else if err := k.Abort(); err != nil {
		t.Fatal(err)
	}
	return mem.b, fits
}

// TestPrioritisedFile: a complete prioritised file has the pfn-order
// file's headers, bitmaps, size and descriptors but for their offsets,
// and every page's data; one cut short by a size limit or by stopping
// keeps exactly the priority pages of the chunks that landed in order and
// the bulk below the descriptors' front, each with its right data.
func TestPrioritisedFile(t *testing.T) {
	d := newSplitDump(7, 12000, true)
	whole := d.unsplit(t)
	r := rand.New(rand.NewPCG(21, 21))
	pd := newPrioDump(d, r)
	l := kdumpfmt.NewLayout(4096, uint64(len(d.meta.Notes)), d.meta.MaxMapnr, d.meta.NumDumpable)
	b, _ := pd.write(t, d.meta, len(pd.chunks), 0, r)
	if len(b) != len(whole) || !bytes.Equal(b[:l.Descs], whole[:l.Descs]) {
		t.Fatalf("%d bytes, pfn order %d; headers and bitmaps equal: %v", len(b), len(whole), bytes.Equal(b[:l.Descs], whole[:l.Descs]))
	}
	moved := 0
	for i := range d.meta.NumDumpable {
		got, want := descAt(b, l, i), descAt(whole, l, i)
		if got.Size != want.Size || got.Flags != want.Flags || !bytes.Equal(pageData(b, got), pageData(whole, want)) {
			t.Fatalf("page %d: %+v, pfn order %+v", i, got, want)
		}
		if got.Offset != want.Offset {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("nothing moved")
	}
	nPrio := 0
	for nPrio < len(pd.pfns) && pd.set.Test(pd.pfns[nPrio][0]) {
		nPrio++
	}
	for _, stop := range []int{0, 1, nPrio / 2, nPrio, nPrio + 1, (nPrio + len(pd.chunks)) / 2, len(pd.chunks) - 1} {
		checkPrioCut(t, d, pd, whole, l, stop, 0, r)
	}
	for limit := int64(l.Data) + 4096; limit < int64(len(whole)); limit += 96 << 10 {
		checkPrioCut(t, d, pd, whole, l, len(pd.chunks), limit, r)
	}
}

func checkPrioCut(t *testing.T, d *splitDump, pd *prioDump, whole []byte, l kdumpfmt.Layout, stop int, limit int64, r *rand.Rand) {
	t.Helper()
	b, fits := pd.write(t, d.meta, stop, limit, r)
	h, err := kdumpfmt.UnmarshalHeader(b)
	if err != nil || h.Status&kdumpfmt.StatusIncomplete == 0 {
		t.Fatalf("stop %d, limit %d: header %v, status %#x", stop, limit, err, h.Status)
	}
	kept := bitmap.FromBytes(b[l.Bitmap2:], d.meta.MaxMapnr)
	// What must be kept: the priority pages of the chunks that landed in
	// order; what may be: those and the bulk pages of those chunks.
	must, may := bitmap.New(d.meta.MaxMapnr), bitmap.New(d.meta.MaxMapnr)
	for _, pfns := range pd.pfns[:fits] {
		for _, p := range pfns {
			may.Set(p)
			if pd.set.Test(p) {
				must.Set(p)
			}
		}
	}
	wholeRank := uint64(0)
	rank := uint64(0)
	lostBulk := false
	for pfn := d.meta.Dumpable.NextSet(0); pfn < d.meta.MaxMapnr; pfn = d.meta.Dumpable.NextSet(pfn + 1) {
		in := kept.Test(pfn)
		switch {
		case must.Test(pfn) && !in:
			t.Fatalf("stop %d, limit %d: priority pfn %#x landed but is not kept", stop, limit, pfn)
		case in && !may.Test(pfn):
			t.Fatalf("stop %d, limit %d: pfn %#x kept but never landed", stop, limit, pfn)
		case in:
			got, want := descAt(b, l, rank), descAt(whole, l, wholeRank)
			if got.Size != want.Size || got.Flags != want.Flags || !bytes.Equal(pageData(b, got), pageData(whole, want)) {
				t.Fatalf("stop %d, limit %d: pfn %#x: %+v, want %+v", stop, limit, pfn, got, want)
			}
			if !pd.set.Test(pfn) && lostBulk {
				t.Fatalf("stop %d, limit %d: bulk pfn %#x kept past a lost one", stop, limit, pfn)
			}
			rank++
		}
		lostBulk = lostBulk || !in && !pd.set.Test(pfn)
		wholeRank++
	}
	if kept.Count(0, d.meta.MaxMapnr) != rank {
		t.Fatalf("stop %d, limit %d: the kept bitmap has pfns that are not dumpable", stop, limit)
	}
}

func descAt(b []byte, l kdumpfmt.Layout, i uint64) kdumpfmt.PageDesc {
	return kdumpfmt.UnmarshalPageDesc(b[l.Descs+i*kdumpfmt.PageDescSize:])
}

func pageData(b []byte, d kdumpfmt.PageDesc) []byte {
	end := d.Offset + int64(d.Size)
	if d.Offset <= 0 || end > int64(len(b)) {
		return nil
	}
	return b[d.Offset:end]
}
