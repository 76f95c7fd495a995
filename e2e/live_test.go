//go:build integration

package e2e

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/source"
)

// The live tests run pagepipe on a running Debian 12 kernel's own
// /proc/kcore (fixtures/make-live.sh: one QEMU guest per architecture,
// cached): --mem-usage beside makedumpfile 1.7.2's while the guest is
// quiescent, live -l -d 31 dumps while it runs a workload, and the
// refusals; on x86_64 (the host's kernel) and arm64 (Debian 12's arm64
// kernel under QEMU virt, TCG, with the arm64 build of pagepipe and
// Debian's arm64 makedumpfile in the guest).

// liveArch is one architecture's live fixture and its judges.
type liveArch struct {
	name, arch string                  // the subtests' name; make-live.sh's --arch
	pagepipe   func(*testing.T) string // the static build the guest runs
	// dumps is how many live dumps the plan takes under load: ten on
	// x86_64; three on arm64, whose TCG guest and qemu-user crash (about
	// 3 minutes of CPU to load the debug vmlinux, per dump) cost several
	// times as much.
	dumps int
	// imageTwice: makedumpfile 1.7.2's --mem-usage counts the kernel
	// image's pages twice (below).
	imageTwice bool
	crash      string // fixture.Peer's crash that reads the dumps
	// crashLastOnly: crash reads only the last dump (arm64's qemu-user
	// crash: about 4 CPU-minutes a dump); every other check still runs on
	// every dump. x86_64's native crash reads all ten.
	crashLastOnly bool
	vmlinux       func(*testing.T) string // the kernel's debug vmlinux
}

var liveArches = []liveArch{
	{
		name: "x86_64", arch: "amd64", pagepipe: func(*testing.T) string { return bin },
		dumps: 10, imageTwice: true, crash: "crash-sid", vmlinux: func(t *testing.T) string { return fixture.DebugVmlinux(t) },
	},
	{
		name: "arm64", arch: "arm64", pagepipe: armBuild.binary,
		dumps: 3, imageTwice: true, crash: "crash-arm64", crashLastOnly: true,
		vmlinux: func(t *testing.T) string { return fixture.DebugVmlinuxOf(t, "bookworm", "arm64") },
	},
}

// forLiveArches runs f on each architecture's live fixture, a subtest
// each.
func forLiveArches(t *testing.T, f func(t *testing.T, a liveArch, l fixture.Live)) {
	for _, a := range liveArches {
		t.Run(a.name, func(t *testing.T) {
			l := fixture.LiveRun(t, a.arch, a.pagepipe(t))
			if l.Arch != a.arch {
				t.Fatalf("%s: a fixture of %q", l.Dir, l.Arch)
			}
			f(t, a, l)
		})
	}
}

// memUsageRows are the TYPE rows and totals of a --mem-usage table.
var memUsageRow = regexp.MustCompile(`(?m)^(ZERO|NON_PRI_CACHE|PRI_CACHE|USER|FREE|KERN_DATA|page size:|Total pages on system:|Total size on system:)\s+(\d+)`)

func memUsageRows(t *testing.T, out string) map[string]int64 {
	t.Helper()
	rows := map[string]int64{}
	for _, m := range memUsageRow.FindAllStringSubmatch(out, -1) {
		rows[strings.TrimSuffix(m[1], ":")], _ = strconv.ParseInt(m[2], 10, 64)
	}
	if len(rows) != 9 {
		t.Fatalf("%d rows in\n%s", len(rows), out)
	}
	return rows
}

// Acceptance 1: in the quiescent guest, pagepipe's --mem-usage and
// makedumpfile's, run back to back, print makedumpfile's table (the same
// lines but for the numbers) with equal counts of what the guest does not
// change while nothing but init runs: the page size, the total (both
// leave the crashkernel reservation out), and the page cache (nothing
// reads or writes a file between them). USER, FREE, ZERO and KERN_DATA
// hold each tool's own process: its anonymous memory, and the kernel's
// for it (page tables, slab), allocated while it counts and freed after.
// They may differ by what the two processes held, at most the sum of their
// peak RSS, and as much again for the kernel's side.
func TestLiveMemUsageMatchesMakedumpfile(t *testing.T) {
	forLiveArches(t, liveMemUsageMatches)
}

