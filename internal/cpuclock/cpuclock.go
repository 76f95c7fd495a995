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

// Faults is the process's minor page faults so far: on the virtual
// machines here a fault costs 20-30 µs of CPU time, so they are part of
// what the stages cost (docs/scaling.md).
func Faults() int64 { return getrusage(unix.RUSAGE_SELF).Minflt }

func rusage(who int) Usage {
	ru := getrusage(who)
	return Usage{User: timeval(ru.Utime), Sys: timeval(ru.Stime)}
}

func getrusage(who int) unix.Rusage {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return unix.Rusage{} // cannot fail for these arguments
	}
	return ru
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
	m := c.Start()
	return m.Stop
}

// Start locks the calling goroutine to its OS thread and starts measuring
// its CPU time into c, until Stop.
func (c *Counter) Start() *Meter {
	runtime.LockOSThread()
	return &Meter{c: c, start: Thread(), yielded: time.Now()}
}

// Meter measures one goroutine's CPU time on its OS thread (Counter.Start).
type Meter struct {
	c       *Counter
	start   Usage
	yielded time.Time
	yields  int
}

// Stop adds the thread's CPU time since Start (or the last yield) to the
// counter and unlocks the goroutine from its thread.
func (m *Meter) Stop() {
	m.c.Add(Thread().Sub(m.start))
	runtime.UnlockOSThread()
}

// YieldAfter is how long a measured goroutine runs before Pace gives it
// back to the scheduler: under the runtime's 10 ms time slice.
const YieldAfter = 5 * time.Millisecond

// Pace, called between units of work, yields to the scheduler once the
// goroutine has run YieldAfter since it last did. The Go runtime preempts
// a goroutine that runs 10 ms without rescheduling; one preempted in a
// system call has its P taken and handed to another thread, and the
// runtime's monitor goes back to polling every 20 µs for the next
// millisecond and more: on one CPU, 50 to 80 wake-ups of the monitor per
// 10 ms of a copy worker's work (docs/scaling.md). A locked goroutine
// cannot yield without handing its P to another thread and back, so Pace
// adds the thread's time so far to the counter, unlocks, yields (on the
// same thread when nothing else is runnable), locks again and goes on
// measuring on whichever thread it runs.
func (m *Meter) Pace() {
	if time.Since(m.yielded) < YieldAfter {
		return
	}
	m.c.Add(Thread().Sub(m.start))
	runtime.UnlockOSThread()
	runtime.Gosched()
	runtime.LockOSThread()
	m.start, m.yielded = Thread(), time.Now()
	m.yields++
}
