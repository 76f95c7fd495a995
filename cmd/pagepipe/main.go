// Command pagepipe turns a crashed kernel's memory (/proc/vmcore) into a
// filtered, compressed kdump file on every CPU it may use. It takes
// makedumpfile's command line:
//
//	pagepipe [-c|-l|-p|-z|--lz4] [-d LEVEL] [--num-threads N] VMCORE DUMPFILE
//
// and subcommands of its own: inspect and verify. It is the binary a
// capture kernel's initramfs carries, so it holds nothing else: the bench
// and the vmcore generator are cmd/pagepipe-bench.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"golang.org/x/term"

	"pagepipe/dump"
	"pagepipe/internal/cpuset"
	"pagepipe/internal/memprobe"
	"pagepipe/internal/runstats"
)

// progName ends the final message line ("makedumpfile Completed." when
// pagepipe is installed as makedumpfile, as scripts may look for it).
var progName = "pagepipe"

func main() {
	avail, _ := memprobe.Available() // 0 when unknown: the floor
	collectWhenLarge(gcLimitFor(avail), os.Getenv)
	if name := filepath.Base(os.Args[0]); name == "makedumpfile" {
		progName = name
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exit codes, as makedumpfile's.
const (
	exitOK           = 0
	exitFailed       = 1
	exitWrongRelease = 2
)

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "inspect":
			if len(args) != 2 {
				fmt.Fprintln(stderr, "usage: pagepipe inspect DUMPFILE")
				return exitFailed
			}
			return tool(stderr, dump.Inspect(stdout, args[1]))
		case "verify":
			if len(args) < 3 {
				fmt.Fprintln(stderr, "usage: pagepipe verify VMCORE DUMPFILE...")
				return exitFailed
			}
			for _, d := range args[2:] {
				if err := dump.Verify(stdout, args[1], d); err != nil {
					return tool(stderr, err)
				}
			}
			return exitOK
		}
	}
	return runDump(args, stdin, stdout, stderr)
}

// tool ends a subcommand: its error in one line on stderr, exit 1.
func tool(stderr io.Writer, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "pagepipe: %s\n", oneLine(err))
		return exitFailed
	}
	return exitOK
}

