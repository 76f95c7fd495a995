//go:build integration

package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
	"pagepipe/kdumpfmt"
	"pagepipe/priority"
	"pagepipe/source"
)

// The incomplete-dump tests run on the nokaslr fixture: the kernel image
// sits at 16 MiB physical, so every cut keeps it. (With KASLR the default
// fixture's kernel landed near the top of RAM, and any cut lost it.)
func nokaslrVmcore(t *testing.T) fixture.Paths {
	return fixture.Real(t, fixture.Options{Cmdline: "nokaslr"})
}

// checkIncomplete asserts what a dump cut short must be: exit 1 with
// makedumpfile's message, the INCOMPLETE flag, fewer pages than the full
// dump, and every page it still holds read by libkdumpfile and drgn equal
// to the vmcore (the lost ones read as missing), and by pagepipe verify.
// It returns the first pfn the dump lost.
func checkIncomplete(t *testing.T, vmcore, dump string, err error, out []byte, full judge.Pages) uint64 {
	t.Helper()
	exitedIncomplete(t, err, out)
	d, err := source.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Header.Status&kdumpfmt.StatusIncomplete == 0 {
		t.Errorf("status %#x lacks INCOMPLETE", d.Header.Status)
	}
	kept := d.NumDumpable()
	if kept == 0 || kept >= uint64(len(full)) {
		t.Fatalf("%d of %d pages kept: not cut short", kept, len(full))
	}
	want := judge.Pages{}
	lost := d.MaxMapnr
	for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
		h, ok := full[pfn]
		if !ok {
			t.Fatalf("pfn %#x is in the cut dump but not in the full one", pfn)
		}
		want[pfn] = h
	}
	for pfn := range full {
		if _, ok := want[pfn]; !ok && pfn < lost {
			lost = pfn
		}
	}
	ranges := judge.AllPFNs(t, dump)
	if diff := want.Diff(judge.Libkdumpfile(t, dump, ranges)); diff != "" {
		t.Errorf("libkdumpfile:\n%s", diff)
	}
	if diff := want.Diff(judge.Drgn(t, dump, ranges)); diff != "" {
		t.Errorf("drgn:\n%s", diff)
	}
	verify(t, vmcore, dump)
	return lost
}

// exitedIncomplete fails the test unless the command that wrote a dump cut
// short exited 1 (err) with makedumpfile's message (out) for one.
func exitedIncomplete(t *testing.T, err error, out []byte) {
	t.Helper()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("This is an incomplete dumpfile, but might analyzable.")) {
		t.Errorf("no incomplete message in:\n%s", out)
	}
}

// crash and incomplete dumps.
//
// A dump cut short keeps the pages of the lowest pfns; what crash needs
// to start a session sits at the top of RAM, where the kernel's early
// allocator (memblock, top down) put it:
//
//   - the per-cpu areas: crash reads current_task, runqueues and the TSS
//     of every CPU while it starts; with them lost it stops ("page
//     excluded: … current_task (per_cpu)", or with --zero_excluded
//     "cannot determine idle task addresses from init_tasks[] or
//     runqueues[]");
//   - the page-table pages of the cpu_entry_area mapping (the very last
//     pages of RAM on the fixture): crash's x86_64 setup probes the
//     exception stacks there with accessible(), which is meant to fail
//     quietly, but the walk reads the page tables with FILL_PUD, which is
//     FAULT_ON_ERROR (crash defs.h): a lost PUD page ends the session
//     ("page excluded: physical address: 3ffd1000  type: \"pud page\"").
//
// So crash can open no dump cut in pfn order — pagepipe's or
// makedumpfile's — without --zero_excluded (which makes missing pages read
// as zeros, and which crash's own warning suggests for incomplete dumps),
// and with it only a dump that still holds the per-cpu areas and every
// page-table page its set-up walks — which a boot may put among the last
// pages of RAM (one fixture's vmalloc'd task stack at ffffc90000430000 had
// its page table there: "invalid kernel virtual address"). The tests cut
// past the whole priority set where the dump has data beyond it, and then
// require crash's full session; otherwise past the per-cpu areas, and then
// crash's minimal mode (pfnOrderCut).

// perCPUEnd returns the first pfn above every CPU's per-cpu area in the
// fixture's vmcore: the largest __per_cpu_offset plus pcpu_unit_size
// (x86_64 per-cpu areas are addressed from 0, so an offset is the area's
// direct-map address), read from the vmcore at the symbols of the debug
// vmlinux.
func perCPUEnd(t *testing.T, fx fixture.Paths, vmlinux string) uint64 {
	t.Helper()
	perCPU.Lock()
	defer perCPU.Unlock()
	if end, ok := perCPU.m[fx.Vmcore]; ok {
		return end
	}
	end := readPerCPUEnd(t, fx, vmlinux)
	perCPU.m[fx.Vmcore] = end
	return end
}

