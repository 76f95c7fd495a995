package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"pagepipe/bench"
	"pagepipe/internal/cpuset"
)

// runRoofline is the floor on one CPU (docs/benchmarks.md): each codec's
// pagepipe run beside the parts no dump can do without, measured alone,
// and beside makedumpfile's run with --vs, in alternating rounds.
func runRoofline(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("roofline", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	codecs := fs.String("codec", "l,z,c", "codecs: c, l, p, z, lz4, none")
	level := fs.Int("dump-level", 31, "the dump level")
	cpu := fs.Int("cpu", 0, "the CPU every run and the floor are pinned to (as taskset -c CPU)")
	runs := fs.Int("runs", 7, "rounds (medians)")
	vs := fs.String("vs", "", "makedumpfile to run beside pagepipe: a path, or makedumpfile from $PATH")
	dumpDir := fs.String("dump-dir", defaultDumpDir(), "where the dumps and the floor's write go (removed after)")
	out := fs.String("out", "", "write tables.txt and results.json here")
	pagepipe := fs.String("pagepipe", defaultPagepipe(), "the pagepipe binary to measure")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: pagepipe-bench roofline [--codec LIST] [--dump-level N] [--cpu N] [--runs K] [--vs makedumpfile|PATH] [--out DIR] VMCORE")
		return exitFailed
	}
	failf := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pagepipe roofline: "+format+"\n", a...)
		return exitFailed
	}
	usable, err := cpuset.Usable()
	if err != nil {
		return failf("%s", oneLine(err))
	}
	if !slices.Contains(usable, *cpu) {
		return failf("--cpu %d: not one of this process's CPUs (%s)", *cpu, cpuset.Format(usable))
	}
	set := []int{*cpu}
	cs, err := bench.ParseCodecs(*codecs)
	if err != nil {
		return failf("%s", oneLine(err))
	}
	exe, err := exec.LookPath(*pagepipe)
	if err != nil {
		return failf("--pagepipe: %s", oneLine(err))
	}
	ident, err := binaryIdentity(exe)
	if err != nil {
		return failf("--pagepipe: %s", oneLine(err))
	}
	vmcore := fs.Arg(0)
	rf := &bench.Roofline{Command: "pagepipe-bench roofline " + strings.Join(args, " "), Date: time.Now().UTC().Format(time.RFC3339),
		Vmcore: vmcore, Level: *level, CPUs: set, Host: bench.DescribeHost(), Pagepipe: ident}
	r := &bench.Runner{Pagepipe: exe, Vmcore: vmcore, DumpDir: *dumpDir, Rounds: *runs, Progress: stderr}
	if *vs != "" {
		if r.Makedumpfile, err = exec.LookPath(*vs); err != nil {
			return failf("--vs %s: %s", *vs, oneLine(err))
		}
		if rf.Makedumpfile, err = makedumpfileVersion(r.Makedumpfile); err != nil {
			return failf("--vs %q: %s", *vs, oneLine(err))
		}
	}
	if r.BytesIn, err = memoryBytes(vmcore); err != nil {
		return failf("%s", oneLine(err))
	}
	job, err := bench.FloorSetup(vmcore, *level)
	if err != nil {
		return failf("%s", oneLine(err))
	}
	defer job.Close()
	ctx, stop := stopOnSignals(stderr)
	defer stop()
	if err := bench.RunRoofline(ctx, r, job, rf, cs, *runs); err != nil {
		return failf("%s", oneLine(err))
	}
	if err := bench.WriteRoofline(stdout, rf); err != nil {
		return failf("%s", oneLine(err))
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return failf("--out: %s", oneLine(err))
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
				return failf("--out: %s", oneLine(err))
			}
		}
	}
	return exitOK
}
