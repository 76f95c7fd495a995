package erase

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pagepipe/debuginfo"
)

// fakeMem is kernel memory for the tests: a direct map at base over mem.
type fakeMem struct {
	base uint64
	mem  []byte
}

const memBase = 0xffff888000000000

func (m *fakeMem) VtoP(v uint64) (uint64, error) {
	if v < m.base || v-m.base >= uint64(len(m.mem)) {
		return 0, fmt.Errorf("%#x not mapped", v)
	}
	return v - m.base, nil
}

func (m *fakeMem) ReadVirt(v uint64, p []byte) error {
	pa, err := m.VtoP(v)
	if err != nil || pa+uint64(len(p)) > uint64(len(m.mem)) {
		return fmt.Errorf("read %d at %#x: out of memory", len(p), v)
	}
	copy(p, m.mem[pa:])
	return nil
}

func (m *fakeMem) put64(v, x uint64)      { binary.LittleEndian.PutUint64(m.mem[v-m.base:], x) }
func (m *fakeMem) put(v uint64, b []byte) { copy(m.mem[v-m.base:], b) }

// fakeSyms is a symbol table.
type fakeSyms map[string]uint64

func (s fakeSyms) Symbol(name string) (uint64, error) {
	if v, ok := s[name]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("%q: %w", name, debuginfo.ErrNotFound)
}

type oneSection struct{ sec *Section }

func (o oneSection) Section(m string) (*Section, error) {
	if m != "vmlinux" {
		return nil, ErrNotLoaded
	}
	return o.sec, nil
}

// world is testdata/types.c's variables laid out in a fake memory, with
// struct outer's and struct node's offsets (debuginfo's tests check them).
type world struct {
	mem  *fakeMem
	syms fakeSyms
	sec  *Section
	// addresses
	outerVar, outerB, outerC, str, opaque, x, y, head, arr, nodeHead, node2, greeting uint64
}

const (
	outerSize  = 152
	offNext    = 16
	offList    = 32
	offName    = 48
	offStr     = 64
	offOpaque  = 72
	offPtrs    = 120
	nodeKey    = 8
	nodeKeyLen = 16
)

func newWorld(t *testing.T) *world {
	d, err := debuginfo.OpenDWARF("../debuginfo/testdata/types.o")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	w := &world{mem: &fakeMem{base: memBase, mem: make([]byte, 64<<10)}}
	at := uint64(memBase + 0x100)
	alloc := func(n uint64) uint64 { a := at; at += (n + 15) &^ 15; return a }
	w.outerVar, w.outerB, w.outerC = alloc(outerSize), alloc(outerSize), alloc(outerSize)
	w.x, w.y = alloc(outerSize), alloc(outerSize)
	w.arr = alloc(5 * outerSize)
	w.head = alloc(16)
	w.str = alloc(32)
	w.opaque = alloc(64)
	w.nodeHead, w.node2 = alloc(24), alloc(24)
	w.greeting = alloc(16)
	counter := alloc(8)
	m := w.mem
	for i, o := range []uint64{w.outerVar, w.outerB, w.outerC, w.x, w.y} {
		m.put(o+offName, []byte(fmt.Sprintf("name-%d", i)))
	}
	// outer_var.ptrs = {NULL, &B, &C}
	m.put64(w.outerVar+offPtrs+8, w.outerB)
	m.put64(w.outerVar+offPtrs+16, w.outerC)
	m.put(w.str, []byte("secret\x00"))
	m.put64(w.outerVar+offStr, w.str)
	m.put64(w.outerVar+offOpaque, w.opaque)
	// head_var -> x.list -> y.list -> head_var
	m.put64(w.head, w.x+offList)
	m.put64(w.x+offList, w.y+offList)
	m.put64(w.y+offList, w.head)
	// node_head -> node2 -> NULL
	m.put64(w.nodeHead, w.node2)
	m.put64(w.nodeHead+nodeKeyLen, 3)
	m.put64(w.node2+nodeKeyLen, 5)
	m.put(w.greeting, []byte("hello\x00"))
	m.put64(counter, 42)
	w.syms = fakeSyms{"outer_var": w.outerVar, "outer_arr": w.arr, "head_var": w.head, "node_head": w.nodeHead, "counter": counter, "greeting": w.greeting}
	greetingPtr := alloc(8)
	m.put64(greetingPtr, w.greeting)
	w.syms["greeting"] = greetingPtr
	w.sec = &Section{Types: d, Symbols: w.syms}
	return w
}

