package filter

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
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

// MemFree reads MemFree from /proc/meminfo, in bytes, as makedumpfile's
// get_free_memory_size does.
func MemFree() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemFree:"))
		if !ok {
			continue
		}
		n, unit, _ := bytes.Cut(bytes.TrimSpace(v), []byte(" "))
		kb, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || string(bytes.TrimSpace(unit)) != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: cannot read %q", sc.Text())
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemFree line")
}
