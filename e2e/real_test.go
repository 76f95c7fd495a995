package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
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
	vmcore := realVmcore(t).Vmcore
	for _, level := range levels {
		t.Run("d"+level, func(t *testing.T) {
			ours := dump(t, "pagepipe", vmcore, "-d", level)
			theirs := dump(t, "makedumpfile", vmcore, "-d", level)
			equalFiles(t, ours, theirs)
			a, b := counts(t, report("pagepipe", vmcore, "-d", level)), counts(t, report("makedumpfile", vmcore, "-d", level))
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
	vmcore := realVmcore(t).Vmcore
	for _, args := range [][]string{{"-c", "-d", "1"}, {"-c", "-d", "31"}} {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			ours := dump(t, "pagepipe", vmcore, args...)
			want := expectedPages(t, vmcore, dump(t, "makedumpfile", vmcore, args...))
			ranges := allPFNs(t, ours)
			if d := want.Diff(judge.Libkdumpfile(t, ours, ranges)); d != "" {
				t.Errorf("libkdumpfile:\n%s", d)
			}
			if d := want.Diff(judge.Drgn(t, ours, ranges)); d != "" {
				t.Errorf("drgn:\n%s", d)
			}
		})
	}
}

// crash sees the same machine in pagepipe's dump as in makedumpfile's: the
// same sys, log, ps and kmem -i output, at -c -d 1 and at -d 31.
func TestRealCrashSameAsMakedumpfile(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	vmlinux := fixture.DebugVmlinux(t)
	for _, args := range [][]string{{"-c", "-d", "1"}, {"-d", "31"}} {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			cmds := []string{"sys", "log", "ps", "kmem -i"}
			ours := judge.Crash(t, vmlinux, dump(t, "pagepipe", vmcore, args...), cmds...)
			theirs := judge.Crash(t, vmlinux, dump(t, "makedumpfile", vmcore, args...), cmds...)
			if ours != theirs {
				t.Fatalf("crash output differs:\n--- pagepipe\n%s\n--- makedumpfile\n%s", head(ours, 40), head(theirs, 40))
			}
			for _, want := range []string{"RELEASE: 6.", "MEMORY: 1 GB", "CPUS: 2", "Linux version"} {
				if !strings.Contains(ours, want) {
					t.Errorf("crash output lacks %q:\n%s", want, head(ours, 20))
				}
			}
		})
	}
}

func head(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// The judges can fail: a dump with one page descriptor pointing at another
// page's data is caught by libkdumpfile's and drgn's page comparison and by
// pagepipe verify.
func TestRealJudgesCatchADamagedDump(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	good := dump(t, "pagepipe", vmcore, "-c", "-d", "31")
	b := readFile(t, good)
	h, err := kdumpfmt.UnmarshalHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	descs := (1 + int64(h.SubHdrSize) + int64(h.BitmapBlocks)) * int64(h.BlockSize)
	// Point descriptor 1000 at descriptor 1001's data.
	d1000 := kdumpfmt.UnmarshalPageDesc(b[descs+1000*kdumpfmt.PageDescSize:])
	d1001 := kdumpfmt.UnmarshalPageDesc(b[descs+1001*kdumpfmt.PageDescSize:])
	if d1000 == d1001 {
		t.Fatal("pick other descriptors: these two are equal")
	}
	d1001.Put(b[descs+1000*kdumpfmt.PageDescSize:])
	bad := filepath.Join(t.TempDir(), "damaged")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	want := expectedPages(t, vmcore, good)
	ranges := allPFNs(t, bad)
	if d := want.Diff(judge.Libkdumpfile(t, bad, ranges)); d == "" {
		t.Error("libkdumpfile judge passed a damaged dump")
	}
	if d := want.Diff(judge.Drgn(t, bad, ranges)); d == "" {
		t.Error("drgn judge passed a damaged dump")
	}
	out, err := execOut(bin, "verify", vmcore, bad)
	if err == nil || !strings.Contains(out, "differs") {
		t.Errorf("pagepipe verify passed a damaged dump: %v %s", err, out)
	}
	if out, err := execOut(bin, "verify", vmcore, good); err != nil {
		t.Errorf("pagepipe verify failed the good dump: %v %s", err, out)
	}
}
