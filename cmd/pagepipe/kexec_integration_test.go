//go:build integration

package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
)

// /proc/vmcore as kexec-tools makes it in a capture kernel ends low RAM
// mid-page (0x9fc00), and makedumpfile counts that page present or not
// depending on how it builds its bitmaps: in one cycle through a bitmap
// file (when --work-dir is given, or its buffer holds both bitmaps whole,
// which for small machines means max_mapnr ≡ 0 mod 4 and one dump file)
// or in cycles. pagepipe decides as it does: on the kexec machines, whose
// max_mapnr has each residue mod 4 and whose memory has a 6.1 kernel's
// struct pages (so that -d 31 runs the page scan), every output shape is
// byte-identical to makedumpfile 1.7.2's at -d 0, 1 and 31, by default,
// with --work-dir and with a --cyclic-buffer (cycles of 8192 pfns: two
// cycles for max_mapnr > 0x2000); the reports' counts are the same but for
// the differences reportDifferences names.
func TestKexecLayoutsMatchMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	for r := range uint64(4) {
		s := synth.KexecMachine(r)
		if got := s.MaxMapnr() % 4; got != r {
			t.Fatalf("kexec machine %d: max_mapnr %#x ≡ %d mod 4", r, s.MaxMapnr(), got)
		}
		vmcore := writeShape(t, dir, fmt.Sprintf("kexec-%d", r), s)
		t.Run(fmt.Sprintf("r%d", r), func(t *testing.T) {
			t.Parallel()
			kexecCases(t, func(t *testing.T, mode kexecMode, out kexecOutput, level string) {
				args := append(append(append([]string{}, mode.args...), out.args...), "-d", level, vmcore)
				a, b := sameAsMakedumpfile(t, "makedumpfile", nil, args, out.files)
				if out.name != "split" {
					sameReport(t, a, b, reportDifferences(out.name, kexecInCycles(r, mode)))
				}
			}, work, "0", "1", "31")
		})
	}
}

// kexecCases runs f as a subtest for every bitmap mode, output shape and
// dump level.
func kexecCases(t *testing.T, f func(*testing.T, kexecMode, kexecOutput, string), workDir string, levels ...string) {
	for _, mode := range kexecModes(workDir) {
		for _, out := range kexecOutputs {
			for _, level := range levels {
				t.Run(fmt.Sprintf("%s/%s/d%s", mode.name, out.name, level), func(t *testing.T) { f(t, mode, out, level) })
			}
		}
	}
}

// With --partial-pages 1.7.6 pagepipe takes the pages a PT_LOAD holds in
// part as makedumpfile 1.7.6 and later do: on the same kexec machines and
// in the same cases (but -d 0, whose partial page is -d 1's, to keep the
// test short), every output is byte-identical to sid's 1.7.8 — which
// dumps the partial page at 0x9fc00 when it builds its bitmaps in one
// cycle, as 1.7.2 does not (the assertion at the end shows the two
// releases' dumps differ there, so the rule is exercised).
func TestKexecLayoutsMatchMakedumpfile178(t *testing.T) {
	mdf := fixture.Peer(t, "makedumpfile-sid")
	dir := t.TempDir()
	work := t.TempDir()
	for r := range uint64(4) {
		vmcore := writeShape(t, dir, fmt.Sprintf("kexec-%d", r), synth.KexecMachine(r))
		t.Run(fmt.Sprintf("r%d", r), func(t *testing.T) {
			t.Parallel()
			kexecCases(t, func(t *testing.T, mode kexecMode, out kexecOutput, level string) {
				args := append(append(append([]string{}, mode.args...), out.args...), "-d", level, vmcore)
				a, b := sameAsMakedumpfile(t, mdf, []string{"--partial-pages", "1.7.6"}, args, out.files)
				if out.name != "split" {
					sameReport(t, a, b, reportDifferences(out.name, kexecInCycles(r, mode)))
				}
			}, work, "1", "31")
		})
	}
	t.Run("releases differ", func(t *testing.T) {
		vmcore := filepath.Join(dir, "kexec-0") // max_mapnr ≡ 0 mod 4: one cycle
		tmp := t.TempDir()
		old, cur := filepath.Join(tmp, "1.7.2"), filepath.Join(tmp, "1.7.8")
		judge.Makedumpfile(t, "-d", "1", vmcore, old)
		judge.MakedumpfileBy(t, mdf, "-d", "1", vmcore, cur)
		if bytes.Equal(readFile(t, old), readFile(t, cur)) {
			t.Fatal("makedumpfile 1.7.2 and 1.7.8 wrote the same dump: the partial page is not exercised")
		}
	})
}