var perCPU = struct {
	sync.Mutex
	m map[string]uint64
}{m: map[string]uint64{}}

func readPerCPUEnd(t *testing.T, fx fixture.Paths, vmlinux string) uint64 {
	t.Helper()
	info, err := fixture.ReadInfo(fx.Info)
	if err != nil {
		t.Fatal(err)
	}
	num := func(k string) uint64 {
		v, err := strconv.ParseUint(strings.TrimPrefix(info[k], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("fixture info %s=%q: %v", k, info[k], err)
		}
		return v
	}
	pageOffset, textVaddr, textPaddr := num("page_offset"), num("kernel_text_vaddr"), num("kernel_text_paddr")
	f, err := elf.Open(vmlinux)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("%s: %v", vmlinux, err)
	}
	addr := map[string]uint64{}
	for _, s := range syms {
		if s.Name == "__per_cpu_offset" || s.Name == "pcpu_unit_size" {
			addr[s.Name] = s.Value
		}
	}
	v, err := source.Open(fx.Vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	read := func(name string, n int) []byte {
		a, ok := addr[name]
		if !ok {
			t.Fatalf("%s: no symbol %s", vmlinux, name)
		}
		b := make([]byte, n)
		if err := v.ReadPhys(a-textVaddr+textPaddr, b); err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		return b
	}
	_, cpus, _, _ := v.Notes()
	unit := uint64(binary.LittleEndian.Uint32(read("pcpu_unit_size", 4)))
	offs := read("__per_cpu_offset", 8*cpus)
	var end uint64
	for i := range cpus {
		o := binary.LittleEndian.Uint64(offs[8*i:])
		if o < pageOffset {
			t.Fatalf("cpu %d: __per_cpu_offset %#x is not a direct-map address", i, o)
		}
		end = max(end, (o-pageOffset+unit+v.PageSize()-1)/v.PageSize())
	}
	if cpus == 0 || unit == 0 || end > v.MaxMapnr {
		t.Fatalf("per-cpu areas: %d cpus, unit %#x, end pfn %#x of %#x", cpus, unit, end, v.MaxMapnr)
	}
	return end
}

// sessionEnd returns the first pfn above the fixture's priority set
// (priority.Find on its vmcore): the kernel's page tables, the per-cpu
// areas, the memory model, the CPUs' current tasks and their stacks,
// kernel data and text, what pagepipe --priority writes first so that
// crash's full session starts on a cut dump (TestRealPriority). Where the
// boot put the last of them — a page-table page of the vmalloc range
// holding a task's stack, say — is the boot's: with 1 GiB, memblock's
// top-down allocations put some within the last 64 pages of RAM.
func sessionEnd(t *testing.T, fx fixture.Paths) uint64 {
	t.Helper()
	session.Lock()
	defer session.Unlock()
	if end, ok := session.m[fx.Vmcore]; ok {
		return end
	}
	v, err := source.Open(fx.Vmcore)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	set, err := priority.Find(v, vmcoreinfoIn(t, v))
	if err != nil {
		t.Fatal(err)
	}
	var end uint64
	for _, c := range set.Classes {
		if n := len(c.Pfns); n > 0 {
			end = max(end, c.Pfns[n-1]+1)
		}
	}
	session.m[fx.Vmcore] = end
	return end
}

var session = struct {
	sync.Mutex
	m map[string]uint64
}{m: map[string]uint64{}}

// pfnOrderCut picks the pfn below which a pfn-order cut of the complete
// dump ref must keep every page. When ref holds more than maxWrite of data
// past sessionEnd, it is sessionEnd, and crash's full session must start
// on the cut dump (session true). Otherwise no cut that still loses a page
// can keep all crash's set-up reads, and it is the end of the per-cpu
// areas, without which not even crash --zero_excluded gets that far; then
// only crash --minimal's log is asserted, and the choice is logged.
func pfnOrderCut(t *testing.T, fx fixture.Paths, vmlinux, ref string) (keep uint64, session bool) {
	t.Helper()
	keep = perCPUEnd(t, fx, vmlinux)
	need := max(keep, sessionEnd(t, fx))
	if dataEnd(t, ref, need)+maxWrite < dataEnd(t, ref, math.MaxUint64) {
		return need, true
	}
	t.Logf("the priority set ends at pfn %#x, within %d bytes of the end of the dump's data: cutting past the per-cpu areas (pfn %#x), crash's minimal mode only", need, maxWrite, keep)
	return keep, false
}

// checkCut asserts what crash makes of a dump cut in pfn order past keep
// (pfnOrderCut): a full session with the whole console log, or with
// session false the log in crash's minimal mode.
func checkCut(t *testing.T, fx fixture.Paths, vmlinux, dump string, session bool) {
	t.Helper()
	if session {
		checkCrash(t, fx, judge.CrashWith(t, []string{"--zero_excluded"}, vmlinux, dump, crashCommands...))
		return
	}
	checkCrashLog(t, fx, judge.CrashWith(t, []string{"--minimal"}, vmlinux, dump, "log"))
}

// maxWrite is the most bytes pagepipe's kdump writer puts down at once
// (sink's 1 MiB data buffer; one pipeline chunk's data is at most 256
// pages): a write that ends by offset X holds every page whose data ends
// before X - maxWrite.
const maxWrite = 1 << 20

// dataEnd returns where, in the complete dump ref, the data of the
// dumpable pages below pfn ends.
func dataEnd(t *testing.T, ref string, pfn uint64) int64 {
	t.Helper()
	d, err := source.OpenDump(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var end int64
	for p := d.Dumpable.NextSet(0); p < pfn && p < d.MaxMapnr; p = d.Dumpable.NextSet(p + 1) {
		desc, err := d.Desc(p)
		if err != nil {
			t.Fatal(err)
		}
		end = max(end, desc.Offset+int64(desc.Size))
	}
	return end
}

var crashCommands = []string{"sys", "log", "ps"}

// checkCrash asserts what crash --zero_excluded makes of an incomplete
// dump of the fixture (output as judge.CrashRun returns it): it opens it,
// warns that it is incomplete, names the fixture's kernel release, and its
// log holds every kernel line the guest printed on its console.
func checkCrash(t *testing.T, fx fixture.Paths, out string) {
	t.Helper()
	info, err := fixture.ReadInfo(fx.Info)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RELEASE: " + info["osrelease"], "[swapper/0]"} {
		if !strings.Contains(out, want) {
			t.Errorf("crash output lacks %q:\n%s", want, head(out, 40))
		}
	}
	checkCrashLog(t, fx, out)
}

// checkCrashLog asserts that crash opened an incomplete dump of the
// fixture, warned that it is incomplete, and that its log holds every
// kernel line the guest printed on its console.
func checkCrashLog(t *testing.T, fx fixture.Paths, out string) {
	t.Helper()
	if !strings.Contains(out, "This dumpfile is incomplete.") {
		t.Errorf("crash does not call the dump incomplete:\n%s", head(out, 40))
	}
	n, missing := missingLogLines(t, fx, out)
	if n < 100 || len(missing) > 0 {
		t.Errorf("crash's log lacks %d of the %d kernel lines of the guest's console, first %q", len(missing), n, missing[:min(len(missing), 3)])
	}
}

// missingLogLines returns how many kernel lines the guest printed on its
// console and which of them crash's output (of log) lacks.
func missingLogLines(t *testing.T, fx fixture.Paths, out string) (n int, missing []string) {
	t.Helper()
	serial, err := os.ReadFile(filepath.Join(fx.Dir, "serial.log"))
	if err != nil {
		t.Fatal(err)
	}
	// crash prints a record's continuation lines indented where the
	// console repeats the timestamp.
	stamp := regexp.MustCompile(`^\[ *\d+\.\d+\] `)
	inLog := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if loc := stamp.FindStringIndex(l); loc != nil {
			inLog[l[loc[1]:]] = true
		} else if strings.HasPrefix(l, strings.Repeat(" ", 15)) {
			inLog[l[15:]] = true
		}
	}
	for _, l := range strings.Split(strings.ReplaceAll(string(serial), "\r", ""), "\n") {
		if loc := stamp.FindStringIndex(l); loc != nil {
			n++
			if !inLog[l[loc[1]:]] {
				missing = append(missing, l)
			}
		}
	}
	return n, missing
}

