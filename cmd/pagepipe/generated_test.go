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

// generatedMachine is one generated kernel machine of another architecture
// than x86_64 that TestGeneratedDumps dumps: levels are the dump levels it
// is dumped at, shapes marks the machines every codec and output shape is
// checked on.
type generatedMachine struct {
	name   string
	spec   synth.Spec
	levels []string
	shapes bool
}

// generatedMachines are arm64Machines (every arm64 geometry), riscvMachines
// (every translation mode) and ppc64Machines (4 KiB pages, radix and hash).
func generatedMachines() []generatedMachine {
	var ms []generatedMachine
	for _, m := range arm64Machines {
		ms = append(ms, generatedMachine{"arm64-" + m.name, arm64Machine(m.ks, m.mib, m.page), m.levels, m.shapes})
	}
	for _, m := range riscvMachines {
		ms = append(ms, generatedMachine{"riscv64-" + m.name, riscvMachine(m.vaBits, m.mib), m.levels, m.shapes})
	}
	for _, m := range ppc64Machines {
		ms = append(ms, generatedMachine{"ppc64le-" + m.name, synth.NewPPC64Machine(m.ks, m.mib), allLevels, true})
	}
	return ms
}

// Acceptance (issue 19 acc. 3, issue 23 acc. 2, issue 36 acc. 2, issue 37
// acc. 3): generated vmcores of every arm64 geometry (4, 16 and 64 KiB
// pages), every riscv64 translation mode and 4 KiB ppc64le, radix and
// hash, dump to what the generator says they hold: at every level the
// dumped pfns are the truth's, each page is the generator's and the 2nd
// bitmap is the truth's; the header is the architecture's, with blocks of
// the page size; -c and -l read back the same; refiltering the -d 1 dump
// to 31 gives the vmcore's -d 31 file; on the shapes machines every codec,
// -F/-R, -E, verify, inspect and --split/--reassemble. (That libkdumpfile
// and drgn read them back, and makedumpfile's bytes where it walks them:
// the *_integration_test.go and riscv64_peer_test.go files.)
func TestGeneratedDumps(t *testing.T) {
	dir := t.TempDir()
	for _, m := range generatedMachines() {
		t.Run(m.name, func(t *testing.T) {
			s := m.spec
			vmcore := writeShape(t, dir, m.name, s)
			if v := vi(t, s); uint64(v.PageSize()) != s.PageBytes() || kernel.ArchOf(v) != kernelArch(s) {
				t.Fatalf("VMCOREINFO: %d-byte pages, %s", v.PageSize(), kernel.ArchOf(v).Name())
			}
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
				checkGeneratedHeader(t, out, s)
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
			// Refiltering the -d 1 dump to 31 walks the page tables in a
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
				checkGeneratedShapes(t, dir, m.name, vmcore, d31, s)
			}
			os.Remove(d31)
			os.Remove(vmcore)
		})
	}
}

// kernelArch is the architecture of generated machine s.
func kernelArch(s synth.Spec) kernel.Arch {
	switch s.Arch {
	case synth.AArch64:
		return kernel.ARM64
	case synth.RISCV64:
		return kernel.RISCV64
	case synth.PPC64LE:
		return kernel.PPC64LE
	}
	return kernel.X86_64
}

// utsMachine is what uname -m says on generated machine s.
func utsMachine(s synth.Spec) string {
	return map[kernel.Arch]string{kernel.ARM64: "aarch64", kernel.RISCV64: "riscv64", kernel.PPC64LE: "ppc64le", kernel.X86_64: "x86_64"}[kernelArch(s)]
}

