// Package pipeline runs the copy pass: the workers cut the dumpable pfns
// into chunks, read, zero-check and compress them in any order, and the
// chunks reach the writer strictly in pfn order.
//
//	Pfns ──cut, in order──▶ worker × N ──sequencer──▶ writer
//
// There is no producer or writer goroutine. A worker cuts its next chunk
// from the pfns (a word-at-a-time bitmap scan, numbered in order, under the
// sequencer's lock), works it, and hands it to the sequencer. The worker
// whose chunk is the next one in order takes it and every chunk after it
// that is ready:
//
//   - a Placer (a kdump file): under the lock it only has their places
//     handed out (data offsets and descriptor slots, in order); out of the
//     lock it writes them itself, concurrently with the other workers;
//   - any other Writer (a flattened stream, an ELF file, split files, the
//     zero scan): it writes them in order, one worker at a time, while the
//     others go on working.
//
// So the output is byte-identical for any number of workers, and the only
// serial work per chunk is two short critical sections (docs/scaling.md).
//
// At most min(N, GOMAXPROCS) workers run: more cannot run at once, and each
// costs its reader and codec state (a worker that waits for the CPU while
// another holds it would only evict the other's codec tables; see
// docs/scaling.md).
//
// Memory bound: chunks come from a pool of at most 2×W+2, W being the
// workers that run, each holding at most ChunkBytes of page data (256 pages
// of 4 KiB, 16 of 64 KiB) plus their records; a worker waits for a free
// chunk when all are in flight. A chunk is made only when none is free, so
// a pass touches only as many as it ever had in flight at once: one at one
// worker (a capture kernel with nr_cpus=1 and tens of MiB free). That is about (2W+2) MiB, e.g. 10 MiB for 4
// workers, whatever the page size. Nothing else grows with the size of the
// vmcore.
//
// The first error from any worker cancels the context; every worker
// returns on cancellation and Run reports that first error once.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"pagepipe/chunk"
	"pagepipe/codec"
	"pagepipe/internal/cpuclock"
	"pagepipe/internal/reorder"
)

// ChunkBytes bounds the page data one chunk carries: ChunkBytes/PageSize
// pages (256 of 4 KiB), so the pass's memory does not grow with the page
// size.
const ChunkBytes = 1 << 20

// chunkPages is the most pages one chunk of pageSize-byte pages carries.
func chunkPages(pageSize int) int { return max(ChunkBytes/pageSize, 1) }

// PageReader yields the bytes of a pfn; the slice is valid until the next call.
type PageReader interface {
	Page(pfn uint64) ([]byte, error)
	Close()
}

// Pfns hands out the pfns to copy, in the order the writer takes them
// (bitmap.Cursor: the 2nd bitmap's set bits). Next is called under the
// sequencer's lock, never concurrently.
type Pfns interface {
	// Next appends the next pfns to dst, as many as its capacity takes,
	// and returns it; none appended: none are left.
	Next(dst []uint64) []uint64
}

// PriorityPfns are Pfns whose batches are either all priority pages or
// none (priority.Order): each chunk cut from a batch carries the flag
// (chunk.Chunk.Priority).
type PriorityPfns interface {
	Pfns
	// Priority says whether the batch Next returned last is priority
	// pages. It is called under the sequencer's lock, after Next.
	Priority() bool
}

// Writer takes the chunks in the order Config.Pfns yields their pages (a
// flattened stream, an ELF file, split files, the zero scan). Its calls
// come in order, one at a time (from whichever worker holds the turn); it
// must not keep the chunk.
type Writer interface {
	WriteChunk(c chunk.Chunk) error
}

// Placer takes chunks that the workers write themselves, at places handed
// out in order (a kdump file, sink.PlacedKdump: data offsets and
// descriptor slots are known once the sizes before them are).
type Placer interface {
	// Place reserves the space of the next chunk in order. It is called
	// under the sequencer's lock, in order, never concurrently: it should
	// only do arithmetic.
	Place(c chunk.Chunk) (chunk.Place, error)
	// WritePlaced writes a chunk at its place: concurrently with other
	// calls, in any order. It must not keep the chunk.
	WritePlaced(at chunk.Place, c chunk.Chunk) error
}

