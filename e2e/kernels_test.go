//go:build integration

package e2e

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/internal/judge/structpage"
	"pagepipe/source"
)

// Real fixtures of kernels newer than the host's Debian 12 6.1, booted from
// the suites' own packages (fixtures/debian-kernel.sh). makedumpfile 1.7.2
// is wrong for them (6.9+ page types, 6.12's one-type-per-page byte), so the
// judges are sid's makedumpfile 1.7.8, correct for 6.12 to 6.17, and sid's
// crash 9.0.2 (crash 8.0.2 cannot read 6.12: KASLR detection and the 6.4
// module layout).

// trixieOptions is Debian 13's 6.12 in the default 1 GiB guest.
// no_timer_check: under TCG on a loaded host the kernel's timer check may
// wrongly find the timer broken.
func trixieOptions() fixture.Options {
	return fixture.Options{Suite: "trixie", Cmdline: "no_timer_check"}
}

// la57Options is the same kernel on a CPU with 5-level page tables.
func la57Options() fixture.Options {
	o := trixieOptions()
	o.CPU = "qemu64,+la57"
	return o
}

// The levels acceptance asks of the newer kernels: each bit alone, 31, and
// two combinations.
var kernelLevels = []string{"1", "2", "4", "8", "16", "31", "11", "27"}

// newKernel returns the fixture of opt and fails unless its kernel is the
// release wanted (so that a fixture script falling back to the host's
// kernel cannot pass) and its page tables have the number of levels wanted.
// The dumps the test makes of it are deleted when it ends: each is up to
// 1 GiB in the work directory, which is in memory.
func newKernel(t *testing.T, opt fixture.Options, release string, la57 bool) string {
	t.Helper()
	vmcore := fixture.Real(t, opt).Vmcore
	t.Cleanup(func() { forgetDumps(vmcore) })
	v, err := source.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	vi := vmcoreinfoIn(t, v)
	if !strings.HasPrefix(vi.OSRelease(), release) {
		t.Fatalf("fixture %+v runs kernel %s, want %s", opt, vi.OSRelease(), release)
	}
	l5, _ := vi.Raw("NUMBER(pgtable_l5_enabled)")
	if got := l5 == "1"; got != la57 {
		t.Fatalf("fixture %+v: NUMBER(pgtable_l5_enabled)=%q, want 5-level paging %v", opt, l5, la57)
	}
	return vmcore
}

// forgetDumps deletes the dumps of vmcore that no running test holds.
func forgetDumps(vmcore string) {
	dumps.Lock()
	defer dumps.Unlock()
	for k, d := range dumps.m {
		if d.holders == 0 && strings.HasSuffix(k, " "+vmcore) {
			dropDump(k)
		}
	}
}

// Debian 13's 6.12: pagepipe's uncompressed dumps are byte-identical to
// makedumpfile 1.7.8's at every level asked, with the same counts.
func TestTrixieLevelsMatchMakedumpfile178(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	mdf := fixture.Peer(t, "makedumpfile-sid")
	levelsMatch(t, vmcore, mdf, kernelLevels)
	// The reader that judges 7.2 agrees with makedumpfile 1.7.8 here.
	classesExplained(t, readStructPages(t, vmcore), mdf, vmcore, kernelLevels)
}

// libkdumpfile and drgn read every page of pagepipe's 6.12 dumps back.
func TestTrixieReadersReadEveryPage(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	readersReadEveryPage(t, vmcore, fixture.Peer(t, "makedumpfile-sid"), [][]string{{"-c", "-d", "1"}, {"-c", "-d", "31"}})
}

// crash 9.0.2 with 6.12's debug vmlinux sees the same machine in pagepipe's
// dumps as in makedumpfile 1.7.8's.
func TestTrixieCrashSameAsMakedumpfile178(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	crashSame(t, fixture.Peer(t, "crash-sid"), fixture.SuiteDebugVmlinux(t, "trixie"), vmcore,
		fixture.Peer(t, "makedumpfile-sid"), [][]string{{"-c", "-d", "1"}, {"-d", "31"}})
}

// 5-level paging, real: 6.12 under LA57. -d 31 is byte-identical to
// makedumpfile 1.7.8's, the readers read every page back, and crash sees
// the same machine.
func TestLA57MatchesMakedumpfile178(t *testing.T) {
	vmcore := newKernel(t, la57Options(), "6.12.", true)
	mdf := fixture.Peer(t, "makedumpfile-sid")
	levelsMatch(t, vmcore, mdf, []string{"31"})
	classesExplained(t, readStructPages(t, vmcore), mdf, vmcore, []string{"31"}) // structpage's 5-level walk
	readersReadEveryPage(t, vmcore, mdf, [][]string{{"-c", "-d", "31"}})
	crashSame(t, fixture.Peer(t, "crash-sid"), fixture.SuiteDebugVmlinux(t, "trixie"), vmcore, mdf, [][]string{{"-d", "31"}})
}

