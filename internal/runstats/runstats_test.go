package runstats

import (
	"os"
	"path/filepath"
	"testing"
)

// What Write writes, Read reads back, field for field; a file that is not
// the JSON shape is an error naming it.
func TestWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stats.json")
	want := Stats{GOMAXPROCS: 2, Workers: 3, Pfns: 1 << 20, PageSize: 4096, Dumped: 1234, MaxRSSKiB: 56789,
		Cycles: 4, CopyWall: 1.5, StoreCPU: 0.25}
	if err := Write(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || got != want {
		t.Fatalf("read %+v, %v; want %+v", got, err, want)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Error("a broken file read")
	}
}

// This process has a peak resident set; a process that is gone has 0.
func TestPeakRSSKiB(t *testing.T) {
	if n := PeakRSSKiB("/proc/self/status"); n <= 0 {
		t.Errorf("VmHWM of this process: %d KiB", n)
	}
	if n := PeakRSSKiB(filepath.Join(t.TempDir(), "gone")); n != 0 {
		t.Errorf("a missing status file: %d KiB", n)
	}
}