func runDump(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &console{level: 7, stdout: stdout, stderr: stderr, tty: isTerminal(stderr)}
	o, err := parseOptions(args)
	// A line with an option pagepipe does not have is makedumpfile's to
	// answer, whatever pagepipe would make of the rest: its help, its
	// check, its run.
	if reason := o.handOverReason(); err == nil && reason != "" {
		rc, why := sysFallback.handOver(c, reason, args)
		if why == "" {
			return rc
		}
		err = usagef("%s, and there is no makedumpfile to hand over to (%s)", reason, why)
	}
	if err == nil {
		err = o.mdfValues()
	}
	if o.msgLevel >= 0 && o.msgLevel <= 31 {
		c.level = o.msgLevel
	}
	if o.flatten {
		c.stdout = stderr // stdout carries the dump
	}
	if err != nil {
		return usageError(c, err)
	}
	switch {
	case o.help:
		printUsage(stdout)
		return exitOK
	case o.version:
		printVersion(stdout)
		return exitOK
	}
	if err := o.values(); err != nil {
		c.level = o.msgLevel
		return usageError(c, err)
	}
	c.level = o.msgLevel
	err = o.check()
	if o.checkParams {
		if err != nil {
			return usageError(c, err)
		}
		for _, d := range o.differences() {
			c.msg("%s\n", d)
		}
		return exitOK
	}
	if err == nil && o.genVMCOREINFO != "" {
		return generateVMCOREINFO(c, o)
	}
	if err == nil && !o.rearrange && !o.reassemble {
		// The architecture is decided before any output exists.
		if reason := dump.Foreign(o.args[0], o.vmcoreinfo); reason != "" {
			if rc, why := sysFallback.handOver(c, reason, args); why == "" {
				return rc
			}
		}
	}
	debugHeader(c, args)
	if err != nil {
		return usageError(c, err)
	}
	if err := cpuset.Confine(o.cpus); err != nil {
		return fail(c, err)
	}
	noteNoops(c, o)
	if o.rearrange {
		err := dump.Rearrange(context.Background(), dump.RearrangeOptions{Stream: stdin, Path: o.args[0], Force: o.force, DryRun: o.dryRun})
		if err != nil {
			return fail(c, err)
		}
		c.msg("\nThe dumpfile is saved to %s.\n", o.args[0])
		c.msg("\n%s Completed.\n", progName)
		return exitOK
	}
	if o.reassemble {
		if len(o.args) < 3 {
			return fail(c, fmt.Errorf("--reassemble: need at least two split DUMPFILEs and the DUMPFILE to write, got %d arguments", len(o.args)))
		}
		out := o.args[len(o.args)-1]
		err := dump.Reassemble(context.Background(), dump.ReassembleOptions{Parts: o.args[:len(o.args)-1], Path: out, Force: o.force})
		if err != nil {
			return fail(c, err)
		}
		c.msg("\nThe dumpfile is saved to %s.\n", out)
		c.msg("\n%s Completed.\n", progName)
		return exitOK
	}
	if o.dumpDmesg {
		d := dump.DmesgOptions{Input: o.args[0], VMCOREINFOFile: o.vmcoreinfo, Force: o.force, Partial: o.partialDmesg,
			CallerID: o.dmesgFormat == dmesgCallerID, Program: progName}
		logfile := "STDOUT"
		if o.flatten {
			d.Stream = stdout
		} else {
			d.Log, logfile = o.args[1], o.args[1]
		}
		if err := dump.Dmesg(d, c); err != nil {
			return fail(c, err)
		}
		c.msg("\nThe dmesg log is saved to %s.\n", logfile)
		c.msg("\n%s Completed.\n", progName)
		return exitOK
	}
	if o.memUsage {
		return memUsage(c, o, stdout)
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return fail(c, fmt.Errorf("--cpuprofile: %w", err))
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail(c, fmt.Errorf("--cpuprofile: %w", err))
		}
		defer pprof.StopCPUProfile()
	}
	if o.heapprofile != "" {
		stopHeap, err := startHeapProfile(o.heapprofile)
		if err != nil {
			return fail(c, err)
		}
		defer func() {
			if err := stopHeap(); err != nil {
				c.errorf("%v\n", err)
			}
		}()
	}
	d := o.dumpOptions(stdout)
	ctx, stop := stopOnSignals(c)
	defer stop()
	res, err := dump.Run(ctx, d, c)
	if err != nil {
		return fail(c, err)
	}
	c.printReport(res)
	if o.statsFile != "" {
		if err := runstats.Write(o.statsFile, res.Stats()); err != nil {
			return fail(c, err)
		}
	}
	// The CPUs and workers the dump ran with: without --cpus and
	// --num-threads they are the CPUs the kernel brought up (nr_cpus= in a
	// capture kernel), which a test on a real capture kernel reads here.
	// Report reads every thread's /proc status: only when it is printed.
	if c.level&mlDebug != 0 {
		c.debug("%s; workers %d\n", cpuset.Report(), d.Workers)
	}
	if o.split {
		c.msg("\nThe dumpfiles are saved to %s.\n", joinNames(o.args[1:]))
	} else {
		c.msg("\nThe dumpfile is saved to %s.\n", o.outName())
	}
	c.msg("\n%s Completed.\n", progName)
	return exitOK
}

// generateVMCOREINFO is -g: the VMCOREINFO file of a vmlinux.
func generateVMCOREINFO(c *console, o *options) int {
	if err := dump.GenerateVMCOREINFO(o.vmlinux, o.genVMCOREINFO, progName, c); err != nil {
		return fail(c, err)
	}
	c.msg("\nThe vmcoreinfo is saved to %s.\n", o.genVMCOREINFO)
	c.msg("\n%s Completed.\n", progName)
	return exitOK
}

