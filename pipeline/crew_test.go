package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"
)

// idleWorkers starts a worker per name, one after another, each waiting
// in the crew only once the one before it is idle; a worker reports the
// seq of the chunk it gets (or -1 when told there are none) on got.
func idleWorkers(t *testing.T, ctx context.Context, cr *crew, names int) (got []chan int64, errs chan error) {
	t.Helper()
	errs = make(chan error, names)
	for i := range names {
		ch := make(chan int64, 1)
		got = append(got, ch)
		go func() {
			c, err := cr.next(ctx, make(chan *chunk, 1))
			errs <- err
			if c == nil {
				ch <- -1
				return
			}
			ch <- int64(c.seq)
		}()
		waitIdle(t, cr, i+1)
	}
	return got, errs
}

func waitIdle(t *testing.T, cr *crew, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cr.mu.Lock()
		idle := len(cr.idle)
		cr.mu.Unlock()
		if idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers idle, want %d", idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCrewHandsToTheLastIdleWorker(t *testing.T) {
	ctx := context.Background()
	cr := newCrew(3)
	got, _ := idleWorkers(t, ctx, cr, 3)
	for seq := range uint64(2) {
		if err := cr.hand(ctx, &chunk{seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	// Last in, first out: worker 2 gets chunk 0, worker 1 chunk 1.
	if s := <-got[2]; s != 0 {
		t.Errorf("last idle worker got chunk %d, want 0", s)
	}
	if s := <-got[1]; s != 1 {
		t.Errorf("second-last idle worker got chunk %d, want 1", s)
	}
	select {
	case s := <-got[0]:
		t.Errorf("first idle worker got chunk %d while others were handed the work", s)
	default:
	}
	cr.finish()
	if s := <-got[0]; s != -1 {
		t.Errorf("after finish the idle worker got chunk %d, want none", s)
	}
	// A worker that comes back after finish is told at once.
	if c, err := cr.next(ctx, make(chan *chunk, 1)); c != nil || err != nil {
		t.Errorf("next after finish = %v, %v; want nil, nil", c, err)
	}
}

func TestCrewCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cr := newCrew(2)
	got, errs := idleWorkers(t, ctx, cr, 1)
	cancel()
	if s := <-got[0]; s != -1 {
		t.Errorf("cancelled worker got chunk %d", s)
	}
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled worker's error = %v", err)
	}
	// The token of the cancelled worker may be left; with none idle the
	// producer must still return on cancellation, not block.
	cr2 := newCrew(1)
	if err := cr2.hand(ctx, &chunk{}); !errors.Is(err, context.Canceled) {
		t.Errorf("hand with no idle worker after cancel = %v", err)
	}
}
