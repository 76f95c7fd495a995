package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"pagepipe/codec"
	"pagepipe/filter"
	"pagepipe/kernel"
	"pagepipe/pipeline"
	"pagepipe/sink"
	"pagepipe/source"
)

// dumpJob is one run of the main command: VMCORE in, DUMPFILE out.
type dumpJob struct {
	opts        *options
	con         *console
	vmcore, out string
	stdout      io.Writer // the flattened stream's destination (-F)

	// Set by prepare:
	mem   source.Memory
	vi    *kernel.VMCOREINFO // nil when the input has none
	level filter.Level
	plan  *filter.Plan
	codec *codec.Codec // nil: pages stored raw
	meta  *sink.Meta   // everything in a kdump file besides the pages

	stats    pipeline.Stats
	levelIdx int // which level of -d's list is being tried
}

// run makes the dump at the first dump level of -d's list; when the disk
// fills up or -L is reached and more levels are listed, it starts over at
// the next one, as makedumpfile does.
func (j *dumpJob) run(ctx context.Context) error {
	for i := range j.opts.levels {
		j.levelIdx = i
		err := j.runLevel(ctx)
		if err == nil || !errors.Is(err, errNoSpace) || i+1 == len(j.opts.levels) || j.opts.flatten {
			return err
		}
		if j.opts.split {
			for _, name := range j.opts.args[1:] {
				os.Remove(name) // every split file, as makedumpfile does
			}
		} else {
			os.Remove(j.out)
		}
		j.con.msg("Retry to create a dumpfile by dump_level(%d).\n", j.opts.levels[i+1])
	}
	return nil
}

func (j *dumpJob) runLevel(ctx context.Context) error {
	if err := j.prepare(ctx); err != nil {
		return err
	}
	defer j.mem.Close()
	switch {
	case j.opts.elf:
		return j.writeELF(ctx)
	case j.opts.split:
		return j.writeSplit(ctx, j.opts.args[1:])
	}
	return j.writeKdump(ctx)
}

// errNoSpace is a dump cut short by a full disk or by -L: retried at the
// next dump level of the list, if any.
var errNoSpace = errors.New("no space for the dump")

// errIncomplete marks a dump that was finished early but left valid.
var errIncomplete = errors.New("incomplete dump")

// incomplete classifies why a dump stopped, for the retry and the messages.
func (j *dumpJob) incomplete(err error) error {
	switch {
	case errors.Is(err, sink.ErrSizeLimit):
		return fmt.Errorf("%w: %w: can't write the dump file(%s): size limit(%d) reached", errIncomplete, errNoSpace, j.out, j.opts.sizeLimit)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %w: can't write the dump file(%s): %v", errIncomplete, errNoSpace, j.out, err)
	}
	return fmt.Errorf("%w: %v", errIncomplete, err)
}