func liveMemUsageMatches(t *testing.T, la liveArch, l fixture.Live) {
	pp, mdf := l.Runs["pp-mem"], l.Runs["mdf-mem"]
	if pp.RC != 0 || mdf.RC != 0 {
		t.Fatalf("pagepipe exit %d, makedumpfile exit %d\n%s\n%s", pp.RC, mdf.RC, l.Read(t, "pp-mem.log"), l.Read(t, "mdf-mem.log"))
	}
	ppOut, mdfOut := l.Read(t, "pp-mem.out"), l.Read(t, "mdf-mem.out")
	// pagepipe's table is makedumpfile's, line for line, then its own
	// dump-level table.
	// A number and the spaces padding it to its column are one N: the
	// two tables' totals may differ in digits.
	num := regexp.MustCompile(`\d+ *`)
	shape := func(s string) string { return num.ReplaceAllString(s, "N") }
	ppTable, _, _ := strings.Cut(ppOut, "\nDUMP LEVEL")
	if !strings.Contains(shape(mdfOut), strings.TrimSpace(shape(ppTable))) {
		t.Errorf("pagepipe's table is not makedumpfile's:\n%s\nmakedumpfile:\n%s", ppTable, mdfOut)
	}
	a, b := memUsageRows(t, ppOut), memUsageRows(t, mdfOut)
	// makedumpfile 1.7.2 counts the kernel image twice: kcore's text
	// PT_LOAD aliases RAM, and create_1st_bitmap_file takes every
	// PT_LOAD's pages off the holes (rounded down at its end) without
	// looking for overlaps. Its total and KERN_DATA hold the image's pages
	// once more than the machine has; pagepipe counts every page once.
	var twice int64
	if la.imageTwice {
		twice = int64(imagePages(t, l))
	}
	b["Total pages on system"] -= twice
	b["Total size on system"] -= twice * b["page size"]
	b["KERN_DATA"] -= twice
	for _, k := range []string{"page size", "Total pages on system", "Total size on system", "PRI_CACHE"} {
		if a[k] != b[k] {
			t.Errorf("%s: pagepipe %d, makedumpfile %d (less the %d image pages it counts twice)", k, a[k], b[k], twice)
		}
	}
	// NON_PRI_CACHE: the shell writes each tool's table, log and times
	// into tmpfs (page cache) as it runs it: a few pages, 64 at most.
	bounds := map[string]int64{"NON_PRI_CACHE": 64}
	for _, k := range []string{"ZERO", "USER", "FREE", "KERN_DATA"} {
		bounds[k] = 2 * (pp.RSSKB + mdf.RSSKB) / 4
	}
	for k, bound := range bounds {
		if d := a[k] - b[k]; d > bound || -d > bound {
			t.Errorf("%s: pagepipe %d, makedumpfile %d: %d apart, more than %d (twice their peak RSS, %d + %d KiB)", k, a[k], b[k], d, bound, pp.RSSKB, mdf.RSSKB)
		}
		t.Logf("%-13s pagepipe %8d  makedumpfile %8d  (%+d; bound %d)", k, a[k], b[k], a[k]-b[k], bound)
	}
	t.Logf("total pagepipe %d, makedumpfile %d less the %d image pages it counts twice", a["Total pages on system"], b["Total pages on system"], twice)
}

