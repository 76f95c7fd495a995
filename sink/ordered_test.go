package sink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/convert"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// memFile is a file in memory that reads back too (FinishCut).
type memFile struct{ splitMem }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.b)) {
		return 0, io.EOF
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stream writes pd (prioritised, or in pfn order when pd.set is nil:
// its chunks as they are) as a flattened stream, by Kdump.WriteChunk.
func (pd *prioDump) stream(t *testing.T, meta *Meta) []byte {
	t.Helper()
	var buf bytes.Buffer
	f, err := NewFlat(&buf, 0)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKdump(f, meta)
	if err != nil {
		t.Fatal(err)
	}
	if pd.set != nil {
		if err := k.SetPriority(pd.set); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pd.chunks {
		if err := k.WriteChunk(pd.chunk(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// record is one record of a flattened stream: its bytes' offset in the
// file and in the stream.
type record struct {
	off, size, at int64
}

func records(t *testing.T, s []byte) []record {
	t.Helper()
	var rs []record
	at := int64(kdumpfmt.FlatHeaderSize)
	for {
		off, size, end := kdumpfmt.FlatRecord(s[at:])
		if end {
			return rs
		}
		rs = append(rs, record{off, size, at + kdumpfmt.FlatRecordSize})
		at += kdumpfmt.FlatRecordSize + size
	}
}

// A prioritised flattened stream: every descriptor record comes after the
// records of the data its descriptors point at; the priority pages' data
// and descriptors all come before the bulk's data; the stream is the same
// written twice; and rebuilt it is the prioritised file written by placed
// chunks, byte for byte.
func TestPrioritisedStream(t *testing.T) {
	d := newSplitDump(11, 6000, true)
	r := rand.New(rand.NewPCG(11, 21))
	pd := newPrioDump(d, r)
	l := kdumpfmt.NewLayout(4096, uint64(len(d.meta.Notes)), d.meta.MaxMapnr, d.meta.NumDumpable)
	s := pd.stream(t, d.meta)
	if again := pd.stream(t, d.meta); !bytes.Equal(s, again) {
		t.Fatal("two streams of one dump differ")
	}
	var rebuilt memFile
	if _, err := kdumpfmt.Unflatten(bytes.NewReader(s), &rebuilt); err != nil {
		t.Fatal(err)
	}
	placed, _ := pd.write(t, d.meta, len(pd.chunks), 0, r)
	if !bytes.Equal(rebuilt.b, placed) {
		t.Fatalf("the rebuilt stream is not the prioritised file: first difference at byte %d of %d/%d", firstDiff(rebuilt.b, placed), len(rebuilt.b), len(placed))
	}
	// Where the priority set's data ends in the file.
	var prioEnd int64
	for i, pfns := range pd.pfns {
		if pd.set.Test(pfns[0]) {
			prioEnd = max(prioEnd, int64(pageEnd(pd, l, d.meta, i)))
		}
	}
	landed := make([]bool, len(placed))
	slots := bitmap.New(d.meta.NumDumpable)
	bulkSeen, descRecords := false, 0
	for _, rec := range records(t, s) {
		switch {
		case uint64(rec.off) >= l.Data:
			if rec.off >= prioEnd {
				bulkSeen = true
			} else if bulkSeen {
				t.Fatalf("priority data at %d after bulk data", rec.off)
			}
			for i := range rec.size {
				landed[rec.off+i] = true
			}
		case uint64(rec.off) >= l.Descs:
			descRecords++
			if (uint64(rec.off)-l.Descs)%kdumpfmt.PageDescSize != 0 || rec.size%kdumpfmt.PageDescSize != 0 {
				t.Fatalf("descriptor record {%d, %d} not on slots", rec.off, rec.size)
			}
			for o := int64(0); o < rec.size; o += kdumpfmt.PageDescSize {
				desc := kdumpfmt.UnmarshalPageDesc(s[rec.at+o:])
				for b := desc.Offset; b < desc.Offset+int64(desc.Size); b++ {
					if !landed[b] {
						t.Fatalf("descriptor record at %d points at byte %d before it landed", rec.off, b)
					}
				}
				slot := (uint64(rec.off+o) - l.Descs) / kdumpfmt.PageDescSize
				slots.Set(slot)
			}
		}
	}
	if descRecords == 0 || !bulkSeen {
		t.Fatalf("%d descriptor records, bulk seen %v", descRecords, bulkSeen)
	}
	if n := slots.Count(0, slots.Len()); n != d.meta.NumDumpable {
		t.Fatalf("%d descriptor slots written of %d", n, d.meta.NumDumpable)
	}
}

// pageEnd is where chunk i's data ends in the prioritised file: the
// data before it in the copy pass's order, after the zero page.
func pageEnd(pd *prioDump, l kdumpfmt.Layout, m *Meta, i int) uint64 {
	end := l.Data
	if m.ZeroPage {
		end += m.BlockSize
	}
	for _, b := range pd.data[:i+1] {
		end += uint64(len(b))
	}
	return end
}

// Every prefix of a flattened stream, prioritised or in pfn order, cut at
// a record's edge or inside a record (its header or its bytes), rebuilt
// and finished by FinishCut, is a dump marked INCOMPLETE that holds
// exactly the pages whose data and descriptor landed in complete records,
// each with its data; one cut before its bitmaps landed is no dump.
func TestRebuildCutStream(t *testing.T) {
	d := newSplitDump(12, 4000, true)
	r := rand.New(rand.NewPCG(12, 21))
	for _, tc := range []struct {
		name string
		pd   *prioDump
	}{
		{"prioritised", newPrioDump(d, r)},
		{"pfn order", &prioDump{pfns: pfnsOf(d), chunks: d.chunks, data: d.data}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.pd.stream(t, d.meta)
			var whole memFile
			if _, err := kdumpfmt.Unflatten(bytes.NewReader(s), &whole); err != nil {
				t.Fatal(err)
			}
			l := kdumpfmt.NewLayout(4096, uint64(len(d.meta.Notes)), d.meta.MaxMapnr, d.meta.NumDumpable)
			recs := records(t, s)
			var cuts []int64
			for i, rec := range recs {
				// At the record's header, inside it, at its bytes, inside them.
				hdr := rec.at - kdumpfmt.FlatRecordSize
				if i%3 == 0 || uint64(rec.off) < l.Descs {
					cuts = append(cuts, hdr, hdr+5, rec.at, rec.at+rec.size/2)
				}
			}
			cuts = append(cuts, int64(len(s))-16, int64(len(s))-1, 100, kdumpfmt.FlatHeaderSize)
			for _, cut := range cuts {
				checkStreamCut(t, s[:cut], recs, &whole, l, d.meta)
			}
		})
	}
}

func pfnsOf(d *splitDump) [][]uint64 {
	var out [][]uint64
	pfn := d.meta.Dumpable.NextSet(0)
	for _, c := range d.chunks {
		var p []uint64
		for range c {
			p = append(p, pfn)
			pfn = d.meta.Dumpable.NextSet(pfn + 1)
		}
		out = append(out, p)
	}
	return out
}

func checkStreamCut(t *testing.T, prefix []byte, recs []record, whole *memFile, l kdumpfmt.Layout, m *Meta) {
	t.Helper()
	cut := int64(len(prefix))
	var f memFile
	_, err := kdumpfmt.Unflatten(bytes.NewReader(prefix), &f)
	var ce *kdumpfmt.CutError
	if cut < kdumpfmt.FlatHeaderSize && errors.Is(err, kdumpfmt.ErrNotFlattened) {
		return
	}
	if !errors.As(err, &ce) {
		t.Fatalf("cut at %d: %v, want a CutError", cut, err)
	}
	// What landed: the complete records' descriptor slots.
	landedSlot := map[uint64]bool{}
	headers := false
	for _, rec := range recs {
		if rec.at+rec.size > cut {
			break
		}
		if uint64(rec.off+rec.size) >= l.Descs {
			headers = true
		}
		if uint64(rec.off) >= l.Descs && uint64(rec.off) < l.Data {
			for o := rec.off; o < rec.off+rec.size; o += kdumpfmt.PageDescSize {
				landedSlot[(uint64(o)-l.Descs)/kdumpfmt.PageDescSize] = true
			}
		}
	}
	kept, lost, err := convert.FinishCut(&f, ce.End)
	if !headers {
		if !errors.Is(err, convert.ErrCutInHeaders) {
			t.Fatalf("cut at %d, before the bitmaps landed: %v", cut, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("cut at %d: %v", cut, err)
	}
	if kept != uint64(len(landedSlot)) || kept+lost != m.NumDumpable {
		t.Fatalf("cut at %d: %d kept, %d lost; %d descriptors landed of %d", cut, kept, lost, len(landedSlot), m.NumDumpable)
	}
	h, err := kdumpfmt.UnmarshalHeader(f.b)
	if err != nil || h.Status&kdumpfmt.StatusIncomplete == 0 {
		t.Fatalf("cut at %d: header %v, status %#x", cut, err, h.Status)
	}
	got := bitmap.FromBytes(f.b[l.Bitmap2:], m.MaxMapnr)
	rank, newRank := uint64(0), uint64(0)
	for pfn := m.Dumpable.NextSet(0); pfn < m.MaxMapnr; pfn = m.Dumpable.NextSet(pfn + 1) {
		if got.Test(pfn) != landedSlot[rank] {
			t.Fatalf("cut at %d: pfn %#x kept %v, its descriptor landed %v", cut, pfn, got.Test(pfn), landedSlot[rank])
		}
		if got.Test(pfn) {
			a, b := descAt(f.b, l, newRank), descAt(whole.b, l, rank)
			if a != b || !bytes.Equal(pageData(f.b, a), pageData(whole.b, b)) {
				t.Fatalf("cut at %d: pfn %#x: %+v, complete %+v", cut, pfn, a, b)
			}
			newRank++
		}
		rank++
	}
	if got.Count(0, m.MaxMapnr) != kept {
		t.Fatalf("cut at %d: the bitmap holds pages that are not dumpable", cut)
	}
}

// A prioritised split dump: every part gets its own priority pages first
// (its data order: the priority pages' data before the bulk's), the
// parts reassemble into the dump, page for page; stopped early (Abort),
// at any point, each part keeps every priority page of its range that
// landed, with its data.
func TestPrioritisedSplit(t *testing.T) {
	d := newSplitDump(13, 6000, true)
	m := d.meta
	r := rand.New(rand.NewPCG(13, 21))
	pd := newPrioDump(d, r)
	bounds, err := SplitBounds(m.Dumpable, m.MaxMapnr, 64, 3)
	if err != nil {
		t.Fatal(err)
	}
	whole := d.unsplit(t)
	l := kdumpfmt.NewLayout(4096, uint64(len(m.Notes)), m.MaxMapnr, m.NumDumpable)
	nPrio := 0
	for nPrio < len(pd.pfns) && pd.set.Test(pd.pfns[nPrio][0]) {
		nPrio++
	}
	for _, stop := range []int{len(pd.chunks), 1, nPrio / 2, nPrio, nPrio + 2, (nPrio + len(pd.chunks)) / 2} {
		t.Run(fmt.Sprintf("stop after %d of %d chunks", stop, len(pd.chunks)), func(t *testing.T) {
			mems := []*splitMem{{}, {}, {}}
			s, err := NewSplit([]Output{mems[0], mems[1], mems[2]}, m, bounds)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetPriority(pd.set); err != nil {
				t.Fatal(err)
			}
			landed := bitmap.New(m.MaxMapnr)
			for i := range stop {
				if err := s.WriteChunk(pd.chunk(i)); err != nil {
					t.Fatal(err)
				}
				for _, p := range pd.pfns[i] {
					landed.Set(p)
				}
			}
			complete := stop == len(pd.chunks)
			var inc []int
			if complete {
				err = s.Close()
			} else {
				err = s.Abort()
				inc = s.Incomplete()
			}
			if err != nil {
				t.Fatal(err)
			}
			if !complete && len(inc) == 0 {
				t.Fatal("stopped early, but no part incomplete")
			}
			paths := writeFiles(t, [][]byte{mems[0].b, mems[1].b, mems[2].b}, partNames(3)...)
			for i, p := range paths {
				checkPrioPart(t, p, bounds[i], bounds[i+1], pd.set, landed, whole, l, !slices.Contains(inc, i))
			}
			got, err := reassembleFiles(t, paths)
			if err != nil {
				t.Fatal(err)
			}
			files := writeFiles(t, [][]byte{got}, "got")
			g, err := source.OpenDump(files[0])
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if complete != (g.Header.Status&kdumpfmt.StatusIncomplete == 0) {
				t.Fatalf("reassembled: status %#x", g.Header.Status)
			}
			rank := uint64(0)
			for pfn := m.Dumpable.NextSet(0); pfn < m.MaxMapnr; pfn = m.Dumpable.NextSet(pfn + 1) {
				want := descAt(whole, l, rank)
				rank++
				a, err := g.Desc(pfn)
				switch {
				case errors.Is(err, source.ErrNotDumped) && (complete || pd.set.Test(pfn) && landed.Test(pfn)):
					t.Fatalf("reassembled: pfn %#x lost", pfn)
				case errors.Is(err, source.ErrNotDumped):
				case err != nil:
					t.Fatal(err)
				case a.Flags != want.Flags || !bytes.Equal(got[a.Offset:a.Offset+int64(a.Size)], pageData(whole, want)):
					t.Fatalf("reassembled: pfn %#x differs from the dump's", pfn)
				}
			}
		})
	}
}

// checkPrioPart checks one part of a prioritised split dump: its pages
// are those of its range, each with the dump's data; the priority pages
// that landed are all kept; complete, every page, and the priority pages'
// data comes before the others'.
func checkPrioPart(t *testing.T, path string, lo, hi uint64, set, landed *bitmap.Bitmap, whole []byte, l kdumpfmt.Layout, complete bool) {
	t.Helper()
	dp, err := source.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	b := readAll(t, path)
	if complete == (dp.Header.Status&kdumpfmt.StatusIncomplete != 0) {
		t.Fatalf("%s: status %#x, complete %v", path, dp.Header.Status, complete)
	}
	rank := uint64(0)
	var prioEnd, bulkFirst int64 = 0, -1
	held := 0
	wholeDump := bitmap.FromBytes(whole[l.Bitmap2:], dp.MaxMapnr)
	for pfn := wholeDump.NextSet(0); pfn < dp.MaxMapnr; pfn = wholeDump.NextSet(pfn + 1) {
		want := descAt(whole, l, rank)
		rank++
		if pfn < lo || pfn >= hi {
			continue
		}
		a, err := dp.Desc(pfn)
		if errors.Is(err, source.ErrNotDumped) {
			if complete || set.Test(pfn) && landed.Test(pfn) {
				t.Fatalf("%s: pfn %#x not kept", path, pfn)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if a.Flags != want.Flags || !bytes.Equal(pageData(b, a), pageData(whole, want)) {
			t.Fatalf("%s: pfn %#x: %+v, want %+v", path, pfn, a, want)
		}
		held++
		if a.Offset == int64(l.Data) { // the zero page
			continue
		}
		if set.Test(pfn) {
			prioEnd = max(prioEnd, a.Offset+int64(a.Size))
		} else if bulkFirst < 0 || a.Offset < bulkFirst {
			bulkFirst = a.Offset
		}
	}
	if complete && bulkFirst >= 0 && prioEnd > bulkFirst {
		t.Fatalf("%s: priority data ends at %d, after the bulk's first at %d", path, prioEnd, bulkFirst)
	}
	if held == 0 && set.Count(lo, hi) > 0 && landed.Count(lo, hi) > 0 && complete {
		t.Fatalf("%s: no page", path)
	}
}
