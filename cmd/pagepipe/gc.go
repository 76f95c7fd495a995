package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// gcLimit is the Go memory (heap, stacks, the runtime's own) at which a
// dump collects garbage while its live heap is small.
//
// A dump's heap is small and nearly all of it lives to the end: the
// bitmaps, the copy pass's chunks and codec state. The collector ran at
// the runtime's 4 MiB minimum heap, twice a run on the real 4 GiB fixture,
// to free little, at a few ms of CPU each (mark, and first-touch page
// faults of the sweeper's metadata), on the serial path (docs/scaling.md,
// study 3). So collection
// waits for gcLimit (the runtime's soft memory limit), which holds the
// 32 MiB within the peak RSS targets (docs/benchmarks.md) whatever garbage
// a dump makes.
const gcLimit = 32 << 20

// gcChecks counts the collections collectWhenLarge looked at; gcOrdinary
// is set once the live heap outgrew half the limit and collection went
// back to the runtime's default.
var (
	gcChecks   atomic.Int64
	gcOrdinary atomic.Bool
)

// collectWhenLarge turns collection off until the Go memory reaches limit.
// A dump whose live heap outgrows half of limit (a large machine's
// bitmaps, many workers' chunks) would collect ever more often near the
// limit, so after each collection the live heap is checked and, past
// limit/2, collection goes back to the runtime's default (GOGC=100, no
// limit) for the rest of the process. GOGC or GOMEMLIMIT in the
// environment leave the runtime's settings alone.
func collectWhenLarge(limit int64, getenv func(string) string) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return
	}
	gcOrdinary.Store(false)
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(limit)
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	// A finalizer runs after the collection that found its object
	// unreachable: each one checks the live heap and arms the next.
	var arm func()
	arm = func() {
		runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
			metrics.Read(live)
			gcChecks.Add(1)
			if live[0].Value.Kind() == metrics.KindUint64 && live[0].Value.Uint64() > uint64(limit/2) {
				debug.SetGCPercent(100)
				debug.SetMemoryLimit(math.MaxInt64)
				gcOrdinary.Store(true)
				return
			}
			arm()
		})
	}
	arm()
}

// gcSentinel holds a pointer, so that it is not one of the tiny
// allocations (which share a block, and whose finalizers may never run).
type gcSentinel struct{ _ *byte }
