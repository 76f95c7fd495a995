//go:build integration

package e2e

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
)

// pipe runs a shell pipeline and fails the test if it fails.
func pipe(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// The flattened stream (-F) rebuilds into the plain dump byte for byte,
// through makedumpfile -R and pagepipe -R, in both directions, even with
// garbage after the end marker (a raw partition); crash reads the
// flattened file directly.
func TestRealFlattened(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	dir := t.TempDir()
	ours := dump(t, "pagepipe", vmcore, "-l", "-d", "31")
	theirs := dump(t, "makedumpfile", vmcore, "-l", "-d", "31")
	flat := filepath.Join(dir, "pp.flat")
	pipe(t, bin+" -F -l -d 31 "+vmcore+" > "+flat)

	a, b, c := filepath.Join(dir, "A"), filepath.Join(dir, "B"), filepath.Join(dir, "C")
	pipe(t, "makedumpfile -R "+a+" < "+flat)
	pipe(t, bin+" -R "+b+" < "+flat)
	pipe(t, "makedumpfile -F -l -d 31 "+vmcore+" | "+bin+" -R "+c)
	equalFiles(t, a, ours)
	equalFiles(t, b, ours)
	equalFiles(t, c, theirs)

	// A raw disk: the stream, then 1 MiB of old data.
	raw := filepath.Join(dir, "raw")
	junk := make([]byte, 1<<20)
	rand.Read(junk)
	stream := readFile(t, flat)
	if err := os.WriteFile(raw, append(stream, junk...), 0o600); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(dir, "D")
	pipe(t, bin+" -R "+d+" < "+raw)
	equalFiles(t, d, ours)

	// crash opens the flattened file as it is.
	vmlinux := fixture.DebugVmlinux(t)
	got := judge.Crash(t, vmlinux, flat, "sys", "log")
	want := judge.Crash(t, vmlinux, ours, "sys", "log")
	if got != want {
		t.Fatalf("crash on the flattened file:\n%s", head(got, 20))
	}
}

// -R on input that is not a flattened stream, or is cut before its
// headers and bitmaps landed, fails with one line and leaves no file; a
// stream cut later (half way, or just its end marker missing) is rebuilt
// into a valid dump marked incomplete, kept, with an incomplete dump's
// exit status and message.
func TestRearrangeRejectsBadStreams(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	dir := t.TempDir()
	flat := filepath.Join(dir, "pp.flat")
	pipe(t, bin+" -F -d 31 "+vmcore+" > "+flat)
	stream := readFile(t, flat)
	for name, input := range map[string][]byte{
		"empty":          nil,
		"not flattened":  bytes.Repeat([]byte("x"), 8192),
		"cut in headers": stream[:5000],
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "out")
			cmd := exec.Command(bin, "-R", out)
			cmd.Stdin = bytes.NewReader(input)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil {
				t.Fatal("exit 0")
			}
			if n := strings.Count(stderr.String(), "\n"); n != 1 {
				t.Errorf("stderr is not one line: %q", stderr.String())
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("a partial file was left behind")
			}
		})
	}
	for name, input := range map[string][]byte{
		"cut short":     stream[:len(stream)/2],
		"no end marker": stream[:len(stream)-16],
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command(bin, "-R", out)
			cmd.Stdin = bytes.NewReader(input)
			b, err := cmd.CombinedOutput()
			exitedIncomplete(t, err, b)
			if report, _ := execOut(bin, "inspect", out); !strings.Contains(report, "INCOMPLETE") {
				t.Errorf("not marked incomplete:\n%s", report)
			}
			verify(t, vmcore, out)
		})
	}
}
