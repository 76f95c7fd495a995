package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kernel"
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
	notes, _, off, size := v.Notes()
	vi, err := kernel.ParseVMCOREINFO(notes[off : off+size])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(vi.OSRelease(), release) {
		t.Fatalf("fixture %+v runs kernel %s, want %s", opt, vi.OSRelease(), release)
	}
	l5, _ := vi.Raw("NUMBER(pgtable_l5_enabled)")
	if got := l5 == "1"; got != la57 {
		t.Fatalf("fixture %+v: NUMBER(pgtable_l5_enabled)=%q, want 5-level paging %v", opt, l5, la57)
	}
	return vmcore
}

// forgetDumps deletes the dumps of vmcore that dump made, and their reports.
func forgetDumps(vmcore string) {
	dumps.Lock()
	defer dumps.Unlock()
	for k, v := range dumps.m {
		switch {
		case strings.HasSuffix(k, " "+vmcore):
			os.Remove(v)
		case strings.HasSuffix(k, " "+vmcore+" report"):
		default:
			continue
		}
		delete(dumps.m, k)
	}
}

// Debian 13's 6.12: pagepipe's uncompressed dumps are byte-identical to
// makedumpfile 1.7.8's at every level asked, with the same counts.
func TestTrixieLevelsMatchMakedumpfile178(t *testing.T) {
	vmcore := newKernel(t, trixieOptions(), "6.12.", false)
	levelsMatch(t, vmcore, fixture.Peer(t, "makedumpfile-sid"), kernelLevels)
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

// On sid's kernel, every page pagepipe keeps or drops is accounted for:
//   - -d 0 keeps every RAM page; -d 1 stores as the zero page exactly
//     the pages whose bytes in the vmcore are all zero, and counts them as
//     "Pages filled with zero";
//   - each struct-page class bit (2, 4, 8, 16) alone drops a set of pages
//     as large as the sum of its class counts; 4's (all page cache)
//     holds 2's (page cache without private data), and 4's, 8's and 16's
//     are disjoint (a page has one class);
//   - at the combined levels (31, 11, 27) the kept set is the intersection
//     of the single bits' kept sets, each class count is the largest its
//     bits give alone (the classification does not depend on the level),
//     and the zero count is the zero pages among what the class bits keep.
//
// What this cannot tell is whether a class is the right one for a page: no
// makedumpfile reads 7.1+ struct pages right, and the readers below check
// contents, not classes.
func TestSidClassesExplained(t *testing.T) {
	vmcore := newKernel(t, sidOptions(), "7.", false)
	all := kept(t, dump(t, "pagepipe", vmcore, "-d", "0"))
	n := all.Len()

	v, err := source.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := v.NewReader(source.DefaultMapSize, true)
	defer r.Close()
	zero := bitmap.New(n)
	for pfn := all.NextSet(0); pfn < n; pfn = all.NextSet(pfn + 1) {
		page, err := r.Page(pfn)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.ContainsFunc(page, func(r rune) bool { return r != 0 }) {
			zero.Set(pfn)
		}
	}
	d1 := kept(t, dump(t, "pagepipe", vmcore, "-d", "1"))
	c1 := counts(t, report("pagepipe", vmcore, "-d", "1"))
	var nzero uint64
	for pfn := uint64(0); pfn < n; pfn++ {
		want := all.Test(pfn) && !zero.Test(pfn)
		if d1.Test(pfn) != want {
			t.Fatalf("-d 1: pfn %#x kept %v, want %v (in RAM %v, all zeros %v)", pfn, d1.Test(pfn), want, all.Test(pfn), zero.Test(pfn))
		}
		if zero.Test(pfn) {
			nzero++
		}
	}
	if got := hexCount(t, c1, "Pages filled with zero"); got != nzero || nzero == 0 {
		t.Errorf("-d 1: %d zero pages counted, the vmcore has %d", got, nzero)
	}

	labels := []string{"Non-private cache pages", "Private cache pages", "User process data pages", "Free pages"}
	bits := []uint{2, 4, 8, 16}
	single := map[uint]*bitmap.Bitmap{}
	classCount := map[uint]map[string]uint64{}
	dropped := map[uint]uint64{}
	owner := make([]uint, n)
	for _, bit := range bits {
		level := strconv.Itoa(int(bit))
		k := kept(t, dump(t, "pagepipe", vmcore, "-d", level))
		c := counts(t, report("pagepipe", vmcore, "-d", level))
		classCount[bit] = map[string]uint64{}
		var sum uint64
		for _, l := range labels {
			classCount[bit][l] = hexCount(t, c, l)
			sum += classCount[bit][l]
		}
		for pfn := uint64(0); pfn < n; pfn++ {
			if k.Test(pfn) && !all.Test(pfn) {
				t.Fatalf("-d %s keeps pfn %#x, not in RAM", level, pfn)
			}
			if !all.Test(pfn) || k.Test(pfn) {
				continue
			}
			dropped[bit]++
			if bit == 2 {
				continue // checked against 4 below
			}
			if owner[pfn] != 0 {
				t.Fatalf("pfn %#x dropped by both -d %d and -d %d", pfn, owner[pfn], bit)
			}
			owner[pfn] = bit
		}
		if sum != dropped[bit] {
			t.Errorf("-d %s drops %d pages, counts %v", level, dropped[bit], classCount[bit])
		}
		single[bit] = k
	}
	for pfn := uint64(0); pfn < n; pfn++ {
		if all.Test(pfn) && !single[2].Test(pfn) && single[4].Test(pfn) {
			t.Fatalf("pfn %#x dropped by -d 2 (page cache without private data) but kept by -d 4 (all page cache)", pfn)
		}
	}
	if dropped[16] == 0 || dropped[2] == 0 || dropped[8] == 0 || dropped[4] <= dropped[2] {
		t.Errorf("a 1 GiB guest full of page cache, some with buffers, and anonymous memory, with free memory, dropped %v", dropped)
	}

	for _, level := range []uint{31, 11, 27} {
		name := strconv.Itoa(int(level))
		t.Run("d"+name, func(t *testing.T) {
			k := kept(t, dump(t, "pagepipe", vmcore, "-d", name))
			c := counts(t, report("pagepipe", vmcore, "-d", name))
			var nz uint64
			for pfn := uint64(0); pfn < n; pfn++ {
				byClass := all.Test(pfn)
				for _, bit := range bits {
					if level&bit != 0 && !single[bit].Test(pfn) {
						byClass = false
					}
				}
				want := byClass && !(level&1 != 0 && zero.Test(pfn))
				if byClass && !want {
					nz++
				}
				if k.Test(pfn) != want {
					t.Fatalf("pfn %#x kept %v, want %v", pfn, k.Test(pfn), want)
				}
			}
			for _, l := range labels {
				want := uint64(0)
				for _, bit := range bits {
					if level&bit != 0 {
						want = max(want, classCount[bit][l])
					}
				}
				if got := hexCount(t, c, l); got != want {
					t.Errorf("%s %d, want %d", l, got, want)
				}
			}
			if got := hexCount(t, c, "Pages filled with zero"); got != nz {
				t.Errorf("zero pages %d, want %d", got, nz)
			}
		})
	}
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
var consoleLine = regexp.MustCompile(`^\[ *([0-9]+\.[0-9]{6})\] (.*)$`)

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
	i, n := 0, 0
	for _, l := range strings.Split(string(readFile(t, serial)), "\n") {
		m := consoleLine.FindStringSubmatch(strings.TrimRight(l, "\r"))
		if m == nil {
			continue
		}
		n++
		for i < len(log) && log[i] != [2]string{m[1], m[2]} {
			i++
		}
		if i == len(log) {
			t.Fatalf("console line %q is not in --dump-dmesg's output after the previous one (%d lines matched)", l, n-1)
		}
		i++
	}
	if n < 100 {
		t.Errorf("only %d kernel lines on the serial console", n)
	}
}