// Config is one copy pass.
type Config struct {
	Workers int
	// PageSize is the input's page size in bytes: what each Page read
	// returns, the zero page's size, the unit of the chunks.
	PageSize int
	// NewReader makes one page reader per worker.
	NewReader func() PageReader
	// Pfns are the pages to copy, in the order the writer takes them:
	// the 2nd bitmap's set bits (bitmap.Cursor) for a kdump file, the
	// PT_LOADs' pages in file order for an ELF dump.
	Pfns Pfns
	// Total is the number of pfns Pfns yields, for progress.
	Total uint64
	// ExcludeZero: dump level bit 1, zero pages are marked, not stored.
	ExcludeZero bool
	// ZeroUnreadable stores a page that cannot be read as zeros (and
	// counts it) instead of stopping with an error naming it.
	ZeroUnreadable bool
	// NewRevisitor, when set (a live dump), makes one Revisitor per
	// worker: a page it says is left out is stored as zeros (the shared
	// zero page with ExcludeZero) without being read.
	NewRevisitor func() (Revisitor, error)
	// Codec compresses pages; nil stores them raw.
	Codec *codec.Codec
	// Writer takes the chunks in order; or, when it is nil, Placer takes
	// them, written by the workers at its places. One of them is set.
	Writer Writer
	Placer Placer
	// Progress, if set, is called after chunks are written with the
	// number of pages written so far; never concurrently.
	Progress func(done uint64)
	// Running, if set, is called as the pass starts with the number of
	// workers that run, and what it returns as the pass ends: the
	// caller's process-wide settings for the pass (the pipeline makes
	// none itself).
	Running func(workers int) (done func())
}

// Revisitor decides again, as the pass reaches it, whether a page the
// page scan left out is left out still (filter.Revisitor).
type Revisitor interface {
	LeftOut(pfn uint64) (bool, error)
	Forget() // a chunk begins
	Close()
}

// Stats counts what the pass did.
type Stats struct {
	Pages      uint64 // dumpable pages written
	ZeroPages  uint64 // pages replaced by the shared zero page
	Compressed uint64 // pages stored compressed
	Raw        uint64 // pages stored raw
	DataBytes  uint64 // page data bytes written (without the zero page)
	Unreadable uint64 // pages that could not be read, stored as zeros
	Revisited  uint64 // pages a Revisitor said were still left out, stored as zeros
	// Chunks is how many chunks the pass made, each only when none was
	// free: what it had in flight at once, at most 2×W+2 (each up to
	// ChunkBytes of page data).
	Chunks int

	// Wall is how long the pass took; ProcessCPU is the process's user
	// and system time over it (every thread: the workers, the Go
	// runtime's garbage collector and scheduler).
	Wall       time.Duration
	ProcessCPU cpuclock.Usage
	// Faults is the process's minor page faults over it.
	Faults int64
	// CPU is what each stage cost (StageCPU says how it is measured).
	CPU StageCPU
}

// StageCPU is the CPU time of the copy pass's stages. Every stage runs on
// the workers, each locked to its OS thread for its life, whose thread
// clock (exact, cpuclock.Thread) is read when it starts and ends, and
// around each batch of writes (cpuclock.ThreadTotal: two readings per
// chunk written, 4 µs each on these virtual machines). The serial
// sections, too short for such a clock, are timed with the monotonic clock
// (vDSO, tens of ns) while the lock is held: a wait for the CPU inside one
// counts against it, so they err high. The writes are taken out of the
// workers' system time, the
// serial sections out of their user time; the rest is read (system) and
// compress (user), split as the kernel samples it at ticks. It tells what the code costs, whatever the machine
// gives in wall time: on a machine whose CPUs share one core, more workers
// take longer but cost the same CPU seconds.
type StageCPU struct {
	// Read is the workers' system time besides their writes: pread
	// copies and the page faults of mapped windows.
	Read time.Duration
	// Compress is the workers' user time besides the serial sections:
	// the zero check and the codec.
	Compress time.Duration
	// Reorder is the serial sections: cutting the next chunk from the
	// pfns and numbering it, handing chunks over in order and, for a
	// Placer, their places.
	Reorder time.Duration
	// Write is a Writer's WriteChunk, in order, one at a time: serial.
	Write time.Duration
	// Store is a Placer's WritePlaced, the workers' own writes at the
	// places handed out: not serial in the pipeline. (The kernel holds a
	// file's inode lock through a buffered write, so the writes of one
	// file do not run at once in the kernel: the model bounds them by the
	// sink's measured rate, docs/scaling.md.)
	Store time.Duration
}

