package synth

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// phdr is a program header as the tests see it.
type phdr struct {
	Type, Flags                           uint32
	Off, Vaddr, Paddr, Filesz, Memsz, Aln uint64
}

// rawELF is what parseRaw finds: a minimal ELF64 core reader written
// for the tests, honouring e_phoff and PN_XNUM (debug/elf does not
// implement extended numbering).
type rawELF struct {
	Type, Machine, Ehsize, Phnum16, Shnum, Shstrndx uint16
	Phoff, Shoff                                    uint64
	Progs                                           []phdr
}

func parseRaw(t *testing.T, f *os.File) rawELF {
	t.Helper()
	le := binary.LittleEndian
	h := make([]byte, ehdrSize)
	if _, err := f.ReadAt(h, 0); err != nil {
		t.Fatal(err)
	}
	if string(h[:4]) != "\x7fELF" || h[4] != 2 || h[5] != 1 || h[6] != 1 {
		t.Fatalf("bad e_ident % x", h[:16])
	}
	e := rawELF{
		Type: le.Uint16(h[16:]), Machine: le.Uint16(h[18:]),
		Phoff: le.Uint64(h[32:]), Shoff: le.Uint64(h[40:]),
		Ehsize: le.Uint16(h[52:]), Phnum16: le.Uint16(h[56:]),
		Shnum: le.Uint16(h[60:]), Shstrndx: le.Uint16(h[62:]),
	}
	if v := le.Uint32(h[20:]); v != 1 {
		t.Fatalf("e_version %d", v)
	}
	n := int(e.Phnum16)
	if e.Phnum16 == pnXnum {
		sh := make([]byte, shdrSize)
		if _, err := f.ReadAt(sh, int64(e.Shoff)); err != nil {
			t.Fatal(err)
		}
		n = int(le.Uint32(sh[44:]))
	}
	ph := make([]byte, n*phdrSize)
	if _, err := f.ReadAt(ph, int64(e.Phoff)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		p := ph[i*phdrSize:]
		e.Progs = append(e.Progs, phdr{
			Type: le.Uint32(p[0:]), Flags: le.Uint32(p[4:]), Off: le.Uint64(p[8:]),
			Vaddr: le.Uint64(p[16:]), Paddr: le.Uint64(p[24:]), Filesz: le.Uint64(p[32:]),
			Memsz: le.Uint64(p[40:]), Aln: le.Uint64(p[48:]),
		})
	}
	return e
}

// note is one decoded ELF note.
type note struct {
	Name string
	Type uint32
	Desc []byte
}

func parseNotes(t *testing.T, b []byte) []note {
	t.Helper()
	le := binary.LittleEndian
	var out []note
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("truncated note header: %d bytes left", len(b))
		}
		nsz, dsz, typ := int(le.Uint32(b)), int(le.Uint32(b[4:])), le.Uint32(b[8:])
		b = b[12:]
		if pad4(nsz)+pad4(dsz) > len(b) {
			t.Fatalf("note overruns segment")
		}
		name := string(b[:nsz])
		if nsz == 0 || name[nsz-1] != 0 {
			t.Fatalf("note name %q not NUL-terminated", name)
		}
		desc := b[pad4(nsz) : pad4(nsz)+dsz]
		out = append(out, note{strings.TrimRight(name, "\x00"), typ, desc})
		b = b[pad4(nsz)+pad4(dsz):]
	}
	return out
}

func writeTemp(t *testing.T, s Spec) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vmcore")
	if err := WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, f
}

// testSpecs is Shapes plus combinations no test of other packages needs.
func testSpecs() map[string]Spec {
	m := Shapes()
	q := m["qemu"]
	q.PNXnum = true
	m["qemu-pnxnum"] = q
	u := m["unaligned"]
	u.Layout = QEMU
	m["qemu-unaligned"] = u
	p := m["partial-page"]
	p.ExtraNotes = true
	p.CPUs = 3
	m["procvmcore-extranotes"] = p
	m["default-8"] = Default(8)
	return m
}

// runSorted runs f as a subtest for each spec, in name order.
func runSorted(t *testing.T, specs map[string]Spec, f func(t *testing.T, s Spec)) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		t.Run(name, func(t *testing.T) { f(t, specs[name]) })
	}
}

