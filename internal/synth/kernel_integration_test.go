//go:build integration

package synth

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/source"
)

func init() {
	makedumpfileAgrees64 = func(t *testing.T, s Spec, path, dir string) {
		d, rep, _ := runMakedumpfile(t, makedumpfile(t), path, filepath.Join(dir, "dump"), 31)
		checkDump(t, s, d, rep, 31)
	}
}

// makedumpfile returns the path of the installed makedumpfile (Debian's
// 1.7.2 here); the test fails without it (make test installs it).
func makedumpfile(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("makedumpfile")
	if err != nil {
		t.Fatal("makedumpfile is not installed (scripts/deps.sh installs it)")
	}
	return p
}

var reportLine = regexp.MustCompile(`(?m)^\s*(Pages filled with zero|Non-private cache pages|Private cache pages|User process data pages|Free pages|Hwpoison pages|Offline pages)\s*: 0x([0-9a-f]+)$`)

// parseReport reads makedumpfile's report (--message-level with bit 16).
func parseReport(t *testing.T, out []byte) FilterCounts {
	t.Helper()
	var fc FilterCounts
	m := reportLine.FindAllSubmatch(out, -1)
	if len(m) != 7 {
		t.Fatalf("found %d report lines in:\n%s", len(m), out)
	}
	for _, l := range m {
		v, err := strconv.ParseUint(string(l[2]), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		*map[string]*uint64{
			"Pages filled with zero": &fc.Zero, "Non-private cache pages": &fc.Cache,
			"Private cache pages": &fc.CachePrivate, "User process data pages": &fc.User,
			"Free pages": &fc.Free, "Hwpoison pages": &fc.Hwpoison, "Offline pages": &fc.Offline,
		}[string(l[1])] = v
	}
	return fc
}

// runMakedumpfile dumps vmcore at level into out and returns the opened
// dump and the report.
func runMakedumpfile(t *testing.T, mdf, vmcore, out string, level int) (*source.Dump, FilterCounts, []byte) {
	t.Helper()
	os.Remove(out)
	cmd := exec.Command(mdf, "-d", strconv.Itoa(level), "--message-level", "31", vmcore, out)
	msg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("makedumpfile -d %d: %v\n%s", level, err, msg)
	}
	d, err := source.OpenDump(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); os.Remove(out) })
	return d, parseReport(t, msg), msg
}

// checkDump compares makedumpfile's output with the truth: the header's
// utsname and timestamp (read by makedumpfile through the page tables and
// the note), both bitmaps pfn by pfn, and the report's counters.
func checkDump(t *testing.T, s Spec, d *source.Dump, rep FilterCounts, level int) {
	t.Helper()
	k, _ := kernelOf(&s)
	if rel := d.Header.Utsfield(2); rel != k.prof.osrelease || d.Header.Utsfield(0) != "Linux" || d.Header.Utsfield(4) != "x86_64" {
		t.Errorf("utsname %q %q %q", d.Header.Utsfield(0), rel, d.Header.Utsfield(4))
	}
	if d.Header.TimestampSec != k.crashTime {
		t.Errorf("timestamp %d, CRASHTIME %d", d.Header.TimestampSec, k.crashTime)
	}
	if d.Sub.PhysBase != uint64(k.physBase) {
		t.Errorf("sub header phys_base %#x, want %#x", d.Sub.PhysBase, uint64(k.physBase))
	}
	if d.MaxMapnr != k.endPFN {
		t.Fatalf("max_mapnr %#x, want %#x", d.MaxMapnr, k.endPFN)
	}
	want, wfc, err := ExpectedFilter(s, level)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for pfn := uint64(0); pfn < k.endPFN; pfn++ {
		if d.Present.Test(pfn) != k.inRAM(pfn, pfn+1) {
			t.Fatalf("1st bitmap: pfn %#x present %v", pfn, d.Present.Test(pfn))
		}
		if w := want[pfn/8]&(1<<(pfn%8)) != 0; d.Dumpable.Test(pfn) != w && len(bad) < 10 {
			bad = append(bad, fmt.Sprintf("pfn %#x (%s): dumped %v, want %v", pfn, TruthOf(s, pfn), !w, w))
		}
	}
	if len(bad) > 0 {
		t.Errorf("level %d: 2nd bitmap differs:\n%s", level, strings.Join(bad, "\n"))
	}
	if n := d.Dumpable.Count(0, d.MaxMapnr); n != wfc.Dumpable {
		t.Errorf("level %d: %d pages dumped, want %d", level, n, wfc.Dumpable)
	}
	wfc.Dumpable, rep.Dumpable = 0, 0
	if rep != wfc {
		t.Errorf("level %d: report %+v\n                  truth %+v", level, rep, wfc)
	}
}

