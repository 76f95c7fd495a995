// Package pipeline runs the copy pass: it cuts the dumpable pfns into
// chunks, lets N workers read, zero-check and compress them in any order,
// and hands the results to one writer strictly in pfn order.
//
//	producer ──crew──▶ worker × N ──┐ (each chunk carries its own done channel)
//	    └────────────order──────────┴──▶ writer (waits on chunks in sequence)
//
// The crew wakes workers one at a time, the one that worked last first,
// so that surplus workers (more than the CPUs running) stay asleep and the
// busy ones keep their codec state in cache (crew.go).
//
// The order channel is the reorder stage: the producer queues every chunk
// there in sequence as it queues it for the workers, and the writer takes
// them from it one by one, waiting for each to be finished. So the output
// is byte-identical for any number of workers.
//
// Memory bound: chunks come from a fixed pool of 2×N+2, N being the
// workers or the CPUs the process may use (GOMAXPROCS), whichever is
// fewer, each holding at most ChunkPages pages of output (4 KiB each) plus
// their records; the producer blocks when all are in flight. With the
// default 256 pages that is about (2N+2) MiB, e.g. 10 MiB for 4 workers.
// Nothing else grows with the size of the vmcore.
//
// The first error from any stage cancels the context; every stage returns
// on cancellation and Run reports that first error once.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"pagepipe/codec"
	"pagepipe/filter"
	"pagepipe/internal/cpuclock"
	"pagepipe/sink"
	"pagepipe/source"
)

// ChunkPages is the most dumpable pages one chunk carries.
const ChunkPages = 256

// PageReader yields the bytes of a pfn; the slice is valid until the next call.
type PageReader interface {
	Page(pfn uint64) ([]byte, error)
	Close()
}

// Writer consumes pages in the order Config.Pfns yields them: pfns[i] is
// the pfn of pages[i], whose data, if any, comes next in data.
type Writer interface {
	WritePages(pfns []uint64, pages []sink.Page, data []byte) error
}

// Config is one copy pass.
type Config struct {
	Workers int
	// NewReader makes one page reader per worker.
	NewReader func() PageReader
	// Pfns are the pages to copy, in the order the writer takes them:
	// the 2nd bitmap's set bits (bitmap.Ones) for a kdump file, the
	// PT_LOADs' pages in file order for an ELF dump.
	Pfns iter.Seq[uint64]
	// Total is the number of pfns Pfns yields, for progress.
	Total uint64
	// ExcludeZero: dump level bit 1, zero pages are marked, not stored.
	ExcludeZero bool
	// ZeroUnreadable stores a page that cannot be read as zeros (and
	// counts it) instead of stopping with an error naming it.
	ZeroUnreadable bool
	// Codec compresses pages; nil stores them raw.
	Codec  *codec.Codec
	Writer Writer
	// Progress, if set, is called by the writer after each chunk with the
	// number of pages written so far.
	Progress func(done uint64)
}

// Stats counts what the pass did.
type Stats struct {
	Pages      uint64 // dumpable pages written
	ZeroPages  uint64 // pages replaced by the shared zero page
	Compressed uint64 // pages stored compressed
	Raw        uint64 // pages stored raw
	DataBytes  uint64 // page data bytes written (without the zero page)
	Unreadable uint64 // pages that could not be read, stored as zeros

	// Wall is how long the pass took; ProcessCPU is the process's user
	// and system time over it (every thread: the stages, the Go runtime's
	// garbage collector and scheduler).
	Wall       time.Duration
	ProcessCPU cpuclock.Usage
	// CPU is what each stage cost, measured on its own OS thread.
	CPU StageCPU
}

// StageCPU is the CPU time of the copy pass's stages. Each stage goroutine
// is locked to an OS thread and reads that thread's clock (a getrusage call
// of a few microseconds) when it starts and ends, the writer also around
// each chunk's write: well under 0.1 % of a chunk's work. (Not per chunk
// for the workers: the kernel brings a running thread's time up to date
// only at ticks and switches, and a try that summed per-chunk readings of
// workers that hand chunks over without sleeping got half their CPU time.)
// It tells what the code costs, whatever the machine gives in wall time: on
// a machine whose CPUs share one core, more workers take longer but cost
// the same CPU seconds.
type StageCPU struct {
	// Read is the workers' system time: pread copies and the page faults
	// of mapped windows.
	Read time.Duration
	// Compress is the workers' user time: the zero check and the codec.
	Compress time.Duration
	// Reorder is the producer (cutting the 2nd bitmap into chunks numbered
	// in pfn order, queueing them) and the writer's waits for the next
	// chunk in order.
	Reorder time.Duration
	// Write is the writer: descriptors, page data, positioned writes.
	Write time.Duration
}

