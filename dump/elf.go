package dump

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"time"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/filter"
	"pagepipe/pipeline"
	"pagepipe/sink"
)

// elfLayout lays out an ELF dump (-E) in makedumpfile's layout (see
// sink.ELFLayout). With dump level bit 1 a parallel zero scan first takes
// the zero pages out of the 2nd bitmap: the PT_LOADs depend on it, and
// their headers come first in the file. The copy pass then reads every
// PT_LOAD's pages in file order.
func (j *job) elfLayout(ctx context.Context) (layout, error) {
	v := j.in.vmcore
	if v == nil {
		return nil, unsupported("-E cannot be used on %s: it is a kdump-compressed dump, and an ELF dump is made from an ELF vmcore only (makedumpfile refuses it too)", j.o.Input)
	}
	plan := j.in.plan
	// Made in cycles, the 2nd bitmap is made whole here: the PT_LOADs
	// come from it, and their headers come first in the file.
	keep := plan.Dumpable.Cut(v.Pfns())
	if err := plan.Dumpable.Err(); err != nil {
		return nil, err
	}
	// Pages past mem_map: in cycles makedumpfile keeps them before its
	// zero scan, in one cycle its walk takes stale bits after it.
	oneCycle := j.in.partial.LastPresent
	scan, scanned := plan.Dumpable, plan.NumDumpable
	if !oneCycle && keepPastMemMap(keep, v, plan.MaxMapnr, j.in.partial) {
		scan = keep.Clone()
		scanned = scan.Count(0, scan.Len())
	}
	var zeros uint64
	if j.in.level.Has(filter.ExcludeZero) {
		const label = "Excluding zero pages"
		start := time.Now()
		z := &zeroMarker{keep: keep}
		cfg := j.pipelineConfig(scan.Cursor(), scanned, z, j.ev.Begin(label, scanned, j.in.mem.PageSize()))
		cfg.ExcludeZero = true
		if _, err := pipeline.Run(ctx, cfg); err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, fmt.Errorf("exclude zero pages: %w", err)
		}
		j.ev.End(label, time.Since(start))
		zeros = z.zeros
	}
	if j.in.vmemmap != nil {
		excludeVmemmap(j.ev, plan, j.in.vmemmap, keep)
	}
	if oneCycle {
		markPastMemMap(keep, v, plan.MaxMapnr)
	}
	segs := make([]sink.ELFSegment, len(v.Loads))
	for i, l := range v.Loads {
		segs[i] = sink.ELFSegment{Paddr: l.Paddr, Vaddr: l.Vaddr, MemSize: l.MemSize, Flags: l.Flags, Align: l.Align}
	}
	notes := v.Info.Notes
	noteSize := uint64(len(notes))
	eraseSize := 0
	if f := j.in.eraseFilter; f != nil {
		eraseSize = f.ELFNoteSize()
		noteSize = eraseinfoNoteEnd(len(notes), eraseSize)
	}
	l := sink.NewELFLayout(v.PageSize(), v.Ehdr, v.NotePhdr, noteSize, segs, keep)
	if eraseSize > 0 {
		// A page the file holds twice (the kernel image's PT_LOAD and the
		// RAM one that aliases it) is erased in both copies: makedumpfile
		// erases only the first one it writes.
		runs := mergedRuns(l.PageRuns())
		written := func(pfn uint64) bool {
			i := sort.Search(len(runs), func(i int) bool { return runs[i].Pfn+runs[i].Pages > pfn })
			return i < len(runs) && runs[i].Pfn <= pfn
		}
		j.erasure = j.in.eraseFilter.Apply(v.PageSize(), written)
		notes = eraseinfoNote(notes, j.erasure.Text(), eraseSize)
		// makedumpfile enlarges the PT_NOTE's p_filesz only.
		binary.LittleEndian.PutUint64(l.NotePhdr[40:], binary.LittleEndian.Uint64(v.NotePhdr[40:]))
	}
	j.ev.Notef(Debug, "ELF dump: %d PT_LOADs, %d bytes\n", len(l.Loads), l.Size)
	return &elfFile{l: l, notes: notes, zeros: zeros}, nil
}

// mergedRuns is the pages of runs (in file order, some overlapping) as
// disjoint runs in pfn order.
func mergedRuns(runs []sink.ELFPageRun) []sink.ELFPageRun {
	runs = slices.Clone(runs)
	slices.SortFunc(runs, func(a, b sink.ELFPageRun) int { return cmp.Compare(a.Pfn, b.Pfn) })
	var out []sink.ELFPageRun
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].Pfn+out[n-1].Pages >= r.Pfn {
			out[n-1].Pages = max(out[n-1].Pages, r.Pfn+r.Pages-out[n-1].Pfn)
			continue
		}
		out = append(out, r)
	}
	return out
}

// zeroMarker is the zero scan's pipeline writer: it clears the zero pages
// the pipeline marks in keep (not in the bitmap the producer walks).
type zeroMarker struct {
	keep  *bitmap.Bitmap
	zeros uint64
}

func (z *zeroMarker) WriteChunk(c chunk.Chunk) error {
	for i, p := range c.Pages {
		if p.Zero {
			z.keep.Clear(c.Pfns[i])
			z.zeros++
		}
	}
	return nil
}

// elfFile is an ELF dump before its file exists.
type elfFile struct {
	l     *sink.ELFLayout
	notes []byte
	zeros uint64 // found by the zero scan
}

func (e *elfFile) open(outs []sink.Output) (shape, error) {
	w, err := sink.NewELF(outs[0], e.l, e.notes)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// pages are the pages of the layout's page runs, in file order.
func (e *elfFile) pages() (pipeline.Pfns, uint64, bool) {
	runs := e.l.PageRuns()
	var total uint64
	for _, r := range runs {
		total += r.Pages
	}
	return &runCursor{runs: runs}, total, true
}

// runCursor hands out the pfns of page runs in order.
type runCursor struct {
	runs []sink.ELFPageRun
	done uint64 // pages of runs[0] handed out
}

func (c *runCursor) Next(dst []uint64) []uint64 {
	for len(dst) < cap(dst) && len(c.runs) > 0 {
		r := c.runs[0]
		for ; c.done < r.Pages && len(dst) < cap(dst); c.done++ {
			dst = append(dst, r.Pfn+c.done)
		}
		if c.done == r.Pages {
			c.runs, c.done = c.runs[1:], 0
		}
	}
	return dst
}

func (e *elfFile) report(r *Result) {
	_, inFile, _ := e.pages()
	r.Pages.Excluded.Zero = e.zeros
	r.ELF = &ELFCounts{Excluded: e.l.ExcludedPages, InFile: inFile}
}

func (*elfFile) what() string { return "headers" }
