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

// cmd/pagepipe is the command line only: flags, console, messages, exit
// codes. The dump itself is the engine's (pagepipe/dump); of the project
// it may import nothing else but the CPU-set helpers.
func TestImportsOnlyTheEngine(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "pagepipe/cmd/pagepipe").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{"pagepipe/dump": true, "pagepipe/internal/cpuset": true}
	seen := false
	for _, p := range strings.Fields(string(out)) {
		if p == "pagepipe/dump" {
			seen = true
		}
		if strings.HasPrefix(p, "pagepipe/") && !allowed[p] {
			t.Errorf("cmd/pagepipe imports %s", p)
		}
	}
	if !seen {
		t.Errorf("cmd/pagepipe does not import the engine: %q", out)
	}
}
