package dump

import (
	"io"
	"os"
	"time"

	"pagepipe/priority"
)

// prioritised says whether this dump's copy pass writes the priority set
// first (Options.Priority): a kdump-compressed file, its flattened stream
// (-F) or a split dump (an ELF file is written in pfn order), and by
// default only where the output may end early: -L, or an output that is
// a device or a pipe (for -F, stdout: a stream redirected into a regular
// file stays in pfn order, makedumpfile's records).
func (j *job) prioritised() bool {
	o := j.o
	if o.Out.Shape == ELF {
		return false
	}
	switch o.Priority {
	case PriorityOn:
		return true
	case PriorityOff:
		return false
	}
	if j.in.isLive() {
		// The running kernel: what an analysis needs first (the log,
		// the tasks, per-CPU state) is read first, close together in
		// time, so it is the most consistent part of the dump.
		return true
	}
	if o.Out.SizeLimit > 0 {
		return true
	}
	if o.Out.Stream != nil {
		return streamMayEndEarly(o.Out.Stream)
	}
	for _, p := range o.Out.Paths {
		if mayEndEarly(p) {
			return true
		}
	}
	return false
}

// mayEndEarly: the output is a device or a pipe, whose end the dump does
// not know beforehand (a regular file, or one not yet made, is not).
func mayEndEarly(path string) bool {
	return endsEarly(os.Stat(path))
}

// streamMayEndEarly: a stream that is a pipe or a device (an *os.File
// that is not a regular file); a writer of another kind (a test's buffer)
// is taken not to.
func streamMayEndEarly(w io.Writer) bool {
	f, ok := w.(interface{ Stat() (os.FileInfo, error) })
	return ok && endsEarly(f.Stat())
}

// endsEarly: what a Stat found is neither a regular file nor a directory.
func endsEarly(st os.FileInfo, err error) bool {
	return err == nil && !st.Mode().IsRegular() && !st.IsDir()
}

// priorityOrder finds the priority set and orders the copy pass by it; nil
// when the dump is not prioritised or the set cannot be found (the dump is
// then written in pfn order, which an explicit --priority is told).
func (j *job) priorityOrder() *priority.Order {
	if !j.prioritised() {
		return nil
	}
	start := time.Now()
	set, err := priority.Find(j.in.mem, j.in.vi)
	if err != nil {
		class := Debug
		if j.o.Priority == PriorityOn {
			class = Common
		}
		j.ev.Notef(class, "WARNING: --priority: %v; the pages are written in pfn order.\n", err)
		return nil
	}
	ord := priority.NewOrder(set, j.in.meta.Dumpable)
	// The search's garbage (the log's records, the walk's errors) is
	// collected here, not in the middle of the copy pass; its memory stays
	// for the copy pass's buffers.
	if p := j.o.Process; p != nil {
		p.Collect()
	}
	j.res.Priority = PriorityStats{Found: set.Len(), Pages: ord.Len(), Wall: time.Since(start)}
	j.ev.Notef(Progress, "Priority pages first: %d pages of %d (%s)\n", ord.Len(), j.in.meta.NumDumpable, time.Since(start).Round(time.Millisecond))
	for _, c := range set.Classes {
		j.ev.Notef(Debug, "priority: %s: %d pages\n", c.Name, len(c.Pfns))
	}
	for _, m := range set.Missing {
		j.ev.Notef(Debug, "priority: not found: %s\n", m)
	}
	return ord
}

// PriorityStats is what the priority set came to (Result.Priority).
type PriorityStats struct {
	// Found is the set's pages; Pages, those of them the dump holds
	// (dumpable), written first.
	Found, Pages uint64
	Wall         time.Duration
}
