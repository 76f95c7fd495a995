// Package dump makes one dump from start to end: it opens the crashed
// kernel's memory, runs the filter pass (which pages go in), writes the
// headers of the output shape asked for, runs the copy pass into it and
// finishes it, complete or, when it cannot finish (a full disk, -L, a
// signal), valid and marked incomplete; with a list of dump levels it
// starts over at the next one while the output is full, as makedumpfile
// does. The makedumpfile-compatibility rules that decide bytes live here
// too (compat.go), so that every front end writes the same bytes.
//
// The engine prints nothing: what a user sees goes through Events (steps
// and their progress, messages by class), and what the report, the exit
// code and the bench need comes back in Result and in the error's type.
//
//	cmd/pagepipe ──Options, Events──▶ dump.Run ──▶ source → filter → pipeline → sink
//	             ◀──Result, error────
package dump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"pagepipe/codec"
	"pagepipe/filter"
	"pagepipe/internal/cpuclock"
	"pagepipe/internal/runstats"
	"pagepipe/pipeline"
	"pagepipe/source"
)

// Level is a dump level, makedumpfile's -d: a sum of the Exclude* bits.
type Level = filter.Level

// ParseLevels reads -d's argument: one level or a comma-separated list,
// tried in order while the output is full.
func ParseLevels(s string) ([]Level, error) { return filter.ParseLevels(s) }

// Shape is the kind of file a dump is written as.
type Shape int

const (
	// Kdump is one kdump-compressed file, or its flattened stream when
	// Output.Stream is set (-F).
	Kdump Shape = iota
	// ELF is an ELF dump (-E), in makedumpfile's layout; flattened too
	// with Output.Stream.
	ELF
	// Split is one kdump-compressed file per path (--split), each holding
	// a range of pfns.
	Split
)

// Mmap says how the vmcore's pages are read.
type Mmap int

const (
	// MmapAuto maps windows of /proc/vmcore and preads other files.
	MmapAuto Mmap = iota
	// MmapOn maps windows of any input (--map-size given).
	MmapOn
	// MmapOff always preads (--non-mmap).
	MmapOff
)

// Priority is Options.Priority.
type Priority int

const (
	// PriorityAuto prioritises a kdump-compressed dump (a file, -F or
	// --split) where it may end early: -L, or an output that is a device
	// or a pipe (-F: stdout).
	PriorityAuto Priority = iota
	// PriorityOn always prioritises (--priority).
	PriorityOn
	// PriorityOff never does: pfn order, makedumpfile's bytes.
	PriorityOff
)

