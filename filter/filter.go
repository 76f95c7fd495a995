// Package filter decides which pages of the crashed machine go into the
// dump: the dump level's bits, the bitmaps they produce, and the counts the
// report prints.
package filter

import (
	"context"
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

	cycles *cycles
}

// ScanWall is the wall time the page scan has taken so far: with the 2nd
// bitmap in cycles, each cycle is scanned again whenever a reader comes
// to it (NewPlan's count, the headers, the copy pass), and this counts
// every time, as makedumpfile's STEP lines count both of its scans.
func (p *Plan) ScanWall() time.Duration { return p.cycles.took }

// Cycles is how many cycles the 2nd bitmap has been made in so far: 1
// when it is held whole.
func (p *Plan) Cycles() int { return max(p.Dumpable.Fills(), 1) }

// NewPlan makes the plan: every pfn with data in the vmcore, less what the
// dump level excludes. k is the crashed kernel as seen through VMCOREINFO,
// or nil when the vmcore has none (then only levels 0 and 1 are possible).
// With a kernel, memory past its mem_map is not dumped, and struct pages
// are scanned on workers goroutines whenever makedumpfile would scan them.
// pp is how the bitmaps take the pages PT_LOADs hold in part
// (source.Memory.Bitmaps; Cycle.OneCycle says what makedumpfile does).
//
// window is how many pfns of the 2nd bitmap are held at a time (0: all):
// below MaxMapnr, Dumpable is made in cycles of window pfns
// (bitmap.NewWindowed), scanned again each time a reader comes to a
// cycle, and its memory is bounded by window bits whatever the machine's
// size. NewPlan goes through the cycles once to count the dumpable pages
// (the descriptor area's size, needed before any data is written, as
// makedumpfile's cyclic mode counts them first); the bitmap's readers (the
// headers, the copy pass) make each cycle again. The bits are the same
// for any window: the scan's units are the same, a free block or compound
// page crossing a cycle's end is cleared before the next cycle is scanned
// as it would have been before the rest of its unit was, and one crossing
// a unit's end after, as without cycles (filter/scan.go's spills).
func NewPlan(ctx context.Context, in source.Memory, level Level, k *Kernel, workers int, pp source.PartialPages, window uint64) (*Plan, error) {
	if k == nil && level.NeedsPageScan() {
		return nil, fmt.Errorf("dump level %d needs the kernel's VMCOREINFO, which this vmcore lacks (makedumpfile: specify '-x' or '-i')", level)
	}
	start, startCPU := time.Now(), cpuclock.Process()
	p := &Plan{Level: level, MaxMapnr: in.Pfns()}
	if k != nil {
		p.MaxMapnr = min(p.MaxMapnr, k.MemMap.MaxPFN())
	}
	c := &cycles{ctx: ctx, level: level, workers: workers}
	p.Present, c.base = in.Bitmaps(p.MaxMapnr, pp)
	if k != nil && k.NeedsScan(level) {
		c.k = k
	}
	if window == 0 || window >= p.MaxMapnr {
		p.Dumpable = c.base
		if err := c.make(p.Dumpable, 0, p.MaxMapnr); err != nil {
			return nil, err
		}
	} else {
		c.pool = &scanners{}
		p.Dumpable = bitmap.NewWindowed(p.MaxMapnr, window, func(m *bitmap.Bitmap, lo, hi uint64) error {
			m.CopyRange(c.base, lo, hi)
			return c.make(m, lo, hi)
		})
	}
	p.NumDumpable = p.Dumpable.Count(0, p.Dumpable.Len())
	if err := p.Dumpable.Err(); err != nil {
		return nil, err
	}
	p.Excluded, p.Scanned, p.ScanCPU, p.cycles = c.counts, c.k != nil, c.cpu, c
	p.Wall, p.ProcessCPU = time.Since(start), cpuclock.Process().Sub(startCPU)
	return p, nil
}

// cycles makes the 2nd bitmap's pfns, all at once or a cycle at a time.
type cycles struct {
	ctx     context.Context
	level   Level
	workers int
	base    *bitmap.Bitmap // the 2nd bitmap before the scan (from the PT_LOADs)
	k       *Kernel        // nil: no scan
	// made is where the first pass through the cycles has come to: below
	// it the counts and the spills are known, and a cycle made again
	// takes the spills from there and adds nothing to the counts.
	made   uint64
	spills []spill
	counts Counts
	cpu    cpuclock.Usage
	pool   *scanners     // nil when all is made at once
	took   time.Duration // in make, every time
}

// make scans the pfns [lo, hi) of m, which holds them as the PT_LOADs
// gave them, and applies the spills that fall in them: the edge spills of
// the cycles before it first, the others after the scan.
func (c *cycles) make(m *bitmap.Bitmap, lo, hi uint64) error {
	if c.k == nil {
		return nil
	}
	start := time.Now()
	defer func() { c.took += time.Since(start) }()
	first := lo >= c.made
	var counts Counts
	apply := func(edge bool) {
		for _, sp := range c.spills {
			if sp.edge == edge && sp.lo < hi && sp.hi > lo {
				*sp.counter(&counts) += clearCount(m, max(sp.lo, lo), min(sp.hi, hi))
			}
		}
	}
	apply(true)
	got, spills, cpu, err := c.k.scan(c.ctx, c.level, m, c.workers, lo, hi, c.pool)
	if err != nil {
		return fmt.Errorf("exclude unnecessary pages: %w", err)
	}
	if first {
		c.spills = append(c.spills, spills...)
	}
	apply(false)
	if first {
		counts.add(got)
		c.counts.add(counts)
		c.cpu = cpuclock.Usage{User: c.cpu.User + cpu.User, Sys: c.cpu.Sys + cpu.Sys}
		c.made = hi
	}
	return nil
}