func TestShapes(t *testing.T) {
	runSorted(t, testSpecs(), func(t *testing.T, s Spec) {
		g, err := GeometryOf(s)
		if err != nil {
			t.Fatal(err)
		}
		if g.Size > 64<<20 {
			t.Errorf("shape is %d bytes; shapes should stay small", g.Size)
		}
		_, f := writeTemp(t, s)
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != g.Size {
			t.Fatalf("file size %d, geometry says %d", st.Size(), g.Size)
		}
		e := parseRaw(t, f)
		checkHeader(t, s, g, e)
		if !g.Xnum {
			checkStdlib(t, f, e)
		}
		checkNotes(t, s, g, f, e)
		checkData(t, s, f, e)
		checkHoles(t, s)
	})
}

func checkHeader(t *testing.T, s Spec, g Geometry, e rawELF) {
	t.Helper()
	if e.Type != etCore || e.Machine != emX86_64 {
		t.Errorf("e_type %d e_machine %d", e.Type, e.Machine)
	}
	if len(e.Progs) != 1+len(s.Segments) {
		t.Fatalf("%d program headers, want %d", len(e.Progs), 1+len(s.Segments))
	}
	if (e.Phnum16 == pnXnum) != s.PNXnum {
		t.Errorf("e_phnum %#x with PNXnum %v", e.Phnum16, s.PNXnum)
	}
	switch s.Layout {
	case ProcVmcore:
		if e.Phoff != 64 || e.Ehsize != 64 {
			t.Errorf("e_phoff %d e_ehsize %d", e.Phoff, e.Ehsize)
		}
		if g.NoteOff%PageSize != 0 {
			t.Errorf("PT_NOTE at %#x, not page aligned", g.NoteOff)
		}
	case QEMU:
		if e.Phoff != 192 || e.Ehsize != 8 || e.Shoff != 64 || e.Shnum != 2 || e.Shstrndx != 1 {
			t.Errorf("QEMU header: phoff %d ehsize %d shoff %d shnum %d shstrndx %d",
				e.Phoff, e.Ehsize, e.Shoff, e.Shnum, e.Shstrndx)
		}
		if g.StrtabOff+int64(len(shstrtab)) != g.Size {
			t.Errorf(".shstrtab data at %#x is not at the end (%#x)", g.StrtabOff, g.Size)
		}
	}
	if p := e.Progs[0]; p.Type != ptNote || int64(p.Off) != g.NoteOff || int64(p.Filesz) != g.NoteSize || p.Memsz != p.Filesz {
		t.Errorf("first program header %+v is not the PT_NOTE", p)
	}
	for i, sg := range s.Segments {
		p := e.Progs[1+i]
		if p.Type != ptLoad || p.Paddr != sg.Paddr || p.Vaddr != sg.Vaddr ||
			p.Filesz != sg.FileSize || p.Memsz != sg.MemSize || int64(p.Off) != g.LoadOff[i] || p.Aln != 0 {
			t.Errorf("PT_LOAD %d = %+v, segment %+v", i, p, sg)
		}
		if s.Layout == ProcVmcore {
			if p.Flags != 7 || p.Off%PageSize != sg.Paddr%PageSize {
				t.Errorf("PT_LOAD %d: flags %d, offset %#x not page-congruent with paddr %#x", i, p.Flags, p.Off, p.Paddr)
			}
		}
	}
}

// checkStdlib opens the file with debug/elf and compares its view.
func checkStdlib(t *testing.T, f *os.File, e rawELF) {
	t.Helper()
	ef, err := elf.NewFile(f)
	if err != nil {
		t.Fatalf("debug/elf: %v", err)
	}
	if ef.Type != elf.ET_CORE || ef.Machine != elf.EM_X86_64 || ef.Class != elf.ELFCLASS64 || ef.Data != elf.ELFDATA2LSB {
		t.Errorf("debug/elf header: %+v", ef.FileHeader)
	}
	if len(ef.Progs) != len(e.Progs) {
		t.Fatalf("debug/elf sees %d progs", len(ef.Progs))
	}
	for i, p := range ef.Progs {
		r := e.Progs[i]
		if uint32(p.Type) != r.Type || p.Off != r.Off || p.Paddr != r.Paddr || p.Filesz != r.Filesz || p.Memsz != r.Memsz {
			t.Errorf("debug/elf prog %d: %+v vs %+v", i, p.ProgHeader, r)
		}
	}
	if e.Shnum == 2 {
		if s := ef.Section(".shstrtab"); s == nil {
			t.Error("debug/elf finds no .shstrtab")
		}
	}
}

