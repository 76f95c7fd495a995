package main

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
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
	"pagepipe/source"
)

// runBench is the scaling study: a matrix of worker counts, CPU sets, map
// sizes, codecs and dump levels, each run a child process (the pagepipe
// binary, or makedumpfile with --vs makedumpfile) pinned to its CPUs. See
// docs/scaling.md.
func runBench(args []string, stdout, stderr io.Writer) int {
	c := newCommand("bench", "pagepipe-bench [--pagepipe BIN] [--workers LIST] [--cpus LIST] [--map-size LIST] [--codec LIST] [--dump-level LIST] [--runs K] [--vs makedumpfile|PATH] [--out DIR] (VMCORE | --gen-size MIB [--profile ERA])", stderr)
	genSize := c.Int("gen-size", 0, "generate a vmcore of this many MiB instead of reading VMCORE (cached)")
	profile := c.String("profile", "", "with --gen-size: a kernel machine of this era: "+strings.Join(synth.Profiles(), ", "))
	seed := c.Uint64("seed", synth.DefaultSeed, "with --gen-size: content seed")
	workers := c.String("workers", "1,2,4", "worker counts (--num-threads)")
	cpus := c.String("cpus", "", "CPU sets: each item a count N (the first N usable CPUs) or a range A-B (default: every usable CPU)")
	mapSizes := c.String("map-size", "default", "pagepipe's --map-size in KiB, or default (pread on an ordinary file)")
	codecs := c.String("codec", "c", "codecs: c, l, p, z, lz4, none")
	levels := c.String("dump-level", "31", "dump levels")
	runs := c.Int("runs", 3, "runs of each configuration (median, min, max)")
	vs := c.String("vs", "", "run the same jobs with this makedumpfile too: a path, or makedumpfile from $PATH")
	outDir := c.String("out", "", "write tables.txt, results.csv, results.json and the plots (PNG, SVG) here")
	dumpDir := c.String("dump-dir", defaultDumpDir(), "where each run's dump goes (removed after the run)")
	workDir := c.String("work-dir", "", "where a generated vmcore is cached (default: the fixture directory)")
	pagepipe := c.String("pagepipe", defaultPagepipe(), "the pagepipe binary to measure")
	if code, done := c.parse(args); done {
		return code
	}
	usable, err := cpuset.Usable()
	if err != nil {
		return c.fail(err)
	}
	m, err := benchMatrix(usable, *workers, *cpus, *mapSizes, *codecs, *levels, *vs)
	if err != nil {
		return c.fail(err)
	}
	if *runs < 1 {
		return c.failf("--runs %d: at least 1", *runs)
	}
	ctx, stop := stopOnSignals(stderr)
	defer stop()

	var vmcore string
	switch {
	case c.NArg() == 1 && *genSize == 0:
		vmcore = c.Arg(0)
	case c.NArg() == 0 && *genSize > 0:
		if vmcore, err = generatedVmcore(*workDir, *genSize, *profile, *seed, stderr); err != nil {
			return c.fail(err)
		}
	default:
		return c.failf("need VMCORE or --gen-size MIB (not both)")
	}
	exe, ident, err := measured(*pagepipe)
	if err != nil {
		return c.fail(err)
	}
	r := &bench.Runner{Pagepipe: exe, Vmcore: vmcore, DumpDir: *dumpDir, Rounds: *runs, Progress: stderr, TTY: isTerminal(stderr)}
	st := &bench.Study{
		Command:  "pagepipe bench " + strings.Join(args, " "),
		Date:     time.Now().UTC().Format(time.RFC3339),
		Vmcore:   vmcore,
		Pagepipe: ident,
	}
	if m.VsMakedumpfile {
		if r.Makedumpfile, err = exec.LookPath(*vs); err != nil {
			return c.failf("--vs %s: %s", *vs, oneLine(err))
		}
		if st.Makedumpfile, err = makedumpfileVersion(r.Makedumpfile); err != nil {
			return c.failf("--vs %q: only makedumpfile can be compared (%s)", *vs, oneLine(err))
		}
	}
	if r.BytesIn, err = memoryBytes(vmcore); err != nil {
		return c.fail(err)
	}
	st.BytesIn = r.BytesIn
	st.UsableCPUs = cpuset.Format(usable)

	if st.Machine, err = measureMachine(m.CPUs, vmcore, *dumpDir, stderr); err != nil {
		return c.fail(err)
	}

	cfgs, notes := m.Configs()
	st.Notes = notes
	if m.VsMakedumpfile {
		st.Notes = append(st.Notes, "makedumpfile at 1 worker runs serially (no --num-threads); N > 1 is --num-threads N")
	}
	st.Notes = append(st.Notes, "every run is pinned to the CPUs of its row (the forking thread's CPU set); pagepipe's GOMAXPROCS follows")
	st.Runs, err = r.Run(ctx, cfgs)
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
	if err := bench.WriteTables(stdout, st); err != nil {
		return c.fail(err)
	}
	if *outDir != "" {
		paths, err := bench.WriteAll(*outDir, st)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", strings.Join(paths, ", "))
	}
	return exitOK
}

