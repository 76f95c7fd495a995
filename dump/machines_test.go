package dump

import (
	"testing"

	"pagepipe/kernel"
)

// archTable agrees with package kernel: the architectures pagepipe dumps
// any page size of are the ones kernel.ArchByName knows, so a port added
// there (as riscv64 was) fails here until its row is flipped, and no row hands
// over what pagepipe dumps.
func TestArchTableMatchesKernel(t *testing.T) {
	for _, r := range archTable {
		_, known := kernel.ArchByName(r.name)
		if known != (len(r.pagepipe) > 0) {
			t.Errorf("%s: kernel.ArchByName %v, pagepipe page sizes %v: flip the row", r.name, known, r.pagepipe)
		}
		for _, s := range r.pagepipe {
			if !hasSize(r.kernel, s) {
				t.Errorf("%s: pagepipe dumps %d-byte pages, which its kernels do not use", r.name, s)
			}
		}
	}
	for _, name := range []string{"x86_64", "aarch64", "ppc64le", "riscv64", "s390x"} {
		if archRowOf(name) == nil {
			t.Errorf("%s: no row", name)
		}
	}
}
