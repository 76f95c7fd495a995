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
// in turn (a channel's order: 8) or each round of the chunk pool spread
// over 4 (the crew's first version).
//
// The Go scheduler preempts a goroutine that has run 10 ms of wall time,
// and on a loaded machine (the whole suite runs at once) the OS may stop
// the busy worker's thread that long: then a woken worker rightly takes
// the next chunk. So chunks cost next to nothing (pages that need no read,
// no codec, a writer that keeps nothing), and the pass runs up to 5 times:
// one undisturbed pass shows the policy.
func TestSurplusWorkersSleep(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	m := bitmap.New(100 * ChunkPages)
	m.SetRange(0, m.Len())
	var took []int64
	for range 5 {
		var readers atomic.Int64
		cfg := config(8, m, dropWriter{}, ^uint64(0))
		cfg.NewReader = func() PageReader { readers.Add(1); return constReader{} }
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if took = append(took, readers.Load()); readers.Load() <= 3 {
			return
		}
	}
	t.Errorf("workers of 8 that took chunks on one CPU, in 5 passes: %v; want at most 3 in one", took)
}

// constReader serves one page, not zero, for every pfn.
type constReader struct{}

var constPage = [4096]byte{0: 1}

func (constReader) Page(uint64) ([]byte, error) { return constPage[:], nil }
func (constReader) Close()                      {}

// dropWriter takes pages and keeps nothing.
type dropWriter struct{}

func (dropWriter) WritePages([]uint64, []sink.Page, []byte) error { return nil }
