package priority

import (
	"pagepipe/debuginfo"
	"pagepipe/kernel"
)

// symbols is the crashed kernel's own symbol table (debuginfo.Kallsyms):
// the addresses VMCOREINFO does not give, __per_cpu_offset,
// pcpu_unit_size, current_task.
type symbols = debuginfo.Kallsyms

var errNoKallsyms = debuginfo.ErrNoKallsyms

const maxSymbols = debuginfo.MaxSymbols

// readKallsyms decodes the symbols named in want through r.
func readKallsyms(vi *kernel.VMCOREINFO, r kernel.VirtReader, want ...string) (symbols, error) {
	return debuginfo.ReadKallsyms(vi.Symbol, r, want...)
}
