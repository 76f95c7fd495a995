package e2e

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// pageCounts are crash's lines that count pages or bytes of the dump
// itself, which -e changes: none of sys, log, ps or kmem -i's lines does
// today, but a dump size or a warning about excluded vmemmap would.
var pageCounts = regexp.MustCompile(`(?m)^.*(DUMPFILE SIZE|vmemmap|excluded).*\n`)

// On the real 6.1 fixture, -e -d 31 leaves out vmemmap pages (the header
// says so with DUMP_DH_EXCLUDED_VMEMMAP) and crash still sees the same
// machine: sys, log, ps and kmem -i print what they print for the dump
// without -e. The dump is byte-identical to makedumpfile 1.7.2's -e dump
// (which needs --work-dir).
func TestRealExcludeVmemmap(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	work := t.TempDir()
	args := []string{"-e", "--work-dir", work, "-d", "31"}
	ours := dump(t, "pagepipe", vmcore, args...)
	plain := dump(t, "pagepipe", vmcore, "-d", "31")

	d, err := source.OpenDump(ours)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := source.OpenDump(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
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
	if a, b := pageCounts.ReplaceAllString(with, ""), pageCounts.ReplaceAllString(without, ""); a != b {
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
		t.Errorf("differs from makedumpfile's -e dump: %s", judge.FirstDiff(a, b))
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