// Options are one dump, as plain data (but Process, the running
// program's hooks).
type Options struct {
	// Input is the vmcore, or a kdump-compressed dump (plain or flattened)
	// to refilter or convert to another codec.
	Input string
	// VMCOREINFOFile is makedumpfile's -i: the kernel's VMCOREINFO for a
	// vmcore without the note.
	VMCOREINFOFile string
	// Vmlinux is makedumpfile's -x: the kernel's debug vmlinux, whose
	// DWARF gives FilterConfig its types and symbols.
	Vmlinux string
	// FilterConfig is makedumpfile's --config: a filter config
	// (makedumpfile.conf(5)) whose erase commands overwrite sensitive
	// data in the dump with 'X' (package erase), recorded in its
	// ERASEINFO. It is resolved before any output exists; a line that
	// does not resolve refuses the dump.
	FilterConfig string
	// ModuleDebuginfo is where a config's [module] sections find their
	// module's debuginfo (NAME.ko or NAME.ko.debug, searched below it);
	// "" looks where makedumpfile looks (/usr/lib/debug/lib/modules/REL).
	ModuleDebuginfo string
	// Vtop is makedumpfile's --vtop: the kernel virtual address whose
	// translation through the crashed kernel's page tables is printed
	// (each table entry read on x86_64) before the dump is made; 0: none.
	Vtop uint64
	// Levels are the dump levels, tried in order while the output is full
	// (ErrOutputFull); at least one.
	Levels []Level
	// Codec is a codec's name (CodecNames); "" stores pages raw.
	Codec string
	// Workers read and compress pages (and scan struct pages); 0 means
	// GOMAXPROCS.
	Workers int
	// MapSize is the mmap window in bytes; 0 means source.DefaultMapSize.
	MapSize int
	Mmap    Mmap
	// ZeroUnreadable stores a page of the vmcore that cannot be read as
	// zeros, counts it (Result.Copy.Unreadable) and goes on.
	ZeroUnreadable bool
	// WorkDir and CyclicBufferKiB are makedumpfile's --work-dir (set or
	// not) and --cyclic-buffer: they decide, as in makedumpfile, whether
	// makedumpfile would build the bitmaps in one cycle, and so whether a
	// PT_LOAD's partial last page is present (filter.Cycle) and what an
	// ELF dump keeps past mem_map (dump/compat.go). CyclicBufferKiB is
	// also the budget of pagepipe's own cycles (filter.NewPlan's window;
	// 0: from the available memory), which change no byte.
	WorkDir         bool
	CyclicBufferKiB int
	// ExcludeVmemmap is makedumpfile's -e: the vmemmap pages that describe
	// only excluded pages are left out too (filter.Vmemmap), and the
	// header says so (DUMP_DH_EXCLUDED_VMEMMAP). makedumpfile needs
	// --work-dir for it and then builds its bitmaps in one cycle;
	// pagepipe needs no directory and builds them as in one cycle
	// whenever -e is given. Where the vmemmap cannot be found (not
	// x86_64, a vmemmap mapped by 4 KiB pages) the dump is made without
	// it, as makedumpfile makes it, and an Error message says why.
	ExcludeVmemmap bool
	// KeepPartialData takes a page a PT_LOAD holds in part as makedumpfile
	// 1.7.6 and later do (source.PartialPages.KeepData): in one cycle,
	// kexec-tools' partial page at 0x9fc00 is then dumped. Without it the
	// dump follows 1.7.2, Debian 12's.
	KeepPartialData bool
	// Priority decides whether the copy pass writes the pages an
	// analysis needs first (package priority): a dump cut short then
	// still opens in crash. PriorityAuto does so for a kdump-compressed
	// dump (a file, -F, --split) when -L is given or the output is a
	// device or a pipe, which may end early; a complete prioritised dump
	// holds the same pages, bitmaps and descriptors' sizes as the
	// pfn-order one, only its data offsets differ (and a -F stream's
	// record order: rebuilt, it is the prioritised file).
	Priority Priority
	// Program names the program in the messages makedumpfile words with
	// its own name ("The makedumpfile operation may be incomplete.").
	Program string
	Out     Output
	// Process, when set, makes the process-wide settings the passes want
	// (cmd/pagepipe's); the engine makes none itself.
	Process Process
}

// Process is what the program that runs the engine sets for the whole
// process around the engine's passes: the engine is a library, and the
// runtime's settings are the program's.
type Process interface {
	// CopyPass is called as a copy pass starts, with the number of its
	// workers that run, and what it returns as the pass ends.
	CopyPass(workers int) (done func())
	// Collect is called where the engine has just dropped garbage that
	// would otherwise be collected in the middle of the copy pass (the
	// priority search's), while its memory may still serve the copy
	// pass's buffers.
	Collect()
}

// Output is where a dump goes and in which shape.
type Output struct {
	Shape Shape
	// Paths are the dump file, or with Split the split files (at least
	// two). Unused with Stream.
	Paths []string
	// Stream, when set, gets the dump as a flattened stream (-F) instead
	// of a file.
	Stream io.Writer
	// Force overwrites existing files (-f); DryRun writes nothing but
	// counts every byte (--dry-run).
	Force, DryRun bool
	// SizeLimit stops the dump at this many bytes (-L); 0: none.
	SizeLimit int64
	// SplitBlockKiB is --splitblock-size: split boundaries fall on
	// multiples of it; 0 means makedumpfile's default, 1 GiB.
	SplitBlockKiB int
}

// Class is what kind of message a note is, as makedumpfile's message-level
// bits sort them.
type Class int

const (
	Common   Class = iota // common messages (message level bit 2)
	Debug                 // debug messages (bit 8)
	Report                // the report and STEP timings (bit 16)
	Progress              // progress messages (bit 1), on stderr
	Error                 // error messages (bit 4), on stderr
)

// Events is how a dump talks to its user. The engine calls them from one
// goroutine at a time; a nil Events is silent.
type Events interface {
	// Begin starts a step of total pages of pageSize bytes; update,
	// called as the step goes (from the copy pass's writer), says how
	// many are done.
	Begin(label string, total, pageSize uint64) (update func(done uint64))
	// End ends a step, begun or not (the filter pass's two steps are
	// done at once); took is its wall time when it is timed (makedumpfile
	// prints a STEP line for it), else 0.
	End(label string, took time.Duration)
	// Notef is one message of a class; format ends with its newline.
	Notef(c Class, format string, a ...any)
}

