package dump

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"pagepipe/bitmap"
	"pagepipe/erase"
	"pagepipe/pipeline"
	"pagepipe/priority"
	"pagepipe/sink"
	"pagepipe/source"
)

// shape is what every output shape's writer is to the engine once its
// headers are written: the copy pass writes into it (it is a
// pipeline.Writer or a pipeline.Placer), then Close completes it or, when
// the dump cannot finish, Abort leaves it valid and marked incomplete. So
// the copy pass and the end of a dump are written once.
type shape interface {
	// Close completes the dump: what is buffered, the last descriptors.
	Close() error
	// Abort leaves the dump valid and marked incomplete.
	Abort() error
	// Written is the bytes of output so far.
	Written() uint64
}

// partsLeft is a shape of several files (sink.Split): Incomplete names
// those Abort left incomplete. A shape of one file leaves that one.
type partsLeft interface {
	Incomplete() []int
}

// A layout is one output shape before any file exists: what it checks,
// how its headers are written, which pages the copy pass reads.
type layout interface {
	// open writes the headers into outs (one per target file).
	open(outs []sink.Output) (shape, error)
	// pages are the pfns the copy pass reads, in file order, and their
	// number; raw says the pass stores them as they are (no zero pages,
	// no codec).
	pages() (pfns pipeline.Pfns, total uint64, raw bool)
	// report adds the shape's own counts to the result.
	report(r *Result)
	// what names what must fit before a page is written.
	what() string
}

// job is one try at one dump level.
type job struct {
	o   *Options
	ev  Events
	in  *input
	res Result
	// erasure is what the copy pass erases (nil: nothing).
	erasure *erase.Erasure
}

// write lays the dump out, creates its files, runs the copy pass and ends
// the dump: one path for every shape.
func (j *job) write(ctx context.Context) (Result, error) {
	j.res = Result{Level: j.in.level, Workers: j.o.Workers}
	p := j.in.plan
	j.res.Filter = FilterStats{Wall: p.Wall, ProcessCPU: p.ProcessCPU, ScanCPU: p.ScanCPU, Pfns: p.MaxMapnr, PageSize: j.in.mem.PageSize()}
	var l layout
	var err error
	switch j.o.Out.Shape {
	case ELF:
		l, err = j.elfLayout(ctx)
	case Split:
		l, err = j.splitLayout()
	default:
		l = kdumpLayout{meta: j.in.meta, prio: j.priorityOrder()}
	}
	if err != nil {
		return j.res, err
	}
	switch l := l.(type) {
	case *splitFiles:
		j.erasure = j.applyErase(l.bounds)
	case kdumpLayout:
		j.erasure = j.applyErase(nil)
	}
	t, err := j.createTargets()
	if err != nil {
		return j.res, err
	}
	s, err := l.open(t.outs)
	if err != nil {
		return j.res, t.discard(l.what(), err)
	}
	pfns, total, raw := l.pages()
	err = t.part(j.copyPass(ctx, s, pfns, total, raw))
	if err != nil && ctx.Err() != nil {
		err = context.Cause(ctx) // the signal that stopped us
	}
	if err == nil {
		err = t.named(s.Close())
	}
	if err != nil {
		err = j.stop(s, t, err)
		j.res.Written = s.Written()
		return j.res, err
	}
	if err := t.finish(); err != nil {
		return j.res, err
	}
	j.res.Written = s.Written()
	plan := j.in.plan
	j.res.Filter.Cycles, j.res.Filter.ScanWall = plan.Cycles(), plan.ScanWall()
	j.res.Pages = Counts{Total: plan.Present.Len(), Original: plan.Present.Count(0, plan.Present.Len()), Excluded: plan.Excluded}
	j.res.Pages.Excluded.Zero = j.res.Copy.ZeroPages
	l.report(&j.res)
	return j.res, nil
}

// stop ends a dump that failed on its way: its files are left valid and
// marked incomplete; a flattened stream is left without its end marker,
// with what was buffered put out (as far as -L lets it), so that -R
// rebuilds every page that landed into an incomplete dump.
func (j *job) stop(s shape, t *targets, err error) error {
	if j.o.Out.DryRun {
		return err
	}
	if t.stream {
		_ = t.flat.Flush() // best effort: the pipe may be what failed
		if errors.Is(err, sink.ErrSizeLimit) {
			return incomplete(err, t.names[0], j.o.Out.SizeLimit)
		}
		return err
	}
	aerr := s.Abort()
	parts := []int{0}
	if p, ok := s.(partsLeft); ok {
		parts = p.Incomplete()
	}
	ferr := t.finish()
	if aerr != nil || ferr != nil {
		// The files may not be valid: say so, not "incomplete".
		return errors.Join(err, t.named(aerr), ferr)
	}
	if j.o.Out.Shape == Split {
		var names []string
		for _, i := range parts {
			names = append(names, t.names[i])
		}
		j.ev.Notef(Common, "Incomplete split files: %s.\n", strings.Join(names, ", "))
		ie := incomplete(err, "", 0)
		ie.Parts = names
		return ie
	}
	return incomplete(err, t.names[0], j.o.Out.SizeLimit)
}

