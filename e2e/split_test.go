//go:build integration

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// splitFiles runs prog --split args vmcore into n new files in workDir and
// returns their paths; the files go when the test ends.
func splitFiles(t *testing.T, prog, vmcore string, n int, args ...string) []string {
	t.Helper()
	dir, err := os.MkdirTemp(workDir, "split-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var outs []string
	for i := range n {
		outs = append(outs, filepath.Join(dir, fmt.Sprintf("%s-%c", prog, 'a'+i)))
	}
	path := prog
	if prog == "pagepipe" {
		path = bin
	}
	cmd := exec.Command(path, append(append(append([]string{"--split"}, args...), vmcore), outs...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s --split %s: %v\n%s", prog, strings.Join(args, " "), err, b)
	}
	return outs
}

// reassembled runs prog --reassemble parts and returns the output's path.
func reassembled(t *testing.T, prog string, parts []string) string {
	t.Helper()
	out := filepath.Join(filepath.Dir(parts[0]), prog+"-reassembled")
	path := prog
	if prog == "pagepipe" {
		path = bin
	}
	cmd := exec.Command(path, append(append([]string{"--reassemble"}, parts...), out)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s --reassemble: %v\n%s", prog, err, b)
	}
	return out
}

// pfnRanges returns the split ranges of parts and the dumpable pages each
// holds.
func pfnRanges(t *testing.T, parts []string) (ranges [][2]uint64, pages []uint64) {
	t.Helper()
	for _, p := range parts {
		d, err := source.OpenDump(p)
		if err != nil {
			t.Fatal(err)
		}
		if d.Sub.Split != 1 {
			t.Errorf("%s: split = %d, want 1", p, d.Sub.Split)
		}
		r := [2]uint64{d.Sub.StartPFN64, d.Sub.EndPFN64}
		ranges = append(ranges, r)
		pages = append(pages, d.Dumpable.Count(r[0], r[1]))
		d.Close()
	}
	return ranges, pages
}

// --split through pagepipe's parallel pipeline writes the files
// makedumpfile 1.7.2 writes (it refuses threads with --split), byte for
// byte; crash opens them as one dump and sees what it sees in the unsplit
// dump; and makedumpfile --reassemble and pagepipe --reassemble both turn
// them, and makedumpfile's split files, into the unsplit dump byte for
// byte. With the default 1 GiB splitblock the 1 GiB fixture is one
// splitblock, so the first file takes every page and the others are
// empty; 4 MiB splitblocks give three parts that all hold pages. (crash
// cannot open split files whose boundaries are not aligned, as 4 KiB
// splitblocks make them, makedumpfile's no more than pagepipe's: those get
// no crash check.)
func TestRealSplitReassemble(t *testing.T) {
	fx := realVmcore(t)
	vmcore := fx.Vmcore
	vmlinux := fixture.DebugVmlinux(t)
	cmds := []string{"sys", "log", "ps", "kmem -i"}
	crashWhole := map[string]string{}
	for _, tc := range []struct {
		name      string
		args      []string // the dump's options, split or not
		splitArgs []string
		crash     bool
	}{
		{"l-d31", []string{"-l", "-d", "31"}, nil, true},
		{"l-d31-splitblock4M", []string{"-l", "-d", "31"}, []string{"--splitblock-size", "4096"}, true},
		{"d31-splitblock4M", []string{"-d", "31"}, []string{"--splitblock-size", "4096"}, false},
		// No zero page (level without bit 1), and splitblocks of one page.
		{"l-d30-splitblock4K", []string{"-l", "-d", "30"}, []string{"--splitblock-size", "4"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := dump(t, "pagepipe", vmcore, tc.args...)
			splitArgs := append(slices.Clone(tc.args), tc.splitArgs...)
			ours := splitFiles(t, "pagepipe", vmcore, 3, append(splitArgs, "--num-threads", "2")...)
			theirs := splitFiles(t, "makedumpfile", vmcore, 3, splitArgs...)

			ranges, pages := pfnRanges(t, ours)
			t.Logf("parts: pfns %v, pages %v", ranges, pages)
			if ranges[0][0] != 0 || ranges[0][1] != ranges[1][0] || ranges[1][1] != ranges[2][0] {
				t.Errorf("split ranges %v do not follow each other", ranges)
			}
			if tc.splitArgs != nil && slices.Contains(pages, 0) {
				t.Errorf("a part holds no pages (%v): the test splits nothing", pages)
			}
			for i := range ours {
				equalFiles(t, ours[i], theirs[i])
			}

			equalFiles(t, reassembled(t, "makedumpfile", ours), whole)
			rev := slices.Clone(ours)
			slices.Reverse(rev)
			equalFiles(t, reassembled(t, "pagepipe", rev), whole)
			equalFiles(t, reassembled(t, "pagepipe", theirs), whole)

			if tc.crash {
				if _, ok := crashWhole[whole]; !ok {
					crashWhole[whole] = judge.Crash(t, vmlinux, whole, cmds...)
				}
				got := judge.CrashParts(t, vmlinux, ours, cmds...)
				if got != crashWhole[whole] {
					t.Fatalf("crash output differs:\n--- split\n%s\n--- unsplit\n%s", head(got, 40), head(crashWhole[whole], 40))
				}
				if !strings.Contains(got, "MEMORY: 1 GB") || !strings.Contains(got, "Linux version") {
					t.Errorf("crash output lacks the machine:\n%s", head(got, 20))
				}
			}
		})
	}
}

// --reassemble refuses parts that are not one whole dump, and leaves no
// output behind.
func TestRealReassembleRefusesMissingPart(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	parts := splitFiles(t, "pagepipe", vmcore, 3, "-l", "-d", "31", "--splitblock-size", "4096")
	out := filepath.Join(filepath.Dir(parts[0]), "incomplete-set")
	b, err := exec.Command(bin, "--reassemble", parts[0], parts[2], out).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, b)
	}
	if !strings.Contains(string(b), "no split file holds pfns") {
		t.Errorf("no reason given:\n%s", b)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output left behind: %v", err)
	}
}