func checkNotes(t *testing.T, s Spec, g Geometry, f *os.File, e rawELF) {
	t.Helper()
	p := e.Progs[0]
	b := make([]byte, p.Filesz)
	if _, err := f.ReadAt(b, int64(p.Off)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, NoteBytes(s)) {
		t.Fatal("PT_NOTE contents differ from NoteBytes")
	}
	notes := parseNotes(t, b)
	want := s.CPUs
	if s.ExtraNotes {
		want += s.CPUs
	}
	if s.VMCOREINFO != "" {
		want++
	}
	if len(notes) != want {
		t.Fatalf("%d notes, want %d", len(notes), want)
	}
	for i := 0; i < s.CPUs; i++ {
		n := notes[i]
		if n.Name != "CORE" || n.Type != NtPrstatus || len(n.Desc) != PrstatusSize {
			t.Errorf("note %d: %s type %d desc %d", i, n.Name, n.Type, len(n.Desc))
		}
	}
	if s.ExtraNotes {
		for i := s.CPUs; i < 2*s.CPUs; i++ {
			n := notes[i]
			if n.Name != "QEMU" || n.Type != 0 || len(n.Desc) != QEMUCPUStateSize {
				t.Errorf("note %d: %s type %d desc %d", i, n.Name, n.Type, len(n.Desc))
			}
		}
	}
	if s.VMCOREINFO == "" {
		if g.VMCOREINFOOff != -1 {
			t.Errorf("VMCOREINFOOff %d without a note", g.VMCOREINFOOff)
		}
		return
	}
	n := notes[len(notes)-1]
	if n.Name != "VMCOREINFO" || n.Type != 0 || string(n.Desc) != s.VMCOREINFO {
		t.Errorf("last note %s type %d desc %q", n.Name, n.Type, n.Desc)
	}
	vb := make([]byte, g.VMCOREINFOSize)
	if _, err := f.ReadAt(vb, g.VMCOREINFOOff); err != nil || string(vb) != s.VMCOREINFO {
		t.Errorf("VMCOREINFO at Geometry offset: %q, %v", vb, err)
	}
}

// checkData reads every page of every segment back and compares it with
// Page, and checks KindOf against the bytes.
func checkData(t *testing.T, s Spec, f *os.File, e rawELF) {
	t.Helper()
	want := make([]byte, PageSize)
	got := make([]byte, PageSize)
	counts := map[Kind]int{}
	for i, sg := range s.Segments {
		p := e.Progs[1+i]
		for addr := sg.Paddr &^ (PageSize - 1); addr < sg.End(); addr += PageSize {
			pfn := addr / PageSize
			lo, hi := max(addr, sg.Paddr), min(addr+PageSize, sg.End())
			Page(s, pfn, want)
			n := int(hi - lo)
			if _, err := f.ReadAt(got[:n], int64(p.Off+lo-sg.Paddr)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:n], want[lo-addr:hi-addr]) {
				t.Fatalf("segment %d pfn %#x: file bytes differ from Page", i, pfn)
			}
			k := KindOf(s, pfn)
			counts[k]++
			if allZero(want) != (k == Zero) {
				t.Fatalf("pfn %#x: KindOf %v but all-zero %v", pfn, k, allZero(want))
			}
		}
	}
	if s.Mix.Zero == 0 && counts[Zero] != 0 {
		t.Errorf("%d zero pages with Mix.Zero = 0", counts[Zero])
	}
	if s.Mix.Zero == 1 && len(counts) != 1 {
		t.Errorf("kinds %v with Mix.Zero = 1", counts)
	}
	t.Logf("kinds: %v", counts)
}