func (w *world) resolve(t *testing.T, config string) (*Filter, []string, error) {
	cfg, err := Parse(strings.NewReader(config))
	if err != nil {
		t.Fatal(err)
	}
	var warns []string
	f, err := Resolve(cfg, oneSection{w.sec}, w.mem, func(s string) { warns = append(warns, s) })
	return f, warns, err
}

func TestResolve(t *testing.T) {
	w := newWorld(t)
	p := func(v uint64) uint64 { return v - memBase }
	for _, c := range []struct {
		name, config string
		want         []Range
	}{
		{"array member", "erase outer_var.name", []Range{{w.outerVar + offName, p(w.outerVar + offName), 16, false, "outer_var.name"}}},
		{"char pointer", "erase outer_var.str", []Range{{w.str, p(w.str), 6, false, "outer_var.str"}}},
		{"char pointer variable", "erase greeting", []Range{{w.greeting, p(w.greeting), 5, false, "greeting"}}},
		{"nullify", "erase outer_var.opaque nullify", []Range{{w.outerVar + offOpaque, p(w.outerVar + offOpaque), 8, true, "outer_var.opaque"}}},
		{"void pointer with size", "erase outer_var.opaque size 1K", []Range{{w.opaque, p(w.opaque), 1024, false, "outer_var.opaque"}}},
		{"void pointer without size", "erase outer_var.opaque", nil},
		{"size from a symbol", "erase outer_var.str size counter", []Range{{w.str, p(w.str), 42, false, "outer_var.str"}}},
		{"whole variable", "erase counter", []Range{{w.syms["counter"], p(w.syms["counter"]), 8, false, "counter"}}},
		{"null pointer on the way", "erase node_head.next.next.key", nil},
		{"embedded member first", "erase outer_var.next", []Range{{w.outerVar + 8, p(w.outerVar + 8), 8, false, "outer_var.next"}}},
		{"array loop", "for e in outer_arr\nerase e.name size 4\nendfor", func() []Range {
			var r []Range
			for i := range uint64(5) {
				a := w.arr + i*outerSize + offName
				r = append(r, Range{a, p(a), 4, false, "e.name"})
			}
			return r
		}()},
		{"array of pointers", "for e in outer_var.ptrs\nerase e.name\nendfor", []Range{
			{w.outerB + offName, p(w.outerB + offName), 16, false, "e.name"},
			{w.outerC + offName, p(w.outerC + offName), 16, false, "e.name"},
		}},
		{"list_head loop", "for e in head_var.next within outer:list\nerase e.name\nerase e.str nullify\nendfor", []Range{
			{w.x + offName, p(w.x + offName), 16, false, "e.name"},
			{w.x + offStr, p(w.x + offStr), 8, true, "e.str"},
			{w.y + offName, p(w.y + offName), 16, false, "e.name"},
			{w.y + offStr, p(w.y + offStr), 8, true, "e.str"},
		}},
		{"list_head loop from the head", "for e in head_var within outer:list\nerase e.name size 2\nendfor", []Range{
			{w.x + offName, p(w.x + offName), 2, false, "e.name"},
			{w.y + offName, p(w.y + offName), 2, false, "e.name"},
		}},
		{"via loop with a size member", "for n in node_head via next\nerase n.key size n.key_size\nendfor", []Range{
			{w.nodeHead + nodeKey, p(w.nodeHead + nodeKey), 3, false, "n.key"},
			{w.node2 + nodeKey, p(w.node2 + nodeKey), 5, false, "n.key"},
		}},
		{"same start: the longer one", "erase outer_var.name size 3\nerase outer_var.name", []Range{{w.outerVar + offName, p(w.outerVar + offName), 16, false, "outer_var.name"}}},
		{"module not loaded", "[brd]\nerase brd_devices", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _, err := w.resolve(t, c.config)
			if err != nil {
				t.Fatal(err)
			}
			got := f.Ranges()
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("ranges\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	w := newWorld(t)
	for _, c := range []struct{ config, want string }{
		{"erase nosuch", `line 1: symbol "nosuch"`},
		{"erase outer_var.nosuch", `line 1: structure "outer" has no member "nosuch"`},
		{"erase outer_var.name size outer_var.in", `size "in" is not an integer`},
		{"\n\nfor e in counter\nendfor", `line 3: "counter" is neither an array`},
		{"for e in outer_var via next\nendfor", `"next" is neither an array`},
		{"for e in head_var.next\nendfor", `needs 'within STRUCT:MEMBER'`},
		{"for e in head_var.next within outer:name\nendfor", `member "name" of outer is not a list_head`},
		{"for e in head_var.next within nostruct:list\nendfor", `structure "nostruct"`},
		{"erase outer_var.anon.anon_x", `"anon" has an anonymous type`},
	} {
		_, _, err := w.resolve(t, c.config)
		var re *ResolveError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want a ResolveError with %q", c.config, err, c.want)
		}
	}
}

func TestApply(t *testing.T) {
	w := newWorld(t)
	f, _, err := w.resolve(t, "for e in outer_arr\nerase e.name size 100\nendfor\nerase outer_var.opaque nullify\nerase outer_var.str\n")
	if err != nil {
		t.Fatal(err)
	}
	const ps = 512
	all := func(uint64) bool { return true }
	e := f.Apply(ps, all)
	// Every range lands, split over pages.
	img := make([]byte, len(w.mem.mem))
	copy(img, w.mem.mem)
	for pfn := uint64(0); pfn*ps < uint64(len(img)); pfn++ {
		e.Erase(pfn, img[pfn*ps:(pfn+1)*ps])
	}
	for _, r := range f.Ranges() {
		want := byte('X')
		if r.Nullify {
			want = 0
		}
		for i := range r.Size {
			if img[r.Paddr+uint64(i)] != want {
				t.Fatalf("%s: byte %d of %#x is %#x", r.Expr, i, r.Paddr, img[r.Paddr+uint64(i)])
			}
		}
	}
	wantText := strings.Repeat("erase e.name size 100\n", 5) + "erase outer_var.opaque nullify\nerase outer_var.str size 6\n"
	if string(e.Text()) != wantText {
		t.Errorf("eraseinfo\n got %q\nwant %q", e.Text(), wantText)
	}
	if n := f.ELFNoteSize(); n != len(wantText) {
		t.Errorf("ELF note size %d, want %d", n, len(wantText))
	}
	// Pages left out: their ranges are erased nowhere. A loop's size
	// never counted repeats the line before it, as makedumpfile writes
	// it; before any line there is none (makedumpfile writes what its
	// stack held).
	names := f.Ranges()[1:6]
	for _, c := range []struct {
		skip uint64
		text string
	}{
		{names[0].Paddr / ps, strings.Repeat("erase e.name size 100\n", 2) + "erase outer_var.opaque nullify\nerase outer_var.str size 6\n"},
		{names[4].Paddr / ps, strings.Repeat("erase e.name size 100\n", 5) + "erase outer_var.opaque nullify\n"},
	} {
		e := f.Apply(ps, func(pfn uint64) bool { return pfn != c.skip })
		if e.Touches(c.skip) {
			t.Errorf("page %d is left out but has bytes to erase", c.skip)
		}
		if string(e.Text()) != c.text {
			t.Errorf("page %d left out: eraseinfo\n got %q\nwant %q", c.skip, e.Text(), c.text)
		}
	}
}

func TestApplySplitsOverPages(t *testing.T) {
	w := newWorld(t)
	f, _, err := w.resolve(t, "erase outer_var size 300\n")
	if err != nil {
		t.Fatal(err)
	}
	r := f.Ranges()[0]
	const ps = 128
	first := r.Paddr / ps
	for _, c := range []struct {
		name    string
		written func(uint64) bool
		erased  int64
	}{
		{"all", func(uint64) bool { return true }, 300},
		{"second page left out", func(p uint64) bool { return p != first+1 }, int64((first+1)*ps - r.Paddr)},
		{"first page left out", func(p uint64) bool { return p != first }, 0},
	} {
		e := f.Apply(ps, c.written)
		var n int64
		img := make([]byte, 1024)
		for p := first; p < first+4; p++ {
			page := img[(p-first)*ps : (p-first+1)*ps]
			e.Erase(p, page)
			for _, b := range page {
				if b == 'X' {
					n++
				}
			}
		}
		want := ""
		if c.erased > 0 {
			want = fmt.Sprintf("erase outer_var size %d\n", c.erased)
		}
		if n != c.erased || string(e.Text()) != want {
			t.Errorf("%s: %d bytes erased, eraseinfo %q; want %d, %q", c.name, n, e.Text(), c.erased, want)
		}
	}
}
