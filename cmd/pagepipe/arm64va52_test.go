//go:build integration

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/synth"
)

// Debian 13's arm64 kernel is built with 4 KiB pages, VA_BITS=52 and
// PA_BITS=52 (CONFIG_ARM64_VA_BITS_52=y, CONFIG_PGTABLE_LEVELS=5 in
// linux-image-6.12.117+deb13-arm64's config): 5-level tables with LPA2
// descriptors where the CPU has LPA2, 4 levels at 48 bits where it has
// not. No released makedumpfile dumps such a kernel: Debian 12's 1.7.2,
// Debian 13's own 1.7.6 and forky's 1.7.8 (arm64 builds under qemu-user)
// all refuse both generated machines with "PAGE SIZE 0x1000 and VA Bits
// 52 not supported" (upstream added them after 1.7.8, in b7587f1);
// pagepipe dumps them as the generator's truth says.
func TestARM64VA52RefusedByReleasedMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	machines := map[string]synth.KernelSpec{
		"va52-pa52":       {Profile: "6.12", KASLR: true, VABits: 52, PA52: true},
		"va52-pa52-on-48": {Profile: "6.12", KASLR: true, VABits: 52, VABitsActual: 48, PA52: true},
	}
	for name, ks := range machines {
		s := arm64Machine(ks, 96, 0)
		vmcore := writeShape(t, dir, name, s)
		ours := filepath.Join(dir, name+".pp")
		mustPagepipe(t, "-d", "31", vmcore, ours)
		if want, _ := wantTruth(t, s, "31"); want.Diff(ownReader(t, ours)) != "" {
			t.Errorf("%s: pagepipe's -d 31 dump is not the truth's:\n%s", name, want.Diff(ownReader(t, ours)))
		}
		for _, peer := range []string{"makedumpfile-arm64", "makedumpfile-arm64-trixie", "makedumpfile-arm64-forky"} {
			t.Run(name+"/"+peer, func(t *testing.T) {
				out, err := exec.Command(fixture.Peer(t, peer), "-f", "-d", "31", vmcore, filepath.Join(dir, name+"."+peer)).CombinedOutput()
				if err == nil || !strings.Contains(string(out), "PAGE SIZE 0x1000 and VA Bits 52 not supported") {
					t.Errorf("%s on a 4 KiB 52-bit-VA arm64 vmcore: %v\n%s", peer, err, out)
				}
			})
		}
	}
}
