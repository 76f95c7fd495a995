// Package judge runs the tools people open dumps with — libkdumpfile,
// drgn, crash, makedumpfile — against pagepipe's output, for tests. A
// judge that cannot run fails the test: the tools are installed by
// `make test`, never skipped.
package judge

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/integration"
)

//go:embed pages_kdumpfile.py
var pagesKdumpfile string

//go:embed pages_drgn.py
var pagesDrgn string

// Python is Debian's interpreter, which has the kdumpfile and drgn modules
// (another python3 may come first on PATH).
const Python = "/usr/bin/python3"

// Pages maps each pfn a reader could read to the SHA-1 of its contents.
type Pages map[uint64]string

// Hash is the digest Pages holds for a page's contents.
func Hash(page []byte) string {
	h := sha1.Sum(page)
	return hex.EncodeToString(h[:])
}

// Range is a run of pfns [Lo, Hi) for a judge to read.
type Range struct{ Lo, Hi uint64 }

// Libkdumpfile reads every pfn (of 4 KiB pages) in ranges of dump through
// python3-libkdumpfile.
func Libkdumpfile(tb testing.TB, dump string, ranges []Range) Pages {
	return LibkdumpfileAt(tb, dump, 4096, ranges)
}

// LibkdumpfileAt is Libkdumpfile for a dump of pageSize-byte pages: pfn n
// is the pageSize bytes at physical n*pageSize. The caller says the size
// (from what the dump was made of), not the dump: a dump with the wrong
// block size then reads back wrong.
func LibkdumpfileAt(tb testing.TB, dump string, pageSize uint64, ranges []Range) Pages {
	return runPages(tb, "libkdumpfile", pagesKdumpfile, dump, pageSize, ranges)
}

// Drgn reads every pfn (of 4 KiB pages) in ranges of dump through
// python3-drgn.
func Drgn(tb testing.TB, dump string, ranges []Range) Pages {
	return DrgnAt(tb, dump, 4096, ranges)
}

// DrgnAt is Drgn for a dump of pageSize-byte pages (as LibkdumpfileAt).
func DrgnAt(tb testing.TB, dump string, pageSize uint64, ranges []Range) Pages {
	return runPages(tb, "drgn", pagesDrgn, dump, pageSize, ranges)
}

func runPages(tb testing.TB, name, script, dump string, pageSize uint64, ranges []Range) Pages {
	tb.Helper()
	integration.Require(tb, "the reader "+name+" (judge."+name+")")
	// Not named after the module it imports, which it would shadow.
	path := filepath.Join(tb.TempDir(), "pages_"+name+".py")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	args := []string{path, dump, fmt.Sprint(pageSize)}
	for _, r := range ranges {
		args = append(args, fmt.Sprintf("%d:%d", r.Lo, r.Hi))
	}
	cmd := exec.Command(Python, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s judge on %s: %v\n%s", name, dump, err, lastLines(stderr.String(), 10))
	}
	pages := Pages{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			tb.Fatalf("%s judge: bad line %q", name, sc.Text())
		}
		pfn, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			tb.Fatalf("%s judge: bad line %q", name, sc.Text())
		}
		pages[pfn] = f[1]
	}
	return pages
}

