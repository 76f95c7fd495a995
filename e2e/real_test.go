//go:build integration

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// The dump levels the real-fixture judges run: each bit alone, every
// distribution's 31, and some combinations.
var levels = []string{"0", "1", "2", "4", "8", "16", "31", "3", "11", "19", "27"}

// Uncompressed dumps of a real kernel are byte-identical to makedumpfile
// 1.7.2's at every level, and the report's counts per class agree.
// makedumpfile double-counts the kernel-text PT_LOAD that aliases RAM
// ("Original pages" above "Total pages", a negative "Memory Hole");
// pagepipe's counts must add up instead.
func TestRealLevelsMatchMakedumpfile(t *testing.T) {
	levelsMatch(t, realVmcore(t).Vmcore, "makedumpfile", levels)
}

// levelsMatch checks, at each dump level, that pagepipe's uncompressed dump
// of vmcore is byte-identical to the makedumpfile peer's (a program name or
// path), that the reports' counts per class agree, and that pagepipe's
// counts add up.
func levelsMatch(t *testing.T, vmcore, peer string, levels []string) {
	t.Helper()
	for _, level := range levels {
		t.Run("d"+level, func(t *testing.T) {
			ours := dump(t, "pagepipe", vmcore, "-d", level)
			theirs := dump(t, peer, vmcore, "-d", level)
			equalFiles(t, ours, theirs)
			a, b := counts(t, report("pagepipe", vmcore, "-d", level)), counts(t, report(peer, vmcore, "-d", level))
			for _, k := range []string{"Excluded pages", "Pages filled with zero", "Non-private cache pages",
				"Private cache pages", "User process data pages", "Free pages", "Hwpoison pages",
				"Offline pages", "Total pages", "Write bytes"} {
				if a[k] != b[k] {
					t.Errorf("%s: pagepipe %s, makedumpfile %s", k, a[k], b[k])
				}
			}
			hex := func(k string) uint64 {
				v, err := strconv.ParseUint(strings.TrimPrefix(a[k], "0x"), 16, 64)
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				return v
			}
			if hex("Original pages")+hex("Memory Hole") != hex("Total pages") || hex("Memory Hole") > hex("Total pages") {
				t.Errorf("counts do not add up: original %#x + hole %#x != total %#x", hex("Original pages"), hex("Memory Hole"), hex("Total pages"))
			}
			if hex("Original pages")-hex("Excluded pages") != hex("Remaining pages") {
				t.Errorf("remaining %#x != original %#x - excluded %#x", hex("Remaining pages"), hex("Original pages"), hex("Excluded pages"))
			}
		})
	}
}

// libkdumpfile and drgn read every page of pagepipe's compressed dumps
// equal to the vmcore, and find exactly the pages makedumpfile's dump of
// the same level holds.
func TestRealReadersReadEveryPage(t *testing.T) {
	readersReadEveryPage(t, realVmcore(t).Vmcore, "makedumpfile", [][]string{{"-c", "-d", "1"}, {"-c", "-d", "31"}})
}

// readersReadEveryPage checks, for each argument list, that libkdumpfile
// and drgn read every page of pagepipe's dump of vmcore equal to the
// vmcore, and find exactly the pages the makedumpfile peer's dump holds.
func readersReadEveryPage(t *testing.T, vmcore, peer string, argLists [][]string) {
	t.Helper()
	for _, args := range argLists {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			readersRead(t, vmcore, dump(t, "pagepipe", vmcore, args...), dump(t, peer, vmcore, args...))
		})
	}
}

// readersRead checks that libkdumpfile and drgn read every page of the
// dump ours equal to vmcore, and find exactly the pages the dump
// reference holds.
func readersRead(t *testing.T, vmcore, ours, reference string) {
	t.Helper()
	want := judge.ExpectedPages(t, vmcore, reference)
	ranges := judge.AllPFNs(t, ours)
	if d := want.Diff(judge.Libkdumpfile(t, ours, ranges)); d != "" {
		t.Errorf("libkdumpfile:\n%s", d)
	}
	if d := want.Diff(judge.Drgn(t, ours, ranges)); d != "" {
		t.Errorf("drgn:\n%s", d)
	}
}

// crash sees the same machine in pagepipe's dump as in makedumpfile's: the
// same sys, log, ps and kmem -i output, at -c -d 1 and at -d 31.
func TestRealCrashSameAsMakedumpfile(t *testing.T) {
	crashSame(t, "crash", fixture.DebugVmlinux(t), realVmcore(t).Vmcore, "makedumpfile", [][]string{{"-c", "-d", "1"}, {"-d", "31"}})
}

