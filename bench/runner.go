package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"pagepipe/internal/runstats"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Runner runs a study's configurations as child processes.
type Runner struct {
	Pagepipe     string // the pagepipe binary whose dumps are measured
	Makedumpfile string // makedumpfile's path
	Vmcore       string
	// DumpDir holds each run's dump, in a directory removed after the run.
	DumpDir string
	Rounds  int // --runs
	// BytesIn is the crashed machine's memory (pages with data × page size).
	BytesIn int64
	// Progress gets a line per run; on a terminal (TTY) it is redrawn.
	Progress io.Writer
	TTY      bool
	// AfterRun, when set, sees each run's dump before it is removed.
	AfterRun func(c Config, dump string) error
	// Deadline, when set, ends the study early, at a round's end: no round
	// starts that would end past it by the last round's time (the first
	// always runs). Notes say so.
	Deadline time.Time
	// Notes collect what happened besides the measurements: makedumpfile
	// runs that failed and were run again, rounds left out for the deadline.
	Notes []string
}

// mdfAttempts bounds the runs of one makedumpfile configuration: 1.7.2's
// --num-threads sometimes aborts ("libgcc_s.so.1 must be installed for
// pthread_exit to work", as its threads are cancelled at the end of a
// cycle; seen here on 2 of 24 runs). Such a run is run again, and said
// so in the notes; pagepipe's failures stop the bench at once.
const mdfAttempts = 3

// Run runs every configuration Rounds times, round by round (each round
// runs every configuration once, so that slow drifts of the machine touch
// all of them alike), or fewer rounds where Deadline says so.
func (r *Runner) Run(ctx context.Context, cfgs []Config) ([]Run, error) {
	var runs []Run
	total := len(cfgs) * r.Rounds
	start := time.Now()
	roundStart := start
	for round := 1; round <= r.Rounds; round++ {
		if last := time.Since(roundStart); round > 1 && !r.Deadline.IsZero() && time.Now().Add(last).After(r.Deadline) {
			r.Notes = append(r.Notes, fmt.Sprintf("%d of %d rounds: a round took %s, and another would have ended past the time budget", round-1, r.Rounds, last.Round(time.Second)))
			break
		}
		roundStart = time.Now()
		for _, c := range cfgs {
			if err := ctx.Err(); err != nil {
				return runs, err
			}
			n := len(runs) + 1
			r.progress(false, fmt.Sprintf("bench: run %d/%d (round %d/%d, %s elapsed): %s %s on CPUs %s",
				n, total, round, r.Rounds, time.Since(start).Round(time.Second), c.Program, strings.Join(c.Args(), " "), c.CPUList()), false)
			run, err := r.one(ctx, c)
			for try := 1; err != nil && c.Program == Makedumpfile && try < mdfAttempts && ctx.Err() == nil; try++ {
				r.Notes = append(r.Notes, fmt.Sprintf("makedumpfile %s on CPUs %s failed and was run again: %s", strings.Join(c.Args(), " "), c.CPUList(), oneLine(err)))
				run, err = r.one(ctx, c)
			}
			if err != nil {
				r.progress(false, "", true)
				return runs, err
			}
			run.Round = round
			runs = append(runs, run)
			r.progress(true, fmt.Sprintf("bench: run %d/%d: %s %s on CPUs %s: %.3f s wall, %.3f s CPU, %.0f MB/s",
				n, total, c.Program, strings.Join(c.Args(), " "), c.CPUList(), run.Wall, run.CPU(), run.Throughput()), n == total)
		}
	}
	return runs, nil
}

// progress prints one progress line: redrawn in place on a terminal, else
// only the lines that report a finished run.
func (r *Runner) progress(finished bool, line string, last bool) {
	if r.Progress == nil {
		return
	}
	switch {
	case r.TTY:
		fmt.Fprintf(r.Progress, "\r\033[K%s", line)
		if last {
			fmt.Fprintln(r.Progress)
		}
	case finished:
		fmt.Fprintln(r.Progress, line)
	}
}

// One runs a configuration once, pinned to its CPUs.
func (r *Runner) One(ctx context.Context, c Config) (Run, error) { return r.one(ctx, c) }

