package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"pagepipe/internal/judge"
	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// Issue 21: a prioritised dump (--priority) holds the same pages as the
// pfn-order one — the same headers, bitmaps, descriptors' sizes and flags
// and page contents, in a file of the same size — and only the data
// offsets differ; the priority set's data comes first. -L turns it on by
// itself, --priority=off turns it off.
func TestPriorityReordersOnlyData(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.KernelMachine("6.1", 32))
	plain, prio := filepath.Join(dir, "plain"), filepath.Join(dir, "prio")
	mustPagepipe(t, "-l", "-d", "31", vmcore, plain)
	mustPagepipe(t, "-l", "-d", "31", "--priority", vmcore, prio)
	a, b := readFile(t, plain), readFile(t, prio)
	if len(a) != len(b) {
		t.Fatalf("sizes %d and %d", len(a), len(b))
	}
	da, db := openDump(t, plain), openDump(t, prio)
	h := db.Header
	descs := int64(h.BlockSize) * int64(1+int64(h.SubHdrSize)+int64(h.BitmapBlocks))
	if !bytes.Equal(a[:descs], b[:descs]) {
		t.Fatal("headers or bitmaps differ")
	}
	moved := 0
	pa, pb := make([]byte, 4096), make([]byte, 4096)
	for pfn := da.Dumpable.NextSet(0); pfn < da.MaxMapnr; pfn = da.Dumpable.NextSet(pfn + 1) {
		x, y := desc(t, da, pfn), desc(t, db, pfn)
		if x.Size != y.Size || x.Flags != y.Flags {
			t.Fatalf("pfn %#x: descriptor %+v, pfn order %+v", pfn, y, x)
		}
		if x.Offset != y.Offset {
			moved++
		}
		if err := da.ReadPage(pfn, pa); err != nil {
			t.Fatal(err)
		}
		if err := db.ReadPage(pfn, pb); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pa, pb) {
			t.Fatalf("pfn %#x reads differently", pfn)
		}
	}
	if moved == 0 {
		t.Fatal("no page moved: not prioritised")
	}
	if got := dataOrder(t, prio); got == "pfn order" {
		t.Errorf("inspect of the prioritised dump says %q", got)
	}
	if got := dataOrder(t, plain); got != "pfn order" {
		t.Errorf("inspect of the pfn-order dump says %q", got)
	}
	mustPagepipe(t, "verify", vmcore, prio)

	// -L prioritises unless told not to; at a limit past the priority
	// set's data (plus the 1 MiB the writer puts down at once) every
	// priority page is kept.
	end := prioEnd(t, prio)
	limit := strconv.FormatInt(end+1<<20, 10)
	for _, tc := range []struct {
		name, flag string
		prio       bool
	}{{"auto", "", true}, {"off", "--priority=off", false}} {
		out := filepath.Join(dir, "cut-"+tc.name)
		args := []string{"-l", "-d", "31", "-L", limit}
		if tc.flag != "" {
			args = append(args, tc.flag)
		}
		if rc, _, stderr := pagepipe(t, append(args, vmcore, out)...); rc != exitFailed {
			t.Fatalf("%s: -L %s: exit %d, want %d (cut short): %s", tc.name, limit, rc, exitFailed, stderr)
		}
		mustPagepipe(t, "verify", vmcore, out)
		_, stdout, _ := pagepipe(t, "inspect", out)
		held, found := heldOf(t, stdout)
		_, whole, _ := pagepipe(t, "inspect", prio)
		wantHeld, _ := heldOf(t, whole)
		if tc.prio && held != wantHeld {
			t.Errorf("%s: -L %s kept %d of the %d priority pages (of %d found)\n%s", tc.name, limit, held, wantHeld, found, stdout)
		}
		if !tc.prio && held >= wantHeld {
			t.Errorf("%s: the pfn-order cut kept every priority page (%d): the test shows nothing", tc.name, held)
		}
	}
}