// crashSame checks, for each argument list, that crash (a program name or
// path) prints the same sys, log, ps and kmem -i for pagepipe's dump of
// vmcore as for the makedumpfile peer's, and that it saw the machine.
func crashSame(t *testing.T, crash, vmlinux, vmcore, peer string, argLists [][]string) {
	t.Helper()
	for _, args := range argLists {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			crashAgrees(t, crash, vmlinux, dump(t, "pagepipe", vmcore, args...), dump(t, peer, vmcore, args...),
				"RELEASE: ", "MEMORY: 1 GB", "CPUS: 2", "Linux version")
		})
	}
}

// crashAgrees checks that crash (a program name or path) prints the same
// sys, log, ps and kmem -i for the dump ours as for theirs, and that the
// output holds each of wants; it returns the output.
func crashAgrees(t *testing.T, crash, vmlinux, ours, theirs string, wants ...string) string {
	t.Helper()
	cmds := []string{"sys", "log", "ps", "kmem -i"}
	a := judge.CrashBy(t, crash, vmlinux, ours, cmds...)
	b := judge.CrashBy(t, crash, vmlinux, theirs, cmds...)
	if a != b {
		t.Fatalf("crash output differs:\n--- pagepipe\n%s\n--- makedumpfile\n%s", head(a, 40), head(b, 40))
	}
	for _, want := range wants {
		if !strings.Contains(a, want) {
			t.Errorf("crash output lacks %q:\n%s", want, head(a, 20))
		}
	}
	return a
}

func head(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// The judges can fail: in a dump with one page descriptor pointing at
// another page's data, libkdumpfile's and drgn's page comparison and
// pagepipe verify each find that page, and only that page, wrong.
func TestRealJudgesCatchADamagedDump(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	good := dump(t, "pagepipe", vmcore, "-c", "-d", "31")
	want := judge.ExpectedPages(t, vmcore, good)
	bad, pfn := damagedDump(t, good, want)
	ranges := judge.AllPFNs(t, bad)
	only := fmt.Sprintf("pfn %#x: contents differ\n", pfn)
	for _, j := range []struct {
		name string
		read func(testing.TB, string, []judge.Range) judge.Pages
	}{{"libkdumpfile", judge.Libkdumpfile}, {"drgn", judge.Drgn}} {
		if d := want.Diff(j.read(t, bad, ranges)); d != only {
			t.Errorf("%s judge on the damaged dump: want only %q, got:\n%s", j.name, only, d)
		}
	}
	out, err := execOut(bin, "verify", vmcore, bad)
	if err == nil || !strings.Contains(out, fmt.Sprintf("pfn %#x differs", pfn)) {
		t.Errorf("pagepipe verify on the damaged dump: %v %s", err, out)
	}
	if out, err := execOut(bin, "verify", vmcore, good); err != nil {
		t.Errorf("pagepipe verify failed the good dump: %v %s", err, out)
	}
}

// damagedDump copies the kdump file good and points one page descriptor of
// the copy at another page's data; it returns the copy and the pfn that now
// reads wrong. The pair is the first two neighbours in pfn order whose
// descriptors differ and whose pages in the vmcore (want) differ: which
// pages those are depends on what the boot left in memory (neighbours may
// share the zero page's descriptor, or hold equal pages), but every
// fixture has such a pair, so the damage always shows.
func damagedDump(t *testing.T, good string, want judge.Pages) (string, uint64) {
	t.Helper()
	d, err := source.OpenDump(good)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := os.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := d.Header
	descs := (1 + int64(h.SubHdrSize) + int64(h.BitmapBlocks)) * int64(h.BlockSize)
	var b [kdumpfmt.PageDescSize]byte
	var prev kdumpfmt.PageDesc
	var prevPFN uint64
	k := int64(0) // descriptor index of pfn
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn, k = d.Dumpable.NextSet(pfn+1), k+1 {
		if _, err := f.ReadAt(b[:], descs+k*kdumpfmt.PageDescSize); err != nil {
			t.Fatalf("descriptor %d: %v", k, err)
		}
		desc := kdumpfmt.UnmarshalPageDesc(b[:])
		if k > 0 && desc != prev && want[pfn] != want[prevPFN] {
			bad := filepath.Join(t.TempDir(), "damaged")
			copyFile(t, good, bad)
			out, err := os.OpenFile(bad, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			if _, err := out.WriteAt(b[:], descs+(k-1)*kdumpfmt.PageDescSize); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("descriptor %d (pfn %#x) points at descriptor %d's data (pfn %#x)", k-1, prevPFN, k, pfn)
			return bad, prevPFN
		}
		prev, prevPFN = desc, pfn
	}
	t.Fatal("no two neighbouring dumped pages differ in descriptor and contents")
	return "", 0
}