// Total is the CPU time of every stage.
func (s StageCPU) Total() time.Duration { return s.Read + s.Compress + s.Reorder + s.Write }

type chunk struct {
	seq   uint64
	pfns  []uint64
	pages []sink.Page
	data  []byte
	done  chan struct{}
	err   error
}

// Run performs the copy pass.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	start, startCPU := time.Now(), cpuclock.Process()
	workers := max(cfg.Workers, 1)
	var workerCPU, producerCPU, waitCPU, writeCPU cpuclock.Counter
	g, ctx := errgroup.WithContext(ctx)

	// Chunks in flight beyond two per CPU cannot be worked on sooner:
	// they would only cost memory whose pages fault in on first use (with
	// 8 workers on one CPU, 18 chunks made the pass 10 % dearer in CPU
	// time than 1 worker's 4; docs/scaling.md).
	poolSize := 2*min(workers, runtime.GOMAXPROCS(0)) + 2
	free := make(chan *chunk, poolSize)
	for range poolSize {
		free <- &chunk{
			pfns:  make([]uint64, 0, ChunkPages),
			pages: make([]sink.Page, 0, ChunkPages),
			data:  make([]byte, 0, ChunkPages*source.PageSize),
			done:  make(chan struct{}, 1),
		}
	}
	order := make(chan *chunk, poolSize)
	crew := newCrew(poolSize)

	// Producer: cut the pfns into chunks, numbered in order.
	g.Go(func() error {
		defer producerCPU.Measure()()
		defer crew.finish()
		defer close(order)
		var seq uint64
		var c *chunk
		send := func() bool {
			select {
			case order <- c:
			case <-ctx.Done():
				return false
			}
			crew.hand(c)
			c = nil
			return true
		}
		for pfn := range cfg.Pfns {
			if c == nil {
				select {
				case c = <-free:
				case <-ctx.Done():
					return ctx.Err()
				}
				c.seq, c.pfns = seq, c.pfns[:0]
				seq++
			}
			c.pfns = append(c.pfns, pfn)
			if len(c.pfns) == ChunkPages && !send() {
				return ctx.Err()
			}
		}
		if c != nil && !send() {
			return ctx.Err()
		}
		return nil
	})

	var zero, compressed, unreadable atomic.Uint64
	for range workers {
		g.Go(func() error {
			// A page of a mapped vmcore that cannot be read (an I/O error
			// under /proc/vmcore, a file cut short) faults: make that a
			// panic this goroutine can recover from, not a crash.
			debug.SetPanicOnFault(true)
			defer workerCPU.Measure()()
			var w *worker
			wakeup := make(chan struct{}, 1)
			for {
				c, err := crew.next(ctx, wakeup)
				if c == nil {
					return err
				}
				if w == nil {
					// Made on the first chunk: a worker the crew never
					// needs costs no reader or codec state.
					w = newWorker(cfg)
					defer w.close()
				}
				// After done is signalled the chunk belongs to the writer
				// (and then to the pool): keep the error in a local.
				err = w.process(c)
				if err == nil {
					zero.Add(w.zero)
					compressed.Add(w.compressed)
					unreadable.Add(w.unreadable)
				}
				c.err = err
				c.done <- struct{}{}
				if err != nil {
					return err
				}
			}
		})
	}

	var st Stats
	g.Go(func() error {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// The writer's thread time alternates: waiting for the next chunk
		// in order (reorder), then writing it.
		t := cpuclock.Thread()
		defer func() { waitCPU.Add(cpuclock.Thread().Sub(t)) }()
		for c := range order {
			select {
			case <-c.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if c.err != nil {
				return c.err
			}
			now := cpuclock.Thread()
			waitCPU.Add(now.Sub(t))
			err := cfg.Writer.WritePages(c.pfns, c.pages, c.data)
			t = cpuclock.Thread()
			writeCPU.Add(t.Sub(now))
			if err != nil {
				return err
			}
			st.Pages += uint64(len(c.pages))
			st.DataBytes += uint64(len(c.data))
			if cfg.Progress != nil {
				cfg.Progress(st.Pages)
			}
			free <- c
		}
		return nil
	})

	err := g.Wait()
	st.ZeroPages, st.Compressed, st.Unreadable = zero.Load(), compressed.Load(), unreadable.Load()
	st.Raw = st.Pages - st.ZeroPages - st.Compressed
	w := workerCPU.Load()
	st.CPU = StageCPU{
		Read:     w.Sys,
		Compress: w.User,
		Reorder:  producerCPU.Load().Total() + waitCPU.Load().Total(),
		Write:    writeCPU.Load().Total(),
	}
	st.Wall, st.ProcessCPU = time.Since(start), cpuclock.Process().Sub(startCPU)
	return st, err
}