// prepare opens the input and runs the filter pass: after it, the plan says
// which pages go into the dump and meta holds the headers' contents.
func (j *dumpJob) prepare(ctx context.Context) (err error) {
	o := j.opts
	v, err := source.OpenMemory(j.vmcore)
	if err != nil {
		return fmt.Errorf("open vmcore: %w", err)
	}
	defer func() {
		if err != nil {
			v.Close()
		}
	}()
	j.mem = v

	level := o.levels[j.levelIdx]
	var input *source.Dump
	switch m := v.(type) {
	case *source.Dump:
		input = m
	case interface{ Unwrap() *source.Dump }:
		input = m.Unwrap()
	}
	isDump := input != nil
	if isDump {
		// Refiltering: what the dump left out stays out.
		level |= filter.Level(input.Sub.DumpLevel)
	}
	j.level = level
	printVMCOREINFO(j.con, v)
	if j.vi, err = loadVMCOREINFO(v, o.vmcoreinfo); err != nil {
		return err
	}
	if j.vi != nil && !isDump {
		warnKernelVersion(j.con, j.vi.OSRelease())
	}
	var kern *filter.Kernel
	if j.vi != nil {
		kern, err = filter.OpenKernel(j.vi, v, v.Pfns())
		if err != nil {
			if level.NeedsPageScan() {
				return fmt.Errorf("dump level %d: %w", level, err)
			}
			j.con.debug("mem_map not found (%v): dumping every page with data\n", err)
			kern = nil
		}
	}
	scanStart := time.Now()
	if j.plan, err = filter.NewPlan(ctx, v, level, kern, o.threads, j.countPartial(v.Pfns())); err != nil {
		return err
	}
	// makedumpfile's first two progress lines, for the 1st bitmap (memory
	// holes) and the 2nd (the page scan): NewPlan made both.
	j.con.stepDone("Checking for memory holes")
	j.con.stepDone("Excluding unnecessary pages")
	if j.plan.Scanned {
		j.con.step("Excluding unnecessary pages", time.Since(scanStart))
	}
	if o.compress != 0 {
		if j.codec, err = codec.ByFlag(o.compress); err != nil {
			return err
		}
		if !j.codec.Standard {
			j.con.msg("WARNING: %s compression is a pagepipe extension that crash, libkdumpfile and makedumpfile cannot read; convert the dump with pagepipe before sharing it.\n", j.codec.Name)
		}
	}

	plan := j.plan
	notes, nrCPUs, viOff, viSize := v.Notes()
	j.meta = &sink.Meta{
		BlockSize:      source.PageSize,
		NrCPUs:         int32(nrCPUs),
		DumpLevel:      int32(level),
		Notes:          notes,
		VmcoreinfoOff:  viOff,
		VmcoreinfoSize: viSize,
		MaxMapnr:       plan.MaxMapnr,
		Present:        plan.Present,
		Dumpable:       plan.Dumpable,
		NumDumpable:    plan.NumDumpable,
		ZeroPage:       level.Has(filter.ExcludeZero),
	}
	if j.codec != nil {
		j.meta.Status = j.codec.Flag
	}
	if isDump {
		// The header describes the same crash: keep what the input says.
		m := j.meta
		m.Utsname, m.CrashTime, m.PhysBase = input.Header.Utsname, input.Header.TimestampSec, input.Sub.PhysBase
		m.NrCPUs = input.Header.NrCPUs
	} else if note := fillKernelMeta(v.(*source.Vmcore), j.vi, j.meta); note != "" {
		j.con.debug("%s\n", note)
	}
	return nil
}

// countPartial decides, as makedumpfile would on this machine with this
// command line, whether the 1st bitmap counts a PT_LOAD's partial last
// page (filter.Cycle).
func (j *dumpJob) countPartial(maxMapnr uint64) bool {
	o := j.opts
	c := filter.Cycle{WorkDir: o.workDir != "", CyclicBufferKiB: o.cyclicBufferKB, Dumpfiles: 1}
	if o.split {
		c.Dumpfiles = len(o.args) - 1
	}
	var err error
	if c.MemFree, err = filter.MemFree(); err != nil {
		j.con.debug("%v: taking the bitmaps as built in cycles\n", err)
	}
	one := c.OneCycle(maxMapnr)
	j.con.debug("bitmaps as makedumpfile builds them %s (MemFree %d bytes)\n", map[bool]string{true: "in one cycle", false: "in cycles"}[one], c.MemFree)
	return one
}

// copyPass runs the pipeline over the dumpable pages into w, with the
// progress line and the STEP timing.
func (j *dumpJob) copyPass(ctx context.Context, w pipeline.Writer) error {
	o := j.opts
	start := time.Now()
	prog := j.con.newProgress("Copying data", j.plan.NumDumpable)
	var err error
	j.stats, err = pipeline.Run(ctx, pipeline.Config{
		Workers: o.threads,
		NewReader: func() pipeline.PageReader {
			return j.mem.NewReader(o.mapSizeKiB<<10, j.useMmap())
		},
		Dumpable:       j.plan.Dumpable,
		Total:          j.plan.NumDumpable,
		ExcludeZero:    j.meta.ZeroPage,
		ZeroUnreadable: o.zeroUnreadable,
		Codec:          j.codec,
		Writer:         w,
		Progress:       prog.update,
	})
	if err != nil {
		return err
	}
	if m, ok := j.mem.(interface{ MapStats() *source.MapStats }); ok && j.useMmap() {
		s := m.MapStats()
		j.con.debug("mmap: %d windows mapped, %d failed and read instead", s.Windows.Load(), s.Failed.Load())
		if err := s.FirstError(); err != nil {
			j.con.debug(" (first: %v)", err)
		}
		j.con.debug("\n")
	}
	if n := j.stats.Unreadable; n > 0 {
		j.con.msg("WARNING: %d pages of the vmcore could not be read; they are stored as zeros (--zero-unreadable).\n", n)
	}
	prog.finish()
	j.con.step("Copying data", time.Since(start))
	return nil
}

