//go:build integration

package e2e

import (
	"path/filepath"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
)

// Refiltering pagepipe's -d 1 dump at -d 31 gives the direct -d 31 dump,
// byte for byte (same pfns, same contents, same header).
func TestRealRefilterDumpToHigherLevel(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	d1 := dump(t, "pagepipe", vmcore, "-c", "-d", "1")
	direct := dump(t, "pagepipe", vmcore, "-c", "-d", "31")
	refiltered := dump(t, "pagepipe", d1, "-c", "-d", "31")
	equalFiles(t, refiltered, direct)

	// A flattened dump is taken as input as well.
	flat := filepath.Join(t.TempDir(), "d1.flat")
	pipe(t, bin+" -F -c -d 1 "+vmcore+" > "+flat)
	equalFiles(t, dump(t, "pagepipe", flat, "-c", "-d", "31"), direct)
}

// A dump captured fast with --lz4 (which no other reader knows) converts
// to -l and to -c, and the results pass the judges: libkdumpfile and drgn
// read every page equal to the vmcore, crash sees the same machine.
func TestRealLz4ConvertsToStandardCodecs(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	vmlinux := fixture.DebugVmlinux(t)
	lz4 := dump(t, "pagepipe", vmcore, "--lz4", "-d", "31")
	reference := dump(t, "makedumpfile", vmcore, "-d", "31")
	want := judge.ExpectedPages(t, vmcore, reference)
	crashWant := judge.Crash(t, vmlinux, reference, "sys", "log")
	for _, c := range []string{"-l", "-c"} {
		t.Run(c, func(t *testing.T) {
			converted := dump(t, "pagepipe", lz4, c)
			ranges := judge.AllPFNs(t, converted)
			if d := want.Diff(judge.Libkdumpfile(t, converted, ranges)); d != "" {
				t.Errorf("libkdumpfile:\n%s", d)
			}
			if d := want.Diff(judge.Drgn(t, converted, ranges)); d != "" {
				t.Errorf("drgn:\n%s", d)
			}
			if got := judge.Crash(t, vmlinux, converted, "sys", "log"); got != crashWant {
				t.Errorf("crash:\n%s", head(got, 20))
			}
			// Converting is the same as dumping with that codec directly.
			equalFiles(t, converted, dump(t, "pagepipe", vmcore, c, "-d", "31"))
		})
	}
}
