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
// or in cycles. pagepipe decides as it does: on the kexec shapes, whose
// max_mapnr has each residue mod 4, every output shape is byte-identical
// to makedumpfile's, with and without --work-dir and with a
// --cyclic-buffer.
func TestKexecLayoutsMatchMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	for r := range 4 {
		s := synth.Shapes()[fmt.Sprintf("kexec-%d", r)]
		s.VMCOREINFO = "" // makedumpfile would look for kernel structures
		if got := s.MaxMapnr() % 4; got != uint64(r) {
			t.Fatalf("kexec-%d: max_mapnr %#x ≡ %d mod 4", r, s.MaxMapnr(), got)
		}
		vmcore := writeShape(t, dir, fmt.Sprintf("kexec-%d", r), s)
		for _, mode := range []struct {
			name string
			args []string
		}{
			{"default", nil},
			{"work-dir", []string{"--work-dir", work}},
			{"cyclic-buffer", []string{"--cyclic-buffer", "1"}},
		} {
			for _, out := range []struct {
				name  string
				args  []string
				files int
			}{
				{"kdump", nil, 1},
				{"elf", []string{"-E"}, 1},
				// 1 MiB splitblocks, so that both files get pages
				// (makedumpfile leaves an empty part's file shorter
				// than its own bitmaps at -d 0: no reader opens it).
				{"split", []string{"--split", "--splitblock-size", "1024"}, 2},
			} {
				for _, level := range []string{"0", "1"} {
					t.Run(fmt.Sprintf("r%d/%s/%s/d%s", r, mode.name, out.name, level), func(t *testing.T) {
						tmp := t.TempDir()
						var ours, theirs []string
						for i := range out.files {
							ours = append(ours, filepath.Join(tmp, fmt.Sprintf("pp%d", i)))
							theirs = append(theirs, filepath.Join(tmp, fmt.Sprintf("mdf%d", i)))
						}
						args := append(append(append([]string{}, mode.args...), out.args...), "-d", level, vmcore)
						mustPagepipe(t, append(args, ours...)...)
						judge.Makedumpfile(t, append(args, theirs...)...)
						for i := range ours {
							if a, b := readFile(t, ours[i]), readFile(t, theirs[i]); !bytes.Equal(a, b) {
								t.Fatalf("file %d differs: %s", i, judge.FirstDiff(a, b))
							}
						}
					})
				}
			}
		}
	}
}
