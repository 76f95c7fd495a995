//go:build integration

package e2e

import (
	"strings"
	"testing"

	"pagepipe/internal/fixture"
	"pagepipe/internal/judge"
)

// Every codec's dump of the real fixture is read by crash, libkdumpfile and
// drgn, every page equal to the vmcore. makedumpfile 1.7.2 has neither
// snappy nor zstd, so its uncompressed dump at the same level is the
// reference for which pages must be there and for what crash prints.
func TestRealEveryCodecReadByEveryReader(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	vmlinux := fixture.DebugVmlinux(t)
	reference := dump(t, "makedumpfile", vmcore, "-d", "31")
	want := judge.ExpectedPages(t, vmcore, reference)
	cmds := []string{"sys", "log", "kmem -i"}
	crashWant := judge.Crash(t, vmlinux, reference, cmds...)
	for _, c := range []string{"-c", "-l", "-p", "-z"} {
		t.Run(c, func(t *testing.T) {
			ours := dump(t, "pagepipe", vmcore, c, "-d", "31")
			ranges := judge.AllPFNs(t, ours)
			if d := want.Diff(judge.Libkdumpfile(t, ours, ranges)); d != "" {
				t.Errorf("libkdumpfile:\n%s", d)
			}
			if d := want.Diff(judge.Drgn(t, ours, ranges)); d != "" {
				t.Errorf("drgn:\n%s", d)
			}
			if got := judge.Crash(t, vmlinux, ours, cmds...); got != crashWant {
				t.Errorf("crash output differs from makedumpfile's dump:\n%s", head(got, 30))
			}
			if !strings.Contains(report("pagepipe", vmcore, c, "-d", "31"), "Completed") {
				t.Error("no completion message")
			}
		})
	}
}

// makedumpfile 1.7.8 decompresses every page of pagepipe's compressed
// dumps with its own decompressors (zlib, liblzo2, libzstd; no Debian
// build has snappy): re-filtering each at the same dump level writes its
// uncompressed dump byte for byte as it writes it from the vmcore. A page
// it could not decode would fail the run or change the bytes.
func TestRealMakedumpfileDecompressesEveryPage(t *testing.T) {
	vmcore := realVmcore(t).Vmcore
	mdf := fixture.Peer(t, "makedumpfile-sid")
	direct := dump(t, mdf, vmcore, "-d", "31")
	for _, c := range []string{"-c", "-l", "-z"} {
		t.Run(c, func(t *testing.T) {
			ours := dump(t, "pagepipe", vmcore, c, "-d", "31")
			equalFiles(t, dump(t, mdf, ours, "-d", "31"), direct)
		})
	}
}
