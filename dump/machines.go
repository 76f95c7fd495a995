package dump

import (
	"errors"
	"fmt"
	"io"
	"os"

	"pagepipe/kdumpfmt"
	"pagepipe/kernel"
	"pagepipe/source"
)

// An archRow is one architecture makedumpfile dumps, by uname -m name, with
// the page sizes its kernels use and those pagepipe dumps.
type archRow struct {
	name     string
	kernel   []uint64 // page sizes its kernels are built with
	pagepipe []uint64 // of those, the ones pagepipe dumps; none: makedumpfile dumps them all
}

const (
	kib4  = 4 << 10
	kib8  = 8 << 10
	kib16 = 16 << 10
	kib64 = 64 << 10
)

// archTable is the one place that says which vmcores pagepipe dumps and
// which are makedumpfile's (Foreign): when pagepipe comes to dump one more
// (ppc64le with 4 KiB pages), its row's pagepipe sizes gain it
// (TestArchTableMatchesKernel checks the rows against package kernel). A
// vmcore of a page size no kernel of its architecture uses is damaged,
// not foreign.
var archTable = []archRow{
	{"x86_64", []uint64{kib4}, []uint64{kib4}},
	{"aarch64", []uint64{kib4, kib16, kib64}, []uint64{kib4, kib16, kib64}},
	{"ppc64le", []uint64{kib4, kib64}, []uint64{kib64}},
	{"riscv64", []uint64{kib4}, []uint64{kib4}},
	{"s390x", []uint64{kib4}, nil},
	{"ppc64", []uint64{kib4, kib64}, nil},
	{"i386", []uint64{kib4}, nil},
	{"arm", []uint64{kib4}, nil},
	{"ppc", []uint64{kib4, kib16, kib64}, nil},
	{"loongarch64", []uint64{kib4, kib16, kib64}, nil},
	{"mips64", []uint64{kib4, kib16, kib64}, nil},
	{"sparc64", []uint64{kib8}, nil},
	{"ia64", []uint64{kib4, kib16, kib64}, nil},
}

func archRowOf(name string) *archRow {
	for i := range archTable {
		if archTable[i].name == name {
			return &archTable[i]
		}
	}
	return nil
}

func hasSize(sizes []uint64, n uint64) bool {
	for _, s := range sizes {
		if s == n {
			return true
		}
	}
	return false
}

// Foreign opens the input (a vmcore, or a dump to filter again) as Run
// would, before any output exists, and says why makedumpfile rather than
// pagepipe must dump it: it is of an architecture pagepipe does not dump,
// or of a page size pagepipe does not dump that architecture with. It
// returns "" when pagepipe dumps the input, and when the input is refused
// for another reason (damaged, hostile, unreadable: Run says why). A
// flattened input is not looked into (rebuilding it would copy the whole
// dump): Run refuses a foreign one. vmcoreinfo is -i's file.
func Foreign(input, vmcoreinfo string) string {
	if isFlattened(input) {
		return ""
	}
	m, err := source.OpenMemory(input)
	var ae *source.ArchError
	if errors.As(err, &ae) {
		if row := archRowOf(ae.Arch); row != nil && len(row.pagepipe) == 0 {
			return fmt.Sprintf("%s is a vmcore of %s (%s), which pagepipe does not dump", input, ae.Arch, ae.From)
		}
		return ""
	}
	if err != nil {
		return ""
	}
	defer m.Close()
	arch, size := m.Arch().Name(), m.PageSize()
	if _, _, _, n := m.Notes(); n == 0 && vmcoreinfo != "" {
		if b, err := os.ReadFile(vmcoreinfo); err == nil {
			if vi, err := kernel.ParseVMCOREINFO(b); err == nil && vi.PageSize() > 0 {
				size = uint64(vi.PageSize())
			}
		}
	}
	row := archRowOf(arch)
	if row == nil || hasSize(row.pagepipe, size) || !hasSize(row.kernel, size) {
		return ""
	}
	return fmt.Sprintf("%s is a vmcore of %s with %d KiB pages, which pagepipe does not dump", input, arch, size>>10)
}

// isFlattened says whether path starts as a flattened dump does.
func isFlattened(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, len(kdumpfmt.FlatSignature))
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == kdumpfmt.FlatSignature
}