// worker holds one goroutine's reader and codec state, reused for every
// page it handles.
type worker struct {
	cfg        Config
	r          PageReader
	comp       codec.Compressor
	buf        []byte
	zero       uint64 // per chunk
	compressed uint64
	unreadable uint64
	// where the chunk stood before the page being read, to undo it
	pagesMark, dataMark int
}

func newWorker(cfg Config) *worker {
	w := &worker{cfg: cfg, r: cfg.NewReader()}
	if cfg.Codec != nil {
		w.comp = cfg.Codec.NewCompressor()
		w.buf = make([]byte, 0, codec.MaxCompressedLen(source.PageSize))
	}
	return w
}

func (w *worker) close() { w.r.Close() }

// process fills c.pages and c.data for c.pfns.
func (w *worker) process(c *chunk) error {
	c.pages, c.data = c.pages[:0], c.data[:0]
	w.zero, w.compressed, w.unreadable = 0, 0, 0
	for _, pfn := range c.pfns {
		if err := w.readStore(c, pfn); err != nil {
			if !w.cfg.ZeroUnreadable || !errors.Is(err, errUnreadable) {
				return err
			}
			// The option: store the page as zeros, count it, go on.
			c.pages, c.data = c.pages[:w.pagesMark], c.data[:w.dataMark]
			w.unreadable++
			if err := w.store(c, pfn, zeroPage[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// errUnreadable marks a vmcore page that could not be read.
var errUnreadable = errors.New("the vmcore cannot be read there")

var zeroPage [source.PageSize]byte

// readAttempts bounds the reads of one page: a short read or an I/O error
// on /proc/vmcore may pass, a bad page does not.
const readAttempts = 3

// readStore reads pfn (retrying a failed read) and stores it. A mapped page
// that faults while it is checked or compressed is unreadable too: with
// SetPanicOnFault that is a panic this goroutine recovers from.
func (w *worker) readStore(c *chunk, pfn uint64) (err error) {
	w.pagesMark, w.dataMark = len(c.pages), len(c.data)
	defer func() {
		if r := recover(); r != nil {
			// SetPanicOnFault's panics carry the faulting address.
			if fault, ok := r.(interface{ Addr() uintptr }); ok {
				err = fmt.Errorf("pfn %#x: %w (memory fault at %#x)", pfn, errUnreadable, fault.Addr())
				return
			}
			panic(r)
		}
	}()
	var page []byte
	for try := 1; ; try++ {
		if page, err = w.r.Page(pfn); err == nil {
			break
		}
		if try == readAttempts {
			return fmt.Errorf("pfn %#x: %w after %d reads: %v", pfn, errUnreadable, try, err)
		}
	}
	return w.store(c, pfn, page)
}

// store appends one page to the chunk: the shared zero page, compressed
// when that is strictly smaller than a page, else raw.
func (w *worker) store(c *chunk, pfn uint64, page []byte) error {
	if w.cfg.ExcludeZero && filter.IsZero(page) {
		c.pages = append(c.pages, sink.Page{Zero: true})
		w.zero++
		return nil
	}
	if w.comp != nil {
		out, err := w.comp.Compress(w.buf, page)
		if err != nil {
			return fmt.Errorf("compress pfn %#x with %s: %w", pfn, w.cfg.Codec.Name, err)
		}
		if out != nil && len(out) < len(page) {
			c.pages = append(c.pages, sink.Page{Size: uint32(len(out)), Flags: w.cfg.Codec.Flag})
			c.data = append(c.data, out...)
			w.compressed++
			return nil
		}
	}
	c.pages = append(c.pages, sink.Page{Size: uint32(len(page))})
	c.data = append(c.data, page...)
	return nil
}
