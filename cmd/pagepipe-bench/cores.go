package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"pagepipe/bench"
	"pagepipe/internal/cpuset"
	"pagepipe/internal/synth"
)

// runCores is the many-core study (make bench-cores; docs/scaling.md,
// "Many cores"): on whatever machine it is carried to, with nothing but
// this binary and pagepipe's, it generates a kernel machine, measures the
// seeds' tables 001 (throughput against workers on the widest CPU set) and
// 003 (throughput per CPU against CPUs, a worker per CPU) for each codec
// and level, round after round until its time budget would be passed, and
// writes them with the machine's name.
func runCores(args []string, stdout, stderr io.Writer) int {
	start := time.Now()
	c := newCommand("cores", "pagepipe-bench cores [--workers LIST] [--cpus LIST] [--codec LIST] [--dump-level LIST] [--size MIB] [--runs K] [--budget DURATION] [--out DIR] [VMCORE]", stderr)
	workers := c.String("workers", "1,2,4,8,16", "worker counts on the widest CPU set (table 001)")
	cpus := c.String("cpus", "", "CPU sets, each a count N or a range A-B (table 003; default: 1, 2, 4, 8, 16 CPUs, as many as usable)")
	codecs := c.String("codec", "l,c", "codecs: c, l, p, z, lz4, none")
	levels := c.String("dump-level", "31,1", "dump levels")
	size := c.Int("size", 0, "the generated machine's memory in MiB (default: 512 per CPU of the widest set, 1 to 8 GiB)")
	profile := c.String("profile", "6.1", "the generated machine's kernel era: "+strings.Join(synth.Profiles(), ", "))
	used := c.Float64("used", 0.6, "the fraction of the generated machine's memory in use")
	runs := c.Int("runs", 5, "rounds at most (each runs every configuration once; medians)")
	budget := c.Duration("budget", 8*time.Minute, "the time the whole study may take, generation included: no round starts that would end past it")
	workDir := c.String("work-dir", defaultDumpDir(), "where the generated vmcore is written (removed at the end)")
	dumpDir := c.String("dump-dir", defaultDumpDir(), "where each run's dump goes (removed after the run)")
	outDir := c.String("out", "", "write tables.txt, results.csv, results.json and the plots (threads, cpus; PNG, SVG) here")
	pagepipe := c.String("pagepipe", defaultPagepipe(), "the pagepipe binary to measure")
	if code, done := c.parse(args); done {
		return code
	}
	if c.NArg() > 1 {
		return c.failf("at most one VMCORE (without one, a machine is generated)")
	}
	usable, err := cpuset.Usable()
	if err != nil {
		return c.fail(err)
	}
	if *cpus == "" {
		*cpus = coresCPUs(len(usable))
	}
	m, err := benchMatrix(usable, *workers, *cpus, "default", *codecs, *levels, "")
	if err != nil {
		return c.fail(err)
	}
	if *runs < 1 {
		return c.failf("--runs %d: at least 1", *runs)
	}
	widest := 0
	for _, set := range m.CPUs {
		widest = max(widest, len(set))
	}
	if *size == 0 {
		*size = min(max(512*widest, 1024), 8192)
	}
	exe, ident, err := measured(*pagepipe)
	if err != nil {
		return c.fail(err)
	}
	ctx, stop := stopOnSignals(stderr)
	defer stop()

	st := &bench.Study{
		Command:  "pagepipe-bench cores " + strings.Join(args, " "),
		Date:     start.UTC().Format(time.RFC3339),
		Pagepipe: ident,
	}
	host := bench.DescribeHost()
	st.Host = &host
	vmcore := c.Arg(0)
	if vmcore == "" {
		spec := machineSpec(*size, *profile, *used)
		if err := spec.Validate(); err != nil {
			return c.failf("--size %d --profile %s --used %g: %s", *size, *profile, *used, oneLine(err))
		}
		if err := os.MkdirAll(*workDir, 0o755); err != nil {
			return c.failf("--work-dir: %s", oneLine(err))
		}
		f, err := os.CreateTemp(*workDir, "pagepipe-cores-*.vmcore")
		if err != nil {
			return c.failf("--work-dir: %s", oneLine(err))
		}
		f.Close()
		vmcore = f.Name()
		defer os.Remove(vmcore)
		fmt.Fprintf(stderr, "cores: generating a %d MiB %s machine, %g in use: %s\n", *size, *profile, *used, vmcore)
		t := time.Now()
		if err := synth.WriteFile(vmcore, spec); err != nil {
			return c.failf("generate vmcore: %s", oneLine(err))
		}
		st.Notes = append(st.Notes, fmt.Sprintf("the vmcore: pagepipe-bench gen-vmcore --profile %s --size %d --used %g (generated in %s)",
			*profile, *size, *used, time.Since(t).Round(100*time.Millisecond)))
	}
	st.Vmcore = vmcore
	if st.BytesIn, err = memoryBytes(vmcore); err != nil {
		return c.fail(err)
	}
	st.UsableCPUs = cpuset.Format(usable)
	if st.Machine, err = measureMachine(m.CPUs, vmcore, *dumpDir, stderr); err != nil {
		return c.fail(err)
	}
	r := &bench.Runner{Pagepipe: exe, Vmcore: vmcore, DumpDir: *dumpDir, Rounds: *runs, BytesIn: st.BytesIn,
		Progress: stderr, TTY: isTerminal(stderr), Deadline: start.Add(*budget)}
	st.Notes = append(st.Notes, "every run is pinned to the CPUs of its row (the forking thread's CPU set); pagepipe's GOMAXPROCS follows")
	st.Runs, err = r.Run(ctx, bench.CoresConfigs(m.Workers, m.CPUs, m.Codecs, m.Levels))
	st.Notes = append(st.Notes, r.Notes...)
	if err != nil {
		return c.fail(err)
	}
	if err := checkPinning(st.Runs); err != nil {
		return c.fail(err)
	}
	if err := st.Analyze(); err != nil {
		return c.fail(err)
	}
	st.Notes = append(st.Notes, fmt.Sprintf("the study took %s of a %s budget", time.Since(start).Round(time.Second), *budget))
	if err := bench.WriteCoresTables(stdout, st); err != nil {
		return c.fail(err)
	}
	if *outDir != "" {
		paths, err := bench.WriteCoresAll(*outDir, st)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(paths, ", "))
	}
	return exitOK
}

