package source

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/synth"
)

// smallVmcore returns a generated vmcore's bytes: headers, notes and a few
// pages, small enough to truncate at every offset.
func smallVmcore(t testing.TB, mutate func(*synth.Spec)) []byte {
	t.Helper()
	s := synth.Spec{
		Segments:   []synth.Segment{{Paddr: 0x1000, FileSize: 0x3000, MemSize: 0x3000}, {Paddr: 0x10000, FileSize: 0x1000, MemSize: 0x2000}},
		CPUs:       2,
		VMCOREINFO: synth.DefaultVMCOREINFO,
		Seed:       1,
		Mix:        synth.DefaultMix,
	}
	if mutate != nil {
		mutate(&s)
	}
	path := filepath.Join(t.TempDir(), "vmcore")
	if err := synth.WriteFile(path, s); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(b []byte) (*Info, error) { return ParseELF(bytes.NewReader(b), int64(len(b))) }

func TestParseELF(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*synth.Spec)
	}{
		{"proc-vmcore", nil},
		{"qemu", func(s *synth.Spec) { s.Layout = synth.QEMU; s.ExtraNotes = true }},
		{"pn-xnum", func(s *synth.Spec) { s.PNXnum = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := smallVmcore(t, tc.mutate)
			in, err := parse(b)
			if err != nil {
				t.Fatal(err)
			}
			// What an ELF dump copies: the ELF header, the PT_NOTE header,
			// p_flags (RWX as kexec-tools writes, 0 as QEMU does).
			if !bytes.Equal(in.Ehdr[:], b[:64]) {
				t.Errorf("Ehdr = % x", in.Ehdr)
			}
			le := binary.LittleEndian
			if le.Uint32(in.NotePhdr[0:]) != 4 || le.Uint64(in.NotePhdr[32:]) != uint64(len(in.Notes)) || le.Uint64(in.NotePhdr[8:]) != in.NoteOffset {
				t.Errorf("NotePhdr = % x", in.NotePhdr)
			}
			wantFlags := uint32(7)
			if tc.name == "qemu" {
				wantFlags = 0
			}
			for _, l := range in.Loads {
				if l.Flags != wantFlags || l.Align != 0 {
					t.Errorf("load %+v: flags %d, align 0 expected", l, wantFlags)
				}
			}
			if in.NrCPUs != 2 {
				t.Errorf("NrCPUs = %d, want 2", in.NrCPUs)
			}
			if got := string(in.Vmcoreinfo()); got != synth.DefaultVMCOREINFO {
				t.Errorf("VMCOREINFO = %q", got)
			}
			if len(in.Loads) != 2 || in.Loads[1].MemSize != 0x2000 || in.Loads[1].FileSize != 0x1000 {
				t.Errorf("loads = %+v", in.Loads)
			}
			if in.MaxMapnr != 0x12 {
				t.Errorf("MaxMapnr = %#x, want 0x12", in.MaxMapnr)
			}
		})
	}
}

