package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

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
