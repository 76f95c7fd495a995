package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/synth"
)

// TestSizeLimitBelowTheHeaders: a -L too small for even the headers and
// bitmaps leaves no file (no reader could open one) and says why in one
// line.
func TestSizeLimitBelowTheHeaders(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.Shapes()["holes"])
	out := filepath.Join(dir, "dump")
	rc, _, stderr := pagepipe(t, "-c", "-d", "1", "-L", "100K", vmcore, out)
	if rc != exitFailed {
		t.Fatalf("exit %d, want %d", rc, exitFailed)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("%s left behind (%v)", out, err)
	}
	if !strings.Contains(stderr, "no dump written, its headers and bitmaps do not fit: ") || !strings.Contains(stderr, "size limit reached") {
		t.Errorf("stderr:\n%s", stderr)
	}
}