// checkHoles: pages outside all segments and MemSize tails are zero.
func checkHoles(t *testing.T, s Spec) {
	t.Helper()
	buf := make([]byte, PageSize)
	for i, sg := range s.Segments {
		for _, addr := range []uint64{sg.End() + PageSize, sg.Paddr + sg.MemSize - 1, sg.Paddr - PageSize} {
			covered := false
			for _, o := range s.Segments {
				if addr/PageSize >= o.Paddr/PageSize && addr/PageSize <= (o.End()-1)/PageSize && o.FileSize > 0 {
					covered = true
				}
			}
			if covered {
				continue
			}
			Page(s, addr/PageSize, buf)
			if !allZero(buf) || KindOf(s, addr/PageSize) != Zero {
				t.Errorf("segment %d: page at %#x outside the file data is not zero", i, addr)
			}
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// memAt is an io.WriterAt over a byte slice pre-filled with garbage, to
// prove that Write covers every byte.
type memAt struct{ b []byte }

func (m *memAt) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, fmt.Errorf("write [%d, %d) outside [0, %d)", off, off+int64(len(p)), len(m.b))
	}
	return copy(m.b[off:], p), nil
}

// denseAndFile is s's geometry, s written by Write over memory filled with
// 0xee, and s written by WriteFile as a sparse file.
func denseAndFile(t *testing.T, s Spec) (g Geometry, dense, file []byte) {
	t.Helper()
	g, err := GeometryOf(s)
	if err != nil {
		t.Fatal(err)
	}
	m := &memAt{bytes.Repeat([]byte{0xee}, int(g.Size))}
	if err := Write(m, s); err != nil {
		t.Fatal(err)
	}
	path, _ := writeTemp(t, s)
	file, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return g, m.b, file
}

func TestWriteDenseEqualsSparse(t *testing.T) {
	runSorted(t, testSpecs(), func(t *testing.T, s Spec) {
		_, dense, fb := denseAndFile(t, s)
		if !bytes.Equal(dense, fb) {
			for i := range fb {
				if fb[i] != dense[i] {
					t.Fatalf("Write and WriteFile differ first at %#x", i)
				}
			}
		}
	})
}

func TestSparseFileHasHoles(t *testing.T) {
	s := Shapes()["all-zero"]
	_, f := writeTemp(t, s)
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block counts here")
	}
	if blocks := sys.Blocks; blocks*512 > 64<<10 {
		t.Errorf("all-zero image of %d bytes uses %d bytes on disk", st.Size(), blocks*512)
	}
}

func TestDeterminism(t *testing.T) {
	s := Default(16)
	a, b := make([]byte, PageSize), make([]byte, PageSize)
	differ := 0
	for pfn := uint64(0x100); pfn < 0x400; pfn++ {
		Page(s, pfn, a)
		Page(s, pfn, b)
		if !bytes.Equal(a, b) {
			t.Fatalf("pfn %#x: Page not deterministic", pfn)
		}
		s2 := s
		s2.Seed++
		Page(s2, pfn, b)
		if !bytes.Equal(a, b) {
			differ++
		}
	}
	if differ < 0x300/2 {
		t.Errorf("only %d of %d pages change with the seed", differ, 0x300)
	}
}

func TestValidate(t *testing.T) {
	good := Default(8)
	cases := map[string]func(*Spec){
		"memsz<filesz":  func(s *Spec) { s.Segments[0].MemSize = s.Segments[0].FileSize - 1 },
		"negative cpus": func(s *Spec) { s.CPUs = -1 },
		"mix>1":         func(s *Spec) { s.Mix = Mix{Zero: 0.6, Random: 0.6} },
		"mix negative":  func(s *Spec) { s.Mix.Text = -0.1 },
		"layout":        func(s *Spec) { s.Layout = 9 },
		"overflow": func(s *Spec) {
			s.Segments = append(s.Segments, Segment{Paddr: 1 << 63, FileSize: 1 << 62, MemSize: 1 << 63})
		},
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range cases {
		s := Default(8)
		mod(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
		if err := Write(&memAt{}, s); err == nil {
			t.Errorf("%s: Write did not fail", name)
		}
	}
}

func TestDefault(t *testing.T) {
	for _, mib := range []int{0, 4, 256, 1024, 8192} {
		s := Default(mib)
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		want := uint64(max(mib, 4)) << 20
		if got := s.DataBytes(); got != want {
			t.Errorf("Default(%d): %d bytes of RAM, want %d", mib, got, want)
		}
		if len(s.Segments) != 3 || s.Segments[2].Paddr < 4<<30 || s.Segments[2].FileSize == 0 {
			t.Errorf("Default(%d): segments %+v", mib, s.Segments)
		}
		if s.Segments[1].End() > 3<<30 {
			t.Errorf("Default(%d): low RAM reaches %#x", mib, s.Segments[1].End())
		}
		if s.CPUs < 2 || s.CPUs > 4 {
			t.Errorf("Default(%d): %d CPUs", mib, s.CPUs)
		}
		for _, k := range []string{"OSRELEASE=", "PAGESIZE=4096\n", "CRASHTIME="} {
			if !strings.Contains(s.VMCOREINFO, k) {
				t.Errorf("VMCOREINFO lacks %s", k)
			}
		}
	}
}

func TestDefault256Speed(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 256 MiB")
	}
	s := Default(256)
	path := filepath.Join(t.TempDir(), "vmcore")
	start := time.Now()
	if err := WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	t.Logf("Default(256): %v, %.0f MB/s", d, float64(s.DataBytes())/d.Seconds()/1e6)
	if d > 5*time.Second {
		t.Errorf("Default(256) took %v", d)
	}
	// Spot-check pages across the three segments.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, _ := GeometryOf(s)
	want, got := make([]byte, PageSize), make([]byte, PageSize)
	for i, sg := range s.Segments {
		for _, addr := range []uint64{sg.Paddr, sg.Paddr + sg.FileSize/2&^(PageSize-1), sg.End() - PageSize} {
			Page(s, addr/PageSize, want)
			if _, err := f.ReadAt(got, g.LoadOff[i]+int64(addr-sg.Paddr)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("segment %d page %#x differs", i, addr)
			}
		}
	}
}

// failAt fails every write from the n-th on.
type failAt struct{ n atomic.Int32 }

func (f *failAt) WriteAt(p []byte, _ int64) (int, error) {
	if f.n.Add(-1) < 0 {
		return 0, errBoom
	}
	return len(p), nil
}

var errBoom = errors.New("boom")

func TestWriteError(t *testing.T) {
	for _, n := range []int32{0, 1, 2, 5, 15} {
		f := &failAt{}
		f.n.Store(n)
		if err := Write(f, Default(64)); !errors.Is(err, errBoom) {
			t.Errorf("failing after %d writes: err %v", n, err)
		}
	}
}

func TestWriteFileReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vmcore")
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, 10<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Shapes()["cpu1"]
	if err := WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	g, _ := GeometryOf(s)
	if st, err := os.Stat(path); err != nil || st.Size() != g.Size {
		t.Fatalf("after rewrite: %v, %v", st, err)
	}
}

