package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"pagepipe/bench"
	"pagepipe/internal/cpuset"
)

// runRoofline is the floor on one CPU (docs/benchmarks.md): each codec's
// pagepipe run beside the parts no dump can do without, measured alone,
// and beside makedumpfile's run with --vs, in alternating rounds.
func runRoofline(args []string, stdout, stderr io.Writer) int {
	c := newCommand("roofline", "pagepipe-bench roofline [--codec LIST] [--dump-level N] [--cpu N] [--runs K] [--vs makedumpfile|PATH] [--out DIR] VMCORE", stderr)
	codecs := c.String("codec", "l,z,c", "codecs: c, l, p, z, lz4, none")
	level := c.Int("dump-level", 31, "the dump level")
	cpu := c.Int("cpu", 0, "the CPU every run and the floor are pinned to (as taskset -c CPU)")
	runs := c.Int("runs", 7, "rounds (medians)")
	vs := c.String("vs", "", "makedumpfile to run beside pagepipe: a path, or makedumpfile from $PATH")
	dumpDir := c.String("dump-dir", defaultDumpDir(), "where the dumps and the floor's write go (removed after)")
	out := c.String("out", "", "write tables.txt and results.json here")
	pagepipe := c.String("pagepipe", defaultPagepipe(), "the pagepipe binary to measure")
	if code, done := c.parse(args); done {
		return code
	}
	if c.NArg() != 1 {
		return c.badUsage()
	}
	usable, err := cpuset.Usable()
	if err != nil {
		return c.fail(err)
	}
	if !slices.Contains(usable, *cpu) {
		return c.failf("--cpu %d: not one of this process's CPUs (%s)", *cpu, cpuset.Format(usable))
	}
	set := []int{*cpu}
	cs, err := bench.ParseCodecs(*codecs)
	if err != nil {
		return c.fail(err)
	}
	exe, ident, err := measured(*pagepipe)
	if err != nil {
		return c.fail(err)
	}
	vmcore := c.Arg(0)
	rf := &bench.Roofline{Command: "pagepipe-bench roofline " + strings.Join(args, " "), Date: time.Now().UTC().Format(time.RFC3339),
		Vmcore: vmcore, Level: *level, CPUs: set, Host: bench.DescribeHost(), Pagepipe: ident}
	r := &bench.Runner{Pagepipe: exe, Vmcore: vmcore, DumpDir: *dumpDir, Rounds: *runs, Progress: stderr}
	if *vs != "" {
		if r.Makedumpfile, err = exec.LookPath(*vs); err != nil {
			return c.failf("--vs %s: %s", *vs, oneLine(err))
		}
		if rf.Makedumpfile, err = makedumpfileVersion(r.Makedumpfile); err != nil {
			return c.failf("--vs %q: %s", *vs, oneLine(err))
		}
	}
	if r.BytesIn, err = memoryBytes(vmcore); err != nil {
		return c.fail(err)
	}
	job, err := bench.FloorSetup(vmcore, *level)
	if err != nil {
		return c.fail(err)
	}
	defer job.Close()
	ctx, stop := stopOnSignals(stderr)
	defer stop()
	if err := bench.RunRoofline(ctx, r, job, rf, cs, *runs); err != nil {
		return c.fail(err)
	}
	if err := bench.WriteRoofline(stdout, rf); err != nil {
		return c.fail(err)
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return c.failf("--out: %s", oneLine(err))
		}
		for name, write := range map[string]func(io.Writer) error{
			"tables.txt":   func(w io.Writer) error { return bench.WriteRoofline(w, rf) },
			"results.json": func(w io.Writer) error { e := json.NewEncoder(w); e.SetIndent("", "  "); return e.Encode(rf) },
		} {
			f, err := os.Create(filepath.Join(*out, name))
			if err == nil {
				err = write(f)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				return c.failf("--out: %s", oneLine(err))
			}
		}
	}
	return exitOK
}
