package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// checkIncomplete asserts what a dump cut short must be: exit 1 with
// makedumpfile's message, the INCOMPLETE flag, fewer pages than the full
// dump, and every page it still holds read by libkdumpfile and drgn equal
// to the vmcore (the lost ones read as missing), and by pagepipe verify.
func checkIncomplete(t *testing.T, vmcore, dump string, err error, out []byte, full judge.Pages) {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("This is an incomplete dumpfile, but might analyzable.")) {
		t.Errorf("no incomplete message in:\n%s", out)
	}
	d, err := source.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Header.Status&kdumpfmt.StatusIncomplete == 0 {
		t.Errorf("status %#x lacks INCOMPLETE", d.Header.Status)
	}
	kept := d.NumDumpable()
	if kept == 0 || kept >= uint64(len(full)) {
		t.Fatalf("%d of %d pages kept: not cut short", kept, len(full))
	}
	want := judge.Pages{}
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		h, ok := full[pfn]
		if !ok {
			t.Fatalf("pfn %#x is in the cut dump but not in the full one", pfn)
		}
		want[pfn] = h
	}
	ranges := allPFNs(t, dump)
	if diff := want.Diff(judge.Libkdumpfile(t, dump, ranges)); diff != "" {
		t.Errorf("libkdumpfile:\n%s", diff)
	}
	if diff := want.Diff(judge.Drgn(t, dump, ranges)); diff != "" {
		t.Errorf("drgn:\n%s", diff)
	}
	if out, err := execOut(bin, "verify", vmcore, dump); err != nil {
		t.Errorf("verify: %v %s", err, out)
	}
}

// -L stops the dump at the size limit and leaves it valid and marked.
func TestRealSizeLimitLeavesValidIncompleteDump(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	ref := dump(t, "makedumpfile", vmcore, "-c", "-d", "31")
	full := expectedPages(t, vmcore, ref)
	out := filepath.Join(t.TempDir(), "limited")
	b, err := exec.Command(bin, "-c", "-d", "31", "-L", "20M", vmcore, out).CombinedOutput()
	checkIncomplete(t, vmcore, out, err, b, full)
	if st, err := os.Stat(out); err != nil || st.Size() > 20<<20 {
		t.Errorf("file size %v past -L 20M (%v)", st.Size(), err)
	}
}

// A full disk (a tmpfs too small for the dump) gives the same guarantees.
func TestRealDiskFullLeavesValidIncompleteDump(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	full := expectedPages(t, vmcore, dump(t, "makedumpfile", vmcore, "-c", "-d", "31"))
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs (tests run as root): %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	out := filepath.Join(mnt, "dump")
	b, err := exec.Command(bin, "-c", "-d", "31", vmcore, out).CombinedOutput()
	if !strings.Contains(string(b), "no space left on device") {
		t.Errorf("no ENOSPC message in:\n%s", b)
	}
	// Read it from a roomier place: the judges need no space, but keep the
	// tmpfs as the dump left it.
	checkIncomplete(t, vmcore, out, err, b, full)
}

// SIGTERM during the copy, at 30 %, 60 % and 90 % of it, finishes the same
// way.
func TestRealSigtermLeavesValidIncompleteDump(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	ref := dump(t, "pagepipe", vmcore, "-c", "-d", "1")
	st, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	full := expectedPages(t, vmcore, ref)
	for _, pct := range []int64{30, 60, 90} {
		t.Run(fmt.Sprintf("%dpct", pct), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "dump")
			// One worker on one CPU: slow enough to be caught mid-copy.
			cmd := exec.Command(bin, "--cpus", "1", "--num-threads", "1", "-c", "-d", "1", vmcore, out)
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			target := st.Size() * pct / 100
			deadline := time.Now().Add(2 * time.Minute)
			for {
				if fi, err := os.Stat(out); err == nil && fi.Size() >= target {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("the dump never reached its target size")
				}
				time.Sleep(2 * time.Millisecond)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			err := cmd.Wait()
			checkIncomplete(t, vmcore, out, err, buf.Bytes(), full)
		})
	}
}
