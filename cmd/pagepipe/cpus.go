package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"pagepipe/bench"
)

// cpusEnv marks a process that --cpus has already confined, so that the
// re-executed pagepipe does not confine itself again.
const cpusEnv = "PAGEPIPE_CPUS_CONFINED"

// confineCPUs implements --cpus N|LIST: it mimics a capture kernel booted
// with nr_cpus=N on a bigger machine. The Go runtime starts its threads
// before main, and a thread's CPU mask is only inherited by threads created
// after it is set, so pagepipe sets the mask on the current thread and
// re-executes itself: the new process and every thread it starts are
// confined, and GOMAXPROCS is set to match. It returns only on error or
// when nothing is to be done.
func confineCPUs(spec string) error {
	if spec == "" || os.Getenv(cpusEnv) != "" {
		return nil
	}
	usable, err := bench.UsableCPUs()
	if err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	cpus, err := parseCPUs(spec, usable)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := bench.PinThread(cpus); err != nil {
		return fmt.Errorf("--cpus %s: %w", spec, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	env := append(os.Environ(), cpusEnv+"="+bench.JoinInts(cpus), "GOMAXPROCS="+strconv.Itoa(len(cpus)))
	return fmt.Errorf("--cpus: re-exec %s: %w", exe, syscall.Exec(exe, os.Args, env))
}

// parseCPUs reads N (the first N CPUs the process may use) or a list such
// as 0,2-3.
func parseCPUs(spec string, usable []int) ([]int, error) {
	if n, err := strconv.Atoi(spec); err == nil && !strings.ContainsAny(spec, ",-") {
		if n < 1 || n > len(usable) {
			return nil, fmt.Errorf("--cpus %d: the process may use %d CPUs", n, len(usable))
		}
		return usable[:n], nil
	}
	var out []int
	for _, part := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= 1024 {
			return nil, fmt.Errorf("--cpus %q: not a CPU count or list", spec)
		}
		for c := a; c <= b; c++ {
			if !slices.Contains(usable, c) {
				return nil, fmt.Errorf("--cpus %q: CPU %d is not available to this process", spec, c)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// cpuReport says which CPUs the process's threads may really run on, read
// back from /proc, and GOMAXPROCS: the proof that --cpus took hold.
func cpuReport() string {
	lists := map[string]int{}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				lists[strings.TrimSpace(v)]++
			}
		}
	}
	var parts []string
	for l, n := range lists {
		parts = append(parts, fmt.Sprintf("%d threads on CPUs %s", n, l))
	}
	return fmt.Sprintf("cpus: GOMAXPROCS %d; %s", runtime.GOMAXPROCS(0), strings.Join(parts, "; "))
}
