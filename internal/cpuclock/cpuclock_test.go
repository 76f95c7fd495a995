package cpuclock

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Spinning on a locked thread shows up in that thread's user time and in
// the process's, and never runs backwards.
func TestThreadCountsItsOwnWork(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p0, t0, e0 := Process(), Thread(), ThreadTotal()
	x := 1
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x = x*31 + 7
	}
	_ = x
	e1 := ThreadTotal()
	p1, t1 := Process(), Thread()
	// The exact clock sees the spin at once, with no tick or switch since.
	if d := e1 - e0; d <= 0 || d > time.Second {
		t.Errorf("exact thread CPU over a 50 ms spin: %v", d)
	}
	if d := t1.Sub(t0).Total(); d <= 0 || d > time.Second {
		t.Errorf("thread CPU over a 50 ms spin: %v", d)
	}
	if p1.Sub(p0).Total() < t1.Sub(t0).Total()/2 {
		t.Errorf("process CPU %v less than half the thread's %v", p1.Sub(p0).Total(), t1.Sub(t0).Total())
	}
}

// BenchmarkThread is the cost of one split reading, paid when a worker
// starts and ends (docs/scaling.md).
func BenchmarkThread(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		Thread()
	}
}

func TestCounter(t *testing.T) {
	var c Counter
	c.Add(Usage{User: 2, Sys: 3})
	c.Add(Usage{User: 5, Sys: 7})
	if got := c.Load(); got != (Usage{User: 7, Sys: 10}) {
		t.Fatalf("Load = %+v, want {7 10}", got)
	}
	func() {
		defer c.Measure()()
		spinSum := 0
		for i := range 1_000_000 {
			spinSum += i
		}
		_ = spinSum
	}()
	if got := c.Load(); got.Total() < 17 {
		t.Fatalf("Load after Measure = %+v, less than before", got)
	}
}

// A measured goroutine that paces itself yields once it ran YieldAfter
// and is still measured in full, on whichever thread it goes on.
func TestPaceKeepsMeasuring(t *testing.T) {
	var c Counter
	m := c.Start()
	p0 := Process()
	x := 1
	// Spin for 4 YieldAfters of CPU time (so at least as much wall
	// time), however loaded the machine.
	for Process().Sub(p0).Total() < 4*YieldAfter {
		for range 10000 {
			x = x*31 + 7
		}
		m.Pace()
	}
	m.Stop()
	_ = x
	got, proc := c.Load().Total(), Process().Sub(p0).Total()
	// Nearly all of the process's time is the spin's.
	if got < proc/2 || got > proc || m.yields < 3 {
		t.Fatalf("measured %v of a spin, process %v, %d yields (want 3 or more)", got, proc, m.yields)
	}
}

// BenchmarkThreadTotal is the cost of one exact reading, paid twice per
// chunk of 256 pages written (docs/scaling.md).
func BenchmarkThreadTotal(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for b.Loop() {
		ThreadTotal()
	}
}

// BenchmarkFirstTouch is the CPU time of a page fault: the first write to
// each 4 KiB page of fresh anonymous memory (4 MiB per op, mapped and
// unmapped each time), per page, from the process's clock (a wait for a
// loaded CPU does not count). huge: the same with MADV_HUGEPAGE, where the
// kernel's transparent huge pages allow it (one fault per 2 MiB).
func BenchmarkFirstTouch(b *testing.B) {
	for _, huge := range []bool{false, true} {
		b.Run(map[bool]string{false: "4k", true: "huge"}[huge], func(b *testing.B) {
			const n = 4 << 20
			var cpu time.Duration
			var faults int64
			for b.Loop() {
				m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
				if err != nil {
					b.Fatal(err)
				}
				if huge {
					_ = unix.Madvise(m, unix.MADV_HUGEPAGE)
				}
				c0, f0 := Process(), Faults()
				for i := 0; i < n; i += 4096 {
					m[i] = 1
				}
				cpu += Process().Sub(c0).Total()
				faults += Faults() - f0
				if err := unix.Munmap(m); err != nil {
					b.Fatal(err)
				}
			}
			pages := float64(b.N) * n / 4096
			b.ReportMetric(float64(cpu.Nanoseconds())/pages, "cpu-ns/page")
			b.ReportMetric(float64(faults)/pages, "faults/page")
		})
	}
}
