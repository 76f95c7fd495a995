package pipeline

import (
	"context"
	"sync"
)

// crew hands chunks to idle workers, the one that went idle last first.
//
// A Go channel wakes its receivers in the order they began to wait, so with
// more workers than running CPUs every chunk would go to the worker idle the
// longest: the one whose codec tables (flate's hash table alone is 128 KiB)
// have left the CPU's caches. Handing the next chunk to the worker that just
// finished keeps the surplus workers asleep and the busy ones warm; with
// every CPU busy it changes nothing. With 8 workers on one CPU the
// first-in-first-out order made the copy pass measurably dearer in CPU
// time than 1 worker (docs/scaling.md).
type crew struct {
	mu       sync.Mutex
	idle     []chan *chunk // a stack: each idle worker's inbox
	finished bool
	// ready holds one token per idle worker, so that hand can wait for one.
	ready chan struct{}
}

func newCrew(workers int) *crew {
	return &crew{ready: make(chan struct{}, workers)}
}

// next is the worker's side: it waits in inbox (capacity 1) for its next
// chunk; nil when there are no more.
func (cr *crew) next(ctx context.Context, inbox chan *chunk) (*chunk, error) {
	cr.mu.Lock()
	if cr.finished {
		cr.mu.Unlock()
		return nil, nil
	}
	cr.idle = append(cr.idle, inbox)
	cr.mu.Unlock()
	cr.ready <- struct{}{} // never blocks: at most one token per worker
	select {
	case c := <-inbox:
		if c != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// hand is the producer's side: it gives c to the worker that went idle
// last, waiting for one if all are busy.
func (cr *crew) hand(ctx context.Context, c *chunk) error {
	select {
	case <-cr.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	cr.mu.Lock()
	inbox := cr.idle[len(cr.idle)-1]
	cr.idle = cr.idle[:len(cr.idle)-1]
	cr.mu.Unlock()
	inbox <- c // never blocks: the worker waits on an empty inbox
	return nil
}

// finish tells every worker, idle now or later, that no chunks are left.
func (cr *crew) finish() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.finished = true
	for _, inbox := range cr.idle {
		close(inbox)
	}
	cr.idle = nil
}
