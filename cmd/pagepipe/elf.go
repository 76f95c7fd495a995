package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"pagepipe/bitmap"
	"pagepipe/filter"
	"pagepipe/pipeline"
	"pagepipe/sink"
	"pagepipe/source"
)

// checkELFOptions refuses the options -E cannot go with: compression (ELF
// holds raw pages; makedumpfile refuses -c/-l/-p/-z with -E too) and
// --split. Unlike makedumpfile, --num-threads is fine: both passes of an
// ELF dump run on the parallel pipeline.
func checkELFOptions(o *options) error {
	if !o.elf {
		return nil
	}
	if o.compress != 0 {
		return fmt.Errorf("%w: -E writes pages uncompressed: it cannot be used with -c, -l, -p, -z or --lz4", errUsage)
	}
	if o.split {
		return fmt.Errorf("%w: --split cannot be used with -E", errUsage)
	}
	return nil
}

// writeELF writes the dump as ELF (-E), in makedumpfile's layout (see
// sink.ELFLayout), in two parallel passes: with dump level bit 1 a zero
// scan takes the zero pages out of the 2nd bitmap (the PT_LOADs depend on
// it, and their headers come first in the file), then the copy pass writes
// every PT_LOAD's pages in file order.
func (j *dumpJob) writeELF(ctx context.Context) error {
	if err := checkELFOptions(j.opts); err != nil {
		return err
	}
	v, ok := j.mem.(*source.Vmcore)
	if !ok {
		return fmt.Errorf("-E cannot be used on %s: it is a kdump-compressed dump, and an ELF dump is made from an ELF vmcore only (makedumpfile refuses it too)", j.vmcore)
	}
	keep, zeros, err := j.elfKeep(ctx, v)
	if err != nil {
		return err
	}
	segs := make([]sink.ELFSegment, len(v.Loads))
	for i, l := range v.Loads {
		segs[i] = sink.ELFSegment{Paddr: l.Paddr, Vaddr: l.Vaddr, MemSize: l.MemSize, Flags: l.Flags, Align: l.Align}
	}
	layout := sink.NewELFLayout(v.Ehdr, v.NotePhdr, uint64(len(v.Info.Notes)), segs, keep)
	j.con.debug("ELF dump: %d PT_LOADs, %d bytes\n", len(layout.Loads), layout.Size)

	out, finish, err := j.output()
	if err != nil {
		return err
	}
	w, err := sink.NewELF(out, layout, v.Info.Notes)
	if err != nil {
		return j.stop(nil, finish, fmt.Errorf("%s: %w", j.out, err))
	}
	// fail ends the dump as stop does, with sink.ELF.Abort.
	fail := func(err error) error {
		if ctx.Err() != nil {
			err = context.Cause(ctx) // the signal that stopped us
		}
		return j.stop(w.Abort, finish, err)
	}
	if err := j.elfCopy(ctx, layout, w); err != nil {
		return fail(err)
	}
	if err := w.Close(); err != nil {
		return fail(fmt.Errorf("%s: %w", j.out, err))
	}
	if err := finish(); err != nil {
		return fmt.Errorf("%s: %w", j.out, err)
	}
	var inFile uint64
	for _, r := range layout.PageRuns() {
		inFile += r.Pages
	}
	j.con.printReport(j.plan, zeros, &elfCounts{excluded: layout.ExcludedPages, inFile: inFile}, w.Written())
	return nil
}

// elfKeep returns the 2nd bitmap an ELF dump is laid out against, over
// every pfn of the vmcore: the plan's, less the zero pages with dump level
// bit 1, and past the end of mem_map what markPastMemMap says. It also
// returns the number of zero pages.
func (j *dumpJob) elfKeep(ctx context.Context, v *source.Vmcore) (*bitmap.Bitmap, uint64, error) {
	keep := j.plan.Dumpable.Cut(v.Pfns())
	var zeros uint64
	if j.level.Has(filter.ExcludeZero) {
		o := j.opts
		start := time.Now()
		prog := j.con.newProgress("Excluding zero pages", j.plan.NumDumpable)
		z := &zeroMarker{walk: j.plan.Dumpable, keep: keep}
		_, err := pipeline.Run(ctx, pipeline.Config{
			Workers: o.threads,
			NewReader: func() pipeline.PageReader {
				return j.mem.NewReader(o.mapSizeKiB<<10, j.useMmap())
			},
			Dumpable:    j.plan.Dumpable,
			Total:       j.plan.NumDumpable,
			ExcludeZero: true,
			Writer:      z,
			Progress:    prog.update,
		})
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, 0, fmt.Errorf("exclude zero pages: %w", err)
		}
		prog.finish()
		j.con.step("Excluding zero pages", time.Since(start))
		zeros = z.zeros
	}
	markPastMemMap(keep, v, j.plan.MaxMapnr)
	return keep, zeros, nil
}

