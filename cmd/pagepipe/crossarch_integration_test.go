//go:build integration

package main

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// The architecture is the input's, never the build's (issue 19): pagepipe
// built for the other architecture (GOARCH=arm64 CGO_ENABLED=0 on an
// x86_64 host, run under qemu-user) writes the same bytes as this build,
// for an x86_64 and an arm64 vmcore, dumped, refiltered and converted.
func TestOtherBuildArchitectureSameBytes(t *testing.T) {
	goarch, emulator, machine := "arm64", "qemu-aarch64-static", elf.EM_AARCH64
	if runtime.GOARCH == "arm64" {
		goarch, emulator, machine = "amd64", "qemu-x86_64-static", elf.EM_X86_64
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "pagepipe-"+goarch)
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOARCH="+goarch, "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOARCH=%s go build: %v\n%s", goarch, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != machine {
		t.Fatalf("built for %v, want %v", f.Machine, machine)
	}
	f.Close()
	other := func(args ...string) {
		t.Helper()
		cmd := exec.Command(emulator, append([]string{bin}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s pagepipe %q: %v\n%s", emulator, args, err, out)
		}
	}
	x86 := writeShape(t, dir, "x86_64", synth.KernelMachine("6.1", 96))
	arm := writeShape(t, dir, "aarch64", synth.NewARM64Machine(synth.KernelSpec{Profile: "6.1", KASLR: true}, 96))
	for _, vmcore := range []string{x86, arm} {
		for _, args := range [][]string{{"-d", "31"}, {"-c", "-d", "31"}, {"-l", "-d", "1"}} {
			name := filepath.Base(vmcore) + "-" + args[len(args)-1] + args[0]
			here, there := filepath.Join(dir, name+".here"), filepath.Join(dir, name+".there")
			mustPagepipe(t, append(append([]string{}, args...), vmcore, here)...)
			other(append(append([]string{}, args...), vmcore, there)...)
			if a, b := readFile(t, here), readFile(t, there); !bytes.Equal(a, b) {
				t.Errorf("%s %q: the %s build differs: %s", filepath.Base(vmcore), args, goarch, judge.FirstDiff(a, b))
			}
		}
		// Refilter and convert a dump: the -l -d 1 one to -z -d 31.
		src := filepath.Join(dir, filepath.Base(vmcore)+"-1-l.here")
		here, there := src+".z31", src+".z31.there"
		mustPagepipe(t, "-z", "-d", "31", src, here)
		other("-z", "-d", "31", src, there)
		if a, b := readFile(t, here), readFile(t, there); !bytes.Equal(a, b) {
			t.Errorf("%s refiltered: the %s build differs: %s", filepath.Base(vmcore), goarch, judge.FirstDiff(a, b))
		}
	}
}