// Hostile headers: each gets an error, never a panic or a huge allocation.
// The table doubles as the list of malformed inputs in docs/reliability.md.
func TestParseELFMalformed(t *testing.T) {
	good := smallVmcore(t, nil)
	le := binary.LittleEndian
	phoff := le.Uint64(good[32:])
	ph := func(i int) uint64 { return phoff + uint64(i)*phdrSize }
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty file", nil, "not an ELF64"},
		{"truncated ELF header", good[:40], "not an ELF64"},
		{"not ELF", edit(func(b []byte) []byte { b[0] = 'X'; return b }), "not an ELF64"},
		{"ELF32", edit(func(b []byte) []byte { b[4] = 1; return b }), "not an ELF64"},
		{"big-endian", edit(func(b []byte) []byte { b[5] = 2; return b }), "not an ELF64"},
		{"bad e_phentsize", edit(func(b []byte) []byte { le.PutUint16(b[54:], 32); return b }), "e_phentsize"},
		{"zero program headers", edit(func(b []byte) []byte { le.PutUint16(b[56:], 0); return b }), "0 program headers"},
		{"absurd e_phnum", edit(func(b []byte) []byte { le.PutUint16(b[56:], 0xfffe); return b }), "run past the end"},
		{"e_phoff beyond EOF", edit(func(b []byte) []byte { le.PutUint64(b[32:], 1<<40); return b }), "run past the end"},
		{"e_phoff overflows", edit(func(b []byte) []byte { le.PutUint64(b[32:], ^uint64(0)-8); return b }), "run past the end"},
		{"PN_XNUM without section header", edit(func(b []byte) []byte { le.PutUint16(b[56:], 0xffff); le.PutUint64(b[40:], 0); return b }), "PN_XNUM"},
		{"PN_XNUM with absurd sh_info", smallPNXnum(t, 0xffffffff), "program headers"},
		{"PT_LOAD data beyond EOF", edit(func(b []byte) []byte { le.PutUint64(b[ph(1)+32:], 1<<40); return b }), "runs past the end"},
		{"PT_LOAD offset beyond EOF", edit(func(b []byte) []byte { le.PutUint64(b[ph(1)+8:], 1<<50); return b }), "runs past the end"},
		{"p_memsz smaller than p_filesz", edit(func(b []byte) []byte { le.PutUint64(b[ph(1)+40:], 0x10); return b }), "p_memsz"},
		{"physical range beyond 52 bits", edit(func(b []byte) []byte { le.PutUint64(b[ph(1)+24:], 1<<60); return b }), "beyond 52 bits"},
		{"physical memory beyond 256 TiB", edit(func(b []byte) []byte { le.PutUint64(b[ph(1)+24:], 1<<50); return b }), "beyond the supported"},
		{"note size overruns PT_NOTE", edit(func(b []byte) []byte {
			noteOff := le.Uint64(b[ph(0)+8:])
			le.PutUint32(b[noteOff+4:], 0x7fffffff)
			return b
		}), "run past"},
		{"no PT_LOAD", edit(func(b []byte) []byte {
			for i := 1; i < 3; i++ {
				le.PutUint32(b[ph(i):], 6) // PT_PHDR
			}
			return b
		}), "no PT_LOAD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			t.Logf("| %s | %s |", tc.name, err) // docs/reliability.md
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func smallPNXnum(t *testing.T, count uint32) []byte {
	b := smallVmcore(t, func(s *synth.Spec) { s.PNXnum = true })
	shoff := binary.LittleEndian.Uint64(b[40:])
	binary.LittleEndian.PutUint32(b[shoff+44:], count)
	return b
}

// Truncated anywhere in its headers, notes or data, a vmcore gets an error.
func TestParseELFTruncatedAnywhere(t *testing.T) {
	for _, mutate := range []func(*synth.Spec){nil, func(s *synth.Spec) { s.Layout = synth.QEMU }} {
		good := smallVmcore(t, mutate)
		for n := 0; n < len(good); n += max(1, n/64) {
			if _, err := parse(good[:n]); err == nil {
				t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
			} else if errors.Is(err, nil) {
				t.Fatal("unreachable")
			}
		}
	}
}

func FuzzParseELF(f *testing.F) {
	f.Add(smallVmcore(f, nil))
	f.Add(smallVmcore(f, func(s *synth.Spec) { s.Layout = synth.QEMU; s.ExtraNotes = true }))
	f.Add(smallVmcore(f, func(s *synth.Spec) { s.PNXnum = true }))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := parse(b)
		if err != nil {
			return
		}
		// What parsed must be self-consistent.
		if in.VmcoreinfoSize > 0 && in.VmcoreinfoOff+in.VmcoreinfoSize > uint64(len(in.Notes)) {
			t.Fatalf("VMCOREINFO [%d,+%d) outside %d bytes of notes", in.VmcoreinfoOff, in.VmcoreinfoSize, len(in.Notes))
		}
		for _, l := range in.Loads {
			if l.Offset+l.FileSize > uint64(len(b)) {
				t.Fatalf("load %+v past the end of %d bytes", l, len(b))
			}
		}
		if in.MaxMapnr > 1<<24 {
			return // bitmaps of more than 2 MiB: valid, but slow to fuzz
		}
		for _, pp := range []PartialPages{{}, {LastPresent: true, KeepData: true}} {
			p, d := in.Bitmaps(in.MaxMapnr, pp)
			for pfn := d.NextSet(0); pfn < d.Len(); pfn = d.NextSet(pfn + 1) {
				if !p.Test(pfn) {
					t.Fatalf("%+v: pfn %#x dumpable but not present", pp, pfn)
				}
			}
		}
	})
}