// Every architecture's vmcore is a well-formed core of its class and byte
// order, as debug/elf reads it: e_machine, the PT_LOADs, and notes whose
// CPU registers have the architecture's size and whose VMCOREINFO is the
// spec's.
func TestForeignMachines(t *testing.T) {
	for _, a := range Archs() {
		t.Run(a.String(), func(t *testing.T) {
			s := ForeignMachine(a, 8)
			in := a.info()
			_, f := writeTemp(t, s)
			ef, err := elf.NewFile(f)
			if err != nil {
				t.Fatalf("debug/elf: %v", err)
			}
			wantClass, wantData := elf.ELFCLASS64, elf.ELFDATA2LSB
			if in.class32 {
				wantClass = elf.ELFCLASS32
			}
			if in.bigEndian {
				wantData = elf.ELFDATA2MSB
			}
			if ef.Type != elf.ET_CORE || ef.Machine != elf.Machine(in.machine) || ef.Class != wantClass || ef.Data != wantData {
				t.Fatalf("header %+v, want machine %d class %v data %v", ef.FileHeader, in.machine, wantClass, wantData)
			}
			if len(ef.Progs) != 1+len(s.Segments) || ef.Progs[0].Type != elf.PT_NOTE {
				t.Fatalf("%d program headers", len(ef.Progs))
			}
			for i, sg := range s.Segments {
				p := ef.Progs[1+i]
				if p.Type != elf.PT_LOAD || p.Paddr != sg.Paddr || p.Filesz != sg.FileSize || p.Memsz != sg.MemSize {
					t.Errorf("PT_LOAD %d = %+v, segment %+v", i, p.ProgHeader, sg)
				}
			}
			notes := make([]byte, ef.Progs[0].Filesz)
			if _, err := f.ReadAt(notes, int64(ef.Progs[0].Off)); err != nil {
				t.Fatal(err)
			}
			var got []string
			for b := notes; len(b) >= 12; {
				namesz, descsz, typ := ef.ByteOrder.Uint32(b), ef.ByteOrder.Uint32(b[4:]), ef.ByteOrder.Uint32(b[8:])
				name := string(bytes.TrimRight(b[12:12+namesz], "\x00"))
				desc := b[12+pad4(int(namesz)):][:descsz]
				switch {
				case name == "CORE" && typ == NtPrstatus && int(descsz) != in.prstatus:
					t.Errorf("NT_PRSTATUS of %d bytes, want %d", descsz, in.prstatus)
				case name == "VMCOREINFO" && string(desc) != s.VMCOREINFO:
					t.Errorf("VMCOREINFO %q", desc)
				}
				got = append(got, name)
				b = b[12+pad4(int(namesz))+pad4(int(descsz)):]
			}
			if strings.Join(got, " ") != "CORE CORE VMCOREINFO" {
				t.Errorf("notes %v", got)
			}
			if !strings.Contains(s.VMCOREINFO, fmt.Sprintf("PAGESIZE=%d\n", in.pageSize)) {
				t.Errorf("VMCOREINFO without PAGESIZE=%d", in.pageSize)
			}
		})
	}
}