// A PT_LOAD that ends mid-page inside another one that holds the page
// whole (a kernel-text segment ending mid-page, say): makedumpfile 1.7.2
// leaves the page out of the dump anyway (exclude_nodata_pages clears it
// after all PT_LOADs are set), 1.7.6 and later keep it. pagepipe follows
// each with its --partial-pages, in one cycle and in cycles, kdump and ELF.
func TestPartialAliasMatchesMakedumpfile(t *testing.T) {
	const mib = 1 << 20
	ram := func(paddr, n uint64) synth.Segment {
		return synth.Segment{Paddr: paddr, FileSize: n, MemSize: n, Vaddr: 0xffff888000000000 + paddr}
	}
	text := synth.Segment{Paddr: 2 * mib, FileSize: 0x2800, MemSize: 0x2800, Vaddr: 0xffffffff81000000}
	s := synth.Spec{Segments: []synth.Segment{text, ram(0x1000, 0x9e000), ram(mib, 3*mib)}, CPUs: 1, Seed: 17,
		Mix: synth.Mix{Text: 0.5, Random: 0.5}}
	vmcore := writeShape(t, t.TempDir(), "alias-partial", s)
	releases := []struct {
		name, mdf string
		own       []string
	}{
		{"1.7.2", "makedumpfile", nil},
		{"1.7.8", fixture.Peer(t, "makedumpfile-sid"), []string{"--partial-pages", "1.7.6"}},
	}
	for _, rel := range releases {
		for _, mode := range kexecModes(t.TempDir()) {
			for _, out := range kexecOutputs[:2] {
				for _, level := range []string{"0", "1"} {
					t.Run(fmt.Sprintf("%s/%s/%s/d%s", rel.name, mode.name, out.name, level), func(t *testing.T) {
						args := append(append(append([]string{}, mode.args...), out.args...), "-d", level, vmcore)
						sameAsMakedumpfile(t, rel.mdf, rel.own, args, out.files)
					})
				}
			}
		}
	}
}

type kexecMode struct {
	name string
	args []string
}

// kexecModes are makedumpfile's ways of building the bitmaps: as it
// chooses (one cycle for max_mapnr ≡ 0 mod 4 and one file, else cycles),
// through a bitmap file in workDir, and in cycles of a 1 KiB buffer.
func kexecModes(workDir string) []kexecMode {
	return []kexecMode{
		{"default", nil},
		{"work-dir", []string{"--work-dir", workDir}},
		{"cyclic-buffer", []string{"--cyclic-buffer", "1"}},
	}
}

// kexecInCycles says whether makedumpfile builds a kdump or ELF dump's
// bitmaps of kexec machine r in cycles in mode (on a machine with a few
// MiB free).
func kexecInCycles(r uint64, mode kexecMode) bool {
	return mode.name == "cyclic-buffer" || mode.name == "default" && r != 0
}

type kexecOutput struct {
	name  string
	args  []string
	files int
}

var kexecOutputs = []kexecOutput{
	{"kdump", nil, 1},
	{"elf", []string{"-E"}, 1},
	// 1 MiB splitblocks, so that both files get pages (makedumpfile
	// leaves an empty part's file shorter than its own bitmaps at -d 0:
	// no reader opens it).
	{"split", []string{"--split", "--splitblock-size", "1024"}, 2},
}

