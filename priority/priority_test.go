package priority

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/internal/synth"
	"pagepipe/kernel"
	"pagepipe/source"
)

// virtMem is kernel virtual memory for the tests: one range.
type virtMem struct {
	base uint64
	b    []byte
}

func (m *virtMem) ReadVirt(va uint64, p []byte) error {
	if va < m.base || va-m.base > uint64(len(m.b)) || uint64(len(p)) > uint64(len(m.b))-(va-m.base) {
		return fmt.Errorf("virtual %#x: not mapped", va)
	}
	copy(p, m.b[va-m.base:])
	return nil
}

func (m *virtMem) put(va uint64, p []byte) {
	off := va - m.base
	if need := off + uint64(len(p)); need > uint64(len(m.b)) {
		m.b = append(m.b, make([]byte, need-uint64(len(m.b)))...)
	}
	copy(m.b[off:], p)
}

type sym struct {
	name string // with its type letter
	addr uint64
	// percpu: an absolute per-cpu offset (CONFIG_KALLSYMS_ABSOLUTE_PERCPU)
	percpu bool
}

// kallsymsImage lays out the kernel's kallsyms tables for syms and
// returns the memory and the VMCOREINFO that points at them. Token 200
// is "per_cpu", so names using it are compressed; every other byte is
// its own token.
func kallsymsImage(t *testing.T, syms []sym, absPercpu bool) (*virtMem, *kernel.VMCOREINFO) {
	t.Helper()
	const base = 0xffffffff81000000
	m := &virtMem{base: base}
	at := map[string]uint64{"kallsyms_num_syms": base + 0x100000, "kallsyms_relative_base": base + 0x100010,
		"kallsyms_token_index": base + 0x100100, "kallsyms_token_table": base + 0x100400,
		"kallsyms_offsets": base + 0x101000, "kallsyms_names": base + 0x110000}
	var b4 [4]byte
	binary.LittleEndian.PutUint32(b4[:], uint32(len(syms)))
	m.put(at["kallsyms_num_syms"], b4[:])
	var b8 [8]byte
	binary.LittleEndian.PutUint64(b8[:], base)
	m.put(at["kallsyms_relative_base"], b8[:])
	var table []byte
	index := make([]byte, 512)
	for i := range 256 {
		binary.LittleEndian.PutUint16(index[2*i:], uint16(len(table)))
		switch {
		case i == 200:
			table = append(table, "per_cpu"...)
		case i != 0:
			table = append(table, byte(i))
		}
		table = append(table, 0)
	}
	m.put(at["kallsyms_token_index"], index)
	m.put(at["kallsyms_token_table"], table)
	var names, offsets []byte
	for _, s := range syms {
		enc := []byte(strings.ReplaceAll(s.name, "per_cpu", "\xc8"))
		if len(enc) >= 0x80 {
			names = append(names, byte(len(enc)&0x7f|0x80), byte(len(enc)>>7))
		} else {
			names = append(names, byte(len(enc)))
		}
		names = append(names, enc...)
		var off int32
		switch {
		case !absPercpu:
			off = int32(s.addr - base)
		case s.percpu:
			off = int32(s.addr)
		default:
			off = int32(-int64(s.addr-base) - 1)
		}
		offsets = binary.LittleEndian.AppendUint32(offsets, uint32(off))
	}
	m.put(at["kallsyms_names"], append(names, make([]byte, 4096)...)) // the image goes on
	m.put(at["kallsyms_offsets"], offsets)
	var vi strings.Builder
	vi.WriteString("OSRELEASE=6.1.0\nPAGESIZE=4096\n")
	for k, a := range at {
		fmt.Fprintf(&vi, "SYMBOL(%s)=%x\n", k, a)
	}
	info, err := kernel.ParseVMCOREINFO([]byte(vi.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m, info
}

func TestReadKallsyms(t *testing.T) {
	long := strings.Repeat("x", 150)
	syms := []sym{
		{"T_stext", 0xffffffff81000000, false},
		{"t_etext", 0xffffffff81e00000, false},
		{"D__per_cpu_offset", 0xffffffff82a00040, false},
		{"Dcurrent_task", 0x1ad40, true},
		{"d" + long, 0xffffffff82b00000, false},
		{"Tper_cpu_helper", 0xffffffff81000400, false},
	}
	for _, abs := range []bool{false, true} {
		t.Run(fmt.Sprintf("absolute percpu %v", abs), func(t *testing.T) {
			in := syms
			if !abs {
				// Without CONFIG_KALLSYMS_ABSOLUTE_PERCPU a per-cpu
				// symbol is an ordinary address.
				in = slices.Clone(syms)
				in[3].addr = 0xffffffff82c1ad40
			}
			m, vi := kallsymsImage(t, in, abs)
			got, err := readKallsyms(vi, m, "_stext", "_etext", "__per_cpu_offset", "current_task", long, "per_cpu_helper", "absent")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range in {
				if a, ok := got[s.name[1:]]; !ok || a != s.addr {
					t.Errorf("%s: %#x %v, want %#x", s.name[1:], a, ok, s.addr)
				}
			}
			if _, ok := got["absent"]; ok {
				t.Error("found a symbol that is not there")
			}
		})
	}
}

func TestReadKallsymsRefuses(t *testing.T) {
	m, vi := kallsymsImage(t, []sym{{"T_stext", 0xffffffff81000000, false}}, false)
	a, _ := vi.Symbol("kallsyms_num_syms")
	for _, tc := range []struct {
		name string
		n    uint32
	}{{"no symbols", 0}, {"too many", maxSymbols + 1}} {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], tc.n)
		m.put(a, b[:])
		if _, err := readKallsyms(vi, m, "_stext"); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	plain, _ := kernel.ParseVMCOREINFO([]byte("OSRELEASE=6.1.0\nPAGESIZE=4096\n"))
	if _, err := readKallsyms(plain, m, "_stext"); !errors.Is(err, errNoKallsyms) {
		t.Errorf("no kallsyms in VMCOREINFO: %v", err)
	}
}

// FuzzReadKallsyms: tables of any contents give symbols or an error,
// never a panic or an unbounded read.
func FuzzReadKallsyms(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0}, []byte{3, 'T', 'a', 'b'})
	f.Fuzz(func(t *testing.T, head, names []byte) {
		m, vi := kallsymsImage(t, []sym{{"T_stext", 0xffffffff81000000, false}}, false)
		a, _ := vi.Symbol("kallsyms_num_syms")
		if len(head) > 4 {
			head = head[:4]
		}
		m.put(a, head)
		n, _ := vi.Symbol("kallsyms_names")
		m.put(n, names)
		_, _ = readKallsyms(vi, m, "_stext")
	})
}

