package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"testing"

	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/source"
)

// vmemmapMachine is a machine of mib MiB, 96 % free. From 3 GiB it has
// RAM to 2 GiB and from 4 GiB, so that its vmemmap has a hole (the PCI
// hole's sections) and two physically separate groups, and a 1 GiB
// hugetlb page, whose struct pages -e frees at -d 31 with the free
// pages'. The 3 GiB one is a sparse file of about 120 MiB of data.
func vmemmapMachine(mib int) synth.Spec {
	gig := 0
	if mib >= 3<<10 {
		gig = 1
	}
	return synth.NewKernelMachine(synth.KernelSpec{Profile: "6.1", KASLR: true, Gigantic: gig, Used: 0.04, FreeDirty: -1}, mib)
}

var excludedLine = regexp.MustCompile(`\nExcluded (\d+) unused vmemmap pages\n`)

// -e on a generated machine with much free memory (with --work-dir, which
// makedumpfile requires with -e) leaves out vmemmap pages, kdump and ELF,
// and says how many; in the kdump file DUMP_DH_EXCLUDED_VMEMMAP is set and
// every page -e leaves out is a page of struct pages, each describing a
// present page that the dump without -e leaves out. Refiltering a dump
// with -e leaves out the same pages as -e on the vmcore. (That these are
// the pages makedumpfile 1.7.2's -e leaves out, byte for byte:
// TestExcludeVmemmapMatchesMakedumpfile.)
func TestExcludeVmemmap(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", vmemmapMachine(3<<10))
	small := writeShape(t, dir, "vmcore-1g", vmemmapMachine(1<<10))
	plain := filepath.Join(dir, "plain")
	mustPagepipe(t, "-d", "31", vmcore, plain)
	without := openDump(t, plain)
	for _, c := range vmemmapCases(vmcore, small) {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			ours := filepath.Join(tmp, "pp")
			args := append([]string{"-e", "--work-dir", work}, c.args...)
			_, _, stderr := pagepipeOK(t, append(args, c.vmcore, ours)...)
			if got := excludedLine.FindStringSubmatch(stderr); got == nil || got[1] == "0" {
				t.Errorf("message %q", got)
			}
			if c.name == "elf" {
				return
			}
			d := openDump(t, ours)
			if d.Header.Status&kdumpfmt.StatusExcludedVmemmap == 0 {
				t.Errorf("status %#x", d.Header.Status)
			}
			checkFreedVmemmap(t, vmcore, without, d)
			// Refiltering a -d 1 dump with -e leaves out the same
			// pages (where makedumpfile's -e goes wrong).
			base, refiltered := filepath.Join(tmp, "d1"), filepath.Join(tmp, "refiltered")
			pagepipeOK(t, "-d", "1", c.vmcore, base)
			pagepipeOK(t, append(args, base, refiltered)...)
			if r := openDump(t, refiltered); !r.Dumpable.Equal(d.Dumpable) || r.Header.Status&kdumpfmt.StatusExcludedVmemmap == 0 {
				t.Errorf("refiltered with -e: other pages dumped, or status %#x", r.Header.Status)
			}
		})
	}
}

type vmemmapCase struct {
	name, vmcore string
	args         []string
}

// vmemmapCases are -e's outputs: a kdump file of the 3 GiB machine and
// (makedumpfile's -E reads every page twice) an ELF one of the 1 GiB one.
func vmemmapCases(vmcore, small string) []vmemmapCase {
	return []vmemmapCase{
		{"kdump", vmcore, []string{"-d", "31"}},
		{"elf", small, []string{"-E", "-d", "31"}},
	}
}

// checkFreedVmemmap checks each pfn that the -e dump leaves out and the
// dump without -e keeps: it must back the vmemmap (found by translating
// every 2 MiB of it) and describe only present pfns left out without -e.
func checkFreedVmemmap(t *testing.T, vmcore string, without, with *source.Dump) {
	t.Helper()
	v, err := source.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	vi, err := kernel.ParseVMCOREINFO(v.Vmcoreinfo())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kernel.NewTranslator(v, vi)
	if err != nil {
		t.Fatal(err)
	}
	mm, err := kernel.FindMemMap(vi, tr, v.MaxMapnr)
	if err != nil {
		t.Fatal(err)
	}
	base := mm.Sections[0].MemMap
	// described[pfn of a page of struct pages] = first pfn it describes.
	described := map[uint64]uint64{}
	for pfn := uint64(0); pfn < without.MaxMapnr; pfn += 2 << 20 / mm.PageSize {
		m, err := tr.Lookup(base + pfn*mm.PageSize)
		if err != nil {
			continue
		}
		for i := range uint64(512) {
			described[m.Paddr/4096+i] = pfn + i*4096/mm.PageSize
		}
	}
	freed := 0
	for pfn := range without.Dumpable.Ones() {
		if with.Dumpable.Test(pfn) {
			continue
		}
		freed++
		first, ok := described[pfn]
		if !ok {
			t.Fatalf("pfn %#x left out by -e holds no struct pages", pfn)
		}
		for p := first; p < first+4096/mm.PageSize; p++ {
			if !without.Present.Test(p) || without.Dumpable.Test(p) {
				t.Fatalf("pfn %#x left out by -e holds the struct page of pfn %#x, present %v, dumped %v", pfn, p, without.Present.Test(p), without.Dumpable.Test(p))
			}
		}
	}
	if n := without.Dumpable.Count(0, without.MaxMapnr) - with.Dumpable.Count(0, with.MaxMapnr); freed == 0 || uint64(freed) != n {
		t.Fatalf("-e left out %d pages the dump without it keeps, and %d pages in all", freed, n)
	}
}

// pagepipeOK is mustPagepipe that also returns stderr.
func pagepipeOK(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	rc, stdout, stderr := pagepipe(t, args...)
	if rc != 0 {
		t.Fatalf("pagepipe %v: exit %d\n%s%s", args, rc, stdout, stderr)
	}
	return rc, stdout, stderr
}

func openDump(t *testing.T, path string) *source.Dump {
	t.Helper()
	d, err := source.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Where the vmemmap cannot be found (here a vmcore without VMCOREINFO, so
// without page tables or mem_map), -e says so with makedumpfile's line on
// stderr and the dump is the one without -e, header status included, as
// makedumpfile dumps then.
func TestExcludeVmemmapFallsBack(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.Default(64))
	with, without := filepath.Join(dir, "e"), filepath.Join(dir, "plain")
	_, _, stderr := pagepipeOK(t, "-e", "--work-dir", dir, "-d", "1", vmcore, with)
	pagepipeOK(t, "--work-dir", dir, "-d", "1", vmcore, without)
	if !regexp.MustCompile(`(?m)^find_vmemmap: .+\ncreate_dumpfile: Can't find vmemmap pages$`).MatchString(stderr) {
		t.Errorf("stderr lacks the two error lines:\n%s", stderr)
	}
	if excludedLine.MatchString(stderr) {
		t.Errorf("says it excluded vmemmap pages:\n%s", stderr)
	}
	if !bytes.Equal(readFile(t, with), readFile(t, without)) {
		t.Errorf("the dump differs from the one without -e")
	}
}
