//go:build !race

// The race detector randomises the Go scheduler's choice of the next
// goroutine (a readied goroutine no longer runs next), which is the
// behaviour this test checks the crew against; it runs in make test's
// plain pass.

package pipeline

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"pagepipe/bitmap"
	"pagepipe/sink"
)

// TestSurplusWorkersSleep: on one CPU only one worker can run, and the crew
// keeps the others asleep, so that at most 3 workers of 8 ever take a
// chunk (each makes its reader on its first chunk) instead of all of them
// in turn.
func TestSurplusWorkersSleep(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m := bitmap.New(200 * ChunkPages)
	m.SetRange(0, m.Len())
	var readers atomic.Int64
	cfg := config(8, m, dropWriter{}, ^uint64(0))
	// Pages that cost nothing to read and no codec: a chunk must take well
	// under the scheduler's 10 ms time slice, even under the race detector,
	// or a busy worker is preempted and a woken one rightly takes the next
	// chunk.
	cfg.NewReader = func() PageReader { readers.Add(1); return constReader{} }
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if n := readers.Load(); n > 3 {
		t.Errorf("%d of 8 workers took chunks on one CPU, want at most 3", n)
	}
}

// constReader serves one page, not zero, for every pfn.
type constReader struct{}

var constPage = [4096]byte{0: 1}

func (constReader) Page(uint64) ([]byte, error) { return constPage[:], nil }
func (constReader) Close()                      {}

// dropWriter takes pages and keeps nothing.
type dropWriter struct{}

func (dropWriter) WritePages([]sink.Page, []byte) error { return nil }