// debugging reports whether ev prints Debug notes: an Events with a
// Wants(Class) bool method says; others are taken not to, so that what
// only a debug message needs (every mmap window's extent) is not kept.
func debugging(ev Events) bool {
	w, ok := ev.(interface{ Wants(Class) bool })
	return ok && w.Wants(Debug)
}

// silent is the Events of a nil argument.
type silent struct{}

func (silent) Begin(string, uint64, uint64) func(uint64) { return func(uint64) {} }
func (silent) End(string, time.Duration)                 {}
func (silent) Notef(Class, string, ...any)               {}

// Result is what a dump did: the report's counts, the bytes written,
// where the time went.
type Result struct {
	// Level is the dump level the dump was made at: the one of the list
	// that fitted, with a refiltered dump's own level added.
	Level Level
	// Pages are the report's page counts.
	Pages Counts
	// ELF is set for an ELF dump: its two extra report lines.
	ELF *ELFCounts
	// Written is the bytes of output (every file of a split dump), also
	// when the dump stopped early (with an IncompleteError).
	Written uint64
	// Filter and Copy are the two passes' statistics; the copy pass's
	// counts are its last run's (an ELF dump's zero scan is not in them).
	Filter FilterStats
	Copy   pipeline.Stats
	// Workers is the number of workers the passes ran with.
	Workers int
	// Priority is the priority set of a prioritised dump (zero otherwise).
	Priority PriorityStats
}

// Counts are the page counts of makedumpfile's report.
type Counts struct {
	// Total is max_mapnr: every pfn of the machine, holes included.
	Total uint64
	// Original are the pages with data (the 1st bitmap).
	Original uint64
	// Excluded are the pages left out, by class; Zero is counted by the
	// copy pass (or the ELF zero scan).
	Excluded filter.Counts
}

// ELFCounts are the two extra lines of an ELF dump's report: pages left
// out of the file (runs of sink.ELFMinExcludedRun or more) and pages in it.
type ELFCounts struct{ Excluded, InFile uint64 }

// FilterStats is the filter pass's time: wall, the process's CPU over it,
// and the scan workers' part of that.
type FilterStats struct {
	Wall       time.Duration
	ProcessCPU cpuclock.Usage
	ScanCPU    cpuclock.Usage
	// Pfns is the plan's max_mapnr: the struct pages the scan covered;
	// PageSize the bytes of each page.
	Pfns, PageSize uint64
	// Cycles is how many cycles the 2nd bitmap was made in (1: held
	// whole; filter.NewPlan's window), and ScanWall the page scan's wall
	// time over all of them, each time one was made (Plan.ScanWall).
	Cycles   int
	ScanWall time.Duration
}

// Stats returns what the bench reads about the dump (runstats.Stats), with
// the process's GOMAXPROCS and peak RSS as it is now.
func (r Result) Stats() runstats.Stats {
	f, s := r.Filter, r.Copy
	sec := func(d time.Duration) float64 { return d.Seconds() }
	return runstats.Stats{
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		Workers:     r.Workers,
		Pfns:        f.Pfns,
		PageSize:    f.PageSize,
		Dumped:      s.Pages,
		ZeroPages:   s.ZeroPages,
		DataBytes:   s.DataBytes,
		MaxRSSKiB:   runstats.PeakRSSKiB("/proc/self/status"),
		MinorFaults: cpuclock.Faults(),
		CopyFaults:  s.Faults,
		FilterWall:  sec(f.Wall),
		FilterCPU:   sec(f.ProcessCPU.Total()),
		ScanCPU:     sec(f.ScanCPU.Total()),
		Cycles:      f.Cycles,
		ScanWall:    sec(f.ScanWall),
		CopyWall:    sec(s.Wall),
		CopyCPU:     sec(s.ProcessCPU.Total()),
		ReadCPU:     sec(s.CPU.Read),
		CompressCPU: sec(s.CPU.Compress),
		ReorderCPU:  sec(s.CPU.Reorder),
		WriteCPU:    sec(s.CPU.Write),
		StoreCPU:    sec(s.CPU.Store),
	}
}

// The errors callers decide on; test with errors.Is.
var (
	// ErrIncomplete: the dump stopped early (a full disk, -L, a signal, a
	// read error) but its files are valid and marked incomplete, as
	// makedumpfile leaves them ("This is an incomplete dumpfile").
	ErrIncomplete = errors.New("incomplete dump")
	// ErrOutputFull: the disk filled up or -L was reached; Run has tried
	// every level of the list. Always with ErrIncomplete.
	ErrOutputFull = errors.New("no space for the dump")
	// ErrWrongRelease: the -i file is for another kernel release
	// (makedumpfile exits 2).
	ErrWrongRelease = errors.New("the kernel version is not the same as the VMCOREINFO file's")
	// ErrUnsupported: the input cannot be dumped as asked: another
	// architecture or page size (source's refusals), a kdump file for -E.
	// No file is written.
	ErrUnsupported = source.ErrUnsupported
)