// TestMakedumpfileAgrees is the realism proof: Debian's makedumpfile 1.7.2
// filters kernel machines of the eras it knows (up to 6.0.1 officially; 6.1
// works, as on the real fixture) exactly as the truth says, at every dump
// level, including 1 GiB hugetlb pages that cross batches and sections.
func TestMakedumpfileAgrees(t *testing.T) {
	mdf := makedumpfile(t)
	cases := []struct {
		name   string
		spec   Spec
		levels []int
	}{
		{"6.1-256M", KernelMachine("6.1", 256), []int{0, 1, 2, 4, 8, 16, 31}},
		{"4.19-160M-nokaslr-2M", NewKernelMachine(KernelSpec{Profile: "4.19", DirectMap2M: true}, 160), []int{2, 8, 31}},
		{"5.10-256M", KernelMachine("5.10", 256), []int{4, 16, 31}},
		// Mostly free, so that the file stays small; levels that keep
		// the free pages would have makedumpfile read 3 GiB of them.
		{"6.1-3G-gigantic", NewKernelMachine(KernelSpec{Profile: "6.1", KASLR: true, Gigantic: 1, Used: 0.05, FreeDirty: -1}, 3072),
			[]int{25, 31}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			vmcore := filepath.Join(dir, "vmcore")
			if err := WriteFile(vmcore, c.spec); err != nil {
				t.Fatal(err)
			}
			for _, level := range c.levels {
				d, rep, _ := runMakedumpfile(t, mdf, vmcore, filepath.Join(dir, "dump"), level)
				checkDump(t, c.spec, d, rep, level)
			}
		})
	}
}

// TestMakedumpfileNewerEras runs 1.7.2 on the eras it predates. The
// structures are sound (it walks the page tables and mem_section, reads
// utsname, and agrees on free, hwpoison and offline pages, the page-type
// compare being exact in 1.7.2), but it cannot find compound orders
// without OFFSET(page.compound_order) (6.6+ keep them in page[1].flags),
// so large folios' tail pages stay and hugetlb pages go unnoticed; on 6.6+
// it also counts slabs whose mapping word is odd as user data. Those
// counters are logged, not checked.
func TestMakedumpfileNewerEras(t *testing.T) {
	mdf := makedumpfile(t)
	for _, p := range []string{"6.6", "6.9", "6.12"} {
		t.Run(p, func(t *testing.T) {
			s := KernelMachine(p, 128)
			dir := t.TempDir()
			vmcore := filepath.Join(dir, "vmcore")
			if err := WriteFile(vmcore, s); err != nil {
				t.Fatal(err)
			}
			d, rep, _ := runMakedumpfile(t, mdf, vmcore, filepath.Join(dir, "dump"), 31)
			_, want, _ := ExpectedFilter(s, 31)
			if d.Header.Utsfield(2) != profiles[p].osrelease {
				t.Errorf("utsname release %q", d.Header.Utsfield(2))
			}
			if rep.Free != want.Free || rep.Hwpoison != want.Hwpoison || rep.Offline != want.Offline {
				t.Errorf("report %+v\n truth %+v", rep, want)
			}
			t.Logf("1.7.2 on %s: cache %d (truth %d), private %d (%d), user %d (%d)",
				p, rep.Cache, want.Cache, rep.CachePrivate, want.CachePrivate, rep.User, want.User)
		})
	}
}
