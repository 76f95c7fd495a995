package sink

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/convert"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// bitmapOf returns a bitmap of n pfns with the given ranges set.
func bitmapOf(n uint64, ranges ...[2]uint64) *bitmap.Bitmap {
	m := bitmap.New(n)
	for _, r := range ranges {
		m.SetRange(r[0], r[1])
	}
	return m
}

func TestSplitBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dumpable *bitmap.Bitmap
		max      uint64
		block    uint64
		n        int
		want     []uint64
	}{
		{"one file", bitmapOf(100, [2]uint64{0, 100}), 100, 10, 1, []uint64{0, 100}},
		{"even", bitmapOf(120, [2]uint64{0, 120}), 120, 10, 3, []uint64{0, 40, 80, 120}},
		// 100/3 = 33 pages each: whole blocks of 10 until 33 are reached.
		{"rounded up to blocks", bitmapOf(100, [2]uint64{0, 100}), 100, 10, 3, []uint64{0, 40, 80, 100}},
		{"block of one pfn", bitmapOf(100, [2]uint64{0, 100}), 100, 1, 3, []uint64{0, 33, 66, 100}},
		// Everything fits one splitblock: the other files are empty and
		// start and end at max_mapnr (makedumpfile's files on a 1 GiB
		// machine with the default 1 GiB splitblock).
		{"one block holds all", bitmapOf(64, [2]uint64{0, 64}), 64, 64, 3, []uint64{0, 64, 64, 64}},
		// Counting dumpable pages, not pfns: the holes cost nothing.
		{"sparse", bitmapOf(1000, [2]uint64{0, 10}, [2]uint64{500, 510}, [2]uint64{990, 1000}), 1000, 10, 3, []uint64{0, 10, 510, 1000}},
		{"last block short", bitmapOf(95, [2]uint64{0, 95}), 95, 20, 2, []uint64{0, 60, 95}},
		// Fewer dumpable pages than files: num_dumpable/n is 0, so every
		// file but the last is empty.
		{"fewer pages than files", bitmapOf(100, [2]uint64{50, 52}), 100, 10, 3, []uint64{0, 0, 0, 100}},
		{"nothing dumpable", bitmapOf(100), 100, 10, 2, []uint64{0, 0, 100}},
		// The bitmap may be shorter than max_mapnr.
		{"bitmap shorter", bitmapOf(50, [2]uint64{0, 50}), 80, 10, 2, []uint64{0, 30, 80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SplitBounds(tc.dumpable, tc.max, tc.block, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("SplitBounds = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := SplitBounds(bitmapOf(10), 10, 0, 2); err == nil {
		t.Error("splitblock of 0 pages accepted")
	}
	if _, err := SplitBounds(bitmapOf(10), 10, 1, 0); err == nil {
		t.Error("split into 0 files accepted")
	}
}

// splitMem is an in-memory Output.
type splitMem struct{ b []byte }

func (m *splitMem) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	copy(m.b[off:], p)
	return len(p), nil
}

// splitDump is a synthetic dump: its meta and the page stream the
// pipeline would produce for it, cut into chunks.
type splitDump struct {
	meta   *Meta
	chunks [][]chunk.Page
	data   [][]byte
}

// newSplitDump makes a dump of maxMapnr pfns with a hole, a random
// dumpable subset, zero pages (with zero), and raw and "compressed" pages
// of random contents, in chunks of random sizes.
func newSplitDump(seed uint64, maxMapnr uint64, zero bool) *splitDump {
	r := rand.New(rand.NewPCG(seed, 1))
	present := bitmapOf(maxMapnr, [2]uint64{0, maxMapnr * 3 / 5}, [2]uint64{maxMapnr * 4 / 5, maxMapnr})
	dumpable := bitmap.New(maxMapnr)
	for pfn := range maxMapnr {
		if present.Test(pfn) && r.IntN(3) != 0 {
			dumpable.Set(pfn)
		}
	}
	notes, viOff, viSize := splitNotes(r)
	m := &Meta{
		BlockSize: 4096, NrCPUs: 2, PhysBase: 0x1000000, DumpLevel: 16, Status: kdumpfmt.StatusLZO,
		Notes: notes, VmcoreinfoOff: viOff, VmcoreinfoSize: viSize,
		MaxMapnr: maxMapnr, Present: present, Dumpable: dumpable,
		NumDumpable: dumpable.Count(0, maxMapnr), ZeroPage: zero,
	}
	if zero {
		m.DumpLevel = 31
	}
	copy(m.Utsname[:], "Linux")
	d := &splitDump{meta: m}
	var pages []chunk.Page
	var data []byte
	size := 1 + r.IntN(300)
	for pfn := dumpable.NextSet(0); pfn < maxMapnr; pfn = dumpable.NextSet(pfn + 1) {
		switch k := r.IntN(4); {
		case zero && k == 0:
			pages = append(pages, chunk.Page{Zero: true})
		case k == 1:
			pages = append(pages, chunk.Page{Size: 4096})
			data = append(data, randBytes(r, 4096)...)
		default:
			n := 1 + r.IntN(4095)
			pages = append(pages, chunk.Page{Size: uint32(n), Flags: kdumpfmt.StatusLZO})
			data = append(data, randBytes(r, n)...)
		}
		if len(pages) == size {
			d.chunks, d.data = append(d.chunks, pages), append(d.data, data)
			pages, data, size = nil, nil, 1+r.IntN(300)
		}
	}
	if len(pages) > 0 {
		d.chunks, d.data = append(d.chunks, pages), append(d.data, data)
	}
	return d
}

// splitNotes returns ELF notes as /proc/vmcore has them: two CPUs'
// NT_PRSTATUS and a VMCOREINFO note, and where the VMCOREINFO text is.
func splitNotes(r *rand.Rand) (notes []byte, viOff, viSize uint64) {
	note := func(name string, typ uint32, desc []byte) {
		var h [12]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(len(name)+1))
		binary.LittleEndian.PutUint32(h[4:], uint32(len(desc)))
		binary.LittleEndian.PutUint32(h[8:], typ)
		notes = append(notes, h[:]...)
		notes = append(notes, make([]byte, (len(name)+1+3)&^3)...)
		copy(notes[len(notes)-(len(name)+1+3)&^3:], name)
		if name == "VMCOREINFO" {
			viOff, viSize = uint64(len(notes)), uint64(len(desc))
		}
		notes = append(notes, desc...)
		notes = append(notes, make([]byte, (4-len(desc)%4)%4)...)
	}
	note("CORE", 1, randBytes(r, 336))
	note("CORE", 1, randBytes(r, 336))
	note("VMCOREINFO", 0, []byte("OSRELEASE=6.1.0\nPAGESIZE=4096\nCRASHTIME=1234\n"))
	return notes, viOff, viSize
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, (n+7)&^7)
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b[:n]
}

