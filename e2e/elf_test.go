//go:build integration

package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
	"pagepipe/source"
)

// elfLoads returns the PT_LOAD program headers of an ELF dump, in order.
func elfLoads(t *testing.T, path string) []elf.ProgHeader {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []elf.ProgHeader
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			out = append(out, p.ProgHeader)
		}
	}
	return out
}

// sameELFLoads fails the test unless the two ELF dumps have the same
// PT_LOADs (addresses, sizes, offsets, flags) holding the same bytes.
func sameELFLoads(t *testing.T, ours, theirs string) {
	t.Helper()
	a, b := elfLoads(t, ours), elfLoads(t, theirs)
	if len(a) != len(b) {
		t.Fatalf("%d PT_LOADs, makedumpfile %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("PT_LOAD %d: %+v, makedumpfile %+v", i, a[i], b[i])
		}
	}
	fa, err := elf.Open(ours)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := elf.Open(theirs)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	i := -1
	for k, p := range fa.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		i++
		if off := diffAt(p.Open(), fb.Progs[k].Open()); off >= 0 {
			t.Fatalf("PT_LOAD %d (paddr %#x): data differs from byte %d", i, p.Paddr, off)
		}
	}
}

var elfReportLine = regexp.MustCompile(`(?m)^\s*(Excluded pages|Remaining pages)\s*: \S+\n\s*in ELF format : (\S+)`)

// elfCounts returns the two "in ELF format" counts of a report.
func elfCounts(t *testing.T, msgs string) [][]string {
	t.Helper()
	m := elfReportLine.FindAllStringSubmatch(msgs, -1)
	if len(m) != 2 {
		t.Fatalf("no ELF report in:\n%s", msgs)
	}
	return m
}

// Acceptance: an ELF dump of the real kernel, made with two threads, is
// byte-identical to makedumpfile 1.7.2's (which runs one): the same
// PT_LOADs holding the same pages, the kernel-text PT_LOAD that aliases
// RAM written twice as makedumpfile does, and the same report counts. The
// flattened stream is record for record makedumpfile's.
func TestRealELFSameAsMakedumpfile(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	for _, level := range []string{"31", "1"} {
		t.Run("d"+level, func(t *testing.T) {
			ours := dump(t, "pagepipe", vmcore, "-E", "-d", level, "--num-threads", "2")
			theirs := dump(t, "makedumpfile", vmcore, "-E", "-d", level)
			sameELFLoads(t, ours, theirs)
			equalFiles(t, ours, theirs)

			a := report("pagepipe", vmcore, "-E", "-d", level, "--num-threads", "2")
			b := report("makedumpfile", vmcore, "-E", "-d", level)
			ca, cb := counts(t, a), counts(t, b)
			for _, k := range []string{"Pages filled with zero", "Excluded pages", "Write bytes"} {
				if ca[k] != cb[k] {
					t.Errorf("%s: pagepipe %s, makedumpfile %s", k, ca[k], cb[k])
				}
			}
			// "Excluded pages in ELF format" is the same; the pages written
			// are makedumpfile's "Remaining pages in ELF format" plus the
			// pages of PT_LOADs beyond mem_map, which makedumpfile leaves
			// out of its "Original pages".
			if ea, eb := elfCounts(t, a), elfCounts(t, b); ea[0][2] != eb[0][2] {
				t.Errorf("excluded in ELF format: pagepipe %s, makedumpfile %s", ea[0][2], eb[0][2])
			}
		})
	}
	// In cycles makedumpfile's walk keeps all of the BIOS ROM past
	// mem_map, where in one cycle it takes stale bits (dump/compat.go).
	t.Run("cyclic-buffer", func(t *testing.T) {
		ours := dump(t, "pagepipe", vmcore, "-E", "-d", "31", "--cyclic-buffer", "1024")
		theirs := dump(t, "makedumpfile", vmcore, "-E", "-d", "31", "--cyclic-buffer", "1024")
		sameELFLoads(t, ours, theirs)
		equalFiles(t, ours, theirs)
	})
	t.Run("flattened", func(t *testing.T) {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "pp.flat"), filepath.Join(dir, "mdf.flat")
		pipe(t, bin+" -F -E -d 31 --num-threads 2 "+vmcore+" > "+a)
		pipe(t, "makedumpfile -F -E -d 31 "+vmcore+" > "+b)
		equalFiles(t, a, b)
		c := filepath.Join(dir, "rearranged")
		pipe(t, "makedumpfile -R "+c+" < "+a)
		equalFiles(t, c, dump(t, "makedumpfile", vmcore, "-E", "-d", "31"))
	})
}