// unsupportedError is an input that cannot be dumped as asked.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string        { return e.msg }
func (e *unsupportedError) Is(target error) bool { return target == ErrUnsupported }

func unsupported(format string, a ...any) error {
	return &unsupportedError{fmt.Sprintf(format, a...)}
}

// IncompleteError is a dump left valid but incomplete: Err says why, Full
// whether the output ran out of space (then it is also ErrOutputFull), and
// Parts names the split files that did not get all their pages.
type IncompleteError struct {
	Err   error
	Full  bool
	Parts []string
}

func (e *IncompleteError) Error() string {
	if e.Full {
		return fmt.Sprintf("%v: %v: %v", ErrIncomplete, ErrOutputFull, e.Err)
	}
	return fmt.Sprintf("%v: %v", ErrIncomplete, e.Err)
}

func (e *IncompleteError) Unwrap() error { return e.Err }

func (e *IncompleteError) Is(target error) bool {
	return target == ErrIncomplete || e.Full && target == ErrOutputFull
}

// CodecNames are the codecs built in, by name, in -v's order.
func CodecNames() []string {
	var names []string
	for _, c := range codec.All() {
		names = append(names, c.Name)
	}
	return names
}

// codecByName resolves Options.Codec; "" is nil (raw pages).
func codecByName(name string) (*codec.Codec, error) {
	if name == "" {
		return nil, nil
	}
	for _, c := range codec.All() {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("unknown codec %q (have %v)", name, CodecNames())
}

// Check refuses, before anything is opened, the options no input could be
// dumped with: the command line's own mistakes.
func (o Options) Check() error {
	if _, err := codecByName(o.Codec); err != nil {
		return err
	}
	if o.Priority == PriorityOn && o.Out.Shape == ELF {
		return errors.New("--priority: an ELF dump (-E) is written in pfn order; --priority is for kdump-compressed files, -F streams and --split")
	}
	if o.Out.Shape == ELF {
		// ELF holds raw pages; makedumpfile refuses -c/-l/-p/-z with -E too.
		// Unlike makedumpfile, --num-threads is fine: both passes of an
		// ELF dump run on the parallel pipeline.
		if o.Codec != "" {
			return errors.New("-E writes pages uncompressed: it cannot be used with -c, -l, -p, -z or --lz4")
		}
	}
	return nil
}

// applyDefaults fills what the zero values leave open.
func (o *Options) applyDefaults() {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MapSize <= 0 {
		o.MapSize = source.DefaultMapSize
	}
	if o.Program == "" {
		o.Program = "pagepipe"
	}
	if len(o.Levels) == 0 {
		o.Levels = []Level{0}
	}
}

// name is the output as messages name it.
func (o *Options) name() string {
	if o.Out.Stream != nil {
		return "STDOUT"
	}
	if len(o.Out.Paths) == 0 {
		return ""
	}
	return o.Out.Paths[0]
}

// Run makes the dump at the first dump level of the list; when the disk
// fills up or the size limit is reached and more levels are listed, it
// removes the output and starts over at the next one, as makedumpfile
// does (not for a flattened stream, which cannot be taken back).
func Run(ctx context.Context, o Options, ev Events) (Result, error) {
	if ev == nil {
		ev = silent{}
	}
	o.applyDefaults()
	if err := o.Check(); err != nil {
		return Result{}, err
	}
	for i, level := range o.Levels {
		res, err := runLevel(ctx, &o, ev, level)
		if err == nil || !errors.Is(err, ErrOutputFull) || i+1 == len(o.Levels) || o.Out.Stream != nil {
			return res, err
		}
		for _, name := range o.Out.Paths {
			os.Remove(name) // every split file, as makedumpfile does
		}
		ev.Notef(Common, "Retry to create a dumpfile by dump_level(%d).\n", o.Levels[i+1])
	}
	panic("unreachable")
}

// runLevel is one try, at one dump level.
func runLevel(ctx context.Context, o *Options, ev Events, level Level) (Result, error) {
	in, err := prepare(ctx, o, ev, level)
	if err != nil {
		return Result{}, err
	}
	defer in.mem.Close()
	j := &job{o: o, ev: ev, in: in}
	return j.write(ctx)
}
