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
	used := fs.Float64("used", 0, "with --profile: the fraction of memory in use (0: about 1 GiB's worth, at most 0.6)")
	shape := fs.String("shape", "", "a named test shape instead of the default machine: "+strings.Join(shapeNames(), ", "))
	if err := fs.Parse(args); err != nil {
		return exitFailed
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: pagepipe-bench gen-vmcore [--size MIB] [--seed N] [--profile ERA [--used FRACTION] | --shape NAME] OUTPUT")
		return exitFailed
	}
	if *used != 0 && *profile == "" {
		fmt.Fprintln(stderr, "pagepipe-bench: --used needs --profile (a kernel machine)")
		return exitFailed
	}
	spec := machineSpec(*size, *profile, *used)
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

// machineSpec is the generated machine of sizeMiB: synth.Default, or with
// a profile a kernel machine of that era, used (when not 0) the fraction
// of its memory in use.
func machineSpec(sizeMiB int, profile string, used float64) synth.Spec {
	if profile == "" {
		return synth.Default(sizeMiB)
	}
	spec := synth.KernelMachine(profile, sizeMiB)
	spec.Kernel.Used = used
	return spec
}

func shapeNames() []string {
	names := synth.ShapeNames()
	sort.Strings(names)
	return names
}