// incomplete says why a dump stopped, for the retry and the messages:
// a full disk or the size limit make it ErrOutputFull.
func incomplete(err error, name string, limit int64) *IncompleteError {
	full := errors.Is(err, sink.ErrSizeLimit) || errors.Is(err, syscall.ENOSPC)
	switch {
	case name == "":
	case errors.Is(err, sink.ErrSizeLimit):
		err = fmt.Errorf("can't write the dump file(%s): size limit(%d) reached", name, limit)
	case full:
		err = fmt.Errorf("can't write the dump file(%s): %w", name, err)
	}
	return &IncompleteError{Err: err, Full: full}
}

// copyPass runs the pipeline over pfns into s, with the progress and the
// STEP timing.
func (j *job) copyPass(ctx context.Context, s shape, pfns pipeline.Pfns, total uint64, raw bool) error {
	const label = "Copying data"
	start := time.Now()
	cfg := j.pipelineConfig(pfns, total, nil, j.ev.Begin(label, total, j.in.mem.PageSize()))
	switch w := s.(type) {
	case pipeline.Placer:
		cfg.Placer = w
	case pipeline.Writer:
		cfg.Writer = w
	default:
		return fmt.Errorf("copy pass: %T takes no chunks", s)
	}
	if e := j.erasure; e != nil {
		newReader := cfg.NewReader
		cfg.NewReader = func() pipeline.PageReader { return &erasingReader{PageReader: newReader(), e: e} }
	}
	if !raw {
		cfg.ExcludeZero, cfg.ZeroUnreadable, cfg.Codec = j.in.meta.ZeroPage, j.o.ZeroUnreadable, j.in.codec
	}
	var err error
	j.res.Copy, err = pipeline.Run(ctx, cfg)
	if err == nil {
		// The 2nd bitmap made in cycles: a cycle that could not be made
		// again ended the pfns early.
		err = j.in.plan.Dumpable.Err()
	}
	if err != nil {
		return err
	}
	if m, ok := j.in.mem.(interface{ MapStats() *source.MapStats }); ok && j.useMmap() {
		s := m.MapStats()
		j.ev.Notef(Debug, "mmap: %d windows mapped, %d failed and read instead", s.Windows.Load(), s.Failed.Load())
		if err := s.FirstError(); err != nil {
			j.ev.Notef(Debug, " (first: %v)", err)
		}
		j.ev.Notef(Debug, "\n")
		for _, w := range s.MappedWindows() {
			j.ev.Notef(Debug, "mmap: window 0x%x-0x%x\n", w.Off, w.Off+w.Len)
		}
	}
	if j.in.isLive() {
		j.ev.Notef(Debug, "live: %d revisited pages were still left out when copied, stored as zeros\n", j.res.Copy.Revisited)
	}
	if n := j.res.Copy.Unreadable; n > 0 {
		j.ev.Notef(Common, "WARNING: %d pages of the vmcore could not be read; they are stored as zeros (--zero-unreadable).\n", n)
	}
	j.ev.End(label, time.Since(start))
	return nil
}

// pipelineConfig is a pass over pfns of the input with the dump's workers
// and reader.
func (j *job) pipelineConfig(pfns pipeline.Pfns, total uint64, w pipeline.Writer, progress func(uint64)) pipeline.Config {
	useMmap := j.useMmap()
	return pipeline.Config{
		Workers:  j.o.Workers,
		PageSize: int(j.in.mem.PageSize()),
		NewReader: func() pipeline.PageReader {
			return j.in.mem.NewReader(j.o.MapSize, useMmap)
		},
		Pfns:         pfns,
		Total:        total,
		Writer:       w,
		Progress:     progress,
		NewRevisitor: j.in.live.newRevisitor(),
		Running:      j.running(),
	}
}

// running is the copy pass's process-wide settings (Options.Process).
func (j *job) running() func(int) func() {
	if j.o.Process == nil {
		return nil
	}
	return j.o.Process.CopyPass
}

// useMmap decides how pages are read: mmap windows for /proc/vmcore or
// when asked (--map-size), pread (with read-ahead) for other files, and
// always pread with MmapOff (--non-mmap). The page scan and the metadata
// reads follow the same choice (prepare).
func (j *job) useMmap() bool { return j.o.useMmap() }

func (o *Options) useMmap() bool {
	return o.Mmap == MmapOn || o.Mmap == MmapAuto && source.PreferMmap(o.Input)
}

// targets are the files (or the stream) a dump is written to.
type targets struct {
	outs   []sink.Output
	names  []string
	files  []*os.File // nil entries with --dry-run
	flat   *sink.Flat
	stream bool
}