// The kernel log of Debian 13's 6.12 is byte-identical to makedumpfile
// 1.7.8's by default and to 1.7.2's with --dmesg-format 1.7.2.
func TestTrixieDmesgMatchesMakedumpfile(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	for _, j := range dmesgJudges {
		t.Run(j.name, func(t *testing.T) {
			ours, theirs := dmesgBoth(t, j, vmcore, "full")
			equalFiles(t, ours, theirs)
		})
	}
}

// sidOptions is sid's newest kernel (7.2 today) in the default 1 GiB guest.
// No Debian makedumpfile is right for 7.1+ (page.compound_head became
// compound_info; only makedumpfile's HEAD knows), so these tests judge by
// the vmcore's own contents, the consistency of the classes across levels,
// and the readers.
func sidOptions() fixture.Options {
	return fixture.Options{Suite: "sid", Cmdline: "no_timer_check"}
}

// kept is the set of pfns whose data a kdump file holds: the dumpable
// bitmap less the pages stored as the shared zero page (-d 1 keeps their
// bits; their descriptors all point at one zero page, the only data that
// more than one descriptor shares).
func kept(t *testing.T, dump string) *bitmap.Bitmap {
	t.Helper()
	d, err := source.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	users := map[int64][]uint64{}
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		pd, err := d.Desc(pfn)
		if err != nil {
			t.Fatal(err)
		}
		users[pd.Offset] = append(users[pd.Offset], pfn)
	}
	k := bitmap.New(d.MaxMapnr)
	shared := 0
	for _, pfns := range users {
		if len(pfns) > 1 {
			shared++
			continue
		}
		k.Set(pfns[0])
	}
	if shared > 1 {
		t.Fatalf("%s: %d page data shared by several descriptors, want at most the zero page", dump, shared)
	}
	return k
}

// hexCount parses a report count such as 0x000000000000956c.
func hexCount(t *testing.T, c map[string]string, k string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(c[k], "0x"), 16, 64)
	if err != nil {
		t.Fatalf("%s %q: %v", k, c[k], err)
	}
	return v
}

// readStructPages reads vmcore's struct pages with the test-only reader
// internal/judge/structpage, which shares no code with pagepipe, and fails
// on struct pages that contradict each other.
func readStructPages(t *testing.T, vmcore string) *structpage.Machine {
	t.Helper()
	v, err := structpage.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	m, err := structpage.Read(v)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Anomalies) > 0 {
		t.Fatalf("struct pages that contradict each other:\n%s", strings.Join(m.Anomalies, "\n"))
	}
	t.Logf("%d sections, vmemmap %#x; units: %v", m.Sections, m.VMemmap, m.Kinds())
	return m
}

// classesExplained checks prog's dump of vmcore at each level against
// what the kernel's struct pages say, as structpage reads them: the dump
// holds the data of exactly the pages in RAM (below max_mapnr) that the
// level does not leave out (pages left out as zero may keep their bit, with
// the one shared zero page: see kept), and the report's count of each
// class is the number of pages of that class.
func classesExplained(t *testing.T, m *structpage.Machine, prog, vmcore string, levels []string) {
	t.Helper()
	for _, level := range levels {
		t.Run("explained-d"+level, func(t *testing.T) {
			n, err := strconv.Atoi(level)
			if err != nil {
				t.Fatal(err)
			}
			k := kept(t, dump(t, prog, vmcore, "-d", level))
			if k.Len() != m.MaxPFN {
				t.Fatalf("max_mapnr %d, the struct pages end at pfn %d", k.Len(), m.MaxPFN)
			}
			class, count := m.Level(n)
			bad := 0
			for pfn := range m.MaxPFN {
				want := m.RAM(pfn) && class[pfn] == structpage.Kept
				if k.Test(pfn) != want {
					if bad++; bad <= 5 {
						t.Errorf("pfn %#x: %s keeps it %v; in RAM %v, the struct pages say %q", pfn, prog, k.Test(pfn), m.RAM(pfn), class[pfn].Label())
					}
				}
			}
			if bad > 5 {
				t.Errorf("... %d pages in all", bad)
			}
			c := counts(t, report(prog, vmcore, "-d", level))
			for _, cl := range structpage.Classes {
				if got := hexCount(t, c, cl.Label()); got != count[cl] {
					t.Errorf("%s: %s reports %d, the struct pages say %d", cl.Label(), prog, got, count[cl])
				}
			}
			for bit, cl := range map[int]structpage.Class{1: structpage.Zero, 2: structpage.Cache, 4: structpage.CachePrivate, 8: structpage.User, 16: structpage.Free} {
				if n&bit != 0 && count[cl] == 0 {
					t.Errorf("-d %s left out no %s: the guest holds some", level, cl.Label())
				}
			}
		})
	}
}

