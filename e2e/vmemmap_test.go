//go:build integration

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// What crash prints differently for a dump with excluded vmemmap: its
// warning (after a blank line and a line naming the file, which the judge
// leaves out), and kmem -i's SHARED line, the one line of sys, log, ps and
// kmem -i that counts pages by walking the struct pages.
var (
	vmemmapWarning = regexp.MustCompile(`(?m)^\n? +This dumpfile is incomplete because the page structures associated\n(?: {9}.*\n){3}`)
	pageCounts     = regexp.MustCompile(`(?m)^ +SHARED .*\n`)
)

// sameMachine is crash's output less what -e changes.
func sameMachine(s string) string {
	return pageCounts.ReplaceAllString(vmemmapWarning.ReplaceAllString(s, ""), "")
}

// On the real 6.1 fixture, -e -d 31 leaves out vmemmap pages (the header
// says so with DUMP_DH_EXCLUDED_VMEMMAP, and crash warns) and crash still
// sees the same machine: sys, log, ps and kmem -i print what they print
// for the dump without -e, but for the pages kmem -i counts as SHARED. The dump is byte-identical to makedumpfile 1.7.2's -e dump
// (which needs --work-dir).
func TestRealExcludeVmemmap(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	work := t.TempDir()
	args := []string{"-e", "--work-dir", work, "-d", "31"}
	ours := dump(t, "pagepipe", vmcore, args...)
	plain := dump(t, "pagepipe", vmcore, "-d", "31")

	d, p := openDump(t, ours), openDump(t, plain)
	if d.Header.Status&kdumpfmt.StatusExcludedVmemmap == 0 || p.Header.Status&kdumpfmt.StatusExcludedVmemmap != 0 {
		t.Errorf("status %#x with -e, %#x without", d.Header.Status, p.Header.Status)
	}
	freed := p.Dumpable.Count(0, p.MaxMapnr) - d.Dumpable.Count(0, d.MaxMapnr)
	if freed == 0 {
		t.Fatalf("-e left out no vmemmap page")
	}
	if !strings.Contains(report("pagepipe", vmcore, args...), "unused vmemmap pages") {
		t.Errorf("no \"Excluded N unused vmemmap pages\" line:\n%s", report("pagepipe", vmcore, args...))
	}
	t.Logf("-e left out %d more pages", freed)

	cmds := []string{"sys", "log", "ps", "kmem -i"}
	vmlinux := fixture.DebugVmlinux(t)
	with := judge.Crash(t, vmlinux, ours, cmds...)
	without := judge.Crash(t, vmlinux, plain, cmds...)
	for _, want := range []string{"RELEASE: ", "MEMORY: 1 GB", "Linux version", "TOTAL MEM"} {
		if !strings.Contains(with, want) {
			t.Errorf("crash output of the -e dump lacks %q:\n%s", want, head(with, 20))
		}
	}
	if !vmemmapWarning.MatchString(with) || vmemmapWarning.MatchString(without) {
		t.Errorf("crash's warning about excluded vmemmap: %v with -e, %v without", vmemmapWarning.MatchString(with), vmemmapWarning.MatchString(without))
	}
	if a, b := sameMachine(with), sameMachine(without); a != b {
		t.Fatalf("crash output differs:\n%s", lineDiff(a, b, 30))
	}

	theirs := dump(t, "makedumpfile", vmcore, args...)
	a, err := os.ReadFile(ours)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		// makedumpfile 1.7.2's walk of a KASLR'd vmemmap can stop at an
		// entry it calls invalid ("invalid: pud 63 pmd 19", one fixture's
		// boot): it still counts the vmemmap pages it would leave out but
		// keeps them in the dump. There the counts are what can be held
		// to its answer; anywhere else the bytes.
		w := t.TempDir()
		msgs, _ := exec.Command("makedumpfile", "-e", "--work-dir", w, "--message-level", "31", "-d", "31", vmcore, filepath.Join(w, "dump")).CombinedOutput()
		excluded := regexp.MustCompile(`Excluded \d+ unused vmemmap pages`)
		if !regexp.MustCompile(`(?m)^invalid: pud \d+ pmd \d+`).Match(msgs) {
			t.Errorf("differs from makedumpfile's -e dump: %s", judge.FirstDiff(a, b))
		} else if theirs, ours := excluded.Find(msgs), excluded.FindString(report("pagepipe", vmcore, args...)); string(theirs) != ours || ours == "" {
			t.Errorf("makedumpfile's vmemmap walk stopped at an invalid entry and says %q, pagepipe %q", theirs, ours)
		} else {
			t.Logf("makedumpfile's vmemmap walk stopped at an invalid entry (its dump keeps the pages it counts as left out); both say %q", ours)
		}
	}
}

// lineDiff lists, up to n of each, the lines only a has (-) and only b has (+).
func lineDiff(a, b string, n int) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out []string
	for _, side := range []struct {
		sign  string
		s     string
		other map[string]int
	}{{"-", a, cb}, {"+", b, ca}} {
		k := 0
		for _, l := range strings.Split(side.s, "\n") {
			if side.other[l] > 0 {
				side.other[l]--
				continue
			}
			if k++; k <= n {
				out = append(out, side.sign+" "+l)
			}
		}
	}
	return strings.Join(out, "\n")
}

// openDump opens a kdump file for the rest of the test.
func openDump(t *testing.T, path string) *source.Dump {
	t.Helper()
	d, err := source.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
