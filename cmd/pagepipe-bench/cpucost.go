package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"pagepipe/bench"
)

// runCPUCost times, alone, the operations a dump does per page or chunk
// (bench.CPUCost): in the capture kernel under QEMU and on the host, to
// tell what the emulator makes dear from what the program does.
func runCPUCost(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("cpucost", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 20000, "operations of each kind")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *n < 4 {
		fmt.Fprintln(stderr, "usage: pagepipe-bench cpucost [--n N]")
		return exitFailed
	}
	costs, err := bench.MeasureCPUCosts(*n)
	if err == nil {
		err = bench.WriteCPUCosts(stdout, costs)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagepipe-bench cpucost: %s\n", oneLine(err))
		return exitFailed
	}
	return exitOK
}