// crash and drgn open pagepipe's ELF dump: crash sees what it sees in
// makedumpfile's, and drgn reads every page of every PT_LOAD equal to the
// vmcore (zeros where a PT_LOAD has p_memsz only).
func TestRealELFReaders(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	ours := dump(t, "pagepipe", vmcore, "-E", "-d", "31", "--num-threads", "2")
	theirs := dump(t, "makedumpfile", vmcore, "-E", "-d", "31")

	vmlinux := fixture.DebugVmlinux(t)
	a := judge.Crash(t, vmlinux, ours, "sys", "log")
	b := judge.Crash(t, vmlinux, theirs, "sys", "log")
	if a != b {
		t.Fatalf("crash output differs:\n--- pagepipe\n%s\n--- makedumpfile\n%s", head(a, 40), head(b, 40))
	}
	for _, want := range []string{"RELEASE: 6.", "CPUS: 2", "Linux version"} {
		if !bytes.Contains([]byte(a), []byte(want)) {
			t.Errorf("crash output lacks %q:\n%s", want, head(a, 20))
		}
	}

	allowed, ranges := elfExpected(t, vmcore, ours)
	n := badELFReads(t, "drgn", allowed, judge.Drgn(t, ours, ranges), func(uint64) bool { return true }, 5)
	if n > 0 {
		t.Fatalf("drgn: %d pages wrong", n)
	}
}