// createTargets opens where the dump goes: the files, or a flattened
// stream; with --dry-run outputs that count every byte and write none.
func (j *job) createTargets() (*targets, error) {
	o := &j.o.Out
	t := &targets{names: o.Paths, stream: o.Stream != nil}
	switch {
	case o.DryRun:
		t.names = []string{j.o.name()}
		if o.Shape == Split {
			t.names = o.Paths
		}
		for _, name := range o.Paths {
			if err := checkOutput(name, o.Force); err != nil {
				return nil, err
			}
		}
		for range t.names {
			t.outs = append(t.outs, devNull{})
		}
		return t, nil
	case t.stream:
		fl, err := sink.NewFlat(o.Stream, o.SizeLimit)
		if err != nil {
			return nil, err
		}
		t.flat, t.outs, t.names = fl, []sink.Output{fl}, []string{"STDOUT"}
		return t, nil
	}
	for _, name := range o.Paths {
		f, err := createOutput(name, o.Force)
		if err != nil {
			// Leave nothing behind: the files created so far are empty.
			for k, f := range t.files {
				f.Close()
				os.Remove(o.Paths[k])
			}
			return nil, err
		}
		t.files = append(t.files, f)
		if o.SizeLimit > 0 {
			t.outs = append(t.outs, sink.Limit{Output: f, Max: o.SizeLimit})
		} else {
			t.outs = append(t.outs, f)
		}
	}
	return t, nil
}

// finish completes the outputs: every file closed (a close that fails,
// as on NFS, is the dump's error), the stream's end marker written.
func (t *targets) finish() error {
	var errs []error
	for i, f := range t.files {
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.names[i], err))
		}
	}
	t.files = nil
	if t.flat != nil {
		if err := t.flat.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.names[0], err))
		}
		t.flat = nil
	}
	return errors.Join(errs...)
}

// discard ends a dump whose headers could not be written: without its
// headers a file is no dump at all, not even an incomplete one, so none
// is left, rather than one no reader opens. A stream just stops.
func (t *targets) discard(what string, err error) error {
	if t.stream || t.files == nil {
		return t.named(err)
	}
	name := t.names[0]
	var pe *sink.PartError
	if errors.As(err, &pe) {
		name, err = t.names[pe.Part], pe.Err
	}
	errs := []error{fmt.Errorf("%s: no dump written, its %s do not fit: %w", name, what, err)}
	for i, f := range t.files {
		if cerr := f.Close(); cerr != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.names[i], cerr))
		}
		if st, serr := os.Stat(t.names[i]); serr == nil && st.Mode().IsRegular() {
			os.Remove(t.names[i])
		}
	}
	t.files = nil
	return errors.Join(errs...)
}

// part puts a split file's name on an error of one of its outputs.
func (t *targets) part(err error) error {
	var pe *sink.PartError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", t.names[pe.Part], pe.Err)
	}
	return err
}

// named puts the output's name on an error of the whole dump: a split
// file's when the error says which, else the one output's.
func (t *targets) named(err error) error {
	if err == nil {
		return nil
	}
	var pe *sink.PartError
	if errors.As(err, &pe) || len(t.names) != 1 {
		return t.part(err)
	}
	return fmt.Errorf("%s: %w", t.names[0], err)
}

// devNull is the output of --dry-run: every byte counted, none written.
type devNull struct{}

func (devNull) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// checkOutput refuses, as createOutput would, an output that exists
// (unless force, -f) or that cannot be written: what --dry-run checks, as
// makedumpfile's check_dump_file does, without creating the file.
func checkOutput(path string, force bool) error {
	if _, err := os.Lstat(path); err != nil {
		return nil // it is created
	}
	if !force {
		return fmt.Errorf("can't open the dump file(%s): file exists (use -f to overwrite)", path)
	}
	if err := unix.Access(path, unix.W_OK); err != nil {
		return fmt.Errorf("can't open the dump file: %s: %w", path, err)
	}
	return nil
}

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

// kdumpLayout is a kdump-compressed file (plain or flattened); prio, when
// set, is the copy pass's prioritised order.
type kdumpLayout struct {
	meta *sink.Meta
	prio *priority.Order
}

// open makes a file's writer a sink.PlacedKdump, whose chunks the copy
// pass's workers write themselves at the places it hands out in order; a
// flattened stream's records must come in one order, so it is a
// sink.Kdump, written in order.
func (l kdumpLayout) open(outs []sink.Output) (shape, error) {
	var prio *bitmap.Bitmap
	if l.prio != nil {
		prio = l.prio.Set()
	}
	var k interface {
		shape
		SetPriority(*bitmap.Bitmap) error
	}
	var err error
	if _, stream := outs[0].(*sink.Flat); stream {
		k, err = sink.NewKdump(outs[0], l.meta)
	} else {
		k, err = sink.NewPlacedKdump(outs[0], l.meta)
	}
	if err != nil {
		return nil, err
	}
	if prio != nil {
		if err := k.SetPriority(prio); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func (l kdumpLayout) pages() (pipeline.Pfns, uint64, bool) {
	if l.prio != nil {
		return l.prio, l.meta.NumDumpable, false
	}
	return l.meta.Dumpable.Cursor(), l.meta.NumDumpable, false
}

func (kdumpLayout) report(*Result) {}
func (kdumpLayout) what() string   { return "headers and bitmaps" }