// crashPair runs crash on two dumps at once (each session takes seconds
// of loading the debug vmlinux) with the same options and commands.
func crashPair(options []string, vmlinux, a, b string, commands ...string) (outA, outB string, errA, errB error) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		outB, errB = judge.CrashRun(options, vmlinux, b, commands...)
	}()
	outA, errA = judge.CrashRun(options, vmlinux, a, commands...)
	wg.Wait()
	return
}

// -L stops the dump at the size limit and leaves it valid and marked. The
// limit cuts past the per-cpu areas, so crash opens the dump too, and
// makedumpfile's dump at the same limit (the full -l dumps are
// byte-identical) reads the same in crash. (pagepipe's in pfn order, as
// makedumpfile's: -L alone would prioritise it, TestRealPriority.)
func TestRealSizeLimitLeavesValidIncompleteDump(t *testing.T) {
	t.Parallel()
	fx := nokaslrVmcore(t)
	vmlinux := fixture.DebugVmlinux(t)
	ref := dump(t, "pagepipe", fx.Vmcore, "-l", "-d", "31")
	full := judge.ExpectedPages(t, fx.Vmcore, ref)
	keep, session := pfnOrderCut(t, fx, vmlinux, ref)
	limit := dataEnd(t, ref, keep) + maxWrite
	arg := strconv.FormatInt(limit, 10)

	dir := t.TempDir()
	out, theirs := filepath.Join(dir, "limited"), filepath.Join(dir, "makedumpfile")
	b, err := exec.Command(bin, "-l", "-d", "31", "--priority=off", "-L", arg, fx.Vmcore, out).CombinedOutput()
	if lost := checkIncomplete(t, fx.Vmcore, out, err, b, full); lost < keep {
		t.Fatalf("-L %d lost pfn %#x, below the cut's %#x", limit, lost, keep)
	}
	if st, err := os.Stat(out); err != nil {
		t.Error(err)
	} else if st.Size() > limit {
		t.Errorf("file size %d past -L %d", st.Size(), limit)
	}
	mb, err := exec.Command("makedumpfile", "-l", "-d", "31", "-L", arg, fx.Vmcore, theirs).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !bytes.Contains(mb, []byte("incomplete dumpfile")) {
		t.Fatalf("makedumpfile -L %d: %v, want an incomplete dump\n%s", limit, err, mb)
	}

	// crash reads both dumps alike, whether its session starts (past
	// the priority set) or stops at a page its set-up needs.
	zero := []string{"--zero_excluded"}
	a, c, errA, errC := crashPair(zero, vmlinux, out, theirs, crashCommands...)
	if session && (errA != nil || errC != nil) {
		t.Fatalf("crash --zero_excluded: on pagepipe's dump %v, on makedumpfile's %v\n%s\n%s", errA, errC, head(a, 20), head(c, 20))
	}
	if (errA == nil) != (errC == nil) || a != c {
		t.Errorf("crash reads pagepipe's and makedumpfile's incomplete dumps differently (%v, %v):\npagepipe:\n%s\nmakedumpfile:\n%s", errA, errC, head(a, 40), head(c, 40))
	}
	checkCut(t, fx, vmlinux, out, session)
	// Without --zero_excluded crash stops at the lost page-table page, on
	// both dumps alike: it calls a lost page "excluded" in pagepipe's
	// (out of the 2nd bitmap) and "incomplete" in makedumpfile's (a zeroed
	// descriptor).
	a, c, _, _ = crashPair(nil, vmlinux, out, theirs, "sys")
	if a != strings.ReplaceAll(c, "page incomplete:", "page excluded:") {
		t.Errorf("without --zero_excluded crash differs:\npagepipe:\n%s\nmakedumpfile:\n%s", head(a, 20), head(c, 20))
	}
}

