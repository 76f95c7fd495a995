//go:build integration

// Package e2e runs the pagepipe binary against real kernels' vmcores
// (made by fixtures/make-vmcore.sh under QEMU) and lets the tools people
// open dumps with — makedumpfile 1.7.2, crash, libkdumpfile, drgn — judge
// the result.
package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"pagepipe/internal/fixture"
)

var (
	bin      string // the pagepipe binary under test
	benchBin string // cmd/pagepipe-bench, built beside it (its --pagepipe default)
	workDir  string // dumps shared by the tests of this run
)

func TestMain(m *testing.M) {
	var err error
	workDir, err = os.MkdirTemp(e2eTmp(), "pagepipe-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin, benchBin = filepath.Join(workDir, "pagepipe"), filepath.Join(workDir, "pagepipe-bench")
	// Built as make build builds them: the capture-kernel tests put this
	// pagepipe into an initramfs, and their cached runs are keyed by its
	// bytes, which -trimpath keeps the same in every checkout.
	for _, b := range []struct{ out, pkg string }{{bin, "pagepipe/cmd/pagepipe"}, {benchBin, "pagepipe/cmd/pagepipe-bench"}} {
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", b.out, b.pkg)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(workDir)
	os.Exit(code)
}

// e2eTmp is where a run keeps its dumps: the tests write dumps of 1 GiB
// machines many times over and keep the 6.1 fixture's for the run (about
// 12 GiB), while the newer kernels' tests add up to 9 GiB of their own
// for a while; so in memory (/dev/shm) only when 32 GiB are available,
// and in $TMPDIR otherwise; PAGEPIPE_E2E_TMP chooses.
func e2eTmp() string {
	if d := os.Getenv("PAGEPIPE_E2E_TMP"); d != "" {
		return d
	}
	const need = 32 << 30
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return ""
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			if kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil && kb<<10 >= need {
				return "/dev/shm"
			}
		}
	}
	return ""
}

// realVmcore is the default real fixture: Debian's kernel, 1 GiB, KASLR on.
func realVmcore(t *testing.T) fixture.Paths {
	return fixture.Real(t, fixture.Options{})
}

// dumps caches the dumps that dump made, so that tests comparing the
// same dump with several judges make it once. A dump of a real machine
// is up to a GiB and a run asks for hundreds, so the cache keeps at most
// dumpBudget bytes: past that it deletes the least recently used dumps
// that no running test holds (a test holds every dump it asked for until
// it ends), and a later call makes a deleted one again.
var dumps = struct {
	sync.Mutex
	m     map[string]*cachedDump
	n     int   // dumps made: names stay unique when dumps are deleted
	bytes int64 // on disk, of the dumps in m
	clock int64 // ticks at each use, for least recently used
}{m: map[string]*cachedDump{}}

type cachedDump struct {
	path, report string
	size         int64
	used         int64 // dumps.clock at the last use
	holders      int   // running tests that asked for it
}

// dumpBudget is the bytes of dumps kept for later tests (4 GiB, or
// PAGEPIPE_E2E_DUMP_BUDGET in MiB).
func dumpBudget() int64 {
	if v, err := strconv.ParseInt(os.Getenv("PAGEPIPE_E2E_DUMP_BUDGET"), 10, 64); err == nil && v >= 0 {
		return v << 20
	}
	return 4 << 30
}

