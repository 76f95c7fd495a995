// Package cpuset reads, writes and applies CPU sets: the CPUs a process may
// use, pinning a thread to some of them, and --cpus N|LIST, which confines
// a whole process as a capture kernel booted with nr_cpus=N would be. It is
// shared by the dump binary (--cpus) and the bench (each run pinned to its
// CPUs), and kept small so that the dump binary carries nothing else of
// the bench.
package cpuset

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Usable are the CPUs this process may run on.
func Usable() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var out []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Pin confines the calling OS thread to cpus; the goroutine must be
// locked to it, and never unlocked, so that the thread exits with it.
func Pin(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPUs %s: %w", Format(cpus), err)
	}
	return nil
}

// Format writes CPU numbers in the kernel's list syntax: 0-3,6.
func Format(cpus []int) string {
	c := append([]int(nil), cpus...)
	sort.Ints(c)
	var parts []string
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(c[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", c[i], c[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Parse reads --cpus: N (the first N CPUs of usable) or a list such as
// 0,2-3, every CPU of which must be usable.
func Parse(spec string, usable []int) ([]int, error) {
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

// confinedEnv marks a process that Confine has already confined, so that
// the re-executed program does not confine itself again.
const confinedEnv = "PAGEPIPE_CPUS_CONFINED"

// Confine implements --cpus N|LIST: it mimics a capture kernel booted with
// nr_cpus=N on a bigger machine. The Go runtime starts its threads before
// main, and a thread's CPU mask is only inherited by threads created after
// it is set, so Confine sets the mask on the current thread and
// re-executes the program: the new process and every thread it starts are
// confined, and GOMAXPROCS is set to match. It returns only on error or
// when nothing is to be done.
func Confine(spec string) error {
	if spec == "" || os.Getenv(confinedEnv) != "" {
		return nil
	}
	usable, err := Usable()
	if err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	cpus, err := Parse(spec, usable)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := Pin(cpus); err != nil {
		return fmt.Errorf("--cpus %s: %w", spec, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	env := append(os.Environ(), confinedEnv+"="+Format(cpus), "GOMAXPROCS="+strconv.Itoa(len(cpus)))
	return fmt.Errorf("--cpus: re-exec %s: %w", exe, syscall.Exec(exe, os.Args, env))
}

// Report says which CPUs the process's threads may really run on, read
// back from /proc, and GOMAXPROCS: the proof that --cpus took hold.
func Report() string {
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