func desc(t *testing.T, d *source.Dump, pfn uint64) kdumpfmt.PageDesc {
	t.Helper()
	x, err := d.Desc(pfn)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

var (
	orderLine = regexp.MustCompile(`(?m)^data order +: (.*)$`)
	endLine   = regexp.MustCompile(`data ends at byte (\d+)`)
	heldLine  = regexp.MustCompile(`(?m)^priority set +: (\d+) pages found, (\d+) in the dump`)
)

// dataOrder is inspect's "data order" line.
func dataOrder(t *testing.T, path string) string {
	t.Helper()
	m := orderLine.FindStringSubmatch(mustPagepipe(t, "inspect", path))
	if m == nil {
		t.Fatalf("inspect %s: no data order line", path)
	}
	return m[1]
}

// prioEnd is where inspect says the priority set's data ends.
func prioEnd(t *testing.T, path string) int64 {
	t.Helper()
	m := endLine.FindStringSubmatch(dataOrder(t, path))
	if m == nil {
		t.Fatalf("inspect %s: not prioritised", path)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	if st, err := os.Stat(path); err != nil || n <= 0 || n >= st.Size() {
		t.Fatalf("priority data ends at %d of %v (%v)", n, st.Size(), err)
	}
	return n
}

// heldOf is inspect's count of priority pages held, and found.
func heldOf(t *testing.T, inspect string) (held, found uint64) {
	t.Helper()
	m := heldLine.FindStringSubmatch(inspect)
	if m == nil {
		t.Fatalf("no priority set line in:\n%s", inspect)
	}
	f, _ := strconv.ParseUint(m[1], 10, 64)
	h, _ := strconv.ParseUint(m[2], 10, 64)
	return h, f
}

// Issue 21, -F: a prioritised flattened stream (--priority) differs from
// the pfn-order one in its record order only: rebuilt by pagepipe -R (and
// by Debian's makedumpfile -R: TestPriorityStreamMakedumpfileR), it is the
// prioritised file byte for byte,
// which reads page for page as the default dump. Cut at 30 % and 60 % of
// its bytes (the priority set's data ends before 30 %), rebuilt, it is a
// dump marked INCOMPLETE that holds the whole priority set, every page
// it holds the vmcore's.
func TestPriorityStream(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.KernelMachine("6.1", 128))
	args := []string{"-l", "-d", "1"}
	plain, prio := filepath.Join(dir, "plain"), filepath.Join(dir, "prio")
	mustPagepipe(t, append(args, vmcore, plain)...)
	mustPagepipe(t, append(args, "--priority", vmcore, prio)...)
	stream := []byte(mustPagepipe(t, append([]string{"-F", "--priority"}, append(args, vmcore)...)...))
	// Into a buffer (not a pipe), -F stays in pfn order by default.
	pfnOrder := []byte(mustPagepipe(t, append([]string{"-F"}, append(args, vmcore)...)...))
	if bytes.Equal(stream, pfnOrder) {
		t.Fatal("the prioritised stream is the pfn-order one")
	}

	ours := filepath.Join(dir, "ours")
	if rc, stderr := rearrange(t, stream, ours); rc != 0 {
		t.Fatalf("-R: exit %d: %s", rc, stderr)
	}
	if got, want := readFile(t, ours), readFile(t, prio); !bytes.Equal(got, want) {
		t.Fatalf("the rebuilt stream is not the prioritised file: %s", judge.FirstDiff(got, want))
	}
	samePages(t, plain, ours)
	_, whole, _ := pagepipe(t, "inspect", prio)
	wantHeld, _ := heldOf(t, whole)
	end := prioEnd(t, prio)

	for _, pct := range []int{30, 60} {
		cut := len(stream) * pct / 100
		if int64(cut) < end {
			t.Fatalf("the priority set's data ends at %d, past the %d %% cut at %d", end, pct, cut)
		}
		out := filepath.Join(dir, fmt.Sprintf("cut%d", pct))
		rc, stderr := rearrange(t, stream[:cut], out)
		if rc != exitFailed || !strings.Contains(stderr, "cut short") || !strings.Contains(stderr, "This is an incomplete dumpfile") {
			t.Fatalf("-R of a %d %% cut: exit %d, want %d and the reason:\n%s", pct, rc, exitFailed, stderr)
		}
		mustPagepipe(t, "verify", vmcore, out)
		inspect := mustPagepipe(t, "inspect", out)
		if !strings.Contains(inspect, "INCOMPLETE") {
			t.Errorf("%d %%: not marked INCOMPLETE:\n%s", pct, inspect)
		}
		if held, _ := heldOf(t, inspect); held != wantHeld {
			t.Errorf("%d %%: %d of the %d priority pages kept:\n%s", pct, held, wantHeld, inspect)
		}
		if d := openDump(t, out); d.NumDumpable() >= openDump(t, plain).NumDumpable() {
			t.Errorf("%d %%: every page kept", pct)
		}
	}
	// The pfn-order stream cut at 30 % holds fewer priority pages.
	out := filepath.Join(dir, "cut-pfn-order")
	if rc, stderr := rearrange(t, pfnOrder[:len(pfnOrder)*30/100], out); rc != exitFailed {
		t.Fatalf("-R of a cut pfn-order stream: exit %d: %s", rc, stderr)
	}
	mustPagepipe(t, "verify", vmcore, out)
	if held, _ := heldOf(t, mustPagepipe(t, "inspect", out)); held >= wantHeld {
		t.Errorf("the pfn-order cut kept every priority page (%d): the test shows nothing", held)
	}
	// Cut inside its headers: no dump, no file, one line.
	out = filepath.Join(dir, "cut-headers")
	if rc, stderr := rearrange(t, stream[:5000], out); rc != exitFailed || strings.Count(stderr, "pagepipe: ") != 1 {
		t.Errorf("-R of a stream cut in its headers: exit %d:\n%s", rc, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a stream cut in its headers left a file")
	}
}

// Issue 21, --split: each part gets the priority pages of its own pfn
// range first (on this machine they all lie in one part: the others are
// the pfn-order ones); the complete set reassembles, by pagepipe (and by
// Debian's makedumpfile: TestPrioritySplitMakedumpfileReassembles), into
// the default dump byte for byte.
func TestPrioritySplit(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.KernelMachine("6.1", 128))
	args := []string{"-l", "-d", "1", "--splitblock-size", "1024"}
	whole := filepath.Join(dir, "whole")
	mustPagepipe(t, "-l", "-d", "1", vmcore, whole)
	pfnParts, parts := splitNames(dir, "pfn", 3), splitNames(dir, "prio", 3)
	mustPagepipe(t, append(append(append([]string{"--split"}, args...), vmcore), pfnParts...)...)
	mustPagepipe(t, append(append(append([]string{"--split", "--priority"}, args...), vmcore), parts...)...)
	moved := 0
	for i := range parts {
		a, b := readFile(t, pfnParts[i]), readFile(t, parts[i])
		if len(a) != len(b) {
			t.Fatalf("part %d: %d bytes, in pfn order %d", i, len(b), len(a))
		}
		if !bytes.Equal(a, b) {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no part differs from the pfn-order one: not prioritised")
	}
	ours := filepath.Join(dir, "re-pp")
	mustPagepipe(t, append(append([]string{"--reassemble"}, parts...), ours)...)
	if got, want := readFile(t, ours), readFile(t, whole); !bytes.Equal(got, want) {
		t.Fatalf("reassembled prioritised parts differ from the dump: %s", judge.FirstDiff(got, want))
	}
}

// rearrange runs pagepipe -R out with stream on stdin.
func rearrange(t *testing.T, stream []byte, out string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	rc := run([]string{"-R", out}, bytes.NewReader(stream), &stdout, &stderr)
	return rc, stdout.String() + stderr.String()
}

// samePages checks that dumps a and b hold the same pages, each with the
// same data, and the same bitmaps.
func samePages(t *testing.T, a, b string) {
	t.Helper()
	da, db := openDump(t, a), openDump(t, b)
	if !da.Dumpable.Equal(db.Dumpable) || !da.Present.Equal(db.Present) {
		t.Fatalf("%s and %s: bitmaps differ", a, b)
	}
	pa, pb := make([]byte, da.Header.BlockSize), make([]byte, db.Header.BlockSize)
	for pfn := da.Dumpable.NextSet(0); pfn < da.MaxMapnr; pfn = da.Dumpable.NextSet(pfn + 1) {
		if err := da.ReadPage(pfn, pa); err != nil {
			t.Fatal(err)
		}
		if err := db.ReadPage(pfn, pb); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pa, pb) {
			t.Fatalf("pfn %#x reads differently in %s and %s", pfn, a, b)
		}
	}
}

// -L limits a flattened stream as it limits a file, as makedumpfile limits
// its standard output: the stream stops at exactly the limit, inside a
// record, the dump says so and fails as an incomplete one, and -L turns
// --priority on, so that -R rebuilds the cut stream into an incomplete
// dump holding the whole priority set.
func TestStreamSizeLimit(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.KernelMachine("6.1", 128))
	args := []string{"-l", "-d", "1"}
	prio := filepath.Join(dir, "prio")
	mustPagepipe(t, append(args, "--priority", vmcore, prio)...)
	_, whole, _ := pagepipe(t, "inspect", prio)
	wantHeld, _ := heldOf(t, whole)
	full := mustPagepipe(t, append([]string{"-F"}, append(args, vmcore)...)...)

	limit := len(full) * 60 / 100
	rc, stream, stderr := pagepipe(t, append([]string{"-F", "-L", strconv.Itoa(limit)}, append(args, vmcore)...)...)
	if rc != exitFailed || !strings.Contains(stderr, "size limit("+strconv.Itoa(limit)+") reached") || !strings.Contains(stderr, "This is an incomplete dumpfile") {
		t.Fatalf("-F -L %d: exit %d, want %d and the reason:\n%s", limit, rc, exitFailed, stderr)
	}
	if len(stream) != limit {
		t.Fatalf("-F -L %d wrote %d bytes", limit, len(stream))
	}
	if !strings.Contains(stderr, "Priority pages first") {
		t.Errorf("-L did not turn --priority on:\n%s", stderr)
	}
	out := filepath.Join(dir, "rebuilt")
	if rc, msg := rearrange(t, []byte(stream), out); rc != exitFailed {
		t.Fatalf("-R of the limited stream: exit %d: %s", rc, msg)
	}
	mustPagepipe(t, "verify", vmcore, out)
	inspect := mustPagepipe(t, "inspect", out)
	if held, _ := heldOf(t, inspect); !strings.Contains(inspect, "INCOMPLETE") || held != wantHeld {
		t.Errorf("the rebuilt limited stream holds %d of the %d priority pages:\n%s", held, wantHeld, inspect)
	}

	// A limit below the flattened header: nothing is a dump.
	if rc, _, stderr := pagepipe(t, append([]string{"-F", "-L", "100"}, append(args, vmcore)...)...); rc != exitFailed || !strings.Contains(stderr, "size limit") {
		t.Errorf("-F -L 100: exit %d:\n%s", rc, stderr)
	}
}
