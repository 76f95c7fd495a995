package cpuclock

import (
	"runtime"
	"testing"
	"time"
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
