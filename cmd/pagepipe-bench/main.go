// Command pagepipe-bench holds what pagepipe's developers run and a
// capture kernel never needs, kept out of the dump binary so that it stays
// small (no plotting libraries, fonts or image codecs in an initramfs):
//
//	pagepipe-bench [--workers LIST] [--cpus LIST] [--codec LIST] [--vs makedumpfile|PATH] [--out DIR] VMCORE
//	pagepipe-bench cores [--workers LIST] [--cpus LIST] [--codec LIST] [--budget DURATION] [--out DIR]
//	pagepipe-bench roofline [--codec LIST] [--cpu N] [--runs K] [--vs makedumpfile|PATH] VMCORE
//	pagepipe-bench capture DIR...
//	pagepipe-bench cpucost [--n N]
//	pagepipe-bench readcost [--mib N] [--pages N] [--sizes KIB,...] VMCORE
//	pagepipe-bench gen-vmcore [--size MIB] [--seed N] [--profile ERA [--used F] | --shape NAME] OUTPUT
//
// The first is the scaling study (docs/scaling.md): it runs the pagepipe
// binary (--pagepipe, by default the one beside this) and makedumpfile as
// child processes; the second the many-core study (make bench-cores), with
// nothing but the two binaries and a vmcore it generates; roofline each
// codec's run on one CPU beside the parts no dump can do without; capture
// the tables of capture-kernel bench runs; cpucost what single operations
// cost where it runs; readcost what
// pread and mmap windows cost on a vmcore (/proc/vmcore in a capture
// kernel); gen-vmcore writes a synthetic vmcore.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/term"
)

const (
	exitOK     = 0
	exitFailed = 1
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "gen-vmcore":
			return runGenVmcore(args[1:], stdout, stderr)
		case "cores":
			return runCores(args[1:], stdout, stderr)
		case "readcost":
			return runReadCost(args[1:], stdout, stderr)
		case "roofline":
			return runRoofline(args[1:], stdout, stderr)
		case "capture":
			return runCapture(args[1:], stdout, stderr)
		case "cpucost":
			return runCPUCost(args[1:], stdout, stderr)
		}
	}
	return runBench(args, stdout, stderr)
}

// stopOnSignals returns a context cancelled by the first SIGINT, SIGTERM
// or SIGHUP: the study stops its runs and exits.
func stopOnSignals(stderr io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "pagepipe bench: %v: stopping\n", s)
			cancel(fmt.Errorf("interrupted by %v", s))
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// oneLine flattens an error to the single line users see.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
