package dump

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"pagepipe/pipeline"
	"pagepipe/priority"
	"pagepipe/sink"
)

// splitLayout lays out a dump split over the output paths (--split): the
// pfn ranges balance the dumpable pages per file on splitblock
// boundaries, as makedumpfile chooses them, and one parallel copy pass
// writes every file (makedumpfile forks a serial writer per file instead,
// and refuses --num-threads with --split).
func (j *job) splitLayout() (layout, error) {
	o := &j.o.Out
	if o.Stream != nil {
		return nil, errors.New("--split cannot be combined with -F: each split file needs its own output")
	}
	if o.SizeLimit > 0 {
		// A size limit on split files (each file's, or all of them
		// together?) is not built. Refused rather than ignored: -L guards
		// a disk.
		return nil, errors.New("-L cannot be combined with --split in pagepipe yet")
	}
	kb := o.SplitBlockKiB
	if kb == 0 {
		kb = 1 << 20 // makedumpfile: 0 means the default, 1 GiB
	}
	plan, meta := j.in.plan, j.in.meta
	bs := meta.BlockSize
	if kb < 0 || uint64(kb)<<10%bs != 0 {
		return nil, fmt.Errorf("--splitblock-size %d: the splitblock size must be a positive multiple of the page size (%d KiB)", o.SplitBlockKiB, bs>>10)
	}
	bounds, err := sink.SplitBounds(plan.Dumpable, plan.MaxMapnr, uint64(kb)<<10/bs, len(o.Paths))
	if err == nil {
		err = plan.Dumpable.Err() // made in cycles: see filter.NewPlan
	}
	if err != nil {
		return nil, err
	}
	for i, name := range o.Paths {
		j.ev.Notef(Debug, "%s: pfns [%#x, %#x), %d pages\n", name, bounds[i], bounds[i+1], plan.Dumpable.Count(bounds[i], bounds[i+1]))
	}
	if err := distinctFiles(append([]string{j.o.Input}, o.Paths...)); err != nil {
		return nil, err
	}
	return &splitFiles{meta: meta, bounds: bounds, prio: j.priorityOrder()}, nil
}

// splitFiles is a split dump before its files exist; prio, when set, is
// the copy pass's prioritised order (each part gets its own priority
// pages first: sink.Split.SetPriority).
type splitFiles struct {
	meta   *sink.Meta
	bounds []uint64
	prio   *priority.Order
}

func (l *splitFiles) open(outs []sink.Output) (shape, error) {
	s, err := sink.NewSplit(outs, l.meta, l.bounds)
	if err != nil {
		return nil, err
	}
	if l.prio != nil {
		if err := s.SetPriority(l.prio.Set()); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (l *splitFiles) pages() (pipeline.Pfns, uint64, bool) {
	if l.prio != nil {
		return l.prio, l.meta.NumDumpable, false
	}
	return l.meta.Dumpable.Cursor(), l.meta.NumDumpable, false
}

func (*splitFiles) report(*Result) {}
func (*splitFiles) what() string   { return "headers and bitmaps" }

// distinctFiles refuses a command line that names one file twice among
// the vmcore and the outputs (with -f, a second open would truncate it).
func distinctFiles(paths []string) error {
	for i, a := range paths {
		sa, errA := os.Stat(a)
		for _, b := range paths[:i] {
			if filepath.Clean(a) == filepath.Clean(b) {
				return fmt.Errorf("%s is named twice", a)
			}
			if sb, errB := os.Stat(b); errA == nil && errB == nil && os.SameFile(sa, sb) {
				return fmt.Errorf("%s and %s are the same file", b, a)
			}
		}
	}
	return nil
}
