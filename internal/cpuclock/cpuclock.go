// Package cpuclock reads CPU time: the calling OS thread's, split into user
// and system time, and the whole process's. The pipeline's stages lock
// their goroutines to OS threads and read the thread's clock once per chunk
// of work, so that each stage's CPU seconds can be told apart from the wall
// time the machine gives it (docs/scaling.md).
package cpuclock

import (
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

// Add is the sum of two usages.
func (u Usage) Add(o Usage) Usage { return Usage{u.User + o.User, u.Sys + o.Sys} }

// Thread returns the calling OS thread's user and system time
// (getrusage(RUSAGE_THREAD)). Only meaningful on a goroutine locked to its
// thread (runtime.LockOSThread). The sum is the scheduler's exact runtime;
// the split between user and system time is the kernel's tick-sampled
// estimate, so it is only right over many ticks (a pass, not a chunk).
func Thread() Usage {
	return rusage(unix.RUSAGE_THREAD)
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
