//go:build integration

package debuginfo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"pagepipe/internal/fixture"
)

// makedumpfile -g and GenerateVMCOREINFO write the same file for the
// fixtures' debug vmlinux (Debian 12's 6.1).
func TestGenerateVMCOREINFOAsMakedumpfile(t *testing.T) {
	vmlinux := fixture.DebugVmlinux(t)
	want := filepath.Join(t.TempDir(), "vmcoreinfo")
	out, err := exec.Command("makedumpfile", "-g", want, "-x", vmlinux).CombinedOutput()
	if err != nil {
		t.Fatalf("makedumpfile -g: %v\n%s", err, out)
	}
	wantB, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	d, err := OpenDWARF(vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := GenerateVMCOREINFO(d, int64(os.Getpagesize()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantB) {
		t.Errorf("pagepipe's VMCOREINFO differs from makedumpfile's:\n got %q\nwant %q", got, wantB)
	}
}