// unsplit writes the dump as one file.
func (d *splitDump) unsplit(t *testing.T) []byte {
	t.Helper()
	var out splitMem
	k, err := NewKdump(&out, d.meta)
	if err != nil {
		t.Fatal(err)
	}
	d.writeAll(t, k)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	return out.b
}

// writeAll hands w every chunk of the dump.
func (d *splitDump) writeAll(t *testing.T, w interface {
	WriteChunk(chunk.Chunk) error
}) {
	t.Helper()
	for i := range d.chunks {
		if err := w.WriteChunk(chunk.Chunk{Pages: d.chunks[i], Data: d.data[i]}); err != nil {
			t.Fatal(err)
		}
	}
}

// split writes the dump over len(bounds)-1 files.
func (d *splitDump) split(t *testing.T, bounds []uint64) [][]byte {
	t.Helper()
	outs := make([]Output, len(bounds)-1)
	mems := make([]*splitMem, len(outs))
	for i := range outs {
		mems[i] = &splitMem{}
		outs[i] = mems[i]
	}
	s, err := NewSplit(outs, d.meta, bounds)
	if err != nil {
		t.Fatal(err)
	}
	d.writeAll(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var files [][]byte
	var total uint64
	for _, m := range mems {
		files = append(files, m.b)
		total += uint64(len(m.b))
	}
	if s.Written() == 0 || s.Written() > total {
		t.Errorf("Written() = %d, files hold %d bytes", s.Written(), total)
	}
	return files
}

// writeFiles stores files in a temporary directory and returns their paths.
func writeFiles(t *testing.T, files [][]byte, names ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, b := range files {
		p := filepath.Join(dir, names[i])
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func partNames(n int) []string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("part%d", i))
	}
	return s
}

