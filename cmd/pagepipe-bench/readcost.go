package main

import (
	"io"
	"strings"

	"pagepipe/bench"
)

// runReadCost measures what reading a vmcore costs with pread and with mmap
// windows of several sizes, in order and at random pages (bench.ReadCost):
// run in a capture kernel on /proc/vmcore (fixtures/make-capture.sh, plan
// bench), it is what the page scan's and the metadata reads' choice of
// mmap rests on.
func runReadCost(args []string, stdout, stderr io.Writer) int {
	c := newCommand("readcost", "pagepipe-bench readcost [--mib N] [--pages N] [--sizes KIB,...] VMCORE", stderr)
	seqMiB := c.Int("mib", 64, "MiB read in order with each method and size")
	pages := c.Int("pages", 2000, "pages read at random places with each method and size")
	sizes := c.String("sizes", "4,64,512,4096", "pread sizes and mmap windows, KiB (multiples of 4)")
	if code, done := c.parse(args); done {
		return code
	}
	if c.NArg() != 1 {
		return c.badUsage()
	}
	ks, err := bench.ParseMapSizes(*sizes)
	if err != nil || strings.Contains(*sizes, "default") {
		return c.failf("--sizes %q: KiB, multiples of 4", *sizes)
	}
	for i := range ks {
		ks[i] <<= 10
	}
	costs, err := bench.MeasureReadCosts(c.Arg(0), int64(*seqMiB)<<20, *pages, ks)
	if err != nil {
		return c.fail(err)
	}
	if err := bench.WriteReadCosts(stdout, costs); err != nil {
		return c.fail(err)
	}
	return exitOK
}