// note is one ELF note.
func note(name string, typ uint32, desc []byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, uint32(len(name)+1))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = append(b, name...)
	b = append(b, make([]byte, (len(name)+1+3)&^3-len(name))...)
	b = append(b, desc...)
	return append(b, make([]byte, (4-len(desc)%4)%4)...)
}

func TestPrstatus(t *testing.T) {
	cpu := func(b byte) []byte {
		d := make([]byte, 336)
		d[0] = b
		return d
	}
	all := slices.Concat(note("CORE", 1, cpu(1)), note("VMCOREINFO", 0, []byte("OSRELEASE=6.1\n")), note("CORE", 1, cpu(2)), note("CORE", 4, cpu(9)))
	for _, tc := range []struct {
		name  string
		notes []byte
		want  []byte // each descriptor's first byte
	}{
		{"two CPUs", all, []byte{1, 2}},
		{"cut in a descriptor", all[:40], nil},
		{"cut after the first", all[:12+8+336+5], []byte{1}},
		{"none", nil, nil},
		{"other owner", note("LINUX", 1, cpu(5)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			for _, d := range prstatus(tc.notes) {
				got = append(got, d[0])
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzPrstatus(f *testing.F) {
	f.Add(note("CORE", 1, make([]byte, 336)))
	f.Fuzz(func(t *testing.T, notes []byte) {
		for _, d := range prstatus(notes) {
			if len(d) > len(notes) {
				t.Fatal("descriptor longer than the notes")
			}
		}
	})
}

// TestOrder: the priority set's dumpable pfns come first, in class order,
// then every other dumpable pfn in pfn order; every dumpable pfn once; no
// batch mixes the two.
func TestOrder(t *testing.T) {
	dumpable := bitmap.New(100000)
	for p := uint64(0); p < 100000; p++ {
		if p%3 != 0 {
			dumpable.Set(p)
		}
	}
	s := &Set{Classes: []Class{
		{Name: "b", Pfns: []uint64{70001, 70002, 70003, 99999}},
		{Name: "a", Pfns: []uint64{3, 4, 5, 70002}}, // 3 is not dumpable; 70002 twice
	}}
	o := NewOrder(s, dumpable)
	wantFirst := []uint64{70001, 70002, 70003, 99999, 4, 5}
	wantFirst = slices.DeleteFunc(wantFirst, func(p uint64) bool { return !dumpable.Test(p) })
	if o.Len() != uint64(len(wantFirst)) {
		t.Fatalf("%d priority pages, want %d", o.Len(), len(wantFirst))
	}
	var got []uint64
	mixed := false
	for {
		b := o.Next(make([]uint64, 0, 256))
		if len(b) == 0 {
			break
		}
		if slices.ContainsFunc(b, o.Set().Test) && slices.ContainsFunc(b, func(p uint64) bool { return !o.Set().Test(p) }) {
			mixed = true
		}
		got = append(got, b...)
	}
	if mixed {
		t.Error("a batch mixes priority and bulk pfns")
	}
	if !slices.Equal(got[:len(wantFirst)], wantFirst) {
		t.Errorf("first %v, want %v", got[:len(wantFirst)], wantFirst)
	}
	rest := got[len(wantFirst):]
	if !slices.IsSorted(rest) || uint64(len(got)) != dumpable.Count(0, dumpable.Len()) {
		t.Errorf("the bulk is not every other dumpable pfn in order (%d pfns, want %d)", len(got), dumpable.Count(0, dumpable.Len()))
	}
	seen := map[uint64]bool{}
	for _, p := range got {
		if seen[p] || !dumpable.Test(p) {
			t.Fatalf("pfn %d twice or not dumpable", p)
		}
		seen[p] = true
	}
}

// TestFindKernelMachine: on a generated 6.1 machine (page tables, image,
// mem_section), the page tables and the image are found, each page once;
// the classes VMCOREINFO cannot reach there are said.
func TestFindKernelMachine(t *testing.T) {
	v, vi := kernelMachine(t)
	s, err := Find(v, vi)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	seen := map[uint64]bool{}
	for _, c := range s.Classes {
		n[c.Name] = len(c.Pfns)
		for _, p := range c.Pfns {
			if seen[p] {
				t.Errorf("pfn %#x in two classes", p)
			}
			seen[p] = true
		}
	}
	tr, err := v.Arch().NewTranslator(v, vi)
	if err != nil {
		t.Fatal(err)
	}
	top := tr.TopTable() / 4096
	stext, _ := vi.Symbol("_stext")
	img, err := tr.VtoP(stext)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Classes[0].Pfns, top) || !seen[img/4096] {
		t.Errorf("the top table %#x or _stext's page %#x is not in the set: %v", top, img/4096, n)
	}
	if n["page tables"] == 0 || n["kernel data"] == 0 || len(s.Missing) == 0 {
		t.Errorf("classes %v, missing %q", n, s.Missing)
	}
}

// TestFindAllocations: the search leaves little garbage for the copy
// pass's collector (issue 21's acceptance 3): a few hundred allocations on
// a generated 6.1 machine, where one per step of the page-table walk (an
// error for every empty entry and every 512 GiB of the non-canonical
// hole) made 267 398.
func TestFindAllocations(t *testing.T) {
	v, vi := kernelMachine(t)
	n := testing.AllocsPerRun(3, func() {
		if _, err := Find(v, vi); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1000 {
		t.Errorf("Find makes %.0f allocations", n)
	}
	t.Logf("Find makes %.0f allocations", n)
}

// On generated ppc64le machines (4 KiB pages; radix, hash) the walk of
// the kernel's address space ends with the kernel's region, at
// 0xc010000000000000 or 0xc000400000000000: nothing above is canonical
// (it used to step through the rest of the address space, 2^23 steps of
// 63 lookups each). The top table is in the set,
// and under radix the tables below it (the linear map's, the vmemmap's).
func TestFindPPC64Machine(t *testing.T) {
	for _, hash := range []bool{false, true} {
		v, vi := specMachine(t, synth.NewPPC64Machine(synth.KernelSpec{Profile: "6.12", HashMMU: hash}, 96))
		s, err := Find(v, vi)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range s.Missing {
			if strings.Contains(m, "page tables") {
				t.Errorf("hash %v: %s", hash, m)
			}
		}
		tr, err := v.Arch().NewTranslator(v, vi)
		if err != nil {
			t.Fatal(err)
		}
		f := &finder{m: v, vi: vi, tr: tr, rec: &recorder{r: v, page: 4096}, page: 4096}
		if n := f.tables(); n > 1<<14 {
			t.Errorf("hash %v: the walk took %d steps", hash, n)
		}
		tables := s.Classes[0]
		if tables.Name != "page tables" || !slices.Contains(tables.Pfns, tr.TopTable()/4096) || !hash && len(tables.Pfns) < 16+3 {
			t.Errorf("hash %v: %s: %d pages, top table %#x", hash, tables.Name, len(tables.Pfns), tr.TopTable())
		}
	}
}

// kernelMachine is a generated 6.1 machine of 32 MiB with page tables, a
// kernel image and mem_section (synth.KernelMachine), open, and its
// VMCOREINFO; it is closed when the test ends.
func kernelMachine(t *testing.T) (source.Memory, *kernel.VMCOREINFO) {
	t.Helper()
	return specMachine(t, synth.KernelMachine("6.1", 32))
}

// specMachine is the kernel machine s written, open, and its VMCOREINFO.
func specMachine(t *testing.T, s synth.Spec) (source.Memory, *kernel.VMCOREINFO) {
	t.Helper()
	path := t.TempDir() + "/vmcore"
	if err := synth.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	v, err := source.OpenMemory(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	notes, _, off, size := v.Notes()
	vi, err := kernel.ParseVMCOREINFO(notes[off : off+size])
	if err != nil {
		t.Fatal(err)
	}
	return v, vi
}
