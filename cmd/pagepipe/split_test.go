package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
