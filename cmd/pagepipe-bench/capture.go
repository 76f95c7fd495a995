package main

import (
	"fmt"
	"io"

	"pagepipe/bench"
	"pagepipe/internal/fixture"
)

// runCapture prints the tables of capture-kernel bench runs
// (fixtures/make-capture.sh --plan bench prints each run's directory).
func runCapture(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: pagepipe-bench capture DIR...")
		return exitFailed
	}
	for i, dir := range args {
		c, err := fixture.ReadCapture(dir)
		if err != nil {
			fmt.Fprintf(stderr, "pagepipe-bench capture: %s\n", oneLine(err))
			return exitFailed
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := bench.WriteCaptureBench(stdout, c); err != nil {
			fmt.Fprintf(stderr, "pagepipe-bench capture: %s\n", oneLine(err))
			return exitFailed
		}
	}
	return exitOK
}
