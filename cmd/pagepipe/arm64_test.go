package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/source"
)

// arm64Machines are the generated arm64 kernel machines dumped below: every
// VA size arm64 Linux has with 4 KiB pages (48 is Debian's), a 52-bit
// kernel on hardware without 52-bit VAs, and 52-bit physical addresses
// (LPA2 descriptors); then every VA size with 16 KiB pages (47, 48) and
// with 64 KiB pages (42, 48, 52, and 52-bit PAs: FEAT_LPA descriptors).
// shapes marks the machines every output shape and codec is checked on;
// readers those that libkdumpfile and drgn read back.
var arm64Machines = []struct {
	name   string
	ks     synth.KernelSpec
	mib    int
	page   uint64 // 0: 4 KiB
	levels []string
	shapes bool
}{
	{"va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 128, 0, allLevels, true},
	{"va39", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 39}, 96, 0, []string{"1", "31", "11"}, false},
	{"va52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52}, 96, 0, []string{"1", "31", "11"}, false},
	{"va52-on-48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, VABitsActual: 48}, 96, 0, []string{"1", "31"}, false},
	{"va52-pa52", synth.KernelSpec{Profile: "6.12", KASLR: true, VABits: 52, PA52: true}, 96, 0, []string{"1", "31"}, false},
	{"16k-va47", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 47}, 128, 16 << 10, allLevels, true},
	{"16k-va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 96, 16 << 10, []string{"1", "31", "11"}, false},
	{"64k-va42", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 42}, 128, 64 << 10, allLevels, true},
	{"64k-va48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48}, 96, 64 << 10, []string{"1", "31", "11"}, false},
	{"64k-va52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52}, 96, 64 << 10, []string{"1", "31", "11"}, false},
	{"64k-va52-on-48", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, VABitsActual: 48}, 96, 64 << 10, []string{"1", "31"}, false},
	{"64k-va52-pa52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 52, PA52: true}, 96, 64 << 10, []string{"1", "31"}, false},
	{"64k-va48-pa52", synth.KernelSpec{Profile: "6.1", KASLR: true, VABits: 48, PA52: true}, 96, 64 << 10, []string{"1", "31"}, false},
}

// allLevels are the dump levels issue 19 names.
var allLevels = []string{"0", "1", "2", "4", "8", "16", "31", "11", "27"}

// arm64Machine is the spec of one of arm64Machines.
func arm64Machine(ks synth.KernelSpec, mib int, page uint64) synth.Spec {
	s := synth.NewARM64Machine(ks, mib)
	s.PageSize = page
	return s
}

// wantTruth is what a dump of kernel machine s at level must hold: the generator's
// pages of the pfns its truth keeps.
func wantTruth(t *testing.T, s synth.Spec, level string) (judge.Pages, []byte) {
	t.Helper()
	var l int
	fmt.Sscan(level, &l)
	bits, _, err := synth.ExpectedFilter(s, l)
	if err != nil {
		t.Fatal(err)
	}
	m := bitmap.FromBytes(bits, uint64(len(bits))*8)
	want := judge.Pages{}
	buf := make([]byte, s.PageBytes())
	for pfn := m.NextSet(0); pfn < m.Len(); pfn = m.NextSet(pfn + 1) {
		synth.Page(s, pfn, buf)
		want[pfn] = judge.Hash(buf)
	}
	return want, bits
}

// checkARM64Header asserts what readers decode an arm64 dump by: utsname
// read from the kernel's memory (machine aarch64, the generated nodename),
// phys_base = PHYS_OFFSET, blocks of the kernel's page size.
func checkARM64Header(t *testing.T, dump string, s synth.Spec) {
	t.Helper()
	d, err := source.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	vi := vi(t, s)
	po, _ := vi.NumberUnsigned("PHYS_OFFSET")
	field := func(i int) string {
		f := d.Header.Utsname[i*kdumpfmt.UtsnameFieldSize : (i+1)*kdumpfmt.UtsnameFieldSize]
		return string(bytes.TrimRight(f, "\x00"))
	}
	if field(0) != "Linux" || !strings.HasPrefix(field(1), "synth-") || field(2) != vi.OSRelease() || field(4) != "aarch64" {
		t.Errorf("utsname %q", []string{field(0), field(1), field(2), field(4)})
	}
	if d.Sub.PhysBase != po || po < 1<<63 {
		t.Errorf("phys_base %#x, PHYS_OFFSET %#x", d.Sub.PhysBase, po)
	}
	if uint64(d.Header.BlockSize) != s.PageBytes() || vi.PageSize() != int64(d.Header.BlockSize) {
		t.Errorf("block size %d, pages of %d bytes", d.Header.BlockSize, s.PageBytes())
	}
}

// vi is the VMCOREINFO of the kernel machine s.
func vi(t *testing.T, s synth.Spec) *kernel.VMCOREINFO {
	t.Helper()
	text, err := synth.KernelVMCOREINFO(s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := kernel.ParseVMCOREINFO([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Acceptance (issue 19 acc. 3, issue 23 acc. 2): generated arm64 vmcores
// of each geometry, 4, 16 and 64 KiB pages, dump to what the generator
// says they hold: at every level the dumped pfns are the truth's and each
// page is the generator's, the header is an arm64 one with blocks of the
// page size, and -c, -l and a refiltered dump read back the same (the
// shapes machines: every codec, -F/-R, -E, --split/--reassemble; that
// libkdumpfile and drgn read back every page: TestARM64GeneratedReaders).
func TestARM64GeneratedDumps(t *testing.T) {
	dir := t.TempDir()
	for _, m := range arm64Machines {
		t.Run(m.name, func(t *testing.T) {
			s := arm64Machine(m.ks, m.mib, m.page)
			vmcore := writeShape(t, dir, m.name, s)
			for _, level := range m.levels {
				out := filepath.Join(dir, m.name+".d"+level)
				mustPagepipe(t, "-d", level, vmcore, out)
				want, bits := wantTruth(t, s, level)
				if d := want.Diff(ownReader(t, out)); d != "" {
					t.Fatalf("-d %s:\n%s", level, d)
				}
				d, err := source.OpenDump(out)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Dumpable.Equal(bitmap.FromBytes(bits, d.MaxMapnr)) {
					t.Errorf("-d %s: 2nd bitmap differs from the truth", level)
				}
				d.Close()
				checkARM64Header(t, out, s)
				if level != "31" {
					os.Remove(out)
				}
			}
			d31 := filepath.Join(dir, m.name+".d31")
			want, _ := wantTruth(t, s, "31")
			codecs := []string{"-c", "-l"}
			if m.shapes {
				codecs = append(codecs, "-p", "-z")
			}
			for _, c := range codecs {
				out := d31 + c
				mustPagepipe(t, c, "-d", "31", vmcore, out)
				if d := want.Diff(ownReader(t, out)); d != "" {
					t.Fatalf("%s -d 31:\n%s", c, d)
				}
				os.Remove(out)
			}
			// Refiltering the -d 1 dump to 31 walks the arm64 tables in a
			// kdump file, and gives the same file as the vmcore.
			d1 := filepath.Join(dir, m.name+".d1")
			mustPagepipe(t, "-d", "1", vmcore, d1)
			re := d1 + ".31"
			mustPagepipe(t, "-d", "31", d1, re)
			if !bytes.Equal(readFile(t, re), readFile(t, d31)) {
				t.Errorf("refiltered -d 31 differs from the vmcore's: %s", judge.FirstDiff(readFile(t, re), readFile(t, d31)))
			}
			os.Remove(d1)
			os.Remove(re)
			if m.shapes {
				checkARM64Shapes(t, dir, m.name, vmcore, d31, s)
			}
		})
	}
}

// checkARM64Shapes: -F then -R gives the -d 31 file back; -E keeps the
// arm64 ELF header and the truth's pages; verify and inspect read the
// dump in its page size; --split's files together hold them.
func checkARM64Shapes(t *testing.T, dir, name, vmcore, d31 string, s synth.Spec) {
	want, _ := wantTruth(t, s, "31")
	var stream, stderr bytes.Buffer
	if rc := run([]string{"-F", "-d", "31", vmcore}, strings.NewReader(""), &stream, &stderr); rc != 0 {
		t.Fatalf("-F: exit %d: %s", rc, stderr.String())
	}
	rebuilt := filepath.Join(dir, name+".R")
	var out bytes.Buffer
	if rc := run([]string{"-R", rebuilt}, &stream, &out, &stderr); rc != 0 {
		t.Fatalf("-R: exit %d: %s", rc, stderr.String())
	}
	if !bytes.Equal(readFile(t, rebuilt), readFile(t, d31)) {
		t.Errorf("-F | -R differs from the -d 31 file: %s", judge.FirstDiff(readFile(t, rebuilt), readFile(t, d31)))
	}

	elfOut := filepath.Join(dir, name+".E")
	mustPagepipe(t, "-E", "-d", "31", vmcore, elfOut)
	v, err := source.Open(elfOut)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.Arch() != kernel.ARM64 || binary.LittleEndian.Uint16(v.Ehdr[18:]) != kernel.ARM64.ELFMachine() {
		t.Errorf("-E: architecture %s", v.Arch().Name())
	}
	ps := s.PageBytes()
	if v.PageSize() != ps {
		t.Errorf("-E: %d-byte pages, want %d", v.PageSize(), ps)
	}
	got := elfPages(t, v)
	buf := make([]byte, ps)
	// Every page the ELF dump holds is the generator's, and it holds every
	// non-zero page the truth keeps (-d 31 drops zero pages too).
	zero := judge.Hash(make([]byte, ps))
	for pfn, h := range got {
		synth.Page(s, pfn, buf)
		if h != judge.Hash(buf) {
			t.Fatalf("-E -d 31: pfn %#x differs from the generator's", pfn)
		}
	}
	for pfn, h := range want {
		if _, ok := got[pfn]; !ok && h != zero {
			t.Fatalf("-E -d 31: pfn %#x missing", pfn)
		}
	}

	// verify reads every page back against the vmcore; inspect reports the
	// page size as the block size.
	if got, w := mustPagepipe(t, "verify", vmcore, d31), fmt.Sprintf("verified: %d pages of", len(want)); !strings.HasPrefix(got, w) {
		t.Errorf("verify says %q, want %q...", got, w)
	}
	if got, w := mustPagepipe(t, "inspect", d31), fmt.Sprintf("block size      : %d\n", ps); !strings.Contains(got, w) {
		t.Errorf("inspect says\n%s\nwithout %q", got, w)
	}

	parts := splitNames(dir, name+".split", 2)
	mustPagepipe(t, append([]string{"--split", "--splitblock-size", fmt.Sprint(ps >> 10), "-d", "31", vmcore}, parts...)...)
	for _, p := range parts {
		checkARM64Header(t, p, s)
	}
	re := filepath.Join(dir, name+".reassembled")
	mustPagepipe(t, append(append([]string{"--reassemble"}, parts...), re)...)
	if !bytes.Equal(readFile(t, re), readFile(t, d31)) {
		t.Errorf("--split then --reassemble differs from the -d 31 file: %s", judge.FirstDiff(readFile(t, re), readFile(t, d31)))
	}
}

// elfPages hashes every page the ELF dump v holds, read through
// pagepipe's own reader.
func elfPages(t *testing.T, v *source.Vmcore) judge.Pages {
	t.Helper()
	ps := v.PageSize()
	buf := make([]byte, ps)
	_, has := v.Bitmaps(v.MaxMapnr, source.PartialPages{})
	got := judge.Pages{}
	for pfn := has.NextSet(0); pfn < has.Len(); pfn = has.NextSet(pfn + 1) {
		if err := v.ReadPhys(pfn*ps, buf); err != nil {
			t.Fatal(err)
		}
		got[pfn] = judge.Hash(buf)
	}
	return got
}
