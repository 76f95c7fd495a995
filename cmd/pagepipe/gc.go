package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// gcLimitFor is the Go memory (heap, stacks, the runtime's own) at which a
// dump collects garbage while its live heap is small, for a process that
// may still use avail bytes.
//
// A dump's heap is small and nearly all of it lives to the end: the
// bitmaps, the copy pass's chunks and codec state. The collector ran at
// the runtime's 4 MiB minimum heap, twice a run on the real 4 GiB fixture,
// to free little, at a few ms of CPU each (mark, and first-touch page
// faults of the sweeper's metadata), on the serial path (docs/scaling.md,
// study 3). So collection waits for this limit (the runtime's soft memory
// limit): a quarter of the memory left, so that a capture kernel with
// little to spare (crashkernel=96M leaves about 18 MiB, docs/capture.md)
// collects about as the runtime's default would, and at most 32 MiB,
// within the peak RSS targets (docs/benchmarks.md) whatever garbage a dump
// makes. The floor, 8 MiB, is twice the runtime's minimum heap: a live
// heap above half the limit sends collection back to the default anyway.
func gcLimitFor(avail uint64) int64 {
	return int64(min(max(avail/4, 8<<20), 32<<20))
}

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
	live := []metrics.Sample{{Name: heapLive}}
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
