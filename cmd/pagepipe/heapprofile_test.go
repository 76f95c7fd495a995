package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"path/filepath"
	"testing"

	"pagepipe/internal/synth"
)

// TestHeapProfile: --heapprofile leaves a gzip-compressed heap profile
// (pprof's format) naming pagepipe's allocation sites, and the dump is
// the same bytes as without it.
func TestHeapProfile(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "holes", synth.Shapes()["holes"])
	prof := filepath.Join(dir, "heap.pb.gz")
	mustPagepipe(t, "-c", "-d", "1", vmcore, filepath.Join(dir, "plain"))
	mustPagepipe(t, "-c", "-d", "1", "--heapprofile", prof, vmcore, filepath.Join(dir, "profiled"))
	if !bytes.Equal(readFile(t, filepath.Join(dir, "plain")), readFile(t, filepath.Join(dir, "profiled"))) {
		t.Error("the dump with --heapprofile differs from the one without")
	}
	zr, err := gzip.NewReader(bytes.NewReader(readFile(t, prof)))
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	for _, want := range []string{"inuse_space", "alloc_space", "pagepipe/"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("heap profile (%d bytes) does not name %q", len(b), want)
		}
	}
	rc, _, stderr := pagepipe(t, "-c", "-d", "1", "--heapprofile", filepath.Join(dir, "no", "such", "dir"), vmcore, filepath.Join(dir, "x"))
	if rc == 0 || !bytes.Contains([]byte(stderr), []byte("--heapprofile")) {
		t.Errorf("--heapprofile into a missing directory: exit %d, %q", rc, stderr)
	}
}
