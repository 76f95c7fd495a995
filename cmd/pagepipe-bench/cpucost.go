package main

import (
	"io"

	"pagepipe/bench"
)

// runCPUCost times, alone, the operations a dump does per page or chunk
// (bench.CPUCost): in the capture kernel under QEMU and on the host, to
// tell what the emulator makes dear from what the program does.
func runCPUCost(args []string, stdout, stderr io.Writer) int {
	c := newCommand("cpucost", "pagepipe-bench cpucost [--n N]", stderr)
	n := c.Int("n", 20000, "operations of each kind")
	if code, done := c.parse(args); done {
		return code
	}
	if c.NArg() != 0 || *n < 4 {
		return c.badUsage()
	}
	costs, err := bench.MeasureCPUCosts(*n)
	if err == nil {
		err = bench.WriteCPUCosts(stdout, costs)
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}
