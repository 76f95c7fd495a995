package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"pagepipe/internal/cpuset"
)

// startPinned starts cmd confined to cpus: a new process inherits the CPU
// set of the thread that forks it, so the fork happens on a thread pinned
// for it, locked and never unlocked, so that it exits with its goroutine
// instead of going back to the pool confined. Both programs are started
// this way (pagepipe's Go runtime then sizes GOMAXPROCS to the set, as
// --cpus does).
func startPinned(cmd *exec.Cmd, cpus []int) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cpuset.Pin(cpus); err != nil {
			errc <- err
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// Capacity measures how many cores of throughput cpus give: the same fixed
// CPU-bound loop on one thread, then on one thread per CPU at once, every
// thread confined to the set. k threads that take as long as one give k
// cores; on the 2-vCPU build machines, two threads take twice as long
// (one core). The CPU seconds the kernel counts do not show this, which is
// why the bench measures it: the model's cores are min(workers, capacity).
func Capacity(cpus []int) (float64, error) {
	if len(cpus) == 1 {
		return 1, nil
	}
	best := func(threads int) (time.Duration, error) {
		var min time.Duration
		for try := 0; try < 3; try++ {
			d, err := spinAll(cpus, threads)
			if err != nil {
				return 0, err
			}
			if try == 0 || d < min {
				min = d
			}
		}
		return min, nil
	}
	one, err := best(1)
	if err != nil {
		return 0, err
	}
	all, err := best(len(cpus))
	if err != nil {
		return 0, err
	}
	return float64(len(cpus)) * one.Seconds() / all.Seconds(), nil
}

// spinAll runs the loop on n threads confined to cpus and returns the wall
// time until the last one finished.
func spinAll(cpus []int, n int) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Locked and never unlocked: the pinned thread exits with the
			// goroutine instead of going back to the pool.
			runtime.LockOSThread()
			if err := cpuset.Pin(cpus); err != nil {
				errs[i] = err
				return
			}
			spinSink.Add(spin(40_000_000))
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// spin is a dependent chain of shifts and xors: pure CPU, no memory.
func spin(n int) uint64 {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// spinSink keeps the loops' results alive.
var spinSink atomic.Uint64

// ReadRate measures how fast the source gives its bytes: one sequential
// pass of 1 MiB preads over up to limit bytes of path, after a first pass
// that brings them into the page cache (the runs read a warm vmcore too).
// Bytes per second.
func ReadRate(path string, limit int64) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read rate: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	pass := func() (int64, error) {
		var n int64
		for n < limit {
			k, err := f.ReadAt(buf, n)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				return n, fmt.Errorf("read rate: %w", err)
			}
		}
		return n, nil
	}
	if _, err := pass(); err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := pass()
	if err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// WriteRate measures how fast the sink takes bytes: 256 MiB written in
// 1 MiB pieces to a file in dir, removed after. Bytes per second.
func WriteRate(dir string) (float64, error) {
	f, err := os.CreateTemp(dir, "pagepipe-bench-write")
	if err != nil {
		return 0, fmt.Errorf("write rate: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	const total = 256 << 20
	start := time.Now()
	for off := int64(0); off < total; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			return 0, fmt.Errorf("write rate: %s: %w", filepath.Base(f.Name()), err)
		}
	}
	return total / time.Since(start).Seconds(), nil
}
