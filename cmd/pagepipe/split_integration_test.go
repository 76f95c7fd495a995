//go:build integration

package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// On vmcores of every shape makedumpfile reads, --split writes the files
// makedumpfile writes, byte for byte, and --reassemble (pagepipe's and
// makedumpfile's, of either's split files) gives back the unsplit dump.
func TestSplitByteIdenticalToMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	for name, s := range comparableShapes() {
		vmcore := writeShape(t, dir, name, s)
		for _, tc := range []struct {
			level, splitblockKB string
			n                   int
		}{
			{"0", "64", 3},
			{"1", "4", 4},
			{"1", "0", 2}, // the default, 1 GiB: one file holds everything
		} {
			t.Run(fmt.Sprintf("%s/d%s/splitblock%sK/%d", name, tc.level, tc.splitblockKB, tc.n), func(t *testing.T) {
				sub := t.TempDir()
				args := []string{"-d", tc.level, "--splitblock-size", tc.splitblockKB}
				whole := filepath.Join(sub, "whole")
				mustPagepipe(t, "-d", tc.level, vmcore, whole)

				ours, theirs := splitNames(sub, "pp", tc.n), splitNames(sub, "mdf", tc.n)
				mustPagepipe(t, append(append(append([]string{"--split"}, args...), "--num-threads", "3", vmcore), ours...)...)
				judge.Makedumpfile(t, append(append(append([]string{"--split"}, args...), vmcore), theirs...)...)
				for i := range ours {
					if a, b := readFile(t, ours[i]), readFile(t, theirs[i]); !bytes.Equal(a, b) {
						t.Fatalf("split file %d differs: %s", i, judge.FirstDiff(a, b))
					}
				}

				// makedumpfile's reassembly of its own files is the reference:
				// the unsplit dump, except where the unsplit dump's 1st bitmap
				// holds a partial last page (its bitmaps fit one cycle) that
				// the split files' lacks (a split is built in cycles: see
				// filter.Cycle), and the reassembled dump keeps the split
				// files' bitmap.
				ref := filepath.Join(sub, "mdf-re")
				judge.Makedumpfile(t, append(append([]string{"--reassemble"}, theirs...), ref)...)
				want := readFile(t, ref)
				if whole := readFile(t, whole); !bytes.Equal(want, whole) && !(s.MaxMapnr()%4 == 0 && hasPartialEnd(s)) {
					t.Fatalf("makedumpfile --reassemble differs from the unsplit dump: %s", judge.FirstDiff(want, whole))
				}
				rev := slices.Clone(ours)
				slices.Reverse(rev)
				for i, parts := range [][]string{ours, rev, theirs} {
					out := filepath.Join(sub, fmt.Sprintf("re%d", i))
					mustPagepipe(t, append(append([]string{"--reassemble"}, parts...), out)...)
					if got := readFile(t, out); !bytes.Equal(got, want) {
						t.Fatalf("pagepipe --reassemble %d differs from makedumpfile's: %s", i, judge.FirstDiff(got, want))
					}
				}
			})
		}
	}
}

// hasPartialEnd tells whether a segment of s ends mid-page.
func hasPartialEnd(s synth.Spec) bool {
	for _, g := range s.Segments {
		if (g.Paddr+g.MemSize)%synth.PageSize != 0 {
			return true
		}
	}
	return false
}