// Total is the CPU time of every stage.
func (s StageCPU) Total() time.Duration {
	return s.Read + s.Compress + s.Reorder + s.Write + s.Store
}

// slot is one chunk in flight: cut, worked, handed on in order, written,
// then back in the pool.
type slot struct {
	chunk.Chunk
	seq uint64
	at  chunk.Place
}

// Run performs the copy pass.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	if cfg.PageSize <= 0 {
		return Stats{}, fmt.Errorf("copy pass: page size %d", cfg.PageSize)
	}
	if (cfg.Writer == nil) == (cfg.Placer == nil) {
		return Stats{}, errors.New("copy pass: a Writer or a Placer, not both")
	}
	start, startCPU, startFaults := time.Now(), cpuclock.Process(), cpuclock.Faults()
	// Workers beyond the CPUs cannot run at once: they would only cost
	// their reader, codec state and chunks, whose memory faults in on
	// first use (docs/scaling.md).
	workers := min(max(cfg.Workers, 1), runtime.GOMAXPROCS(0))
	if cfg.Running != nil {
		defer cfg.Running(workers)()
	}
	sq := newSequencer(cfg, 2*workers+2)
	g, ctx := errgroup.WithContext(ctx)
	for range workers {
		g.Go(func() error { return sq.work(ctx) })
	}
	err := g.Wait()
	st := sq.stats
	st.Pages = sq.written.Load()
	st.Chunks = int(sq.made.Load())
	st.ZeroPages, st.Compressed, st.Unreadable = sq.zero.Load(), sq.compressed.Load(), sq.unreadable.Load()
	st.Revisited = sq.revisited.Load()
	st.Raw = st.Pages - st.ZeroPages - st.Compressed
	if err == nil && cfg.Progress != nil {
		cfg.Progress(st.Pages)
	}
	life := sq.life.Load()
	st.CPU.Reorder = sq.serial
	st.CPU.Write = time.Duration(sq.write.Load())
	st.CPU.Store = time.Duration(sq.store.Load())
	st.CPU.Read = max(life.Sys-st.CPU.Write-st.CPU.Store, 0)
	st.CPU.Compress = max(life.User-st.CPU.Reorder, 0)
	st.Wall, st.ProcessCPU = time.Since(start), cpuclock.Process().Sub(startCPU)
	st.Faults = cpuclock.Faults() - startFaults
	return st, err
}

// sequencer hands out chunks in order and takes them back in any order,
// passing them to the writer in order.
type sequencer struct {
	cfg    Config
	placer Placer // nil: cfg.Writer takes the chunks in order
	// prio, when set, says which batches of cfg.Pfns are priority pages.
	prio PriorityPfns
	// free is the chunk pool: the chunks made and not in flight.
	free chan *slot
	// unmade is how many more chunks the pool may make (below zero: none).
	unmade atomic.Int64
	// made counts the chunks made (Stats.Chunks).
	made atomic.Int64

	mu sync.Mutex
	// cut is the number of chunks cut so far.
	cut uint64
	// ready puts the worked chunks back in order for the writer (its ring
	// is the pool's size: at most a pool's worth are cut and not handed
	// on).
	ready *reorder.Buffer[*slot]
	// writing: a worker is writing chunks in order (not for a Placer).
	writing bool
	// exhausted: Pfns has none left.
	exhausted bool
	// serial is the time spent holding mu (StageCPU.Reorder).
	serial time.Duration
	// stats holds DataBytes, counted as chunks are handed on.
	stats Stats

	written, zero, compressed, unreadable atomic.Uint64
	revisited                             atomic.Uint64
	write, store                          atomic.Int64 // ns of thread CPU
	life                                  cpuclock.Counter
}

func newSequencer(cfg Config, pool int) *sequencer {
	sq := &sequencer{cfg: cfg, free: make(chan *slot, pool), ready: reorder.New[*slot](pool)}
	if cfg.Writer == nil {
		sq.placer = cfg.Placer
	}
	sq.prio, _ = cfg.Pfns.(PriorityPfns)
	sq.unmade.Store(int64(pool))
	return sq
}