// On sid's kernel, every page pagepipe keeps or leaves out, at each level
// asked, and every count of its report, is explained by the kernel's own
// struct pages, read by structpage (page types in page_type's top byte,
// folio order, compound_info's tail bit, mem_map from mem_section checked
// against SYMBOL(vmemmap)). No Debian makedumpfile reads 7.1+ right
// (compound_info), so this, the readers and TestTrixieLevelsMatchMakedumpfile178
// (where the same reader agrees with makedumpfile 1.7.8 on 6.12) are the
// judges. At -d 0 the dump holds every page in RAM.
func TestSidClassesExplained(t *testing.T) {
	vmcore := newKernel(t, sidOptions(), "7.", false)
	m := readStructPages(t, vmcore)
	classesExplained(t, m, "pagepipe", vmcore, append([]string{"0"}, kernelLevels...))
}

// libkdumpfile and drgn read every page of pagepipe's dumps of sid's
// kernel equal to the vmcore.
func TestSidReadersReadEveryPage(t *testing.T) {
	vmcore := newKernel(t, sidOptions(), "7.", false)
	for _, args := range [][]string{{"-c", "-d", "1"}, {"-c", "-d", "31"}} {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			ours := dump(t, "pagepipe", vmcore, args...)
			want := judge.ExpectedPages(t, vmcore, ours)
			ranges := judge.AllPFNs(t, ours)
			if d := want.Diff(judge.Libkdumpfile(t, ours, ranges)); d != "" {
				t.Errorf("libkdumpfile:\n%s", d)
			}
			if d := want.Diff(judge.Drgn(t, ours, ranges)); d != "" {
				t.Errorf("drgn:\n%s", d)
			}
		})
	}
}

// consoleLine is a kernel line on the serial console: "[   1.234567] text".
// It need not start the line: the first kernel line follows the firmware's
// output and its escape sequences on the same line.
var consoleLine = regexp.MustCompile(`\[ *([0-9]+\.[0-9]{6})\] (.*)$`)

// dmesgLine is a line of --dump-dmesg's default output, with the caller
// column: "[   1.234567] [      T1] text".
var dmesgLine = regexp.MustCompile(`^\[ *([0-9]+\.[0-9]{6})\] \[ *[TC][0-9]+\] (.*)$`)

// Every kernel line the guest printed on its serial console before the
// dump appears, in order and with the same timestamp, in --dump-dmesg's
// output of sid's kernel (the console shows only the levels above its
// loglevel; the ring buffer holds them all).
func TestSidDmesgHasTheConsole(t *testing.T) {
	opt := sidOptions()
	vmcore := newKernel(t, opt, "7.", false)
	out := filepath.Join(t.TempDir(), "dmesg")
	if o, err := execOut(bin, "--dump-dmesg", vmcore, out); err != nil {
		t.Fatalf("pagepipe --dump-dmesg: %v\n%s", err, o)
	}
	// A record of several lines: the console prints each with the
	// record's timestamp, --dump-dmesg indents the later ones by the
	// prefix's width.
	var log [][2]string
	indent := ""
	for _, l := range strings.Split(string(readFile(t, out)), "\n") {
		if m := dmesgLine.FindStringSubmatch(l); m != nil {
			log = append(log, [2]string{m[1], m[2]})
			indent = strings.Repeat(" ", len(l)-len(m[2]))
		} else if len(log) > 0 && strings.HasPrefix(l, indent) {
			log = append(log, [2]string{log[len(log)-1][0], l[len(indent):]})
		}
	}
	serial := filepath.Join(fixture.Real(t, opt).Dir, "serial.log")
	i, n, first := 0, 0, ""
	for _, l := range strings.Split(string(readFile(t, serial)), "\n") {
		m := consoleLine.FindStringSubmatch(strings.TrimRight(l, "\r"))
		if m == nil {
			continue
		}
		if n++; n == 1 {
			first = m[2]
		}
		for i < len(log) && log[i] != [2]string{m[1], m[2]} {
			i++
		}
		if i == len(log) {
			t.Fatalf("console line %q is not in --dump-dmesg's output after the previous one (%d lines matched)", l, n-1)
		}
		i++
	}
	if n < 100 || !strings.HasPrefix(first, "Linux version ") {
		t.Errorf("%d kernel lines on the serial console, the first %q: want more than 100, from the banner on", n, first)
	}
}