// A full disk during --split leaves every file valid: the files written
// before it filled up stay complete (byte-identical to a split on a roomy
// disk), the file being written and those after it are marked INCOMPLETE
// with their lost pages out of their 2nd bitmap (within their own pfn
// range), and libkdumpfile reads every part, each page it holds equal to
// the vmcore. --reassemble joins such parts into an incomplete dump (exit
// 1, the dump kept, valid and marked) holding every page the parts hold.
func TestRealSplitDiskFullLeavesValidIncompleteParts(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	args := []string{"-l", "-d", "31", "--splitblock-size", "4096"}
	full := judge.ExpectedPages(t, vmcore, dump(t, "pagepipe", vmcore, "-l", "-d", "31"))
	roomy := splitFiles(t, "pagepipe", vmcore, 3, args...)
	size := func(p string) int64 {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	// Room for the first part and half the second.
	disk := (size(roomy[0]) + size(roomy[1])/2 + 4095) / 4096 * 4096
	mnt := smallTmpfs(t, disk)
	var parts []string
	for _, n := range []string{"a", "b", "c"} {
		parts = append(parts, filepath.Join(mnt, n))
	}
	b, err := exec.Command(bin, append(append(append([]string{"--split"}, args...), vmcore), parts...)...).CombinedOutput()
	exitedIncomplete(t, err, b)
	for _, want := range []string{"no space left on device", "Incomplete split files: " + parts[1] + ", " + parts[2] + "."} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in:\n%s", want, b)
		}
	}
	equalFiles(t, parts[0], roomy[0])

	kept := judge.Pages{}
	for i, p := range parts {
		d, err := source.OpenDump(p)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := d.Sub.StartPFN64, d.Sub.EndPFN64
		want, all := judge.Pages{}, 0
		for pfn, h := range full {
			if pfn >= lo && pfn < hi {
				all++
				if d.Dumpable.Test(pfn) {
					want[pfn], kept[pfn] = h, h
				}
			}
		}
		incomplete := d.Header.Status&kdumpfmt.StatusIncomplete != 0
		d.Close()
		if incomplete != (i > 0) {
			t.Errorf("%s: INCOMPLETE %v, want %v", p, incomplete, i > 0)
		}
		if (len(want) < all) != (i > 0) || all == 0 {
			t.Errorf("%s: %d of the %d pages of pfns [%#x, %#x) kept", p, len(want), all, lo, hi)
		}
		if diff := want.Diff(judge.Libkdumpfile(t, p, judge.AllPFNs(t, p))); diff != "" {
			t.Errorf("libkdumpfile on %s:\n%s", p, diff)
		}
	}

	out := filepath.Join(t.TempDir(), "reassembled")
	b, err = exec.Command(bin, append(append([]string{"--reassemble"}, parts...), out)...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(b), "reassembled from incomplete split files") {
		t.Fatalf("--reassemble: exit %v, want 1 and the reason\n%s", err, b)
	}
	d, err := source.OpenDump(out)
	if err != nil {
		t.Fatal(err)
	}
	if d.Header.Status&kdumpfmt.StatusIncomplete == 0 || d.NumDumpable() != uint64(len(kept)) {
		t.Errorf("reassembled: status %#x, %d pages, want INCOMPLETE and the parts' %d", d.Header.Status, d.NumDumpable(), len(kept))
	}
	d.Close()
	if diff := kept.Diff(judge.Libkdumpfile(t, out, judge.AllPFNs(t, out))); diff != "" {
		t.Errorf("libkdumpfile on the reassembled dump:\n%s", diff)
	}
	verify(t, vmcore, out)
}
