package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"pagepipe/chunk"
	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
	"pagepipe/source"
)

// TestInspectCountsSharedZeroPages checks inspect's "zero (shared)" line
// against the pages themselves, on a whole dump and on one cut short by
// -L, whose 2nd bitmap was shortened after the data area was laid out.
func TestInspectCountsSharedZeroPages(t *testing.T) {
	dir := t.TempDir()
	vmcore := writeShape(t, dir, "vmcore", synth.Shapes()["holes"])
	for _, tc := range []struct {
		name string
		args []string
		rc   int
	}{
		{"whole", nil, exitOK},
		{"cut", []string{"-L", "1200K"}, exitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".dump")
			args := append([]string{"-c", "-d", "1"}, tc.args...)
			if rc, _, stderr := pagepipe(t, append(args, vmcore, out)...); rc != tc.rc {
				t.Fatalf("exit %d, want %d: %s", rc, tc.rc, stderr)
			}
			d, err := source.OpenDump(out)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if incomplete := d.Header.Status&kdumpfmt.StatusIncomplete != 0; incomplete != (tc.rc != exitOK) {
				t.Fatalf("INCOMPLETE is %v", incomplete)
			}
			// Pages excluded as zero read back as zeros; kept pages never do.
			var want uint64
			page := make([]byte, d.Header.BlockSize)
			for pfn := d.Dumpable.NextSet(0); pfn < d.MaxMapnr; pfn = d.Dumpable.NextSet(pfn + 1) {
				desc, err := d.Desc(pfn)
				if err != nil {
					t.Fatal(err)
				}
				if desc.Offset == 0 {
					continue
				}
				if err := d.ReadPage(pfn, page); err != nil {
					t.Fatal(err)
				}
				if chunk.IsZero(page) {
					want++
				}
			}
			if want == 0 {
				t.Fatal("the dump holds no zero page: the test proves nothing")
			}
			report := mustPagepipe(t, "inspect", out)
			m := regexp.MustCompile(`zero \(shared\) : (\d+)`).FindStringSubmatch(report)
			if m == nil {
				t.Fatalf("no zero line in:\n%s", report)
			}
			if got, _ := strconv.ParseUint(m[1], 10, 64); got != want {
				t.Errorf("inspect counts %d shared zero pages, the dump holds %d\n%s", got, want, report)
			}
		})
	}
}
