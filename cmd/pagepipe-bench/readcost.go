package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"pagepipe/bench"
)

// runReadCost measures what reading a vmcore costs with pread and with mmap
// windows of several sizes, in order and at random pages (bench.ReadCost):
// run in a capture kernel on /proc/vmcore (fixtures/make-capture.sh, plan
// bench), it is what the page scan's and the metadata reads' choice of
// mmap rests on.
func runReadCost(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("readcost", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	seqMiB := fs.Int("mib", 64, "MiB read in order with each method and size")
	pages := fs.Int("pages", 2000, "pages read at random places with each method and size")
	sizes := fs.String("sizes", "4,64,512,4096", "pread sizes and mmap windows, KiB (multiples of 4)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: pagepipe-bench readcost [--mib N] [--pages N] [--sizes KIB,...] VMCORE")
		return exitFailed
	}
	ks, err := bench.ParseMapSizes(*sizes)
	if err != nil || strings.Contains(*sizes, "default") {
		fmt.Fprintf(stderr, "pagepipe-bench readcost: --sizes %q: KiB, multiples of 4\n", *sizes)
		return exitFailed
	}
	for i := range ks {
		ks[i] <<= 10
	}
	costs, err := bench.MeasureReadCosts(fs.Arg(0), int64(*seqMiB)<<20, *pages, ks)
	if err != nil {
		fmt.Fprintf(stderr, "pagepipe-bench readcost: %s\n", oneLine(err))
		return exitFailed
	}
	if err := bench.WriteReadCosts(stdout, costs); err != nil {
		fmt.Fprintf(stderr, "pagepipe-bench readcost: %s\n", oneLine(err))
		return exitFailed
	}
	return exitOK
}