// imagePages is how many pages makedumpfile 1.7.2 takes from kcore's
// kernel-text PT_LOAD, [pa(_text), pa(_text) + _end - _text) rounded down
// at both ends: the guest saved kcore's headers and notes (kcore.head),
// which source.TypeKcore types as a live dump does.
func imagePages(t *testing.T, l fixture.Live) uint64 {
	t.Helper()
	// kcore's PT_LOADs lie at offsets up to 2^64 (their addresses'):
	// nothing here reads them.
	in, err := source.ParseELF(bytes.NewReader([]byte(l.Read(t, "kcore.head"))), math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	k, err := source.TypeKcore(in)
	if err != nil {
		t.Fatal(err)
	}
	return k.ImageEnd/4096 - k.ImageStart/4096
}

// kernelImage is the kernel image's pfns, from the guest's /proc/iomem
// (x86_64: Kernel code, rodata, data, bss; arm64: Kernel code, data).
func kernelImage(t *testing.T, l fixture.Live) [][2]uint64 {
	t.Helper()
	var out [][2]uint64
	for _, line := range strings.Fields(l.Read(t, "kernel-image")) {
		rng, _, _ := strings.Cut(line, ":")
		lo, hi, _ := strings.Cut(rng, "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kernel-image: bad line %q", line)
		}
		out = append(out, [2]uint64{a / 4096, b/4096 + 1})
	}
	if len(out) < 2 {
		t.Fatalf("kernel-image: %d ranges", len(out))
	}
	return out
}

// Acceptance 2 and 4: every live dump taken under load opens in crash
// (sid's 9.0.2, --no_panic: no task panicked) with the debug vmlinux, and
// sys, log (with the marker line the guest printed just before that dump),
// ps (with the marker process) and kmem -i work; each holds every page of
// the kernel image; its page index is whole (inspect counts no lost page;
// libkdumpfile and drgn read every dumped page of the first and the last,
// equal to what pagepipe reads); inspect says it is live; and verify,
// reading /proc/kcore again right after the first, counted the pages that
// changed.
func TestLiveDumpsUnderLoad(t *testing.T) {
	forLiveArches(t, liveDumpsUnderLoad)
}

