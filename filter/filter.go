// Package filter decides which pages of the crashed machine go into the
// dump: the dump level's bits, the bitmaps they produce, and the counts the
// report prints.
package filter

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"pagepipe/bitmap"
	"pagepipe/internal/cpuclock"
	"pagepipe/source"
)

// Level is a makedumpfile dump level, 0–31: a set of page classes to leave out.
type Level int

// The dump level bits.
const (
	ExcludeZero     Level = 1  // pages filled with zero
	ExcludeCache    Level = 2  // page cache without private data
	ExcludeCachePri Level = 4  // all page cache
	ExcludeUser     Level = 8  // anonymous and hugetlbfs pages
	ExcludeFree     Level = 16 // free pages
	MaxLevel        Level = 31
)

// Has reports whether every bit of b is set in l.
func (l Level) Has(b Level) bool { return l&b == b }

// NeedsPageScan reports whether the level needs the kernel's struct page
// array (and so VMCOREINFO).
func (l Level) NeedsPageScan() bool { return l&^ExcludeZero != 0 }

// ParseLevels parses -d's argument: one level or a comma-separated list,
// tried in order when the output runs out of space.
func ParseLevels(s string) ([]Level, error) {
	var out []Level
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > int(MaxLevel) {
			return nil, fmt.Errorf("dump level %q is invalid (0 to 31)", f)
		}
		out = append(out, Level(n))
	}
	return out, nil
}

// Plan is the outcome of the filter pass: which pfns exist and which are
// dumped. Zero pages are found later, while copying, because in the kdump
// format they stay dumpable and share one descriptor.
type Plan struct {
	Level    Level
	MaxMapnr uint64
	Present  *bitmap.Bitmap // 1st bitmap
	Dumpable *bitmap.Bitmap // 2nd bitmap
	// NumDumpable is the number of set bits in Dumpable: the number of
	// page descriptors, which fixes where page data starts.
	NumDumpable uint64
	// Excluded counts the pages the page scan left out, by class (zero
	// pages are counted by the copy pass).
	Excluded Counts
	// Scanned tells whether struct pages were read.
	Scanned bool
	// VmemmapExcluded is the number of vmemmap pages -e left out
	// (ExcludeVmemmap), as makedumpfile counts them.
	VmemmapExcluded uint64

	// Wall is how long NewPlan took and ProcessCPU the process's CPU time
	// over it; ScanCPU is the scan workers' part of that, measured on
	// their own threads. The rest is serial: the bitmaps from the
	// PT_LOADs, the spills, the count.
	Wall       time.Duration
	ProcessCPU cpuclock.Usage
	ScanCPU    cpuclock.Usage
}

// NewPlan makes the plan: every pfn with data in the vmcore, less what the
// dump level excludes. k is the crashed kernel as seen through VMCOREINFO,
// or nil when the vmcore has none (then only levels 0 and 1 are possible).
// With a kernel, memory past its mem_map is not dumped, and struct pages
// are scanned on workers goroutines whenever makedumpfile would scan them.
// pp is how the bitmaps take the pages PT_LOADs hold in part
// (source.Memory.Bitmaps; Cycle.OneCycle says what makedumpfile does).
func NewPlan(ctx context.Context, in source.Memory, level Level, k *Kernel, workers int, pp source.PartialPages) (*Plan, error) {
	if k == nil && level.NeedsPageScan() {
		return nil, fmt.Errorf("dump level %d needs the kernel's VMCOREINFO, which this vmcore lacks (makedumpfile: specify '-x' or '-i')", level)
	}
	start, startCPU := time.Now(), cpuclock.Process()
	p := &Plan{Level: level, MaxMapnr: in.Pfns()}
	if k != nil {
		p.MaxMapnr = min(p.MaxMapnr, k.MemMap.MaxPFN())
	}
	p.Present, p.Dumpable = in.Bitmaps(p.MaxMapnr, pp)
	if k != nil && k.NeedsScan(level) {
		counts, cpu, err := k.scan(ctx, level, p.Dumpable, workers)
		if err != nil {
			return nil, fmt.Errorf("exclude unnecessary pages: %w", err)
		}
		p.Excluded, p.Scanned, p.ScanCPU = counts, true, cpu
	}
	p.NumDumpable = p.Dumpable.Count(0, p.Dumpable.Len())
	p.Wall, p.ProcessCPU = time.Since(start), cpuclock.Process().Sub(startCPU)
	return p, nil
}

// IsZero reports whether page is all zero bytes. It ORs 64-bit words, four
// at a time: the check runs on every copied page, so it must run at memory
// speed.
func IsZero(page []byte) bool {
	le := binary.LittleEndian
	for len(page) >= 32 {
		if le.Uint64(page)|le.Uint64(page[8:])|le.Uint64(page[16:])|le.Uint64(page[24:]) != 0 {
			return false
		}
		page = page[32:]
	}
	for _, c := range page {
		if c != 0 {
			return false
		}
	}
	return true
}