// elfExpected returns, for every pfn a PT_LOAD of the ELF dump covers, the
// hashes a reader may find there: the vmcore's page where a PT_LOAD has it
// in the file, zeros where one has it in p_memsz only (a pfn two PT_LOADs
// map can be either). It also returns the pfn ranges of the PT_LOADs.
func elfExpected(t *testing.T, vmcore, dump string) (map[uint64]map[string]bool, []judge.Range) {
	t.Helper()
	v, err := source.Open(vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r := v.NewReader(source.DefaultMapSize, true)
	defer r.Close()
	zero := judge.Hash(make([]byte, synth.PageSize))
	allowed := map[uint64]map[string]bool{}
	var ranges []judge.Range
	const ps = synth.PageSize
	for _, p := range elfLoads(t, dump) {
		lo, file, hi := p.Paddr/ps, (p.Paddr+p.Filesz)/ps, (p.Paddr+p.Memsz+ps-1)/ps
		ranges = append(ranges, judge.Range{Lo: lo, Hi: hi})
		for pfn := lo; pfn < hi; pfn++ {
			h := zero
			if pfn < file {
				page, err := r.Page(pfn)
				if err != nil {
					t.Fatal(err)
				}
				h = judge.Hash(page)
			}
			if allowed[pfn] == nil {
				allowed[pfn] = map[string]bool{}
			}
			allowed[pfn][h] = true
		}
	}
	return allowed, ranges
}

// badELFReads fails the test on each pfn the reader name got wrong in got
// (reporting the first most of them): read with contents that allowed
// (elfExpected's) does not list for it, read where no PT_LOAD holds it, or
// not read where mustRead says it must be. It returns how many there are.
func badELFReads(t *testing.T, name string, allowed map[uint64]map[string]bool, got judge.Pages, mustRead func(pfn uint64) bool, most int) int {
	t.Helper()
	n := 0
	for pfn, ok := range allowed {
		if h, found := got[pfn]; (!found && mustRead(pfn)) || (found && !ok[h]) {
			if n++; n <= most {
				t.Errorf("%s: pfn %#x: read %v (found %v)", name, pfn, h, found)
			}
		}
	}
	for pfn := range got {
		if allowed[pfn] == nil {
			if n++; n <= most {
				t.Errorf("%s: pfn %#x read, but no PT_LOAD holds it", name, pfn)
			}
		}
	}
	return n
}

// ELF dumps of generated vmcores of every shape makedumpfile reads, with
// zero runs of every length, are byte-identical to makedumpfile's at -d 0
// and -d 1: partial first and last pages, memsz tails, holes, the
// kernel-text alias, extended numbering.
func TestELFShapesSameAsMakedumpfile(t *testing.T) {
	dir := t.TempDir()
	for _, name := range synth.ShapeNames() {
		s := synth.Shapes()[name]
		if s.Layout == synth.QEMU {
			continue // makedumpfile cannot read it
		}
		s.VMCOREINFO = "" // makedumpfile would look for kernel symbols
		// Mostly zero pages, in runs of 1..16: zero runs shorter and longer
		// than 256 pages.
		s.Mix = synth.Mix{Zero: 0.97, Text: 0.01, Repetitive: 0.01, Random: 0.01}
		vmcore := filepath.Join(dir, name)
		if err := synth.WriteFile(vmcore, s); err != nil {
			t.Fatal(err)
		}
		for _, level := range []string{"0", "1"} {
			t.Run(name+"/d"+level, func(t *testing.T) {
				ours, theirs := vmcore+".pp"+level, vmcore+".mdf"+level
				if out, err := execOut(bin, "-E", "-d", level, vmcore, ours); err != nil {
					t.Fatalf("pagepipe: %v\n%s", err, out)
				}
				judge.Makedumpfile(t, "-E", "-d", level, vmcore, theirs)
				a, b := readFile(t, ours), readFile(t, theirs)
				if s.PNXnum && len(a) == len(b) && len(a) > 64 {
					// makedumpfile copies the input's e_shoff and e_shnum
					// (section 0 of extended numbering) although its dump has
					// no section header; pagepipe clears them.
					copy(a[40:48], b[40:48])
					copy(a[60:64], b[60:64])
				}
				if !bytes.Equal(a, b) {
					t.Fatalf("dumps differ: %s", judge.FirstDiff(a, b))
				}
			})
		}
	}
}

// elfDataEnd returns where, in the ELF dump path, the data of the pages
// below pfn ends (the PT_LOADs are written in order).
func elfDataEnd(t *testing.T, path string, pfn uint64) int64 {
	t.Helper()
	var end uint64
	for _, p := range elfLoads(t, path) {
		if p.Filesz > 0 && p.Paddr < pfn*synth.PageSize {
			end = max(end, p.Off+min(p.Filesz, pfn*synth.PageSize-p.Paddr))
		}
	}
	return int64(end)
}

// checkELFIncomplete asserts what an ELF dump cut short must be: exit 1
// with makedumpfile's message, e_flags with DUMP_ELF_INCOMPLETE (as
// makedumpfile marks it), program headers that describe only what is in
// the file (each PT_LOAD one of the complete dump's, or a prefix of one
// cut at a page with p_memsz = p_filesz), fewer bytes than the complete
// dump, and drgn and libkdumpfile reading every page a PT_LOAD holds in
// the file equal to the vmcore (p_memsz beyond p_filesz: zeros or
// missing) and no other.
func checkELFIncomplete(t *testing.T, vmcore, dump, full string, err error, out []byte) {
	t.Helper()
	exitedIncomplete(t, err, out)
	f, err := elf.Open(dump)
	if err != nil {
		t.Fatalf("%s is not a valid ELF file: %v", dump, err)
	}
	f.Close()
	var ehdr [64]byte
	if r, err := os.Open(dump); err != nil {
		t.Fatal(err)
	} else if _, err := r.ReadAt(ehdr[:], 0); err != nil {
		t.Fatal(err)
	} else {
		r.Close()
	}
	if flags := binary.LittleEndian.Uint32(ehdr[48:]); flags&0x1 == 0 {
		t.Errorf("e_flags %#x lacks DUMP_ELF_INCOMPLETE (0x1)", binary.LittleEndian.Uint32(ehdr[48:]))
	}
	st, err := os.Stat(dump)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ off, paddr uint64 }
	want := map[key]elf.ProgHeader{}
	var wantBytes uint64
	for _, p := range elfLoads(t, full) {
		want[key{p.Off, p.Paddr}] = p
		wantBytes += p.Filesz
	}
	var gotBytes uint64
	inFile := map[uint64]bool{} // pfns a PT_LOAD holds in the file
	for _, p := range elfLoads(t, dump) {
		for pfn := p.Paddr / synth.PageSize; pfn < (p.Paddr+p.Filesz)/synth.PageSize; pfn++ {
			inFile[pfn] = true
		}
		w, ok := want[key{p.Off, p.Paddr}]
		switch {
		case p.Off+p.Filesz > uint64(st.Size()):
			t.Errorf("PT_LOAD at %#x: data [%#x, +%#x) past the end of the %d-byte file", p.Paddr, p.Off, p.Filesz, st.Size())
		case !ok || p.Off != w.Off || p.Vaddr != w.Vaddr:
			t.Errorf("PT_LOAD at %#x (offset %#x) is none of the complete dump's", p.Paddr, p.Off)
		case p != w && (p.Filesz >= w.Filesz || p.Memsz != p.Filesz || p.Filesz%synth.PageSize != 0):
			t.Errorf("PT_LOAD at %#x: filesz %#x memsz %#x, not a whole-page prefix of filesz %#x memsz %#x", p.Paddr, p.Filesz, p.Memsz, w.Filesz, w.Memsz)
		}
		gotBytes += p.Filesz
	}
	if gotBytes == 0 || gotBytes >= wantBytes {
		t.Fatalf("%d of %d bytes of page data described: not cut short", gotBytes, wantBytes)
	}
	allowed, ranges := elfExpected(t, vmcore, dump)
	for _, r := range []struct {
		name string
		got  judge.Pages
	}{{"drgn", judge.Drgn(t, dump, ranges)}, {"libkdumpfile", judge.Libkdumpfile(t, dump, ranges)}} {
		// drgn reads p_memsz beyond p_filesz as zeros, libkdumpfile as
		// missing: either will do there.
		badELFReads(t, r.name, allowed, r.got, func(pfn uint64) bool { return inFile[pfn] }, 3)
	}
}