// stopOnSignals returns a context cancelled by the first SIGINT, SIGTERM
// or SIGHUP, so the dump is finished valid and marked incomplete; a second
// signal exits at once.
func stopOnSignals(c *console) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			c.errorf("pagepipe: %v: stopping (a second signal exits at once)\n", s)
			cancel(fmt.Errorf("interrupted by %v", s))
		case <-done:
			return
		}
		select {
		case <-sigs:
			os.Exit(exitFailed)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// noteNoops says at debug level which makedumpfile options pagepipe
// accepts but has no use for.
func noteNoops(c *console, o *options) {
	if o.blockOrder != 4 {
		c.debug("-b %d: accepted, no effect (pagepipe writes in 1 MiB pieces)\n", o.blockOrder)
	}
	if o.cyclicBufferKB != 0 {
		c.debug("--cyclic-buffer %d: the 2nd bitmap is held %d KiB at a time, its partial pages as makedumpfile builds them in cycles\n", o.cyclicBufferKB, o.cyclicBufferKB)
	}
	if o.workDir != "" {
		c.debug("--work-dir %s: no file is written there; the bitmaps' partial pages are as makedumpfile builds them in one cycle\n", o.workDir)
	}
	if o.nonMmap {
		c.debug("--non-mmap: reading the vmcore with pread\n")
	}
	if o.excludeVmemmap && o.workDir == "" {
		c.debug("-e without --work-dir (makedumpfile requires it): the bitmaps are built as makedumpfile builds them with it, in one cycle\n")
	}
}

// joinNames lists names as makedumpfile does: "A, B, and C".
func joinNames(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + ", and " + names[len(names)-1]
}

// fail reports err in one line, prints the failure line and returns the
// exit code: 2 when the -i file is for another kernel, else 1.
func fail(c *console, err error) int {
	c.errorf("pagepipe: %s\n", oneLine(err))
	if errors.Is(err, dump.ErrIncomplete) {
		c.msg("This is an incomplete dumpfile, but might analyzable.\n") // makedumpfile's words
	}
	c.msg("\n%s Failed.\n", progName)
	if errors.Is(err, dump.ErrWrongRelease) {
		return exitWrongRelease
	}
	return exitFailed
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func printVersion(w io.Writer) {
	fmt.Fprintf(w, "pagepipe: version %s (a makedumpfile-compatible dump writer)\n\n", version)
	fmt.Fprintf(w, "codecs: %s (all built in)\n", strings.Join(dump.CodecNames(), ", "))
}

// memUsage prints the running kernel's page usage (--mem-usage), as
// makedumpfile does: the table on stdout, no "Completed" line.
func memUsage(c *console, o *options, stdout io.Writer) int {
	ctx, stop := stopOnSignals(c)
	defer stop()
	threads := o.threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	u, err := dump.ComputeMemUsage(ctx, dump.MemUsageOptions{Input: o.args[0], Iomem: dump.IomemOf(o.args[0]), Workers: threads})
	if err != nil {
		return fail(c, err)
	}
	u.Print(stdout)
	return exitOK
}

// process is pagepipe's process-wide settings around the engine's passes
// (dump.Process): the engine, a library, makes none itself.
type process struct{}

// CopyPass gives the runtime a second P while a copy pass runs on one.
// With one P, the runtime's monitor takes it from a worker in a write of
// more than about 20 µs, hands it to another thread and back, and keeps
// polling every 20 µs: on one CPU that churn doubled the context switches
// of a -l pass. A second P, idle, makes it leave the syscall alone
// (docs/scaling.md). The workers were counted before: still one.
func (process) CopyPass(int) func() {
	if runtime.GOMAXPROCS(0) != 1 {
		return func() {}
	}
	prev := runtime.GOMAXPROCS(2)
	return func() { runtime.GOMAXPROCS(prev) }
}

// Collect collects the garbage the engine just dropped.
func (process) Collect() { runtime.GC() }