func liveDumpsUnderLoad(t *testing.T, a liveArch, l fixture.Live) {
	if l.Dumps < a.dumps {
		t.Fatalf("%d live dumps, want at least %d", l.Dumps, a.dumps)
	}
	crash := fixture.Peer(t, a.crash)
	vmlinux := a.vmlinux(t)
	image := kernelImage(t, l)
	for i := 1; i <= l.Dumps; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel() // crash loads the debug vmlinux for each: ~15 s of one CPU
			name := fmt.Sprintf("live-%d", i)
			if r := l.Runs[name]; r.RC != 0 {
				t.Fatalf("%s: exit %d\n%s", name, r.RC, l.Read(t, name+".log"))
			}
			path := l.Path(name + ".dump")
			d, err := source.OpenDump(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range image {
				for pfn := r[0]; pfn < r[1]; pfn++ {
					if !d.Dumpable.Test(pfn) {
						t.Errorf("kernel image pfn %#x not in the dump", pfn)
						break
					}
				}
			}
			d.Close()
			ins, err := execOut(bin, "inspect", path)
			if err != nil {
				t.Fatalf("inspect: %v\n%s", err, ins)
			}
			if !strings.Contains(ins, "live dump       : the running kernel, read from /proc/kcore") || strings.Contains(ins, "lost") {
				t.Errorf("inspect:\n%s", ins)
			}
			// inspect finds the priority set through the dump's own
			// page tables, and the dump holds all of it. (Not where:
			// the dump's tables are the kernel's later than the walk
			// that ordered the copy, and may reach pages it did not.)
			if m := priorityLine.FindStringSubmatch(ins); m == nil || m[1] != m[2] || m[1] == "0" {
				t.Errorf("inspect: no priority set, or not all of it in the dump:\n%s", ins)
			}
			if !a.crashLastOnly || i == l.Dumps {
				out, err := judge.CrashRunBy(crash, []string{"--no_panic"}, vmlinux, path, "sys", "log", "ps", "kmem -i")
				if err != nil {
					t.Fatalf("crash: %v\n%s", err, head(out, 20))
				}
				for _, want := range []string{"RELEASE: 6.1", fmt.Sprintf("PAGEPIPE-LIVE-MARKER %d", i), "ppmarker", "TOTAL MEM"} {
					if !strings.Contains(out, want) {
						t.Errorf("crash's output lacks %q:\n%s", want, head(out, 60))
					}
				}
				if m := regexp.MustCompile(`(?m)^crash[^:]*: (cannot|read error|seek error|invalid).*`).FindString(out); m != "" {
					t.Errorf("crash: %s", m)
				}
			}
			if i == 1 || i == l.Dumps {
				want := pagesOf(t, path)
				ranges := judge.AllPFNs(t, path)
				if diff := want.Diff(judge.Libkdumpfile(t, path, ranges)); diff != "" {
					t.Errorf("libkdumpfile:\n%s", diff)
				}
				if diff := want.Diff(judge.Drgn(t, path, ranges)); diff != "" {
					t.Errorf("drgn:\n%s", diff)
				}
			}
			if i == 1 {
				v := fmt.Sprintf("verify-%d", i)
				vo := l.Read(t, v+".out")
				m := regexp.MustCompile(`verified: (\d+) pages .* read again: (\d+) changed since the dump`).FindStringSubmatch(vo)
				if l.Runs[v].RC != 0 || m == nil {
					t.Fatalf("%s: exit %d: %s%s", v, l.Runs[v].RC, vo, l.Read(t, v+".log"))
				}
				pages, _ := strconv.Atoi(m[1])
				changed, _ := strconv.Atoi(m[2])
				if changed == 0 || changed >= pages {
					t.Errorf("%s: %d of %d pages changed", v, changed, pages)
				}
				t.Logf("%s: %d of %d dumped pages changed between the dump and a second read (%.2f %%), dump took %.1f s, verify %.1f s",
					name, changed, pages, 100*float64(changed)/float64(pages), l.Runs[name].Wall, l.Runs[v].Wall)
			}
		})
	}
}

// pagesOf is every page of a dump as pagepipe reads it.
func pagesOf(t *testing.T, path string) judge.Pages {
	t.Helper()
	d, err := source.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pages := judge.Pages{}
	buf := make([]byte, d.PageSize())
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		if err := d.ReadPage(pfn, buf); err != nil {
			t.Fatalf("pfn %#x: %v", pfn, err)
		}
		pages[pfn] = judge.Hash(buf)
	}
	return pages
}

// Acceptance 3: in the guest, a live dump into tmpfs, one without root
// and one under lockdown are refused in one line, exit 1, no file; so is
// --mem-usage without root and under lockdown.
func TestLiveRefusals(t *testing.T) {
	forLiveArches(t, liveRefusals)
}

func liveRefusals(t *testing.T, _ liveArch, l fixture.Live) {
	if !strings.Contains(l.Guest["lockdown_after"], "[confidentiality]") {
		t.Fatalf("the guest did not lock down: %q", l.Guest["lockdown_after"])
	}
	for _, tc := range []struct{ name, want string }{
		{"tmpfs", "is in memory (tmpfs)"},
		{"nonroot", "needs root (CAP_SYS_RAWIO)"},
		{"nonroot-mem", "needs root (CAP_SYS_RAWIO)"},
		{"locked", "locked down (confidentiality)"},
		{"locked-mem", "locked down (confidentiality)"},
	} {
		r := l.Runs[tc.name]
		log, out := l.Read(t, tc.name+".log"), l.Read(t, tc.name+".out")
		if r.RC != 1 || strings.Count(log, "pagepipe: ") != 1 || !strings.Contains(log, tc.want) || strings.Contains(out, "FILE-EXISTS") || strings.Contains(out, "TYPE") {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit 1, one line with %q, no file", tc.name, r.RC, log, out, tc.want)
		}
	}
}