// An ELF dump (-E) cut short by -L, a full disk or SIGTERM stays a valid
// ELF file describing what it holds, marked as makedumpfile marks one.
// crash opens none of them, nor makedumpfile's: an ELF dump has no way to
// say "missing" but to leave a page out of every PT_LOAD, and crash's
// x86_64 start-up reads the page-table page at the top of RAM (see
// incomplete_test.go) with FAULT_ON_ERROR ("read error: physical address:
// 3ffd1000  type: \"pud page\""); --zero_excluded only zero-fills p_memsz
// beyond p_filesz. The test holds crash to the same words on pagepipe's
// dump as on makedumpfile's with the same -L (which, its lost PT_LOADs
// still pointing past the end of the file, adds a warning about them).
func TestRealELFIncompleteDumps(t *testing.T) {
	t.Parallel()
	fx := nokaslrVmcore(t)
	vmlinux := fixture.DebugVmlinux(t)
	full := dump(t, "pagepipe", fx.Vmcore, "-E", "-d", "31")
	st, err := os.Stat(full)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("L", func(t *testing.T) {
		// Past the per-cpu areas, before the end.
		keep := perCPUEnd(t, fx, vmlinux)
		end := elfDataEnd(t, full, keep)
		if end+maxWrite >= st.Size() {
			t.Fatalf("the per-cpu areas' data ends %d bytes before the end of the %d-byte dump: no room to cut", st.Size()-end, st.Size())
		}
		limit := strconv.FormatInt(end+maxWrite, 10)
		dir := t.TempDir()
		out, theirs := filepath.Join(dir, "limited"), filepath.Join(dir, "makedumpfile")
		b, err := exec.Command(bin, "-E", "-d", "31", "-L", limit, fx.Vmcore, out).CombinedOutput()
		checkELFIncomplete(t, fx.Vmcore, out, full, err, b)
		if got := elfDataEnd(t, out, keep); got != end {
			t.Fatalf("-L %s: the pages below the end of the per-cpu areas (pfn %#x) end at byte %d, in the complete dump at %d", limit, keep, got, end)
		}
		if mb, err := exec.Command("makedumpfile", "-E", "-d", "31", "-L", limit, fx.Vmcore, theirs).CombinedOutput(); err == nil {
			t.Fatalf("makedumpfile -E -L %s succeeded\n%s", limit, mb)
		}
		a, c, errA, errC := crashPair(nil, vmlinux, out, theirs, "sys")
		ptload := regexp.MustCompile(`(?m)^\s+(PT_LOAD p_offset|p_filesz|bytes required|dumpfile size):.*\n`)
		c = ptload.ReplaceAllString(c, "")
		if (errA == nil) != (errC == nil) || strings.TrimSpace(a) != strings.TrimSpace(c) {
			t.Errorf("crash differs (%v, %v):\npagepipe:\n%s\nmakedumpfile:\n%s", errA, errC, head(a, 20), head(c, 20))
		}
	})
	t.Run("diskfull", func(t *testing.T) {
		out := filepath.Join(smallTmpfs(t, st.Size()/2/4096*4096), "dump")
		b, err := exec.Command(bin, "-E", "-d", "31", fx.Vmcore, out).CombinedOutput()
		if !strings.Contains(string(b), "no space left on device") {
			t.Errorf("no ENOSPC message in:\n%s", b)
		}
		checkELFIncomplete(t, fx.Vmcore, out, full, err, b)
	})
	t.Run("sigterm", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "dump")
		// The copy takes milliseconds: signalAt runs it in slices.
		b, err := signalled(t, out, st.Size()*40/100, 0, "--num-threads", "1", "-E", "-d", "31", fx.Vmcore, out)
		checkELFIncomplete(t, fx.Vmcore, out, full, err, b)
	})
}