// zeroMarker is the zero scan's pipeline writer. The pipeline hands it one
// record per pfn of walk, in pfn order, zero pages marked; it clears those
// in keep. walk itself is not touched: the pipeline's producer reads it
// meanwhile.
type zeroMarker struct {
	walk, keep *bitmap.Bitmap
	next       uint64 // where to look for the next pfn of walk
	zeros      uint64
}

func (z *zeroMarker) WritePages(pages []sink.Page, _ []byte) error {
	for _, p := range pages {
		pfn := z.walk.NextSet(z.next)
		if pfn >= z.walk.Len() {
			return fmt.Errorf("zero scan: more pages than the bitmap holds")
		}
		z.next = pfn + 1
		if p.Zero {
			z.keep.Clear(pfn)
			z.zeros++
		}
	}
	return nil
}

// bitmapBlockPfns is the number of pfns in one 4 KiB block of
// makedumpfile's bitmap file.
const bitmapBlockPfns = 4096 * 8

// markPastMemMap decides which pfns from maxMapnr (the end of the crashed
// kernel's mem_map) on an ELF dump keeps. The kdump format has no bits for
// them; makedumpfile's ELF walk still visits them when a PT_LOAD reaches
// past mem_map (QEMU's BIOS ROM segment does), and in its usual one-cycle
// mode it reads their bits from past the end of its bitmap file: the read
// fails ("is_dumpable_file: Can't read the bitmap") and the bits come from
// the block it read last, that is, from the pfn at the same place in the
// 32768-pfn block of the last pfn below maxMapnr that its walk visited.
// This reproduces that, so that the dump equals makedumpfile's; only pages
// the vmcore holds are ever taken. (With --cyclic-buffer, makedumpfile
// keeps them all instead.)
func markPastMemMap(keep *bitmap.Bitmap, v *source.Vmcore, maxMapnr uint64) {
	const ps, bp = source.PageSize, bitmapBlockPfns
	if maxMapnr == 0 || maxMapnr >= keep.Len() {
		return
	}
	_, hasData := v.Bitmaps(keep.Len(), false)
	block := (maxMapnr - 1) / bp // the walk starts after a pass over [0, maxMapnr)
	stale := func(pfn uint64) bool {
		q := block*bp + pfn%bp
		switch {
		case q < maxMapnr:
			return keep.Test(q)
		case q < (maxMapnr+7)/8*8:
			return false // the rest of the bitmap file's last byte
		case block > 0:
			return keep.Test(q - bp) // past a short read: the block before
		}
		return false
	}
	for _, l := range v.Loads {
		lo, hi := (l.Paddr+ps-1)/ps, (l.Paddr+l.MemSize+ps-1)/ps
		if in := min(hi, maxMapnr); lo < in {
			block = (in - 1) / bp
		}
		for p := hasData.NextSet(max(lo, maxMapnr)); p < hi; p = hasData.NextSet(p + 1) {
			if stale(p) {
				keep.Set(p)
			}
		}
	}
}

// elfCopy is the copy pass of an ELF dump: the pipeline reads the pages of
// the layout's page runs in file order, numbered 0, 1, 2, ... across the
// runs, and the ELF writer takes them.
func (j *dumpJob) elfCopy(ctx context.Context, l *sink.ELFLayout, w *sink.ELF) error {
	o := j.opts
	runs := l.PageRuns()
	starts := make([]uint64, len(runs))
	var total uint64
	for i, r := range runs {
		starts[i] = total
		total += r.Pages
	}
	all := bitmap.New(total)
	all.SetRange(0, total)
	start := time.Now()
	prog := j.con.newProgress("Copying data", total)
	var err error
	j.stats, err = pipeline.Run(ctx, pipeline.Config{
		Workers: o.threads,
		NewReader: func() pipeline.PageReader {
			return &runReader{r: j.mem.NewReader(o.mapSizeKiB<<10, j.useMmap()), runs: runs, starts: starts}
		},
		Dumpable: all,
		Total:    total,
		Writer:   w,
		Progress: prog.update,
	})
	if err != nil {
		return err
	}
	prog.finish()
	j.con.step("Copying data", time.Since(start))
	return nil
}

// runReader serves page i of the concatenated page runs.
type runReader struct {
	r      source.Reader
	runs   []sink.ELFPageRun
	starts []uint64 // index of each run's first page
	cur    int      // the run of the last page served
}

func (r *runReader) Page(i uint64) ([]byte, error) {
	if c := r.cur; i < r.starts[c] || i-r.starts[c] >= r.runs[c].Pages {
		r.cur = sort.Search(len(r.starts), func(k int) bool { return r.starts[k] > i }) - 1
	}
	return r.r.Page(r.runs[r.cur].Pfn + i - r.starts[r.cur])
}

func (r *runReader) Close() { r.r.Close() }
