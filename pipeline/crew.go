package pipeline

import (
	"context"
	"slices"
	"sync"
)

// crew queues chunks for the workers and decides which of them run.
//
// With Go channels alone every queued chunk wakes a waiting worker, the one
// that has waited longest. With more workers than CPUs running, that sends
// chunk after chunk to a worker whose codec tables (flate's hash table alone
// is 128 KiB) have left the CPU's caches: 8 workers on one CPU cost 1.05 to
// 1.09 times the CPU time of one (docs/scaling.md). The crew instead wakes
// one worker at a time, the one that worked last, and a woken worker wakes
// the next only if more chunks are waiting, as the Go scheduler wakes its
// own threads. Workers that are already busy take waiting chunks as they
// finish theirs. So on one CPU one warm worker does nearly all the work,
// and on many CPUs the workers wake in a chain as fast as chunks come.
type crew struct {
	// work holds the chunks waiting, in pfn order; its capacity is the
	// whole chunk pool, so queueing never blocks.
	work chan *chunk

	mu sync.Mutex
	// idle are the sleeping workers' wake-up channels, the one that
	// worked last on top.
	idle []chan struct{}
	// waking: a worker has been woken and has not looked at work yet.
	waking   bool
	finished bool
}

func newCrew(pool int) *crew {
	return &crew{work: make(chan *chunk, pool)}
}

// hand queues c for the workers.
func (cr *crew) hand(c *chunk) {
	cr.work <- c
	cr.wake()
}

// wake wakes the sleeping worker that worked last, unless a woken worker is
// on its way already.
func (cr *crew) wake() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.waking || len(cr.idle) == 0 {
		return
	}
	w := cr.idle[len(cr.idle)-1]
	cr.idle = cr.idle[:len(cr.idle)-1]
	cr.waking = true
	w <- struct{}{} // never blocks: capacity 1, and it was asleep
}

// finish tells every worker, asleep now or later, that no chunks are left
// once the queue is empty.
func (cr *crew) finish() {
	close(cr.work)
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.finished = true
	for _, w := range cr.idle {
		close(w)
	}
	cr.idle = nil
}

// next is the worker's side: the next waiting chunk, sleeping on wakeup
// (capacity 1, the worker's own) while there is none; nil when all are
// done.
func (cr *crew) next(ctx context.Context, wakeup chan struct{}) (*chunk, error) {
	woken := false
	for {
		select {
		case c, ok := <-cr.work:
			if woken {
				cr.mu.Lock()
				cr.waking = false
				cr.mu.Unlock()
			}
			if !ok {
				return nil, nil
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if len(cr.work) > 0 {
				cr.wake() // more waiting: let another worker look
			}
			return c, nil
		default:
		}
		cr.mu.Lock()
		if woken {
			cr.waking = false
		}
		if len(cr.work) > 0 || cr.finished {
			cr.mu.Unlock()
			woken = false
			continue
		}
		if woken {
			// Woken for nothing (a busy worker took the chunk): still
			// cold, so last in line.
			cr.idle = slices.Insert(cr.idle, 0, wakeup)
		} else {
			cr.idle = append(cr.idle, wakeup)
		}
		cr.mu.Unlock()
		select {
		case <-wakeup:
			woken = true
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
