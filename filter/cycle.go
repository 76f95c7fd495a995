package filter

import (
	"fmt"
)

// Cycle is what makedumpfile looks at to choose how it builds its bitmaps
// (initial() and calculate_cyclic_buffer_size() in makedumpfile.c): in one
// cycle, through a bitmap file, or in cycles of a buffer. The two builders
// of the 1st bitmap disagree about a PT_LOAD's partial last page (the
// file's counts it, the buffer's rounds it down), so pagepipe decides as
// makedumpfile would on the same machine with the same command line, and
// its dumps keep the same bytes.
type Cycle struct {
	// WorkDir is --work-dir: makedumpfile then always uses a bitmap file.
	WorkDir bool
	// CyclicBufferKiB is --cyclic-buffer (0: not given). A buffer given
	// by hand always means cycles, even when one would do.
	CyclicBufferKiB int
	// Dumpfiles is the number of output files (--split: more than one);
	// the buffer is shared between them.
	Dumpfiles int
	// MemFree is MemFree of /proc/meminfo, in bytes.
	MemFree uint64
}

// cycleMaxBuffer is makedumpfile's 4 MiB cap on the cyclic buffer. (It
// also takes 200 KiB per --num-threads thread out of a memory limit above
// the cap, but never below it, so threads do not change the buffer.)
const cycleMaxBuffer = 4 << 20

// OneCycle reports whether makedumpfile would build the bitmaps of a
// machine of maxMapnr pfns (from the PT_LOADs, before the mem_map lowers
// it) in one cycle, from a bitmap file. It does when --work-dir is given,
// or when its buffer, min(4 MiB, 60 % of MemFree, 2 bits per pfn rounded
// down to bytes, divided among the dump files), holds both bitmaps whole:
// for machines up to 64 GiB with enough free memory, exactly when
// maxMapnr is a multiple of 4 and there is one dump file.
func (c Cycle) OneCycle(maxMapnr uint64) bool {
	if c.WorkDir {
		return true
	}
	if c.CyclicBufferKiB != 0 || maxMapnr == 0 {
		return false
	}
	limit := uint64(float64(c.MemFree) * 0.6) // as makedumpfile: an unsigned long long times 0.6
	bitmaps := maxMapnr * 2 / 8
	if c.Dumpfiles > 1 {
		bitmaps /= uint64(c.Dumpfiles)
	}
	return min(limit, cycleMaxBuffer, bitmaps)*8 >= maxMapnr*2
}

// The default budget for the 2nd bitmap (Budget) is a 32nd of the memory
// the process may use, within these bounds. The floor is makedumpfile's
// own cap on its buffer (4 MiB: 32 Mi pfns, a machine of 128 GiB in one
// cycle), so that a small capture kernel never cycles a machine that
// would fit; the cap, 512 GiB of the crashed machine per cycle, kept
// peak memory below 48 MiB at 4 workers on every machine measured, up to
// 4 TiB (docs/benchmarks.md).
const (
	budgetFloor = cycleMaxBuffer
	budgetCap   = 16 << 20
)

// Budget is the bytes of the 2nd bitmap a dump holds at a time: one bit
// per pfn, so a cycle is 8 × bytes pfns.
type Budget struct {
	Bytes uint64
	// Truncated: --cyclic-buffer was more than the free memory allows.
	Truncated bool
	// From says where Bytes came from, for the debug message.
	From string
}

// ChooseBudget honours --cyclic-buffer (c.CyclicBufferKiB) as makedumpfile
// does: its KiB, cut to MemFree divided by the dump files. Without it the
// budget is avail / 32 within [4 MiB, 16 MiB], avail being what the
// process may still use (Available).
func (c Cycle) ChooseBudget(avail uint64) Budget {
	if c.CyclicBufferKiB > 0 {
		b := Budget{Bytes: uint64(c.CyclicBufferKiB) << 10, From: "--cyclic-buffer"}
		if limit := c.MemFree / uint64(max(c.Dumpfiles, 1)); c.MemFree != 0 && b.Bytes > limit {
			b.Bytes, b.Truncated = max(limit, 8), true
		}
		return b
	}
	return Budget{Bytes: min(max(avail/32, budgetFloor), budgetCap), From: fmt.Sprintf("available memory %d bytes / 32, within [%d, %d]", avail, budgetFloor, budgetCap)}
}