func reassembleFiles(t *testing.T, paths []string) ([]byte, error) {
	t.Helper()
	set, err := convert.OpenSplitSet(paths)
	if err != nil {
		return nil, err
	}
	var out splitMem
	n, err := set.Reassemble(context.Background(), &out)
	if err == nil && n > uint64(len(out.b)) {
		t.Errorf("Reassemble says %d bytes written, the file has %d", n, len(out.b))
	}
	return out.b, err
}

// Every part of a split dump is laid out as makedumpfile lays it out, and
// reassembling the parts, in any order, gives the unsplit dump byte for
// byte.
func TestSplitWriterAndReassemble(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   uint64
		zero  bool
		block uint64
		n     int
	}{
		{"zero pages, 3 parts", 5000, true, 256, 3},
		{"no zero page, 3 parts", 5000, false, 256, 3},
		{"pfn blocks, 5 parts", 3000, true, 1, 5},
		{"one part", 2000, true, 64, 1},
		{"empty parts", 2000, true, 1 << 18, 3},
		{"more parts than blocks", 1000, false, 512, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newSplitDump(uint64(tc.max)+uint64(tc.n), tc.max, tc.zero)
			m := d.meta
			bounds, err := SplitBounds(m.Dumpable, m.MaxMapnr, tc.block, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			whole := d.unsplit(t)
			parts := d.split(t, bounds)
			l := kdumpfmt.NewLayout(m.BlockSize, uint64(len(m.Notes)), m.MaxMapnr, m.NumDumpable)
			for i, p := range parts {
				checkPart(t, i, p, whole, l, m, bounds[i], bounds[i+1])
			}

			names := partNames(tc.n)
			paths := writeFiles(t, parts, names...)
			got, err := reassembleFiles(t, paths)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, whole) {
				t.Fatalf("reassembled dump (%d bytes) differs from the unsplit one (%d bytes) from byte %d", len(got), len(whole), firstDiff(got, whole))
			}
			slices.Reverse(paths)
			if got, err := reassembleFiles(t, paths); err != nil || !bytes.Equal(got, whole) {
				t.Fatalf("reassembled in reverse order: err %v, equal %v", err, bytes.Equal(got, whole))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	return i
}

// checkPart checks split file i against the unsplit dump: the same main
// header, notes and bitmaps; the split fields; the part's own descriptors
// in the first slots of the full-size descriptor area (the rest a hole);
// its own zero page first in its data; and the same page bytes as the
// unsplit dump holds for those pfns.
func checkPart(t *testing.T, i int, p, whole []byte, l kdumpfmt.Layout, m *Meta, start, end uint64) {
	t.Helper()
	if !bytes.Equal(p[:kdumpfmt.HeaderSize], whole[:kdumpfmt.HeaderSize]) {
		t.Errorf("part %d: main header differs from the unsplit dump's", i)
	}
	sub, err := kdumpfmt.UnmarshalSubHeader(p[l.BlockSize:])
	if err != nil {
		t.Fatal(err)
	}
	wsub, _ := kdumpfmt.UnmarshalSubHeader(whole[l.BlockSize:])
	want := *wsub
	want.Split, want.StartPFN, want.EndPFN, want.StartPFN64, want.EndPFN64 = 1, start, end, start, end
	if *sub != want {
		t.Errorf("part %d: sub header %+v, want %+v", i, *sub, want)
	}
	if !bytes.Equal(p[l.NoteOffset:l.Descs], whole[l.NoteOffset:l.Descs]) {
		t.Errorf("part %d: notes or bitmaps differ from the unsplit dump's", i)
	}
	n := m.Dumpable.Count(start, end)
	before := m.Dumpable.Count(0, start)
	zeroDesc := kdumpfmt.PageDesc{Offset: int64(l.Data), Size: uint32(l.BlockSize)}
	next := l.Data
	if m.ZeroPage {
		if !bytes.Equal(p[l.Data:l.Data+l.BlockSize], make([]byte, l.BlockSize)) {
			t.Errorf("part %d: no zero page at %d", i, l.Data)
		}
		next += l.BlockSize
	}
	for k := range m.NumDumpable {
		off := l.Descs + k*kdumpfmt.PageDescSize
		var raw []byte
		if off+kdumpfmt.PageDescSize <= uint64(len(p)) {
			raw = p[off : off+kdumpfmt.PageDescSize]
		}
		if k >= n {
			if len(raw) > 0 && !bytes.Equal(raw, make([]byte, kdumpfmt.PageDescSize)) {
				t.Fatalf("part %d: descriptor slot %d of %d is not a hole", i, k, n)
			}
			continue
		}
		got := kdumpfmt.UnmarshalPageDesc(raw)
		w := kdumpfmt.UnmarshalPageDesc(whole[l.Descs+(before+k)*kdumpfmt.PageDescSize:])
		if m.ZeroPage && w == zeroDesc {
			if got != zeroDesc {
				t.Fatalf("part %d: descriptor %d is %+v, want the zero page %+v", i, k, got, zeroDesc)
			}
			continue
		}
		if got.Offset != int64(next) || got.Size != w.Size || got.Flags != w.Flags {
			t.Fatalf("part %d: descriptor %d is %+v, want {%d %d %d}", i, k, got, next, w.Size, w.Flags)
		}
		if !bytes.Equal(p[got.Offset:got.Offset+int64(got.Size)], whole[w.Offset:w.Offset+int64(w.Size)]) {
			t.Fatalf("part %d: data of descriptor %d differs", i, k)
		}
		next += uint64(got.Size)
	}
	wantLen := next
	if next == l.Data { // no zero page, no pages: the file ends with the bitmaps
		wantLen = l.Descs
	}
	if uint64(len(p)) != wantLen {
		t.Errorf("part %d: %d bytes, want %d", i, len(p), wantLen)
	}
}

// The split writer refuses a stream that does not match the bitmap.
func TestSplitWriterCountsPages(t *testing.T) {
	d := newSplitDump(7, 1000, true)
	bounds, _ := SplitBounds(d.meta.Dumpable, d.meta.MaxMapnr, 16, 2)
	outs := []Output{&splitMem{}, &splitMem{}}
	s, err := NewSplit(outs, d.meta, bounds)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.chunks) < 2 {
		t.Fatal("want a dump of several chunks")
	}
	if err := s.WriteChunk(chunk.Chunk{Pages: d.chunks[0], Data: d.data[0]}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil {
		t.Error("Close accepted a stream missing pages")
	}

	s, _ = NewSplit([]Output{&splitMem{}, &splitMem{}}, d.meta, bounds)
	d.writeAll(t, s)
	if err := s.WriteChunk(chunk.Chunk{Pages: []chunk.Page{{Zero: true}}, Data: nil}); err == nil {
		t.Error("WriteChunk accepted a page past the last dumpable one")
	}

	for _, b := range [][]uint64{{0, 1000}, {0, 500, 900}, {0, 600, 500, 1000}, {1, 500, 1000}} {
		if _, err := NewSplit(outs, d.meta, b); err == nil {
			t.Errorf("NewSplit accepted boundaries %v", b)
		}
	}
}

// A part's write error names the part.
func TestSplitWriterPartError(t *testing.T) {
	d := newSplitDump(9, 1000, true)
	bounds, _ := SplitBounds(d.meta.Dumpable, d.meta.MaxMapnr, 16, 2)
	boom := errors.New("boom")
	// Every part's headers are written at the start: the error comes
	// from NewSplit.
	_, err := NewSplit([]Output{&splitMem{}, failingOutput{boom}}, d.meta, bounds)
	var pe *PartError
	if !errors.As(err, &pe) || pe.Part != 1 || !errors.Is(err, boom) {
		t.Errorf("error %v, want part 1's write error", err)
	}
}

type failingOutput struct{ err error }

func (f failingOutput) WriteAt([]byte, int64) (int, error) { return 0, f.err }

// Reassembly checks that the files make one whole dump.
func TestReassembleRefuses(t *testing.T) {
	d := newSplitDump(11, 3000, true)
	m := d.meta
	bounds, _ := SplitBounds(m.Dumpable, m.MaxMapnr, 64, 3)
	parts := d.split(t, bounds)
	whole := d.unsplit(t)
	other := newSplitDump(12, 3000, true)
	other.meta.CrashTime = 12345
	otherParts := other.split(t, bounds)
	tweak := func(b []byte, off int, v byte) []byte {
		c := slices.Clone(b)
		c[off] = v
		return c
	}
	paths := writeFiles(t, [][]byte{parts[0], parts[1], parts[2], whole, otherParts[1],
		tweak(parts[1], int(m.BlockSize)+8, 1)}, // dump level 1
		"p0", "p1", "p2", "whole", "other1", "level1")
	p0, p1, p2, wholeP, other1, level1 := paths[0], paths[1], paths[2], paths[3], paths[4], paths[5]
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"missing part", []string{p0, p2}, "no split file holds"},
		{"missing last part", []string{p0, p1}, "no split file holds"},
		{"twice", []string{p0, p1, p1, p2}, "holds too"},
		{"not split", []string{p0, wholeP}, "not a split dump"},
		{"other dump", []string{p0, other1, p2}, "main headers differ"},
		{"other dump level", []string{p0, level1, p2}, "sub headers differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reassembleFiles(t, tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// A part cut short (a full disk: INCOMPLETE, data missing at the end) still
// reassembles; the output is marked INCOMPLETE and its pages that were
// lost have zero descriptors.
func TestReassembleIncompletePart(t *testing.T) {
	d := newSplitDump(13, 3000, false)
	m := d.meta
	bounds, _ := SplitBounds(m.Dumpable, m.MaxMapnr, 64, 2)
	parts := d.split(t, bounds)
	whole := d.unsplit(t)
	cut := parts[1][:len(parts[1])-5000]
	cut[kdumpfmt.StatusOffset] |= kdumpfmt.StatusIncomplete
	l := kdumpfmt.NewLayout(m.BlockSize, uint64(len(m.Notes)), m.MaxMapnr, m.NumDumpable)
	var wantLost uint64
	for k := range m.Dumpable.Count(bounds[1], bounds[2]) {
		pd := kdumpfmt.UnmarshalPageDesc(cut[l.Descs+k*kdumpfmt.PageDescSize:])
		if pd.Offset+int64(pd.Size) > int64(len(cut)) {
			wantLost++
		}
	}
	paths := writeFiles(t, [][]byte{parts[0], cut}, "p0", "p1")
	got, err := reassembleFiles(t, paths)
	if err != nil {
		t.Fatal(err)
	}
	h, err := kdumpfmt.UnmarshalHeader(got)
	if err != nil {
		t.Fatal(err)
	}
	if h.Status&kdumpfmt.StatusIncomplete == 0 {
		t.Error("reassembled dump not marked INCOMPLETE")
	}
	var lost, kept uint64
	for k := range m.NumDumpable {
		off := l.Descs + k*kdumpfmt.PageDescSize
		g := kdumpfmt.UnmarshalPageDesc(got[off:])
		w := kdumpfmt.UnmarshalPageDesc(whole[off:])
		switch {
		case g.Offset == 0:
			lost++
		case !bytes.Equal(got[g.Offset:g.Offset+int64(g.Size)], whole[w.Offset:w.Offset+int64(w.Size)]):
			t.Fatalf("descriptor %d: data differs", k)
		default:
			kept++
		}
	}
	if lost == 0 || lost != wantLost || kept+lost != m.NumDumpable {
		t.Errorf("%d pages lost, %d kept of %d; want %d lost", lost, kept, m.NumDumpable, wantLost)
	}
}

// Eraseinfo (--config filtering, which makedumpfile writes after a file's
// page data) of every part is concatenated after the reassembled data.
func TestReassembleEraseinfo(t *testing.T) {
	d := newSplitDump(17, 2000, true)
	m := d.meta
	bounds, _ := SplitBounds(m.Dumpable, m.MaxMapnr, 64, 2)
	parts := d.split(t, bounds)
	whole := d.unsplit(t)
	texts := []string{"erase jiffies size 8\n", "erase modules nullify\n"}
	bs := int(m.BlockSize)
	for i, text := range texts {
		binary.LittleEndian.PutUint64(parts[i][bs+64:], uint64(len(parts[i])))
		binary.LittleEndian.PutUint64(parts[i][bs+72:], uint64(len(text)))
		parts[i] = append(parts[i], text...)
	}
	got, err := reassembleFiles(t, writeFiles(t, parts, "p0", "p1"))
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(whole), strings.Join(texts, "")...)
	binary.LittleEndian.PutUint64(want[bs+64:], uint64(len(whole)))
	binary.LittleEndian.PutUint64(want[bs+72:], uint64(len(want)-len(whole)))
	if !bytes.Equal(got, want) {
		t.Fatalf("reassembled dump (%d bytes) differs from the expected one (%d bytes) from byte %d", len(got), len(want), firstDiff(got, want))
	}
}

// A split dump stopped on its way (a full disk, a signal) is finished by
// Abort: the parts already closed stay complete, byte for byte; the part
// being written keeps the pages that landed and the later parts none, each
// losing the rest from its 2nd bitmap within its own pfn range only, and
// marked INCOMPLETE. Reassembling them gives an INCOMPLETE dump of exactly
// the pages kept, each equal to the unsplit dump's.
func TestSplitAbort(t *testing.T) {
	// Stopped inside part 1, and inside part 0, whose file also holds
	// where the data of the reassembled dump starts.
	for _, stopIn := range []int{1, 0} {
		t.Run(fmt.Sprintf("stop in part %d", stopIn), func(t *testing.T) { splitAbort(t, stopIn) })
	}
}

func splitAbort(t *testing.T, stopIn int) {
	d := newSplitDump(21, 3000, true)
	m := d.meta
	bounds, _ := SplitBounds(m.Dumpable, m.MaxMapnr, 64, 3)
	full := d.split(t, bounds)
	mems := []*splitMem{{}, {}, {}}
	s, err := NewSplit([]Output{mems[0], mems[1], mems[2]}, m, bounds)
	if err != nil {
		t.Fatal(err)
	}
	stop := m.Dumpable.Count(0, bounds[stopIn]) + m.Dumpable.Count(bounds[stopIn], bounds[stopIn+1])*2/3
	var sent uint64
	for i := 0; sent < stop; i++ {
		if err := s.WriteChunk(chunk.Chunk{Pages: d.chunks[i], Data: d.data[i]}); err != nil {
			t.Fatal(err)
		}
		sent += uint64(len(d.chunks[i]))
	}
	err = s.Abort()
	incomplete := s.Incomplete()
	if want := fmt.Sprint([]int{0, 1, 2}[stopIn:]); err != nil || fmt.Sprint(incomplete) != want {
		t.Fatalf("Abort: parts %v incomplete, %v; want %s", incomplete, err, want)
	}
	for i := range stopIn {
		if !bytes.Equal(mems[i].b, full[i]) {
			t.Errorf("complete part %d differs from a split run to its end", i)
		}
	}
	paths := writeFiles(t, [][]byte{mems[0].b, mems[1].b, mems[2].b}, partNames(3)...)
	kept := uint64(0)
	for i, p := range paths {
		dp, err := source.OpenDump(p)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := bounds[i], bounds[i+1]
		n := dp.Dumpable.Count(lo, hi)
		kept += n
		inc := dp.Header.Status&kdumpfmt.StatusIncomplete != 0
		outside := dp.Dumpable.Clone()
		outside.ClearRange(lo, hi)
		want := m.Dumpable.Clone()
		want.ClearRange(lo, hi)
		// Within the range: a prefix of the dump's pages.
		prefix := m.Dumpable.Clone()
		prefix.ClearRange(0, lo)
		pfn := prefix.NextSet(lo)
		for range n {
			pfn = prefix.NextSet(pfn + 1)
		}
		prefix.ClearRange(min(pfn, hi), prefix.Len())
		inside := dp.Dumpable.Clone()
		inside.ClearRange(0, lo)
		inside.ClearRange(hi, inside.Len())
		switch {
		case inc != (i >= stopIn):
			t.Errorf("part %d: INCOMPLETE %v", i, inc)
		case !outside.Equal(want):
			t.Errorf("part %d: its 2nd bitmap changed outside its range", i)
		case !inside.Equal(prefix):
			t.Errorf("part %d: its pages are not the first %d of its range", i, n)
		case i > 0 && n >= m.Dumpable.Count(lo, hi):
			t.Errorf("part %d: all %d pages kept", i, n)
		}
		dp.Close()
	}
	set, err := convert.OpenSplitSet(paths)
	if err != nil {
		t.Fatal(err)
	}
	var out splitMem
	if _, err := set.Reassemble(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	got := out.b
	if total := m.Dumpable.Count(0, m.MaxMapnr); set.Lost != total-kept {
		t.Errorf("Lost = %d, want %d (%d pages, %d kept)", set.Lost, total-kept, total, kept)
	}
	whole := d.unsplit(t)
	files := writeFiles(t, [][]byte{got, whole}, "got", "whole")
	gp, wp := files[0], files[1]
	g, err := source.OpenDump(gp)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := source.OpenDump(wp)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if g.Header.Status&kdumpfmt.StatusIncomplete == 0 || g.NumDumpable() != kept {
		t.Fatalf("reassembled: status %#x, %d pages; want INCOMPLETE and %d", g.Header.Status, g.NumDumpable(), kept)
	}
	h := w.Header // the unsplit dump's data, and its zero page, start after its descriptors
	zeroAt := (1+int64(h.SubHdrSize)+int64(h.BitmapBlocks))*int64(h.BlockSize) + int64(w.NumDumpable())*kdumpfmt.PageDescSize
	for pfn := g.Dumpable.NextSet(0); pfn < g.MaxMapnr; pfn = g.Dumpable.NextSet(pfn + 1) {
		a, errA := g.Desc(pfn)
		b, errB := w.Desc(pfn)
		if errA != nil || errB != nil || a.Flags != b.Flags ||
			!bytes.Equal(got[a.Offset:a.Offset+int64(a.Size)], whole[b.Offset:b.Offset+int64(b.Size)]) {
			t.Fatalf("pfn %#x differs from the unsplit dump's (%v, %v)", pfn, errA, errB)
		}
		// Same layout: the zero pages share the unsplit dump's zero page.
		if b.Offset == zeroAt && a.Offset != zeroAt {
			t.Fatalf("zero pfn %#x at offset %d, not the shared zero page's %d", pfn, a.Offset, zeroAt)
		}
	}
}
