package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"pagepipe/internal/synth"
)

// runGenVmcore writes a synthetic ELF vmcore: the demo's and the
// benchmarks' input when no real one is at hand.
func runGenVmcore(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("gen-vmcore", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.Int("size", 256, "RAM of the generated machine in MiB")
	seed := fs.Uint64("seed", synth.DefaultSeed, "content seed")
	profile := fs.String("profile", "", "a kernel machine after this era's struct page layout: "+strings.Join(synth.Profiles(), ", "))
	shape := fs.String("shape", "", "a named test shape instead of the default machine: "+strings.Join(shapeNames(), ", "))
	if err := fs.Parse(args); err != nil {
		return exitFailed
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: pagepipe-bench gen-vmcore [--size MIB] [--seed N] [--profile ERA | --shape NAME] OUTPUT")
		return exitFailed
	}
	spec := synth.Default(*size)
	if *profile != "" {
		spec = synth.KernelMachine(*profile, *size)
	}
	if *shape != "" {
		s, ok := synth.Shapes()[*shape]
		if !ok {
			fmt.Fprintf(stderr, "pagepipe-bench: unknown shape %q (have %s)\n", *shape, strings.Join(shapeNames(), ", "))
			return exitFailed
		}
		spec = s
	}
	spec.Seed = *seed
	if err := spec.Validate(); err != nil {
		fmt.Fprintf(stderr, "pagepipe-bench: %s\n", oneLine(err))
		return exitFailed
	}
	if err := synth.WriteFile(fs.Arg(0), spec); err != nil {
		fmt.Fprintf(stderr, "pagepipe-bench: %s\n", oneLine(err))
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: %d MiB of memory in %d PT_LOADs, %d CPUs\n", fs.Arg(0), spec.DataBytes()>>20, len(spec.Segments), spec.CPUs)
	return exitOK
}

func shapeNames() []string {
	names := synth.ShapeNames()
	sort.Strings(names)
	return names
}
