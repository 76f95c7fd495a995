//go:build integration

package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// vmcoreinfoBlock returns the VMCOREINFO lines a message-level-8 run
// printed: from "VMCOREINFO   :" to the blank line after it.
func vmcoreinfoBlock(msgs string) string {
	_, rest, ok := strings.Cut(msgs, "VMCOREINFO   :\n")
	if !ok {
		return ""
	}
	block, _, _ := strings.Cut(rest, "\n\n")
	return block
}

// Message level 8 prints the VMCOREINFO lines as makedumpfile does, on
// stderr with -F: SUSE's kdump reads OSRELEASE= (and CRASHTIME=) there, in
// `-F --message-level 8 --dump-dmesg VMCORE`, whose log goes to stdout.
func TestRealVMCOREINFOLinesAtLevel8(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	run := func(prog string, own ...string) (stdout, stderr string) {
		cmd := exec.Command(prog, append(own, "-F", "--message-level", "8", "--dump-dmesg", vmcore)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", prog, err, e.String())
		}
		return o.String(), e.String()
	}
	ourLog, ours := run(bin, "--dmesg-format", "1.7.2") // the judge is 1.7.2
	theirLog, theirs := run("makedumpfile")
	if ourLog != theirLog {
		t.Error("the logs written to stdout differ")
	}
	a, b := vmcoreinfoBlock(ours), vmcoreinfoBlock(theirs)
	if a == "" || a != b {
		t.Fatalf("VMCOREINFO lines differ:\n--- pagepipe\n%s\n--- makedumpfile\n%s", a, b)
	}
	if !strings.Contains(a, "  OSRELEASE=6.") {
		t.Errorf("no OSRELEASE= line in:\n%s", a)
	}
}
