package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// /proc/vmcore as kexec-tools makes it in a capture kernel ends low RAM
// mid-page (0x9fc00), and makedumpfile counts that page present or not
// depending on how it builds its bitmaps: in one cycle through a bitmap
// file (when --work-dir is given, or its buffer holds both bitmaps whole,
// which for small machines means max_mapnr ≡ 0 mod 4 and one dump file)
// or in cycles. pagepipe decides as it does: on the kexec machines, whose
// max_mapnr has each residue mod 4 and whose memory has a 6.1 kernel's
// struct pages (so that -d 31 runs the page scan), every output shape is
// byte-identical to makedumpfile 1.7.2's at -d 0, 1 and 31, by default,
// with --work-dir and with a --cyclic-buffer (cycles of 8192 pfns: two
// cycles for max_mapnr > 0x2000).
func TestKexecLayoutsMatchMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	for r := range uint64(4) {
		s := synth.KexecMachine(r)
		if got := s.MaxMapnr() % 4; got != r {
			t.Fatalf("kexec machine %d: max_mapnr %#x ≡ %d mod 4", r, s.MaxMapnr(), got)
		}
		vmcore := writeShape(t, dir, fmt.Sprintf("kexec-%d", r), s)
		for _, mode := range kexecModes(work) {
			for _, out := range kexecOutputs {
				for _, level := range []string{"0", "1", "31"} {
					t.Run(fmt.Sprintf("r%d/%s/%s/d%s", r, mode.name, out.name, level), func(t *testing.T) {
						args := append(append(append([]string{}, mode.args...), out.args...), "-d", level, vmcore)
						sameAsMakedumpfile(t, "makedumpfile", args, out.files)
					})
				}
			}
		}
	}
}

type kexecMode struct {
	name string
	args []string
}

// kexecModes are makedumpfile's ways of building the bitmaps: as it
// chooses (one cycle for max_mapnr ≡ 0 mod 4 and one file, else cycles),
// through a bitmap file in workDir, and in cycles of a 1 KiB buffer.
func kexecModes(workDir string) []kexecMode {
	return []kexecMode{
		{"default", nil},
		{"work-dir", []string{"--work-dir", workDir}},
		{"cyclic-buffer", []string{"--cyclic-buffer", "1"}},
	}
}

var kexecOutputs = []struct {
	name  string
	args  []string
	files int
}{
	{"kdump", nil, 1},
	{"elf", []string{"-E"}, 1},
	// 1 MiB splitblocks, so that both files get pages (makedumpfile
	// leaves an empty part's file shorter than its own bitmaps at -d 0:
	// no reader opens it).
	{"split", []string{"--split", "--splitblock-size", "1024"}, 2},
}

// sameAsMakedumpfile runs pagepipe and the makedumpfile at mdf with args
// (the vmcore last) and files output files each, and fails unless every
// file is byte-identical.
func sameAsMakedumpfile(t *testing.T, mdf string, args []string, files int) {
	t.Helper()
	tmp := t.TempDir()
	var ours, theirs []string
	for i := range files {
		ours = append(ours, filepath.Join(tmp, fmt.Sprintf("pp%d", i)))
		theirs = append(theirs, filepath.Join(tmp, fmt.Sprintf("mdf%d", i)))
	}
	mustPagepipe(t, append(args, ours...)...)
	judge.MakedumpfileBy(t, mdf, append(args, theirs...)...)
	for i := range ours {
		if a, b := readFile(t, ours[i]), readFile(t, theirs[i]); !bytes.Equal(a, b) {
			t.Fatalf("file %d differs from %s's: %s", i, mdf, judge.FirstDiff(a, b))
		}
	}
}