// A full disk (a tmpfs too small for the dump) gives the same guarantees.
func TestRealDiskFullLeavesValidIncompleteDump(t *testing.T) {
	t.Parallel()
	fx := nokaslrVmcore(t)
	vmlinux := fixture.DebugVmlinux(t)
	ref := dump(t, "pagepipe", fx.Vmcore, "-c", "-d", "31")
	full := judge.ExpectedPages(t, fx.Vmcore, ref)
	keep, session := pfnOrderCut(t, fx, vmlinux, ref)
	size := (dataEnd(t, ref, keep) + maxWrite + 4095) / 4096 * 4096
	out := filepath.Join(smallTmpfs(t, size), "dump")
	b, err := exec.Command(bin, "-c", "-d", "31", fx.Vmcore, out).CombinedOutput()
	if !strings.Contains(string(b), "no space left on device") {
		t.Errorf("no ENOSPC message in:\n%s", b)
	}
	if lost := checkIncomplete(t, fx.Vmcore, out, err, b, full); lost < keep {
		t.Fatalf("a %d-byte disk lost pfn %#x, below the cut's %#x", size, lost, keep)
	}
	checkCut(t, fx, vmlinux, out, session)
}

// signalled runs pagepipe with args, writing out, and has signalAt send it
// SIGTERM; it returns the command's combined output and how it exited.
func signalled(t *testing.T, out string, target, stepFrom int64, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	signalAt(t, cmd, out, target, stepFrom)
	err := cmd.Wait()
	return buf.Bytes(), err
}

