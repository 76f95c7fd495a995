package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"pagepipe/internal/synth"
)

// runGenVmcore writes a synthetic ELF vmcore: the demo's and the
// benchmarks' input when no real one is at hand.
func runGenVmcore(args []string, stdout, stderr io.Writer) int {
	c := newCommand("gen-vmcore", "pagepipe-bench gen-vmcore [--size MIB] [--seed N] [--profile ERA [--used FRACTION] | --shape NAME] OUTPUT", stderr)
	size := c.Int("size", 256, "RAM of the generated machine in MiB")
	seed := c.Uint64("seed", synth.DefaultSeed, "content seed")
	profile := c.String("profile", "", "a kernel machine after this era's struct page layout: "+strings.Join(synth.Profiles(), ", "))
	used := c.Float64("used", 0, "with --profile: the fraction of memory in use (0: about 1 GiB's worth, at most 0.6)")
	shape := c.String("shape", "", "a named test shape instead of the default machine: "+strings.Join(shapeNames(), ", "))
	if code, done := c.parse(args); done {
		return code
	}
	if c.NArg() != 1 {
		return c.badUsage()
	}
	if *used != 0 && *profile == "" {
		return c.failf("--used needs --profile (a kernel machine)")
	}
	spec := machineSpec(*size, *profile, *used)
	if *shape != "" {
		s, ok := synth.Shapes()[*shape]
		if !ok {
			return c.failf("unknown shape %q (have %s)", *shape, strings.Join(shapeNames(), ", "))
		}
		spec = s
	}
	spec.Seed = *seed
	if err := spec.Validate(); err != nil {
		return c.fail(err)
	}
	if err := synth.WriteFile(c.Arg(0), spec); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(stdout, "%s: %d MiB of memory in %d PT_LOADs, %d CPUs\n", c.Arg(0), spec.DataBytes()>>20, len(spec.Segments), spec.CPUs)
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