// checkGeneratedHeader asserts what readers decode a dump of generated
// machine s by: utsname read from the kernel's memory (the architecture's
// machine, the generated nodename), blocks of the kernel's page size, and
// phys_base as makedumpfile sets it there: arm64's PHYS_OFFSET, riscv64's
// phys_ram_base, 0 on ppc64le (which has none).
func checkGeneratedHeader(t *testing.T, dump string, s synth.Spec) {
	t.Helper()
	d, err := source.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	v := vi(t, s)
	field := func(i int) string {
		f := d.Header.Utsname[i*kdumpfmt.UtsnameFieldSize : (i+1)*kdumpfmt.UtsnameFieldSize]
		return string(bytes.TrimRight(f, "\x00"))
	}
	if field(0) != "Linux" || !strings.HasPrefix(field(1), "synth-") || field(2) != v.OSRelease() || field(4) != utsMachine(s) {
		t.Errorf("utsname %q", []string{field(0), field(1), field(2), field(4)})
	}
	if uint64(d.Header.BlockSize) != s.PageBytes() {
		t.Errorf("block size %d, pages of %d bytes", d.Header.BlockSize, s.PageBytes())
	}
	switch kernelArch(s) {
	case kernel.ARM64:
		if po, _ := v.NumberUnsigned("PHYS_OFFSET"); d.Sub.PhysBase != po || po < 1<<63 {
			t.Errorf("phys_base %#x, PHYS_OFFSET %#x", d.Sub.PhysBase, po)
		}
	case kernel.RISCV64:
		if base, _ := v.NumberUnsigned("phys_ram_base"); d.Sub.PhysBase != base || base != 0x80000000 {
			t.Errorf("phys_base %#x, phys_ram_base %#x", d.Sub.PhysBase, base)
		}
	case kernel.PPC64LE:
		if d.Sub.PhysBase != 0 || d.MaxMapnr != s.Segments[0].FileSize/s.PageBytes() {
			t.Errorf("phys_base %#x, max_mapnr %d", d.Sub.PhysBase, d.MaxMapnr)
		}
	}
}

// checkGeneratedShapes: -F then -R gives the -d 31 file back; -E keeps the
// architecture's ELF header and exactly the truth's non-zero pages; verify
// and inspect read the dump in its page size; --split's files, each with
// the architecture's header, reassemble into it.
func checkGeneratedShapes(t *testing.T, dir, name, vmcore, d31 string, s synth.Spec) {
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
	os.Remove(rebuilt)

	arch, ps := kernelArch(s), s.PageBytes()
	elfOut := filepath.Join(dir, name+".E")
	mustPagepipe(t, "-E", "-d", "31", vmcore, elfOut)
	v, err := source.Open(elfOut)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.Arch() != arch || binary.LittleEndian.Uint16(v.Ehdr[18:]) != arch.ELFMachine() || v.PageSize() != ps {
		t.Errorf("-E: architecture %s, %d-byte pages", v.Arch().Name(), v.PageSize())
	}
	// Every page the ELF dump holds is the generator's, and it holds every
	// non-zero page the truth keeps (-d 31 drops zero pages too).
	got := elfPages(t, v)
	if len(got) == 0 {
		t.Fatal("-E -d 31 holds no page")
	}
	buf := make([]byte, ps)
	for pfn, h := range got {
		if synth.Page(s, pfn, buf); h != judge.Hash(buf) {
			t.Fatalf("-E -d 31: pfn %#x differs from the generator's", pfn)
		}
	}
	zero := judge.Hash(make([]byte, ps))
	for pfn, h := range want {
		if _, ok := got[pfn]; !ok && h != zero {
			t.Fatalf("-E -d 31: pfn %#x missing", pfn)
		}
	}

	// verify reads every page back against the vmcore; inspect reports the
	// page size as the block size, and the architecture.
	if got, w := mustPagepipe(t, "verify", vmcore, d31), fmt.Sprintf("verified: %d pages of", len(want)); !strings.HasPrefix(got, w) {
		t.Errorf("verify says %q, want %q...", got, w)
	}
	if got, w := mustPagepipe(t, "inspect", d31), fmt.Sprintf("block size      : %d\n", ps); !strings.Contains(got, w) || !strings.Contains(got, utsMachine(s)) {
		t.Errorf("inspect says\n%s\nwithout %q or %s", got, w, utsMachine(s))
	}

	// A split block of one page: every part holds some of the pages.
	parts := splitNames(dir, name+".split", 2)
	mustPagepipe(t, append([]string{"--split", "--splitblock-size", fmt.Sprint(ps >> 10), "-d", "31", vmcore}, parts...)...)
	for _, p := range parts {
		checkGeneratedHeader(t, p, s)
	}
	re := filepath.Join(dir, name+".reassembled")
	mustPagepipe(t, append(append([]string{"--reassemble"}, parts...), re)...)
	if !bytes.Equal(readFile(t, re), readFile(t, d31)) {
		t.Errorf("--split then --reassemble differs from the -d 31 file: %s", judge.FirstDiff(readFile(t, re), readFile(t, d31)))
	}
}
