package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/synth"
	"pagepipe/source"
)

// liveMachines are the kcore-shaped machines the live tests dump: x86_64
// whose init sections were freed (the page scan leaves pages of the
// kernel image out, which a live dump holds all the same), and arm64.
func liveMachines() map[string]synth.Spec {
	return map[string]synth.Spec{
		"x86_64": synth.NewKernelMachine(synth.KernelSpec{Profile: "6.1", KASLR: true, FreedInit: true}, 96),
		"arm64":  synth.NewARM64Machine(synth.KernelSpec{Profile: "6.1", KASLR: true}, 64),
	}
}

func writeKcore(t *testing.T, s synth.Spec, o synth.KcoreOptions) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kcore")
	if err := synth.WriteKcore(path, s, o); err != nil {
		t.Fatal(err)
	}
	return path
}

// memUsageTable parses --mem-usage's output: the TYPE rows, the totals
// and the dump-level rows.
func memUsageTable(t *testing.T, out string) (rows map[string]uint64, levels [32]uint64) {
	t.Helper()
	rows = map[string]uint64{}
	typeRow := regexp.MustCompile(`^(ZERO|NON_PRI_CACHE|PRI_CACHE|USER|FREE|KERN_DATA)\t+(\d+) +\t(yes|no)\t\t`)
	total := regexp.MustCompile(`^(page size|Total pages on system|Total size on system):\t+(\d+)`)
	level := regexp.MustCompile(`^(\d+) *\t\t(\d+) +\t(\d+) Byte$`)
	sc := bufio.NewScanner(strings.NewReader(out))
	nLevels := 0
	for sc.Scan() {
		l := sc.Text()
		if m := typeRow.FindStringSubmatch(l); m != nil {
			rows[m[1]], _ = strconv.ParseUint(m[2], 10, 64)
		} else if m := total.FindStringSubmatch(l); m != nil {
			rows[m[1]], _ = strconv.ParseUint(m[2], 10, 64)
		} else if m := level.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			levels[n], _ = strconv.ParseUint(m[2], 10, 64)
			nLevels++
		}
	}
	if len(rows) != 9 || nLevels != 32 {
		t.Fatalf("%d table rows and %d dump levels in\n%s", len(rows), nLevels, out)
	}
	return rows, levels
}

// --mem-usage on a kcore-shaped machine prints makedumpfile's table with
// the machine's own page classes (as makedumpfile counts them at level
// 31), and what each dump level keeps: exactly the pages a dump at that
// level holds, where the level keeps zero pages, and no fewer than the
// pages with data of one that leaves them out.
func TestMemUsage(t *testing.T) {
	for name, s := range liveMachines() {
		t.Run(name, func(t *testing.T) {
			out := mustPagepipe(t, "--mem-usage", writeKcore(t, s, synth.KcoreOptions{}))
			rows, levels := memUsageTable(t, out)
			_, fc, err := synth.ExpectedFilter(s, 31)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]uint64{
				"ZERO": fc.Zero, "NON_PRI_CACHE": fc.Cache, "PRI_CACHE": fc.CachePrivate, "USER": fc.User, "FREE": fc.Free,
				"KERN_DATA": fc.Dumpable - fc.Zero, "page size": s.PageBytes(),
				"Total pages on system": fc.Dumpable + fc.Cache + fc.CachePrivate + fc.User + fc.Free + fc.Hwpoison + fc.Offline,
			}
			want["Total size on system"] = want["Total pages on system"] * s.PageBytes()
			for k, v := range want {
				if rows[k] != v {
					t.Errorf("%s: %d, want %d", k, rows[k], v)
				}
			}
			for l := 0; l <= 31; l++ {
				_, fl, err := synth.ExpectedFilter(s, l)
				if err != nil {
					t.Fatal(err)
				}
				if l&1 == 0 && levels[l] != fl.Dumpable || l&1 == 1 && levels[l] < fl.Dumpable-fl.Zero || l == 31 && levels[l] != fl.Dumpable-fl.Zero {
					t.Errorf("level %d: %d pages, a dump holds %d (%d of them zero)", l, levels[l], fl.Dumpable, fl.Zero)
				}
			}
		})
	}
}