// sameAsMakedumpfile runs pagepipe (with its own options first) and the
// makedumpfile at mdf with args (the vmcore last) and files output files
// each, and fails unless every file is byte-identical. It returns both
// reports (--message-level 16).
func sameAsMakedumpfile(t *testing.T, mdf string, own, args []string, files int) (ours, theirs map[string]string) {
	t.Helper()
	tmp := t.TempDir()
	var a, b []string
	for i := range files {
		a = append(a, filepath.Join(tmp, fmt.Sprintf("pp%d", i)))
		b = append(b, filepath.Join(tmp, fmt.Sprintf("mdf%d", i)))
	}
	args = append([]string{"--message-level", "16"}, args...)
	out := mustPagepipe(t, append(append(append([]string{}, own...), args...), a...)...)
	theirOut := judge.MakedumpfileBy(t, mdf, append(args, b...)...)
	for i := range a {
		if x, y := readFile(t, a[i]), readFile(t, b[i]); !bytes.Equal(x, y) {
			t.Fatalf("file %d differs from %s's: %s", i, mdf, judge.FirstDiff(x, y))
		}
	}
	return reportCounts(out), reportCounts(theirOut)
}

var reportCount = regexp.MustCompile(`^\s*([A-Z][A-Za-z -]*[a-z]|in ELF format)\s*: (0x[0-9a-f]+|\d+)$`)

// reportCounts reads the counts of a report ("in ELF format" lines are
// named after the line before them).
func reportCounts(out string) map[string]string {
	m := map[string]string{}
	prev := ""
	for _, line := range strings.Split(out, "\n") {
		f := reportCount.FindStringSubmatch(line)
		if f == nil {
			continue
		}
		k := f[1]
		if k == "in ELF format" {
			k = prev + " in ELF format"
		}
		m[k], prev = f[2], k
	}
	return m
}

// reportDifferences are the report's counts where makedumpfile's differ
// from pagepipe's on purpose, for a kdump or ELF dump built in one cycle
// or in cycles (a split dump's report is makedumpfile's parent's, which
// counts neither the zero pages nor the bytes its children write):
//
//   - always "Original pages", "Remaining pages" and "Memory Hole":
//     makedumpfile counts the kernel-text PT_LOAD's pages twice, as they
//     alias RAM (e2e/real_test.go); pagepipe's counts add up;
//   - in cycles, "Write bytes" of kdump and split dumps: makedumpfile
//     writes each cycle's bitmap bytes only, up to the byte of the last
//     pfn, and leaves the rest of the bitmap blocks a hole; pagepipe
//     writes (and counts) the blocks whole. The files are the same;
//   - in cycles, an ELF dump's counts per class: makedumpfile scans each
//     PT_LOAD's cycles afresh, and so counts what it excludes of the
//     kernel-text alias twice (pages filled with zero, cache, user, free);
//     the pages it writes and leaves out, "in ELF format", are the same.
func reportDifferences(shape string, cycles bool) []string {
	d := []string{"Original pages", "Remaining pages", "Memory Hole"}
	switch {
	case cycles && shape == "elf":
		d = append(d, "Excluded pages", "Pages filled with zero", "Non-private cache pages", "Private cache pages",
			"User process data pages", "Free pages", "Hwpoison pages", "Offline pages")
	case cycles:
		d = append(d, "Write bytes")
	}
	return d
}

// sameReport fails unless the two reports have the same counts, but for
// the named ones.
func sameReport(t *testing.T, ours, theirs map[string]string, differ []string) {
	t.Helper()
	if len(theirs) < 12 {
		t.Fatalf("makedumpfile printed no report: %v", theirs)
	}
	for k, v := range theirs {
		if !slices.Contains(differ, k) && ours[k] != v {
			t.Errorf("%s: pagepipe %s, makedumpfile %s", k, ours[k], v)
		}
	}
}
