package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pagepipe/bitmap"
	"pagepipe/chunk"
	"pagepipe/codec"
	"pagepipe/kdumpfmt"
	"pagepipe/sink"
)

// fakeReader serves pages whose contents encode their pfn (every 3rd page
// zero), and fails at failPFN.
type fakeReader struct {
	buf     []byte
	failPFN uint64
	reads   *atomic.Int64
}

func (r *fakeReader) Page(pfn uint64) ([]byte, error) {
	if pfn == r.failPFN {
		return nil, fmt.Errorf("read pfn %#x: injected failure", pfn)
	}
	if r.reads != nil {
		r.reads.Add(1)
	}
	clear(r.buf)
	if pfn%3 != 0 {
		for i := 0; i < len(r.buf); i += 8 {
			binary.LittleEndian.PutUint64(r.buf[i:], pfn)
		}
	}
	return r.buf, nil
}

func (r *fakeReader) Close() {}

// recorder is a Writer keeping what it got.
type recorder struct {
	pages []chunk.Page
	data  []byte
	fail  int // fail on this call (1-based); 0 never
	calls int
}

func (w *recorder) WriteChunk(c chunk.Chunk) error {
	w.calls++
	if w.calls == w.fail {
		return errors.New("disk full (injected)")
	}
	w.pages = append(w.pages, c.Pages...)
	w.data = append(w.data, c.Data...)
	return nil
}

func config(workers int, m *bitmap.Bitmap, w Writer, failPFN uint64) Config {
	return Config{
		Workers:     workers,
		PageSize:    4096,
		NewReader:   func() PageReader { return &fakeReader{buf: make([]byte, 4096), failPFN: failPFN} },
		Pfns:        m.Cursor(),
		ExcludeZero: true,
		Writer:      w,
	}
}

func testBitmap() *bitmap.Bitmap {
	m := bitmap.New(10000)
	m.SetRange(3, 2000)
	m.SetRange(2500, 2501)
	m.SetRange(4000, 9999)
	return m
}

// The writer sees the same pages in the same order for any worker count
// (GOMAXPROCS 64, so that as many run).
func TestOrderedForAnyWorkerCount(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(64))
	m := testBitmap()
	var ref *recorder
	for _, workers := range []int{1, 2, 3, 8, 64} {
		w := &recorder{}
		cfg := config(workers, m, w, ^uint64(0))
		c, _ := codec.ByFlag(kdumpfmt.StatusZlib)
		cfg.Codec = c
		st, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pages != m.Count(0, m.Len()) || uint64(len(w.pages)) != st.Pages {
			t.Fatalf("%d workers: %d pages written, %d recorded, want %d", workers, st.Pages, len(w.pages), m.Count(0, m.Len()))
		}
		if st.ZeroPages == 0 || st.Compressed == 0 {
			t.Fatalf("%d workers: stats %+v", workers, st)
		}
		// One worker has one chunk in flight at a time, so it makes one
		// (a capture kernel's memory); more never exceed the pool.
		if workers == 1 && st.Chunks != 1 || st.Chunks < 1 || st.Chunks > 2*workers+2 {
			t.Fatalf("%d workers made %d chunks (pool %d)", workers, st.Chunks, 2*workers+2)
		}
		if ref == nil {
			ref = w
			continue
		}
		if fmt.Sprint(w.pages) != fmt.Sprint(ref.pages) || string(w.data) != string(ref.data) {
			t.Fatalf("%d workers: output differs from 1 worker", workers)
		}
	}
}

// The first error stops every stage, is returned once, and no goroutine
// is left behind.
func TestFirstErrorCancelsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	for _, workers := range []int{1, 2, 8, 64} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			_, err := Run(context.Background(), config(workers, testBitmap(), &recorder{}, 4500))
			// A read that keeps failing is tried readAttempts times.
			if err == nil || err.Error() != "pfn 0x1194: the vmcore cannot be read there after 3 reads: read pfn 0x1194: injected failure" {
				t.Fatalf("error %v", err)
			}
			_, err = Run(context.Background(), config(workers, testBitmap(), &recorder{fail: 3}, ^uint64(0)))
			if err == nil || err.Error() != "disk full (injected)" {
				t.Fatalf("writer error %v", err)
			}
		})
	}
	waitGoroutines(t, base)
}

// Cancelling at random points stops the pass with the context's error and
// leaks nothing.
func TestCancelAtRandomPoints(t *testing.T) {
	base := runtime.NumGoroutine()
	big := bitmap.New(1 << 17)
	big.SetRange(0, 1<<17)
	for i, workers := range []int{1, 2, 8, 64, 3, 5} {
		ctx, cancel := context.WithCancel(context.Background())
		var reads atomic.Int64
		cfg := config(workers, big, &recorder{}, ^uint64(0))
		cfg.NewReader = func() PageReader {
			return &fakeReader{buf: make([]byte, 4096), failPFN: ^uint64(0), reads: &reads}
		}
		stopAt := int64(1000 * (i + 1) * 3)
		cfg.Progress = func(done uint64) {
			if int64(done) >= stopAt {
				cancel()
			}
		}
		_, err := Run(ctx, cfg)
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%d workers: error %v, want context.Canceled", workers, err)
		}
	}
	waitGoroutines(t, base)
}