// A live dump of a kcore-shaped machine: the header and inspect say it is
// live and when; its page index is whole (verify reads every page back,
// none changed: the image is not live); every page of the kernel image is
// in it, those the page scan left out (freed init sections) too; and the
// 2nd bitmap is made once, whatever --cyclic-buffer says, so that the
// count that fixed the index is the bitmap the data follows; and the pages
// an analysis needs first (--priority's) are read and written first.
func TestLiveDump(t *testing.T) {
	for name, s := range liveMachines() {
		t.Run(name, func(t *testing.T) {
			kcore := writeKcore(t, s, synth.KcoreOptions{})
			dumpPath := filepath.Join(t.TempDir(), "live.dump")
			stdout, stderr := mustPagepipeErr(t, "-l", "-d", "31", "--cyclic-buffer", "1", "--message-level", "31", kcore, dumpPath)
			stderr += stdout
			if !strings.Contains(stderr, "Dumping the running kernel") {
				t.Errorf("no word that the kernel is running in\n%s", stderr)
			}
			if strings.Contains(stderr, "the 2nd bitmap in ") {
				t.Errorf("a live dump's 2nd bitmap was made in cycles\n%s", stderr)
			}
			ins := mustPagepipe(t, "inspect", dumpPath)
			if !regexp.MustCompile(`(?m)^live dump +: the running kernel, read from .*kcore at \d{4}-\d\d-\d\dT`).MatchString(ins) {
				t.Errorf("inspect does not say live:\n%s", ins)
			}
			// The log, the tasks and per-CPU state are read first
			// (inspect finds the priority set of x86_64 dumps).
			if name == "x86_64" && !strings.Contains(ins, "data order      : priority set first") {
				t.Errorf("a live dump is not in priority order:\n%s", ins)
			}
			ver := mustPagepipe(t, "verify", kcore, dumpPath)
			if !strings.Contains(ver, ": 0 changed since the dump") {
				t.Errorf("verify: %s", ver)
			}
			d, err := source.OpenDump(dumpPath)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			v, err := source.Open(kcore)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			ps := v.PageSize()
			var image, left uint64
			bm, fc, err := synth.ExpectedFilter(s, 31)
			if err != nil {
				t.Fatal(err)
			}
			for pfn := v.Kcore.ImageStart / ps; pfn < v.Kcore.ImageEnd/ps; pfn++ {
				image++
				if !d.Dumpable.Test(pfn) {
					t.Fatalf("image pfn %#x not dumped", pfn)
				}
				if bm[pfn/8]&(1<<(pfn%8)) == 0 {
					left++
				}
			}
			// The pages level 31 leaves out as free, cache or user
			// memory are in the index too (revisited): the copy pass
			// read their struct pages again, found them unchanged
			// and stored them as zeros.
			revisit := fc.Free + fc.Cache + fc.CachePrivate + fc.User - left
			if got := d.Dumpable.Count(0, d.Dumpable.Len()); got != fc.Dumpable+left+revisit {
				t.Errorf("%d pages dumped, want level 31's %d, the %d of the image it leaves out and the %d it leaves out as free, cache or user memory", got, fc.Dumpable, left, revisit)
			}
			if want := fmt.Sprintf("live: %d pages the page scan left out as free, cache or user memory are revisited by the copy pass\n", revisit); !strings.Contains(stderr, want) {
				t.Errorf("no %q in\n%s", want, stderr)
			}
			if want := fmt.Sprintf("live: %d revisited pages were still left out when copied, stored as zeros\n", revisit); !strings.Contains(stderr, want) {
				t.Errorf("no %q in\n%s", want, stderr)
			}
			if revisit == 0 {
				t.Errorf("level 31 left no page out as free, cache or user memory: the test shows nothing")
			}
			if name == "x86_64" && left == 0 {
				t.Errorf("the page scan left no page of the %d-page image out: the test shows nothing", image)
			}
		})
	}
}

// A kcore without VMCOREINFO, and --mem-usage on a vmcore, are refused:
// one line, exit 1, no file.
func TestLiveRefusals(t *testing.T) {
	s := liveMachines()["x86_64"]
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", s)
	old := writeKcore(t, s, synth.KcoreOptions{NoVMCOREINFO: true})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-l", "-d", "31", old, filepath.Join(dir, "out")}, "no VMCOREINFO note"},
		{[]string{"--mem-usage", old}, "no VMCOREINFO note"},
		{[]string{"--mem-usage", vmcore}, "--mem-usage reads the running kernel's /proc/kcore"},
	} {
		rc, stdout, stderr := pagepipe(t, tc.args...)
		errs := strings.Count(stderr, "pagepipe: ")
		if rc != 1 || errs != 1 || !strings.Contains(stderr, tc.want) || strings.Contains(stdout, "TYPE") {
			t.Errorf("%q: exit %d, stderr %q, want one line with %q", tc.args, rc, stderr, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(err) {
			t.Errorf("%q left a file", tc.args)
		}
	}
}

func mustPagepipeErr(t *testing.T, args ...string) (string, string) {
	t.Helper()
	rc, stdout, stderr := pagepipe(t, args...)
	if rc != 0 {
		t.Fatalf("pagepipe %s: exit %d\n%s%s", strings.Join(args, " "), rc, stdout, stderr)
	}
	return stdout, stderr
}

// Every output shape dumps the running kernel: ELF, a flattened stream
// and split files say they are live, and verify reads each back whole
// against the kcore (none changed: the image is not live).
func TestLiveDumpEveryShape(t *testing.T) {
	kcore := writeKcore(t, liveMachines()["x86_64"], synth.KcoreOptions{})
	dir := t.TempDir()
	elf, flat, s1, s2 := filepath.Join(dir, "elf"), filepath.Join(dir, "flat"), filepath.Join(dir, "s1"), filepath.Join(dir, "s2")
	mustPagepipe(t, "-E", "-d", "31", kcore, elf)
	stream := mustPagepipe(t, "-F", "-l", "-d", "31", kcore)
	if err := os.WriteFile(flat, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	mustPagepipe(t, "--split", "--splitblock-size", "4096", "-z", "-d", "31", kcore, s1, s2)
	for _, files := range [][]string{{elf}, {flat}, {s1, s2}} {
		ins := mustPagepipe(t, "inspect", files[0])
		if !strings.Contains(ins, "live dump       : the running kernel") {
			t.Errorf("inspect %s does not say live:\n%s", files[0], ins)
		}
		ver := mustPagepipe(t, append([]string{"verify", kcore}, files...)...)
		if n := strings.Count(ver, ": 0 changed since the dump"); n != len(files) {
			t.Errorf("verify %s:\n%s", files, ver)
		}
	}
}