// measureMachine is what the machine gives, apart from the programs: the
// cores of throughput of each CPU set, the source's and the sink's rates.
func measureMachine(sets [][]int, vmcore, dumpDir string, stderr io.Writer) (bench.Machine, error) {
	fmt.Fprintf(stderr, "bench: measuring the machine (source and sink rates, cores per CPU set)\n")
	m := bench.Machine{Capacity: map[string]float64{}}
	for _, set := range sets {
		c, err := bench.Capacity(set)
		if err != nil {
			return m, err
		}
		m.Capacity[cpuset.Format(set)] = c
	}
	var err error
	if m.ReadRate, err = bench.ReadRate(vmcore, 1<<30); err != nil {
		return m, err
	}
	m.WriteRate, err = bench.WriteRate(dumpDir)
	return m, err
}

// benchMatrix reads the matrix flags; --cpus picks from usable.
func benchMatrix(usable []int, workers, cpus, mapSizes, codecs, levels, vs string) (bench.Matrix, error) {
	var m bench.Matrix
	var err error
	if m.Workers, err = bench.ParseInts("workers", workers, 1); err != nil {
		return m, err
	}
	if cpus == "" {
		cpus = strconv.Itoa(len(usable))
	}
	if m.CPUs, err = bench.ParseCPUSets(cpus, usable); err != nil {
		return m, err
	}
	if m.MapSizes, err = bench.ParseMapSizes(mapSizes); err != nil {
		return m, err
	}
	if m.Codecs, err = bench.ParseCodecs(codecs); err != nil {
		return m, err
	}
	if m.Levels, err = bench.ParseLevels(levels); err != nil {
		return m, err
	}
	// --vs PATH: a makedumpfile binary, or "makedumpfile" from $PATH.
	m.VsMakedumpfile = vs != ""
	return m, nil
}

// defaultDumpDir is /dev/shm when the machine has it: the dumps are
// written to memory, since a disk's speed is not what the bench measures.
func defaultDumpDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// memoryBytes is the crashed machine's memory: pages with data × page size.
func memoryBytes(vmcore string) (int64, error) {
	v, err := source.OpenMemory(vmcore)
	if err != nil {
		return 0, fmt.Errorf("open vmcore: %w", err)
	}
	defer v.Close()
	present, _ := v.Bitmaps(v.Pfns(), source.PartialPages{})
	return int64(present.Count(0, present.Len())) * int64(v.PageSize()), nil
}

// makedumpfileVersion returns the first line of PATH -v, which must be
// makedumpfile's "makedumpfile: version X" line.
func makedumpfileVersion(path string) (string, error) {
	out, _ := exec.Command(path, "-v").CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	// Any other program given to --vs would be timed as if it dumped.
	if !strings.HasPrefix(line, "makedumpfile: version ") {
		return "", fmt.Errorf("%s -v printed %q, not makedumpfile's version line", path, line)
	}
	return line, nil
}

// generatedVmcore returns a generated vmcore of sizeMiB after profile,
// writing it on first use into dir (default: the fixture directory). The
// file is keyed by its inputs and by this binary, since the generator is
// part of it; older files of the same inputs are removed, as they may be
// gigabytes on a tmpfs.
func generatedVmcore(dir string, sizeMiB int, profile string, seed uint64, stderr io.Writer) (string, error) {
	if dir == "" {
		dir = os.Getenv("PAGEPIPE_FIXTURES")
		if dir == "" {
			dir = filepath.Join(os.TempDir(), "pagepipe-fixtures")
		}
	}
	spec := machineSpec(sizeMiB, profile, 0)
	spec.Seed = seed
	if err := spec.Validate(); err != nil {
		return "", fmt.Errorf("--gen-size %d --profile %q: %w", sizeMiB, profile, err)
	}
	exeHash, err := executableHash()
	if err != nil {
		return "", err
	}
	prefix := fmt.Sprintf("gen-%dM-%s-%x-", sizeMiB, cmp.Or(profile, "default"), seed)
	path := filepath.Join(dir, prefix+exeHash+".vmcore")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--work-dir: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, prefix+"*.vmcore"))
	for _, o := range old {
		os.Remove(o)
	}
	fmt.Fprintf(stderr, "bench: generating %s\n", path)
	tmp := path + ".tmp"
	if err := synth.WriteFile(tmp, spec); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("generate vmcore: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("generate vmcore: %w", err)
	}
	return path, nil
}

// executableHash is the first 12 hex digits of this binary's SHA-256.
func executableHash() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	h, err := fileHash(exe)
	if err != nil {
		return "", err
	}
	return h[:12], nil
}

// fileHash is the file's SHA-256 in hex.
func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// defaultPagepipe is the pagepipe binary installed beside this one (make
// build puts both in bin/), else the one on $PATH.
func defaultPagepipe() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "pagepipe")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return "pagepipe"
}