// one runs a configuration once.
func (r *Runner) one(ctx context.Context, c Config) (Run, error) {
	dir, err := os.MkdirTemp(r.DumpDir, "pagepipe-bench-run")
	if err != nil {
		return Run{}, fmt.Errorf("dump directory: %w", err)
	}
	defer os.RemoveAll(dir)
	dumpPath := filepath.Join(dir, "dump")
	statsFile := filepath.Join(dir, "stats.json")

	prog := r.Pagepipe
	args := c.Args()
	if c.Program == Pagepipe {
		args = append(args, "--message-level", "4", "--stats-file", statsFile)
	} else {
		prog = r.Makedumpfile
		// 2 common, 4 errors, 16 the report and STEP timings.
		args = append(args, "--message-level", "22")
	}
	args = append(args, r.Vmcore, dumpPath)
	cmd := exec.CommandContext(ctx, prog, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := startPinned(cmd, c.CPUs); err != nil {
		return Run{}, fmt.Errorf("%s: %w", c.Program, err)
	}
	// pagepipe reads its own peak as it finishes; makedumpfile's is
	// sampled from outside.
	hwm := func() int64 { return 0 }
	if c.Program == Makedumpfile {
		hwm = watchHWM(cmd.Process.Pid)
	}
	err = cmd.Wait()
	wall := time.Since(start).Seconds()
	peak := hwm()
	if err != nil {
		return Run{}, fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, lastLines(out.String(), 3))
	}
	st, err := os.Stat(dumpPath)
	if err != nil {
		return Run{}, fmt.Errorf("%s wrote no dump: %w", c.Program, err)
	}
	if r.AfterRun != nil {
		if err := r.AfterRun(c, dumpPath); err != nil {
			return Run{}, err
		}
	}
	run := Run{
		Config:    c,
		Wall:      wall,
		User:      cmd.ProcessState.UserTime().Seconds(),
		Sys:       cmd.ProcessState.SystemTime().Seconds(),
		MaxRSSKiB: peak,
		BytesIn:   r.BytesIn,
		BytesOut:  st.Size(),
	}
	if c.Program == Makedumpfile {
		run.FilterWall, run.CopyWall, err = parseSteps(out.String())
		if err != nil {
			return Run{}, fmt.Errorf("makedumpfile %s: %w", strings.Join(args, " "), err)
		}
		return run, nil
	}
	cs, err := runstats.Read(statsFile)
	if err != nil {
		return Run{}, err
	}
	run.MaxRSSKiB = cs.MaxRSSKiB
	run.FilterWall, run.CopyWall = cs.FilterWall, cs.CopyWall
	run.ScanCPU = cs.ScanCPU
	run.Dumped, run.GOMAXPROCS = cs.Dumped, cs.GOMAXPROCS
	run.BytesRead = int64(cs.Dumped) * int64(cs.PageSize)
	run.Stages = Stages{
		Read:     cs.ReadCPU,
		Filter:   cs.FilterCPU,
		Compress: cs.CompressCPU,
		Reorder:  cs.ReorderCPU,
		Write:    cs.WriteCPU,
		Store:    cs.StoreCPU,
	}
	// Whatever the stages do not account for: setup, the runtime during
	// the copy (garbage collection, scheduling), the report, exit.
	run.Stages.Other = run.CPU() - run.Stages.Filter - run.Stages.Read - run.Stages.Compress - run.Stages.Reorder - run.Stages.Write - run.Stages.Store
	// Of it, what lies outside both passes: a fixed cost.
	run.Fixed = max(run.CPU()-cs.FilterCPU-cs.CopyCPU, 0)
	return run, nil
}

// watchHWM samples the peak RSS (VmHWM) of a running process every 5 ms;
// the returned function stops and gives the last sample, KiB. wait4's
// ru_maxrss cannot be used: Go starts children with vfork, and the kernel
// counts the parent's resident set, shared until exec, into the child's
// peak.
func watchHWM(pid int) func() int64 {
	path := fmt.Sprintf("/proc/%d/status", pid)
	stop := make(chan struct{})
	done := make(chan int64)
	go func() {
		var peak int64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if v := runstats.PeakRSSKiB(path); v > peak {
				peak = v
			}
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		return <-done
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// stepLine is makedumpfile's timing line (message level 16):
// "STEP [Copying data               ] : 3.332507 seconds".
var stepLine = regexp.MustCompile(`^STEP \[([^\]]*)\] : ([0-9.]+) seconds`)

// parseSteps adds up makedumpfile's STEP lines as the seed study did:
// "Filter pages" is every mem_map pass (Checking for memory holes,
// Excluding unnecessary pages, Excluding free pages) and "Copy data" every
// Copying data line. makedumpfile prints a step's line once per pass over
// the memory: with one cycle (up to its cyclic buffer's worth of pages) it
// scans the mem_map once; with more it scans it twice, once to count the
// dumpable pages and again while writing, and both scans count, since both
// are work the dump costs.
func parseSteps(out string) (filter, copyS float64, err error) {
	steps := 0
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(out, "\r", "\n")))
	for sc.Scan() {
		m := stepLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		s, perr := strconv.ParseFloat(m[2], 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("STEP line %q: %w", sc.Text(), perr)
		}
		steps++
		switch strings.TrimSpace(m[1]) {
		case "Checking for memory holes", "Excluding unnecessary pages", "Excluding free pages":
			filter += s
		case "Copying data":
			copyS += s
		}
	}
	if steps == 0 {
		return 0, 0, fmt.Errorf("no STEP lines in its output (message level 16): %s", lastLines(out, 3))
	}
	return filter, copyS, nil
}
