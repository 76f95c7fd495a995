package memprobe

import "testing"

// Both read whole KiB from /proc/meminfo, and what the process may use is
// no more than what the machine has available.
func TestMemFreeAndAvailable(t *testing.T) {
	free, err := MemFree()
	if err != nil || free == 0 || free%1024 != 0 {
		t.Fatalf("MemFree = %d, %v", free, err)
	}
	avail, err := Available()
	if err != nil || avail == 0 {
		t.Fatalf("Available = %d, %v", avail, err)
	}
	machine, err := meminfo("MemAvailable:")
	if err != nil || avail > machine {
		t.Fatalf("Available %d, MemAvailable %d (%v)", avail, machine, err)
	}
	if _, err := meminfo("NoSuchLine:"); err == nil {
		t.Error("a missing line read")
	}
}
