//go:build integration

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/source"
)

// mdfGeometries are the arm64Machines whose geometry makedumpfile 1.7.2
// walks (arch/arm64.c: 4 KiB pages with 39- and 48-bit VAs, 16 KiB with
// 47 and 48, 64 KiB with 42, 48 and 52, and 52-bit PAs with 64 KiB pages;
// not 4 KiB pages with 52-bit VAs, nor LPA2 descriptors).
var mdfGeometries = map[string]bool{
	"va48": true, "va39": true, "16k-va47": true, "16k-va48": true,
	"64k-va42": true, "64k-va48": true, "64k-va52": true, "64k-va52-on-48": true, "64k-va52-pa52": true, "64k-va48-pa52": true,
}

// Acceptance (issue 19 acc. 1 and 3, issue 23 acc. 2): on generated arm64
// vmcores of every geometry makedumpfile 1.7.2 supports (mdfGeometries:
// 4, 16 and 64 KiB pages), pagepipe's uncompressed dump is byte-identical
// to Debian's arm64 makedumpfile's, run under qemu-user (fixtures/peer.sh
// makedumpfile-arm64), at each machine's levels.
func TestARM64ByteIdenticalToMakedumpfile(t *testing.T) {
	mdf := fixture.Peer(t, "makedumpfile-arm64")
	dir := t.TempDir()
	for _, m := range arm64Machines {
		if !mdfGeometries[m.name] {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			vmcore := writeShape(t, dir, m.name, arm64Machine(m.ks, m.mib, m.page))
			for _, level := range m.levels {
				ours, theirs := filepath.Join(dir, m.name+".pp"+level), filepath.Join(dir, m.name+".mdf"+level)
				mustPagepipe(t, "-d", level, vmcore, ours)
				if out, err := exec.Command(mdf, "-f", "-d", level, vmcore, theirs).CombinedOutput(); err != nil {
					t.Fatalf("arm64 makedumpfile -d %s: %v\n%s", level, err, out)
				}
				if a, b := readFile(t, ours), readFile(t, theirs); !bytes.Equal(a, b) {
					t.Errorf("-d %s differs from the arm64 makedumpfile's: %s", level, judge.FirstDiff(a, b))
				}
				os.Remove(ours)
				os.Remove(theirs)
			}
			if !m.shapes {
				return
			}
			// -E, whose PT_LOADs are cut per page and written through
			// caches of page size << 4 bytes.
			for _, level := range []string{"1", "31"} {
				ours, theirs := filepath.Join(dir, m.name+".ppE"+level), filepath.Join(dir, m.name+".mdfE"+level)
				mustPagepipe(t, "-E", "-d", level, vmcore, ours)
				if out, err := exec.Command(mdf, "-f", "-E", "-d", level, vmcore, theirs).CombinedOutput(); err != nil {
					t.Fatalf("arm64 makedumpfile -E -d %s: %v\n%s", level, err, out)
				}
				if a, b := readFile(t, ours), readFile(t, theirs); !bytes.Equal(a, b) {
					t.Errorf("-E -d %s differs from the arm64 makedumpfile's: %s", level, judge.FirstDiff(a, b))
				}
				os.Remove(ours)
				os.Remove(theirs)
			}
		})
	}
}

// Acceptance (issue 19 acc. 3, issue 23 acc. 2): libkdumpfile and drgn
// read the generated arm64 machines' dumps (the shapes machines of
// TestGeneratedDumps' arm64 machines: 4, 16 and 64 KiB pages) without a vmlinux:
// init_uts_ns through the dump's own page tables, and every page of RAM
// as the generator's, at -d 31 with every codec; and the -E dump in the
// kernel's pages, every page it holds as pagepipe's reader does, what
// else they read zeros (a PT_LOAD's p_memsz past its p_filesz).
func TestARM64GeneratedReaders(t *testing.T) {
	dir := t.TempDir()
	readers := map[string]func(testing.TB, string, uint64, []judge.Range) judge.Pages{"libkdumpfile": judge.LibkdumpfileAt, "drgn": judge.DrgnAt}
	for _, m := range arm64Machines {
		if !m.shapes {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			s := arm64Machine(m.ks, m.mib, m.page)
			vmcore := writeShape(t, dir, m.name, s)
			want, _ := wantTruth(t, s, "31")
			uts, _ := vi(t, s).Symbol("init_uts_ns")
			ps := s.PageBytes()
			ram := []judge.Range{{Lo: 0x40000000 / ps, Hi: (0x40000000 + uint64(m.mib)<<20) / ps}}
			for _, c := range []string{"-c", "-l", "-p", "-z"} {
				out := filepath.Join(dir, m.name+".d31"+c)
				mustPagepipe(t, c, "-d", "31", vmcore, out)
				for _, reader := range []string{"libkdumpfile", "drgn"} {
					if got := judge.ReadVirtual(t, reader, out, uts, 6*65); !bytes.HasPrefix(got, []byte("Linux\x00")) || !bytes.Contains(got, []byte("aarch64\x00")) {
						t.Errorf("%s %s: init_uts_ns reads %q", reader, c, got)
					}
				}
				for name, read := range readers {
					if d := want.Diff(read(t, out, ps, ram)); d != "" {
						t.Errorf("%s %s -d 31:\n%s", name, c, d)
					}
				}
				os.Remove(out)
			}

			elfOut := filepath.Join(dir, m.name+".E")
			mustPagepipe(t, "-E", "-d", "31", vmcore, elfOut)
			v, err := source.Open(elfOut)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			got := elfPages(t, v)
			zero := judge.Hash(make([]byte, ps))
			ram = []judge.Range{{Lo: 0x40000000 / ps, Hi: v.MaxMapnr}}
			for reader, read := range readers {
				theirs := read(t, elfOut, ps, ram)
				for pfn, h := range got {
					if theirs[pfn] != h {
						t.Fatalf("%s -E -d 31: pfn %#x differs from the dump's", reader, pfn)
					}
				}
				for pfn, h := range theirs {
					if _, ok := got[pfn]; !ok && h != zero {
						t.Fatalf("%s -E -d 31: reads pfn %#x, which the dump does not hold, as non-zero", reader, pfn)
					}
				}
			}
			os.Remove(elfOut)
		})
	}
}
