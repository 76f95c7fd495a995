//go:build integration

package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// Debian's makedumpfile -R rebuilds the prioritised flattened stream into
// the prioritised file byte for byte (TestPriorityStream: pagepipe -R).
func TestPriorityStreamMakedumpfileR(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.KernelMachine("6.1", 128))
	args := []string{"-l", "-d", "1"}
	prio := filepath.Join(dir, "prio")
	mustPagepipe(t, append(args, "--priority", vmcore, prio)...)
	stream := []byte(mustPagepipe(t, append([]string{"-F", "--priority"}, append(args, vmcore)...)...))
	theirs := filepath.Join(dir, "theirs")
	cmd := exec.Command("makedumpfile", "-R", theirs)
	cmd.Stdin = bytes.NewReader(stream)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("makedumpfile -R: %v\n%s", err, out)
	}
	if got, want := readFile(t, theirs), readFile(t, prio); !bytes.Equal(got, want) {
		t.Fatalf("the stream rebuilt by makedumpfile -R is not the prioritised file: %s", judge.FirstDiff(got, want))
	}
}

// Debian's makedumpfile --reassemble makes the prioritised --split parts
// into the default dump byte for byte (TestPrioritySplit: pagepipe's).
func TestPrioritySplitMakedumpfileReassembles(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.KernelMachine("6.1", 128))
	whole := filepath.Join(dir, "whole")
	mustPagepipe(t, "-l", "-d", "1", vmcore, whole)
	parts := splitNames(dir, "prio", 3)
	mustPagepipe(t, append([]string{"--split", "--priority", "-l", "-d", "1", "--splitblock-size", "1024", vmcore}, parts...)...)
	theirs := filepath.Join(dir, "re-mdf")
	judge.Makedumpfile(t, append(append([]string{"--reassemble"}, parts...), theirs)...)
	if got, want := readFile(t, theirs), readFile(t, whole); !bytes.Equal(got, want) {
		t.Fatalf("prioritised parts reassembled by makedumpfile differ from the dump: %s", judge.FirstDiff(got, want))
	}
}
