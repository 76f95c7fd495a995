//go:build integration

package e2e

import (
	"debug/elf"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/source"
)

// The live tests run pagepipe on a running Debian 12 kernel's own
// /proc/kcore (fixtures/make-live.sh: one QEMU guest, cached): --mem-usage
// beside makedumpfile 1.7.2's while the guest is quiescent, ten live
// -l -d 31 dumps while it runs a workload, and the refusals.

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
	l := fixture.LiveRun(t, bin)
	pp, mdf := l.Runs["pp-mem"], l.Runs["mdf-mem"]
	if pp.RC != 0 || mdf.RC != 0 {
		t.Fatalf("pagepipe exit %d, makedumpfile exit %d\n%s\n%s", pp.RC, mdf.RC, l.Read(t, "pp-mem.log"), l.Read(t, "mdf-mem.log"))
	}
	ppOut, mdfOut := l.Read(t, "pp-mem.out"), l.Read(t, "mdf-mem.out")
	// pagepipe's table is makedumpfile's, line for line, then its own
	// dump-level table.
	num := regexp.MustCompile(`\d+`)
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
	twice := int64(imagePages(t, l))
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
// kernel-text PT_LOAD [pa(_text), pa(_text) + _end - _text): the guest's
// /proc/iomem gives where the image starts ("Kernel code"), the debug
// vmlinux its length (_end - _text, the same under KASLR).
func imagePages(t *testing.T, l fixture.Live) uint64 {
	t.Helper()
	f, err := elf.Open(fixture.DebugVmlinux(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var text, end uint64
	for _, s := range syms {
		switch s.Name {
		case "_text":
			text = s.Value
		case "_end":
			end = s.Value
		}
	}
	if text == 0 || end <= text {
		t.Fatalf("vmlinux: _text %#x, _end %#x", text, end)
	}
	start := kernelImage(t, l)[0][0] * 4096
	return (start+end-text)/4096 - start/4096
}

// kernelImage is the kernel image's pfns, from the guest's /proc/iomem
// (Kernel code, rodata, data, bss).
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
	if len(out) < 3 {
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
	l := fixture.LiveRun(t, bin)
	if l.Dumps < 10 {
		t.Fatalf("%d live dumps, want at least 10", l.Dumps)
	}
	crash := fixture.Peer(t, "crash-sid")
	vmlinux := fixture.DebugVmlinux(t)
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
	l := fixture.LiveRun(t, bin)
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
