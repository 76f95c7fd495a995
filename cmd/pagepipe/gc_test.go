package main

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// gcPercent reads the GOGC setting.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// collectAndWait runs a collection and waits until collectWhenLarge's
// check of it ran.
func collectAndWait(t *testing.T) {
	t.Helper()
	n := gcChecks.Load()
	runtime.GC()
	for start := time.Now(); gcChecks.Load() == n; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("no check after a collection")
		}
	}
}

// Collection stays off while the live heap is small and goes back to the
// default once a collection finds more than half the limit live; GOGC or
// GOMEMLIMIT in the environment leave the runtime's settings alone.
func TestCollectWhenLarge(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const limit = 256 << 20 // far above the test binary's own heap

	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		collectWhenLarge(limit, func(k string) string {
			if k == env {
				return "100"
			}
			return ""
		})
		if p := gcPercent(); p != 100 {
			t.Errorf("with %s set: GOGC %d, want 100 (untouched)", env, p)
		}
	}

	collectWhenLarge(limit, func(string) string { return "" })
	if p, l := gcPercent(), debug.SetMemoryLimit(-1); p != -1 || l != limit {
		t.Fatalf("GOGC %d, memory limit %d; want -1 and %d", p, l, limit)
	}
	collectAndWait(t)
	if p := gcPercent(); p != -1 || gcOrdinary.Load() {
		t.Fatalf("small live heap: GOGC %d (ordinary %v), want still off", p, gcOrdinary.Load())
	}
	keep := make([]byte, limit/2+(1<<20))
	collectAndWait(t)
	if p, l := gcPercent(), debug.SetMemoryLimit(-1); p != 100 || !gcOrdinary.Load() || l != 1<<63-1 {
		t.Fatalf("live heap past half the limit: GOGC %d, limit %d (ordinary %v); want 100, none", p, l, gcOrdinary.Load())
	}
	runtime.KeepAlive(keep)
}

func TestGCLimitFor(t *testing.T) {
	for _, c := range []struct {
		avail uint64
		want  int64
	}{
		{0, 8 << 20},          // unknown: the floor
		{18 << 20, 8 << 20},   // crashkernel=96M's capture kernel
		{64 << 20, 16 << 20},  // a quarter
		{200 << 20, 32 << 20}, // crashkernel=256M: the cap
		{20 << 30, 32 << 20},  // a host
	} {
		if got := gcLimitFor(c.avail); got != c.want {
			t.Errorf("gcLimitFor(%d MiB) = %d MiB, want %d MiB", c.avail>>20, got>>20, c.want>>20)
		}
	}
}

// On one P a copy pass gets a second, and the first back after it; with
// more it is left alone.
func TestProcessCopyPass(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	done := process{}.CopyPass(1)
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Fatalf("in a copy pass on one P: GOMAXPROCS %d, want 2", n)
	}
	done()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("after it: GOMAXPROCS %d, want 1", n)
	}
	runtime.GOMAXPROCS(3)
	process{}.CopyPass(3)()
	if n := runtime.GOMAXPROCS(0); n != 3 {
		t.Fatalf("a copy pass on 3 Ps left GOMAXPROCS %d", n)
	}
}