// dump runs prog ("pagepipe" or "makedumpfile") with args on vmcore and
// returns the dump's path, which stays until t ends; a later call with the
// same arguments reuses the dump while the cache keeps it.
func dump(t *testing.T, prog, vmcore string, args ...string) string {
	t.Helper()
	key := prog + " " + strings.Join(args, " ") + " " + vmcore
	dumps.Lock()
	defer dumps.Unlock()
	dumps.clock++
	d, ok := dumps.m[key]
	if !ok {
		dumps.n++
		out := filepath.Join(workDir, fmt.Sprintf("dump-%d", dumps.n))
		path := prog
		if prog == "pagepipe" {
			path = bin
		}
		cmd := exec.Command(path, append(append([]string{"--message-level", "23"}, args...), vmcore, out)...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			os.Remove(out)
			t.Fatalf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, b)
		}
		d = &cachedDump{path: out, report: string(b), size: diskSize(out)}
		dumps.m[key] = d
		dumps.bytes += d.size
	}
	d.used = dumps.clock
	d.holders++
	t.Cleanup(func() {
		dumps.Lock()
		defer dumps.Unlock()
		d.holders--
		evictDumps(dumpBudget())
	})
	evictDumps(dumpBudget())
	return d.path
}

// evictDumps deletes the least recently used dumps that no running test
// holds until the cache is within budget bytes. dumps is locked.
func evictDumps(budget int64) {
	for dumps.bytes > budget {
		var oldest string
		for k, d := range dumps.m {
			if d.holders == 0 && (oldest == "" || d.used < dumps.m[oldest].used) {
				oldest = k
			}
		}
		if oldest == "" {
			return
		}
		dropDump(oldest)
	}
}

// dropDump deletes the cached dump of key. dumps is locked.
func dropDump(key string) {
	os.Remove(dumps.m[key].path)
	dumps.bytes -= dumps.m[key].size
	delete(dumps.m, key)
}

// diskSize is the bytes path takes on disk (a dump may be sparse).
func diskSize(path string) int64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Blocks * 512
}

// report returns the messages of the dump made by the same call to dump.
func report(prog, vmcore string, args ...string) string {
	dumps.Lock()
	defer dumps.Unlock()
	if d, ok := dumps.m[prog+" "+strings.Join(args, " ")+" "+vmcore]; ok {
		return d.report
	}
	return ""
}

var reportLine = regexp.MustCompile(`(?m)^\s*(Original pages|Excluded pages|Pages filled with zero|Non-private cache pages|Private cache pages|User process data pages|Free pages|Hwpoison pages|Offline pages|Remaining pages|Memory Hole|Total pages|Write bytes)\s*: (\S+)`)

// counts parses makedumpfile's report into label → value.
func counts(t *testing.T, msgs string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, g := range reportLine.FindAllStringSubmatch(msgs, -1) {
		m[g[1]] = g[2]
	}
	if len(m) < 10 {
		t.Fatalf("no report in:\n%s", msgs)
	}
	return m
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// equalFiles fails the test unless the two files have the same bytes; it
// streams them, since dumps of real machines are large.
func equalFiles(t *testing.T, a, b string) {
	t.Helper()
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if off := diffAt(fa, fb); off >= 0 {
		t.Fatalf("%s and %s differ from byte %d", a, b, off)
	}
}

// diffAt returns the offset of the first byte at which ra and rb differ
// (one ending before the other counts), or -1 where they read the same to
// the end. It reads them a MiB at a time.
func diffAt(ra, rb io.Reader) int64 {
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for off := int64(0); ; {
		na, ea := io.ReadFull(ra, ba)
		nb, eb := io.ReadFull(rb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			i := 0
			for i < min(na, nb) && ba[i] == bb[i] {
				i++
			}
			return off + int64(i)
		}
		if ea != nil || eb != nil {
			return -1
		}
		off += int64(na)
	}
}

// smallTmpfs mounts a tmpfs of size bytes, for a disk that fills up, and
// returns its mount point; it is unmounted when the test ends.
func smallTmpfs(t *testing.T, size int64) string {
	t.Helper()
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a small tmpfs (tests run as root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

func execOut(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// verify runs pagepipe verify on a dump of the real fixture.
func verify(t *testing.T, vmcore, dump string) {
	t.Helper()
	if out, err := execOut(bin, "verify", vmcore, dump); err != nil {
		t.Errorf("pagepipe verify %s: %v\n%s", filepath.Base(dump), err, out)
	}
}