// useMmap decides how pages are read: mmap windows for /proc/vmcore or
// when --map-size is given, pread (with read-ahead) for other files, and
// always pread with --non-mmap.
func (j *dumpJob) useMmap() bool {
	o := j.opts
	return !o.nonMmap && (o.mapSizeSet || source.PreferMmap(j.vmcore))
}

// writeKdump writes the kdump-compressed file (or its flattened stream).
// A dump that cannot finish (disk full, -L, a signal) is left valid and
// marked incomplete; a flattened stream just gets no end marker.
func (j *dumpJob) writeKdump(ctx context.Context) error {
	out, finish, err := j.output()
	if err != nil {
		return err
	}
	k, err := sink.NewKdump(out, j.meta)
	if err != nil {
		if j.opts.flatten || j.opts.dryRun {
			return j.stop(nil, finish, fmt.Errorf("%s: %w", j.out, err))
		}
		// Without its headers and bitmaps the file is no dump at all, not
		// even an incomplete one: leave none, rather than one no reader
		// opens.
		finish()
		if st, serr := os.Stat(j.out); serr == nil && st.Mode().IsRegular() {
			os.Remove(j.out)
		}
		return fmt.Errorf("%s: no dump written, its headers and bitmaps do not fit: %w", j.out, err)
	}
	if err := j.copyPass(ctx, k); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx) // the signal that stopped us
		}
		return j.stop(k.Abort, finish, err)
	}
	if err := k.Close(); err != nil {
		return j.stop(k.Abort, finish, fmt.Errorf("%s: %w", j.out, err))
	}
	if err := finish(); err != nil {
		return fmt.Errorf("%s: %w", j.out, err)
	}
	j.con.printReport(j.plan, j.stats.ZeroPages, nil, k.Written())
	return nil
}

// stop ends a dump that failed on its way: a file whose headers got
// written (abort is its writer's Abort, nil before that) is left valid and
// marked incomplete; a flattened stream is left without its end marker.
func (j *dumpJob) stop(abort func() error, finish func() error, err error) error {
	if j.opts.flatten {
		return err
	}
	if abort == nil || j.opts.dryRun {
		finish()
		return err
	}
	if aerr := abort(); aerr != nil {
		finish()
		return fmt.Errorf("%w (and %v)", err, aerr)
	}
	finish()
	return j.incomplete(err)
}

// output opens where the dump goes: the dump file, or with -F a flattened
// stream on stdout. finish completes it (for -F, the end marker).
func (j *dumpJob) output() (out sink.Output, finish func() error, err error) {
	if j.opts.dryRun {
		return discard{}, func() error { return nil }, nil
	}
	if j.opts.flatten {
		fl, err := sink.NewFlat(j.stdout)
		if err != nil {
			return nil, nil, err
		}
		return fl, fl.Close, nil
	}
	f, err := createOutput(j.out, j.opts.force)
	if err != nil {
		return nil, nil, err
	}
	if j.opts.sizeLimit > 0 {
		return sink.Limit{Output: f, Max: j.opts.sizeLimit}, f.Close, nil
	}
	return f, f.Close, nil
}

// discard is the output of --dry-run: every byte counted, none written.
type discard struct{}

func (discard) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// createOutput creates an output file, refusing to clobber an existing one
// unless force (-f).
func createOutput(path string, force bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if os.IsExist(err) {
		return nil, fmt.Errorf("can't open the dump file(%s): file exists (use -f to overwrite)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("can't open the dump file: %w", err)
	}
	return f, nil
}

func codecNames() []string {
	var names []string
	for _, c := range codec.All() {
		names = append(names, c.Name)
	}
	return names
}