// ReadVirtual reads n bytes at kernel virtual address va of dump through
// reader ("libkdumpfile" or "drgn") without a vmlinux: the readers
// translate through the dump's own page tables, which they find from its
// header (utsname machine, phys_base) and VMCOREINFO.
func ReadVirtual(tb testing.TB, reader, dump string, va uint64, n int) []byte {
	tb.Helper()
	integration.Require(tb, "the reader "+reader+" (judge.ReadVirtual)")
	scripts := map[string]string{
		"libkdumpfile": `import sys, kdumpfile
k = kdumpfile.kdumpfile(sys.argv[1])
k.attr['addrxlat.ostype'] = 'linux'
sys.stdout.buffer.write(k.read(kdumpfile.KDUMP_KVADDR, int(sys.argv[2], 0), int(sys.argv[3])))
`,
		"drgn": `import sys, drgn
p = drgn.Program()
p.set_core_dump(sys.argv[1])
sys.stdout.buffer.write(p.read(int(sys.argv[2], 0), int(sys.argv[3])))
`,
	}
	cmd := exec.Command(Python, "-c", scripts[reader], dump, fmt.Sprintf("%#x", va), fmt.Sprint(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s virtual read of %#x in %s: %v\n%s", reader, va, dump, err, lastLines(stderr.String(), 10))
	}
	return out
}

// Diff describes how got differs from want, in at most a few lines; ""
// when they are equal.
func (want Pages) Diff(got Pages) string {
	var b strings.Builder
	n := 0
	note := func(format string, a ...any) {
		if n < 5 {
			fmt.Fprintf(&b, format+"\n", a...)
		}
		n++
	}
	for pfn, h := range want {
		switch g, ok := got[pfn]; {
		case !ok:
			note("pfn %#x: missing", pfn)
		case g != h:
			note("pfn %#x: contents differ", pfn)
		}
	}
	for pfn := range got {
		if _, ok := want[pfn]; !ok {
			note("pfn %#x: present but not expected", pfn)
		}
	}
	if n > 5 {
		fmt.Fprintf(&b, "... %d differences in all\n", n)
	}
	return b.String()
}

// FirstDiff says where two files' bytes, a and b, first differ, for a
// test's failure message.
func FirstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("first at byte %d of %d and %d", i, len(a), len(b))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Makedumpfile runs Debian's makedumpfile with args and fails the test if
// it fails; it returns its combined output.
func Makedumpfile(tb testing.TB, args ...string) string {
	tb.Helper()
	return MakedumpfileBy(tb, "makedumpfile", args...)
}

// MakedumpfileBy is Makedumpfile with another build of it, prog (a
// fixture.Peer, say).
func MakedumpfileBy(tb testing.TB, prog string, args ...string) string {
	tb.Helper()
	integration.Require(tb, "the peer "+prog+" (judge.Makedumpfile)")
	out, err := exec.Command(prog, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, lastLines(string(out), 10))
	}
	return string(out)
}

// Crash runs crash in batch mode with the debug vmlinux on dump, feeding it
// commands, and returns its output with the lines that name the dump file
// taken out (they differ between any two dumps).
func Crash(tb testing.TB, vmlinux, dump string, commands ...string) string {
	tb.Helper()
	return CrashWith(tb, nil, vmlinux, dump, commands...)
}

// CrashWith is Crash with extra crash options before the file names, such
// as --zero_excluded.
func CrashWith(tb testing.TB, options []string, vmlinux, dump string, commands ...string) string {
	tb.Helper()
	return crashWith(tb, "crash", options, vmlinux, dump, commands...)
}

// CrashBy is Crash run by another crash program than Debian's on PATH,
// such as sid's crash 9.0.2 for kernels 6.12 and later (fixture.Peer).
func CrashBy(tb testing.TB, prog, vmlinux, dump string, commands ...string) string {
	tb.Helper()
	return crashWith(tb, prog, nil, vmlinux, dump, commands...)
}

func crashWith(tb testing.TB, prog string, options []string, vmlinux, dump string, commands ...string) string {
	tb.Helper()
	integration.Require(tb, "the reader "+prog+" (judge.Crash)")
	out, err := crash(prog, options, vmlinux, []string{dump}, commands)
	if err != nil {
		tb.Fatalf("crash on %s: %v\n%s", dump, err, lastLines(out, 20))
	}
	return out
}

// CrashParts is Crash for a split dump: crash opens the parts as one dump
// when they all follow the vmlinux. Lines naming a part are taken out.
func CrashParts(tb testing.TB, vmlinux string, parts []string, commands ...string) string {
	tb.Helper()
	integration.Require(tb, "the reader crash (judge.CrashParts)")
	out, err := crash("crash", nil, vmlinux, parts, commands)
	if err != nil {
		tb.Fatalf("crash on %s: %v\n%s", strings.Join(parts, " "), err, lastLines(out, 20))
	}
	return out
}

// CrashRun runs crash as CrashWith does and returns its output (the lines
// naming the dump file taken out) and its error, if it failed. It does not
// touch a testing.TB, so it may run in a goroutine.
func CrashRun(options []string, vmlinux, dump string, commands ...string) (string, error) {
	return crash("crash", options, vmlinux, []string{dump}, commands)
}

func crash(prog string, options []string, vmlinux string, files, commands []string) (string, error) {
	args := append(append(append([]string{"-s", "--no_scroll"}, options...), vmlinux), files...)
	cmd := exec.Command(prog, args...)
	cmd.Stdin = strings.NewReader(strings.Join(commands, "\n") + "\nquit\n")
	out, err := cmd.CombinedOutput()
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		if !slices.ContainsFunc(files, func(f string) bool { return strings.Contains(line, f) }) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n"), err
}

// CrashRunBy is CrashRun by another crash program than Debian's (sid's
// crash 9.0.2 from fixture.Peer, say).
func CrashRunBy(prog string, options []string, vmlinux, dump string, commands ...string) (string, error) {
	return crash(prog, options, vmlinux, []string{dump}, commands)
}