// signalAt sends cmd SIGTERM once out has grown to target bytes. Where
// the rest of the copy takes only milliseconds (a target near the end, a
// fast ELF copy), it freezes the process (SIGSTOP) once out reaches
// stepFrom bytes and then lets it run in slices of 50 µs (SIGCONT, SIGSTOP) until the target is reached, so that the
// signal lands before the end, and in slices until it exits; stepFrom < 0
// never freezes it.
func signalAt(t *testing.T, cmd *exec.Cmd, out string, target, stepFrom int64) {
	t.Helper()
	stopped := false
	deadline := time.Now().Add(2 * time.Minute)
	for {
		fi, err := os.Stat(out)
		if err == nil && fi.Size() >= target {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the dump never reached its target size")
		}
		switch {
		case stopped:
			slice(cmd)
		case stepFrom >= 0 && err == nil && fi.Size() >= stepFrom:
			cmd.Process.Signal(syscall.SIGSTOP)
			stopped = true
		default:
			time.Sleep(2 * time.Millisecond)
		}
	}
	t.Logf("SIGTERM at %d bytes (target %d, frozen from %d: %v)", func() int64 { fi, _ := os.Stat(out); return fi.Size() }(), target, stepFrom, stopped)
	cmd.Process.Signal(syscall.SIGTERM)
	// Keep it in slices until it exits, so that the copy cannot outrun
	// the signal's handling.
	for stopped && time.Now().Before(deadline) {
		slice(cmd)
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); err != nil || exited(b) {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGCONT)
}

// slice lets a frozen process run for about 50 µs (timed by spinning:
// a sleep that short overshoots) and freezes it again.
func slice(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGCONT)
	for start := time.Now(); time.Since(start) < 50*time.Microsecond; {
	}
	cmd.Process.Signal(syscall.SIGSTOP)
}

// exited tells from /proc/PID/stat whether the process is a zombie.
func exited(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// SIGTERM during the copy, at 30 %, 60 % and 90 % of it, and once the
// per-cpu areas are written, finishes the same way; crash opens the last
// for a full session, the others in its minimal mode.
func TestRealSigtermLeavesValidIncompleteDump(t *testing.T) {
	t.Parallel()
	fx := nokaslrVmcore(t)
	vmlinux := fixture.DebugVmlinux(t)
	ref := dump(t, "pagepipe", fx.Vmcore, "-c", "-d", "1")
	st, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	full := judge.ExpectedPages(t, fx.Vmcore, ref)
	keep, session := pfnOrderCut(t, fx, vmlinux, ref)
	cuts := []struct {
		name   string
		target int64 // file size at which to send the signal
	}{
		{"30pct", st.Size() * 30 / 100},
		{"60pct", st.Size() * 60 / 100},
		{"90pct", st.Size() * 90 / 100},
		{"percpu", dataEnd(t, ref, keep)},
	}
	for _, c := range cuts {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "dump")
			// One worker on one CPU: slow enough to be caught mid-copy. (Run
			// in slices, the last cut leaves the second CPU to the signal's
			// handling.)
			args := []string{"--cpus", "1", "--num-threads", "1", "-c", "-d", "1", fx.Vmcore, out}
			if c.name == "percpu" {
				args = args[2:]
			}
			stepFrom := int64(-1)
			if c.name == "percpu" {
				stepFrom = c.target / 2
			}
			b, err := signalled(t, out, c.target, stepFrom, args...)
			lost := checkIncomplete(t, fx.Vmcore, out, err, b, full)
			if c.name == "percpu" {
				if lost < keep {
					t.Fatalf("lost pfn %#x, below the cut's %#x", lost, keep)
				}
				checkCut(t, fx, vmlinux, out, session)
				return
			}
			// Cut below the per-cpu areas, a full session cannot start
			// (see above), but crash's minimal mode, which skips the task
			// and per-cpu set-up, opens the dump and reads the kernel log.
			checkCrashLog(t, fx, judge.CrashWith(t, []string{"--minimal"}, vmlinux, out, "log"))
		})
	}
}
