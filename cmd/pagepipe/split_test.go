package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

func splitNames(dir, prefix string, n int) []string {
	var names []string
	for i := range n {
		names = append(names, filepath.Join(dir, fmt.Sprintf("%s%d", prefix, i)))
	}
	return names
}

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

// The split files come out the same for any number of workers.
func TestSplitIndependentOfWorkers(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "default", synth.Default(24))
	var want [][]byte
	for _, n := range []string{"1", "2", "5"} {
		outs := splitNames(dir, "w"+n+"-", 3)
		mustPagepipe(t, append([]string{"--split", "-c", "-d", "1", "--splitblock-size", "256", "--num-threads", n, vmcore}, outs...)...)
		for i, o := range outs {
			b := readFile(t, o)
			if want == nil || len(want) <= i {
				want = append(want, b)
			} else if !bytes.Equal(b, want[i]) {
				t.Fatalf("%s workers: file %d differs: %s", n, i, judge.FirstDiff(b, want[i]))
			}
		}
	}
}

// --split refuses bad splitblock sizes, never clobbers an existing file
// without -f (and then leaves no file behind), and refuses a file named
// twice; --reassemble refuses to write over one of its parts.
func TestSplitRefuses(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "v", synth.Shapes()["cpu1"])
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	if err := os.WriteFile(c, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--split", "--splitblock-size", "6", vmcore, a, b}, "multiple of the page size"},
		{[]string{"--split", "--splitblock-size", "-4", vmcore, a, b}, "multiple of the page size"},
		{[]string{"--split", "-d", "1", vmcore, a, b, c}, "file exists"},
		{[]string{"--split", "-f", "-d", "1", vmcore, a, a}, "named twice"},
		{[]string{"--split", "-f", "-d", "1", vmcore, a, vmcore}, "named twice"},
		{[]string{"--split", "-L", "1M", "-d", "1", vmcore, a, b}, "-L cannot be combined with --split"},
	} {
		rc, _, stderr := pagepipe(t, tc.args...)
		if rc != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", strings.Join(tc.args, " "), rc, stderr, tc.want)
		}
		for _, f := range []string{a, b} {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				t.Errorf("%s: %s left behind", strings.Join(tc.args, " "), f)
			}
		}
	}
	if got := string(readFile(t, c)); got != "precious" {
		t.Fatalf("%s clobbered: %q", c, got)
	}

	mustPagepipe(t, "--split", "-d", "1", "--splitblock-size", "4", vmcore, a, b)
	rc, _, stderr := pagepipe(t, "--reassemble", "-f", a, b, b)
	if rc != 1 || !strings.Contains(stderr, "named twice") {
		t.Errorf("--reassemble over a part: exit %d, stderr %q", rc, stderr)
	}
	rc, _, stderr = pagepipe(t, "--reassemble", a, vmcore, c)
	if rc != 1 || !strings.Contains(stderr, "kdump") {
		t.Errorf("--reassemble of a vmcore: exit %d, stderr %q", rc, stderr)
	}
}
