package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The dump binary lives in a capture kernel's initramfs, inside the
// crashkernel= reservation: it must not carry the bench's plotting
// libraries, their fonts and image codecs, nor the vmcore generator.
func TestNoBenchDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "pagepipe/cmd/pagepipe").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps gave %d packages", len(deps))
	}
	for _, p := range deps {
		for _, bad := range []string{"gonum.org/", "golang.org/x/image", "font", "freetype", "codeberg.org/", "git.sr.ht/", "github.com/ajstarks/", "pagepipe/bench", "pagepipe/internal/synth"} {
			if strings.Contains(p, bad) {
				t.Errorf("cmd/pagepipe depends on %s", p)
			}
		}
	}
}