func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left behind (had %d):\n%s", runtime.NumGoroutine()-base, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memFile is an Output in memory, safe for concurrent writes.
type memFile struct {
	mu sync.Mutex
	b  []byte
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end := int(off) + len(p); end > len(f.b) {
		f.b = append(f.b, make([]byte, end-len(f.b))...)
	}
	return copy(f.b[off:], p), nil
}

// A kdump file written by the workers at the places handed out in order
// has the same bytes as one written in order, for 1 to 64 workers.
func TestPlacedKdumpIdenticalToOrdered(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(64))
	m := testBitmap()
	meta := &sink.Meta{BlockSize: 4096, MaxMapnr: m.Len(), Present: m, Dumpable: m,
		NumDumpable: m.Count(0, m.Len()), ZeroPage: true, Status: kdumpfmt.StatusZlib}
	c, _ := codec.ByFlag(kdumpfmt.StatusZlib)
	write := func(workers int, placed bool) []byte {
		f := &memFile{}
		cfg := config(workers, m, nil, ^uint64(0))
		cfg.Codec = c
		var close func() error
		if placed {
			k, err := sink.NewPlacedKdump(f, meta)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Writer, cfg.Placer, close = nil, k, k.Close
		} else {
			k, err := sink.NewKdump(f, meta)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Writer, close = k, k.Close
		}
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if err := close(); err != nil {
			t.Fatal(err)
		}
		return f.b
	}
	want := write(1, false)
	for _, workers := range []int{1, 2, 3, 8, 64} {
		got := write(workers, true)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d workers, placed: %d bytes differ from the ordered file's %d", workers, len(got), len(want))
		}
	}
}

// fakeRevisitor says the pfns it holds are left out still; it never
// lets the reader see them.
type fakeRevisitor struct {
	out    map[uint64]bool
	closed *atomic.Int64
}

func (r *fakeRevisitor) LeftOut(pfn uint64) (bool, error) { return r.out[pfn], nil }
func (r *fakeRevisitor) Forget()                          {}
func (r *fakeRevisitor) Close()                           { r.closed.Add(1) }

// A live dump's revisited pages: those still left out are stored as the
// shared zero page and not read, the rest are copied; every worker's
// Revisitor is closed.
func TestRevisitor(t *testing.T) {
	m := testBitmap()
	out := map[uint64]bool{}
	for pfn := uint64(4000); pfn < 4100; pfn++ {
		if pfn%3 != 0 { // pages with data
			out[pfn] = true
		}
	}
	for _, zero := range []bool{true, false} {
		w := &recorder{}
		var reads, closed atomic.Int64
		cfg := config(4, m, w, ^uint64(0))
		cfg.ExcludeZero = zero
		cfg.NewReader = func() PageReader { return &fakeReader{buf: make([]byte, 4096), failPFN: ^uint64(0), reads: &reads} }
		cfg.NewRevisitor = func() (Revisitor, error) { return &fakeRevisitor{out: out, closed: &closed}, nil }
		st, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		n := m.Count(0, m.Len())
		if st.Pages != n || st.Revisited != uint64(len(out)) || uint64(reads.Load()) != n-uint64(len(out)) {
			t.Errorf("zero %v: %d pages, %d revisited, %d read; want %d, %d, %d", zero, st.Pages, st.Revisited, reads.Load(), n, len(out), n-uint64(len(out)))
		}
		if closed.Load() == 0 {
			t.Errorf("zero %v: no Revisitor closed", zero)
		}
		// The pages in order: a revisited one is the zero page (or
		// a raw page of zeros), the others what the reader gave.
		off := 0
		i := 0
		for pfn := m.NextSet(0); pfn < m.Len(); pfn = m.NextSet(pfn + 1) {
			p := w.pages[i]
			i++
			if zero {
				if p.Zero != (out[pfn] || pfn%3 == 0) {
					t.Fatalf("pfn %d: zero %v", pfn, p.Zero)
				}
				if p.Zero {
					continue
				}
			}
			d := w.data[off : off+int(p.Size)]
			off += int(p.Size)
			if allZero := !bytes.ContainsFunc(d, func(r rune) bool { return r != 0 }); allZero != (out[pfn] || pfn%3 == 0) {
				t.Fatalf("zero %v: pfn %d: data all zeros %v", zero, pfn, allZero)
			}
		}
	}
}

// Running is called once as the pass starts, with the workers that run
// (no more than GOMAXPROCS), and its done once as it ends.
func TestRunning(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	var started, ended, workers int
	cfg := config(8, testBitmap(), &recorder{}, ^uint64(0))
	cfg.Running = func(w int) func() {
		started++
		workers = w
		return func() { ended++ }
	}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if started != 1 || ended != 1 || workers != 3 {
		t.Fatalf("Running called %d times with %d workers, done %d times; want once with 3, once", started, workers, ended)
	}
}
