// Package cpuclock reads CPU time: the calling OS thread's, split into user
// and system time, and the whole process's. The pipeline's stages lock
// their goroutines to OS threads and read the thread's clock once per chunk
// of work, so that each stage's CPU seconds can be told apart from the wall
// time the machine gives it (docs/scaling.md).
package cpuclock

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Usage is user and system CPU time.
type Usage struct {
	User time.Duration `json:"user_ns"`
	Sys  time.Duration `json:"sys_ns"`
}

// Total is user plus system time.
func (u Usage) Total() time.Duration { return u.User + u.Sys }

// Sub is the usage between an earlier reading o and u.
func (u Usage) Sub(o Usage) Usage { return Usage{u.User - o.User, u.Sys - o.Sys} }

// Thread returns the calling OS thread's user and system time. Only
// meaningful on a goroutine locked to its thread (runtime.LockOSThread).
//
// The total is exact: clock_gettime(CLOCK_THREAD_CPUTIME_ID) brings the
// running thread's time up to date. getrusage(RUSAGE_THREAD) alone does
// not: it returns the time as of the thread's last tick or switch, so a
// reading after a short stretch of work (one chunk's write) missed it and
// the next interval, a wait, got it instead. The split between user and
// system time is getrusage's, the kernel's tick-sampled estimate, so it is
// only right over many ticks (a pass, not a chunk).
func Thread() Usage {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return rusage(unix.RUSAGE_THREAD) // cannot fail on Linux
	}
	total := time.Duration(ts.Nano())
	u := rusage(unix.RUSAGE_THREAD)
	u.Sys = min(u.Sys, total)
	u.User = total - u.Sys
	return u
}

// ThreadTotal is the calling OS thread's CPU time, exact: one
// clock_gettime(CLOCK_THREAD_CPUTIME_ID), half the cost of Thread.
func ThreadTotal() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return rusage(unix.RUSAGE_THREAD).Total() // cannot fail on Linux
	}
	return time.Duration(ts.Nano())
}

// Process returns the process's user and system time so far, every thread
// included (getrusage(RUSAGE_SELF)).
func Process() Usage {
	return rusage(unix.RUSAGE_SELF)
}

func rusage(who int) Usage {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return Usage{} // cannot fail for these arguments
	}
	return Usage{User: timeval(ru.Utime), Sys: timeval(ru.Stime)}
}

func timeval(tv unix.Timeval) time.Duration {
	return time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
}

// Counter sums the CPU time of several threads, such as the goroutines of
// one stage; it is safe for concurrent use.
type Counter struct{ user, sys atomic.Int64 }

// Add adds u to the sum.
func (c *Counter) Add(u Usage) {
	c.user.Add(int64(u.User))
	c.sys.Add(int64(u.Sys))
}

// Load is the sum so far.
func (c *Counter) Load() Usage {
	return Usage{User: time.Duration(c.user.Load()), Sys: time.Duration(c.sys.Load())}
}

// Measure locks the calling goroutine to its OS thread and returns the
// function that, deferred, adds the thread's CPU time since then to c and
// unlocks it.
func (c *Counter) Measure() func() {
	runtime.LockOSThread()
	t := Thread()
	return func() {
		c.Add(Thread().Sub(t))
		runtime.UnlockOSThread()
	}
}
