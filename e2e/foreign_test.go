//go:build integration

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/kernel"
	"pagepipe/source"
)

// What the arm64 and ppc64le checks share: each runs this run's x86_64
// pagepipe and a build for the vmcore's own architecture under qemu-user,
// and judges both by that architecture's makedumpfile and the readers.

// foreignBuild is pagepipe built for another GOARCH (CGO_ENABLED=0), made
// once per test run and run through a wrapper script under qemu-user.
type foreignBuild struct {
	goarch, qemu string
	once         sync.Once
	bin          string // the static binary
	path         string // the wrapper that runs it under qemu-user
	err          error
}

var (
	armBuild = &foreignBuild{goarch: "arm64", qemu: "qemu-aarch64-static"}
	ppcBuild = &foreignBuild{goarch: "ppc64le", qemu: "qemu-ppc64le-static"}
)

// pagepipe returns the wrapper script's path, building on first use.
func (f *foreignBuild) pagepipe(t *testing.T) string {
	t.Helper()
	f.build(t)
	return f.path
}

// binary returns the static binary itself (for a guest of its
// architecture), building on first use.
func (f *foreignBuild) binary(t *testing.T) string {
	t.Helper()
	f.build(t)
	return f.bin
}

func (f *foreignBuild) build(t *testing.T) {
	t.Helper()
	f.once.Do(func() {
		b := filepath.Join(workDir, "pagepipe-"+f.goarch)
		f.bin = b
		// As make build builds: the live fixture keys its arm64 guest by these
		// bytes, which -trimpath keeps the same in every checkout.
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", b, "pagepipe/cmd/pagepipe")
		build.Env = append(os.Environ(), "GOARCH="+f.goarch, "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			f.err = fmt.Errorf("GOARCH=%s go build: %v\n%s", f.goarch, err, out)
			return
		}
		f.path = b + ".sh"
		f.err = os.WriteFile(f.path, []byte("#!/bin/sh\nexec "+f.qemu+" "+b+" \"$@\"\n"), 0o755)
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
}

// runTo runs prog with args, vmcore and outs, and returns its messages.
func runTo(t *testing.T, prog string, args []string, vmcore string, outs ...string) string {
	t.Helper()
	cmd := exec.Command(prog, append(append(append([]string{"--message-level", "23"}, args...), vmcore), outs...)...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, b)
	}
	return string(b)
}

// levelMatchesMakedumpfile dumps vmcore uncompressed at level with mdf and
// with each of progs (build name to program), and wants every build's dump
// byte-identical to makedumpfile's and its report's per-class counts equal
// to makedumpfile's.
func levelMatchesMakedumpfile(t *testing.T, mdf string, progs map[string]string, vmcore, dir, level string) {
	t.Helper()
	theirs := filepath.Join(dir, "mdf")
	b := counts(t, runTo(t, mdf, []string{"-d", level}, vmcore, theirs))
	defer os.Remove(theirs)
	for name, prog := range progs {
		ours := filepath.Join(dir, name)
		a := counts(t, runTo(t, prog, []string{"-d", level}, vmcore, ours))
		equalFiles(t, ours, theirs)
		os.Remove(ours)
		for _, k := range []string{"Excluded pages", "Pages filled with zero", "Non-private cache pages",
			"Private cache pages", "User process data pages", "Free pages", "Hwpoison pages",
			"Offline pages", "Total pages", "Write bytes"} {
			if a[k] != b[k] {
				t.Errorf("%s build: %s: pagepipe %s, makedumpfile %s", name, k, a[k], b[k])
			}
		}
	}
}

// foreignReadsEveryPage dumps vmcore with codec c at -d 31 with this run's
// pagepipe and with foreign (the vmcore's own architecture's build), wants
// the same bytes from both, every page libkdumpfile and drgn read equal to
// want (pageSize-byte pages), and init_uts_ns (at uts) read through a
// virtual address to name the machine.
func foreignReadsEveryPage(t *testing.T, foreign, c, vmcore, dir string, want judge.Pages, pageSize, uts uint64, machine string) {
	t.Helper()
	ours, theirs := filepath.Join(dir, "pp"+c), filepath.Join(dir, "foreign"+c)
	defer os.Remove(ours)
	defer os.Remove(theirs)
	runTo(t, bin, []string{c, "-d", "31"}, vmcore, ours)
	runTo(t, foreign, []string{c, "-d", "31"}, vmcore, theirs)
	equalFiles(t, theirs, ours)
	ranges := judge.AllPFNs(t, ours)
	if d := want.Diff(judge.LibkdumpfileAt(t, ours, pageSize, ranges)); d != "" {
		t.Errorf("libkdumpfile:\n%s", d)
	}
	if d := want.Diff(judge.DrgnAt(t, ours, pageSize, ranges)); d != "" {
		t.Errorf("drgn:\n%s", d)
	}
	for _, reader := range []string{"libkdumpfile", "drgn"} {
		got := judge.ReadVirtual(t, reader, ours, uts, 6*65)
		if !bytes.HasPrefix(got, []byte("Linux\x00")) || !bytes.Contains(got, []byte(machine+"\x00")) {
			t.Errorf("%s: init_uts_ns reads %q", reader, got)
		}
	}
}

// vmcoreinfoOf is the vmcore's parsed VMCOREINFO.
func vmcoreinfoOf(t *testing.T, vmcore string) *kernel.VMCOREINFO {
	t.Helper()
	v, err := source.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	return vmcoreinfoIn(t, v)
}

// vmcoreinfoIn is the VMCOREINFO of the open vmcore v.
func vmcoreinfoIn(t *testing.T, v *source.Vmcore) *kernel.VMCOREINFO {
	t.Helper()
	vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
	if err != nil {
		t.Fatal(err)
	}
	return vi
}

// initUtsNS is the virtual address of init_uts_ns.name in the vmcore.
func initUtsNS(t *testing.T, vmcore string) uint64 {
	t.Helper()
	vi := vmcoreinfoOf(t, vmcore)
	sym, err := vi.RequireSymbol("init_uts_ns")
	if err != nil {
		t.Fatal(err)
	}
	off, _ := vi.Offset("uts_namespace.name")
	return sym + uint64(off)
}