// coresCPUs is the default CPU sets: 1, 2, 4, 8 and 16 CPUs, as many of
// them as usable, and all usable CPUs up to 16 when that is none of them.
func coresCPUs(usable int) string {
	top := min(usable, 16)
	var sets []string
	for n := 1; n <= top; n *= 2 {
		sets = append(sets, strconv.Itoa(n))
	}
	if sets[len(sets)-1] != strconv.Itoa(top) {
		sets = append(sets, strconv.Itoa(top))
	}
	return strings.Join(sets, ",")
}

// checkPinning fails when a pagepipe run's GOMAXPROCS was not its CPU
// count: the run was not confined to its CPUs.
func checkPinning(runs []bench.Run) error {
	for _, run := range runs {
		if run.Program == bench.Pagepipe && run.GOMAXPROCS != len(run.CPUs) {
			return fmt.Errorf("a pagepipe run on CPUs %s had GOMAXPROCS %d: the pinning did not take", run.CPUList(), run.GOMAXPROCS)
		}
	}
	return nil
}

// binaryIdentity is the binary's version line and the start of its
// SHA-256: which pagepipe a study measured, wherever it was carried.
func binaryIdentity(exe string) (string, error) {
	h, err := fileHash(exe)
	if err != nil {
		return "", err
	}
	out, _ := exec.Command(exe, "-v").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return fmt.Sprintf("%s, sha256 %s (%s)", filepath.Base(exe), h[:16], line), nil
}
