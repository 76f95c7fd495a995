//go:build integration

package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
)

// -e on a generated machine with much free memory leaves out exactly the
// vmemmap pages makedumpfile 1.7.2's -e leaves out: the files are
// byte-identical (so are their 2nd bitmaps and header status, with
// DUMP_DH_EXCLUDED_VMEMMAP set), kdump and ELF (where -e counts the zero
// pages the zero scan found), with --work-dir (which both require with
// -e); both say how many pages they left out.
func TestExcludeVmemmapMatchesMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", vmemmapMachine(3<<10))
	small := writeShape(t, dir, "vmcore-1g", vmemmapMachine(1<<10))
	for _, c := range vmemmapCases(vmcore, small) {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			ours, theirs := filepath.Join(tmp, "pp"), filepath.Join(tmp, "mdf")
			args := append([]string{"-e", "--work-dir", work}, c.args...)
			_, _, stderr := pagepipeOK(t, append(args, c.vmcore, ours)...)
			msg := judge.Makedumpfile(t, append(args, c.vmcore, theirs)...)
			a, b := readFile(t, ours), readFile(t, theirs)
			if !bytes.Equal(a, b) {
				t.Errorf("differs from makedumpfile's -e dump: %s", judge.FirstDiff(a, b))
			}
			got, want := excludedLine.FindStringSubmatch(stderr), excludedLine.FindStringSubmatch(msg)
			if got == nil || want == nil || got[1] != want[1] || got[1] == "0" {
				t.Errorf("message %q, makedumpfile's %q", got, want)
			}
			if c.name == "elf" {
				return
			}
			d, m := openDump(t, ours), openDump(t, theirs)
			if d.Header.Status&kdumpfmt.StatusExcludedVmemmap == 0 || d.Header.Status != m.Header.Status {
				t.Errorf("status %#x, makedumpfile's %#x", d.Header.Status, m.Header.Status)
			}
			if !d.Dumpable.Equal(m.Dumpable) {
				t.Errorf("2nd bitmaps differ")
			}
		})
	}
}