// get takes a free chunk if one is waiting, else makes one while the pool
// allows, else waits for one. (Premade chunks handed out first in, first
// out cycled through the whole pool even at one worker, where one chunk is
// all that is ever in flight: 3 MiB more of a capture kernel's memory.)
func (sq *sequencer) get(ctx context.Context) (*slot, error) {
	select {
	case c := <-sq.free:
		return c, nil
	default:
	}
	if sq.unmade.Add(-1) >= 0 {
		sq.made.Add(1)
		return &slot{}, nil
	}
	select {
	case c := <-sq.free:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lock takes the sequencer's lock and returns when it was taken, for
// unlock to count the time it was held.
func (sq *sequencer) lock() time.Time {
	sq.mu.Lock()
	return time.Now()
}

func (sq *sequencer) unlock(t time.Time) {
	sq.serial += time.Since(t)
	sq.mu.Unlock()
}

// work is one worker: it cuts chunks, works them and hands them on until
// the pfns run out, an error or the context stops it.
func (sq *sequencer) work(ctx context.Context) error {
	// A page of a mapped vmcore that cannot be read (an I/O error under
	// /proc/vmcore, a file cut short) faults: make that a panic this
	// goroutine can recover from, not a crash.
	debug.SetPanicOnFault(true)
	m := sq.life.Start()
	defer m.Stop()
	var w *worker
	var batch []*slot
	for {
		c, err := sq.get(ctx)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !sq.cutNext(c) {
			sq.free <- c
			return nil
		}
		if w == nil {
			// Made on the first chunk: a worker that never gets one costs
			// no reader or codec state.
			w = newWorker(sq.cfg)
			defer w.close()
		}
		if err := w.process(c); err != nil {
			return err
		}
		sq.zero.Add(w.zero)
		sq.compressed.Add(w.compressed)
		sq.unreadable.Add(w.unreadable)
		sq.revisited.Add(w.revisited)
		if batch, err = sq.handOn(c, batch[:0]); err != nil {
			return err
		}
		if err := sq.writeBatch(batch); err != nil {
			return err
		}
		m.Pace()
	}
}

// cutNext fills c with the next pfns and numbers it; false when none are
// left.
func (sq *sequencer) cutNext(c *slot) bool {
	if c.Pfns == nil {
		n := chunkPages(sq.cfg.PageSize)
		c.Pfns = make([]uint64, 0, n)
		c.Pages = make([]chunk.Page, 0, n)
		c.Data = make([]byte, 0, n*sq.cfg.PageSize)
	}
	t := sq.lock()
	defer sq.unlock(t)
	if sq.exhausted {
		return false
	}
	c.Pfns = sq.cfg.Pfns.Next(c.Pfns[:0])
	if len(c.Pfns) == 0 {
		sq.exhausted = true
		return false
	}
	c.Priority = sq.prio != nil && sq.prio.Priority()
	c.seq = sq.cut
	sq.cut++
	return true
}

// handOn puts the worked chunk c in line. When it is the next one in order
// (and, for an ordered Writer, no worker is writing), the caller takes it
// and the ready chunks after it into batch: for a Placer each gets its
// place here.
func (sq *sequencer) handOn(c *slot, batch []*slot) ([]*slot, error) {
	t := sq.lock()
	defer sq.unlock(t)
	sq.ready.Put(c.seq, c)
	return sq.take(batch)
}

// take moves the ready chunks that are next in order into batch (under the
// lock).
func (sq *sequencer) take(batch []*slot) ([]*slot, error) {
	if sq.writing {
		return batch, nil
	}
	for c, ok := sq.ready.Next(); ok; c, ok = sq.ready.Next() {
		if sq.placer != nil {
			at, err := sq.placer.Place(c.Chunk)
			if err != nil {
				return batch, err
			}
			c.at = at
		}
		sq.stats.DataBytes += uint64(len(c.Data))
		batch = append(batch, c)
	}
	sq.writing = sq.placer == nil && len(batch) > 0
	return batch, nil
}

// writeBatch writes the chunks take gave this worker and returns them to
// the pool. For an ordered Writer the worker keeps the turn, taking the
// chunks that became ready meanwhile, until none are left.
func (sq *sequencer) writeBatch(batch []*slot) error {
	for len(batch) > 0 {
		t0 := cpuclock.ThreadTotal()
		for _, c := range batch {
			var err error
			if sq.placer != nil {
				err = sq.placer.WritePlaced(c.at, c.Chunk)
			} else {
				err = sq.cfg.Writer.WriteChunk(c.Chunk)
			}
			if err != nil {
				return err
			}
			sq.written.Add(uint64(len(c.Pages)))
		}
		d := int64(cpuclock.ThreadTotal() - t0)
		if sq.placer != nil {
			sq.store.Add(d)
		} else {
			sq.write.Add(d)
		}
		for _, c := range batch {
			sq.free <- c
		}
		t := sq.lock()
		if sq.cfg.Progress != nil {
			sq.cfg.Progress(sq.written.Load())
		}
		if sq.placer != nil {
			sq.unlock(t)
			return nil
		}
		sq.writing = false
		var err error
		batch, err = sq.take(batch[:0])
		sq.unlock(t)
		if err != nil {
			return err
		}
	}
	return nil
}

// worker holds one goroutine's reader and codec state, reused for every
// page it handles.
type worker struct {
	cfg        Config
	r          PageReader
	comp       codec.Compressor
	buf        []byte
	zeroPage   []byte // what an unreadable or revisited page is stored as
	rv         Revisitor
	revisited  uint64 // per chunk
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
		w.buf = make([]byte, 0, codec.MaxCompressedLen(cfg.PageSize))
	}
	if cfg.ZeroUnreadable || cfg.NewRevisitor != nil {
		w.zeroPage = make([]byte, cfg.PageSize)
	}
	return w
}

func (w *worker) close() {
	w.r.Close()
	if w.rv != nil {
		w.rv.Close()
	}
}

// process fills c.Pages and c.Data for c.Pfns.
func (w *worker) process(c *slot) error {
	c.Pages, c.Data = c.Pages[:0], c.Data[:0]
	w.zero, w.compressed, w.unreadable, w.revisited = 0, 0, 0, 0
	if w.cfg.NewRevisitor != nil {
		if w.rv == nil {
			rv, err := w.cfg.NewRevisitor()
			if err != nil {
				return err
			}
			w.rv = rv
		}
		w.rv.Forget()
	}
	for _, pfn := range c.Pfns {
		if w.rv != nil {
			out, err := w.rv.LeftOut(pfn)
			if err != nil {
				return err
			}
			if out {
				w.revisited++
				if err := w.store(c, pfn, w.zeroPage); err != nil {
					return err
				}
				continue
			}
		}
		if err := w.readStore(c, pfn); err != nil {
			if !w.cfg.ZeroUnreadable || !errors.Is(err, errUnreadable) {
				return err
			}
			// The option: store the page as zeros, count it, go on.
			c.Pages, c.Data = c.Pages[:w.pagesMark], c.Data[:w.dataMark]
			w.unreadable++
			if err := w.store(c, pfn, w.zeroPage); err != nil {
				return err
			}
		}
	}
	return nil
}

// errUnreadable marks a vmcore page that could not be read.
var errUnreadable = errors.New("the vmcore cannot be read there")

// readAttempts bounds the reads of one page: a short read or an I/O error
// on /proc/vmcore may pass, a bad page does not.
const readAttempts = 3

// readStore reads pfn (retrying a failed read) and stores it. A mapped page
// that faults while it is checked or compressed is unreadable too: with
// SetPanicOnFault that is a panic this goroutine recovers from.
func (w *worker) readStore(c *slot, pfn uint64) (err error) {
	w.pagesMark, w.dataMark = len(c.Pages), len(c.Data)
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
func (w *worker) store(c *slot, pfn uint64, page []byte) error {
	if w.cfg.ExcludeZero && chunk.IsZero(page) {
		c.Pages = append(c.Pages, chunk.Page{Zero: true})
		w.zero++
		return nil
	}
	if w.comp != nil {
		// Straight into the chunk's data where the most a page can come
		// to fits there (a copy less of every compressed byte), else
		// into the worker's buffer.
		dst, end := w.buf, len(c.Data)
		if cap(c.Data)-end >= cap(w.buf) {
			dst = c.Data[end:end]
		}
		out, err := w.comp.Compress(dst, page)
		if err != nil {
			return fmt.Errorf("compress pfn %#x with %s: %w", pfn, w.cfg.Codec.Name, err)
		}
		if out != nil && len(out) < len(page) {
			c.Pages = append(c.Pages, chunk.Page{Size: uint32(len(out)), Flags: w.cfg.Codec.Flag})
			if len(out) > 0 && cap(c.Data) > end && &out[0] == &c.Data[end : end+1][0] {
				c.Data = c.Data[:end+len(out)]
			} else {
				c.Data = append(c.Data, out...)
			}
			w.compressed++
			return nil
		}
	}
	c.Pages = append(c.Pages, chunk.Page{Size: uint32(len(page))})
	c.Data = append(c.Data, page...)
	return nil
}
