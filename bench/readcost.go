package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"pagepipe/internal/cpuclock"
	"pagepipe/source"
)

// ReadCost is one way of reading a vmcore, measured alone: what the page
// scan's and the metadata reads' choice between read() and mmap windows
// rests on. On /proc/vmcore in a capture kernel the two cost very
// differently (read_vmcore copies old memory a page at a time through a
// temporary mapping; mmap_vmcore maps a whole window with
// remap_pfn_range), and differently again from a file in the page cache,
// where the project's other figures were taken.
type ReadCost struct {
	// Method is pread or mmap; Pattern sequential (a run of the file read
	// in order, as the page scan reads struct pages) or random (single
	// pages far apart, as page-table walks and the priority search read).
	Method, Pattern string
	// Size is the bytes per pread, or the mmap window (MAP_POPULATE,
	// unmapped before the next is mapped).
	Size  int
	Calls int
	// Bytes is what was read: every byte copied by pread, and for mmap one
	// 8-byte word per 64 (a struct page's flags) over the bytes wanted.
	Bytes           int64
	Wall, User, Sys float64 // seconds; User and Sys the thread's own
}

// PerPage is the CPU seconds (user + sys) per 4 KiB page wanted.
func (c ReadCost) PerPage() float64 {
	if c.Bytes == 0 {
		return 0
	}
	return (c.User + c.Sys) / float64(c.Bytes) * 4096
}

// PerCall is the CPU seconds per pread or per window.
func (c ReadCost) PerCall() float64 {
	if c.Calls == 0 {
		return 0
	}
	return (c.User + c.Sys) / float64(c.Calls)
}

// MeasureReadCosts reads seqBytes of the vmcore's largest PT_LOAD in order
// with each pread size and each mmap window of sizes, then randomPages
// pages at random places in it with a 4 KiB pread and with each window
// (a window mapped around each page). Every measurement runs on one locked
// OS thread, whose rusage gives its CPU time.
func MeasureReadCosts(path string, seqBytes int64, randomPages int, sizes []int) ([]ReadCost, error) {
	v, err := source.Open(path)
	if err != nil {
		return nil, err
	}
	defer v.Close()
	var seg source.Load
	for _, l := range v.Loads {
		if l.FileSize > seg.FileSize {
			seg = l
		}
	}
	osPage := uint64(os.Getpagesize())
	start := (seg.Offset + osPage - 1) &^ (osPage - 1)
	end := (seg.Offset + seg.FileSize) &^ (osPage - 1)
	if end <= start+uint64(osPage) {
		return nil, fmt.Errorf("%s: no PT_LOAD of more than a page", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seq := min(uint64(seqBytes), end-start) &^ (osPage - 1)
	rng := rand.New(rand.NewPCG(1, 2))
	offs := make([]uint64, randomPages)
	for i := range offs {
		offs[i] = start + rng.Uint64N((end-start)/osPage)*osPage
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out []ReadCost
	measure := func(method, pattern string, size int, body func() (calls int, bytes int64, err error)) error {
		t0, u0 := time.Now(), cpuclock.Thread()
		calls, bytes, err := body()
		if err != nil {
			return fmt.Errorf("%s %s %d: %w", method, pattern, size, err)
		}
		u := cpuclock.Thread().Sub(u0)
		out = append(out, ReadCost{method, pattern, size, calls, bytes, time.Since(t0).Seconds(), u.User.Seconds(), u.Sys.Seconds()})
		return nil
	}
	var sink uint64
	touch := func(b []byte) {
		for i := 0; i+8 <= len(b); i += 64 {
			sink += uint64(b[i]) | uint64(b[i+7])<<8
		}
	}
	buf := make([]byte, slicesMax(sizes))
	for _, size := range sizes {
		if err := measure("pread", "sequential", size, func() (int, int64, error) {
			calls := 0
			for off := start; off < start+seq; off += uint64(size) {
				n := min(uint64(size), start+seq-off)
				if _, err := f.ReadAt(buf[:n], int64(off)); err != nil && err != io.EOF {
					return calls, 0, err
				}
				calls++
			}
			return calls, int64(seq), nil
		}); err != nil {
			return out, err
		}
		if err := measure("mmap", "sequential", size, func() (int, int64, error) {
			calls := 0
			for off := start; off < start+seq; off += uint64(size) {
				n := min(uint64(size), start+seq-off)
				w, err := unix.Mmap(int(f.Fd()), int64(off), int(n), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_POPULATE)
				if err != nil {
					return calls, 0, err
				}
				touch(w)
				if err := unix.Munmap(w); err != nil {
					return calls, 0, err
				}
				calls++
			}
			return calls, int64(seq), nil
		}); err != nil {
			return out, err
		}
	}
	if err := measure("pread", "random", int(osPage), func() (int, int64, error) {
		for _, off := range offs {
			if _, err := f.ReadAt(buf[:osPage], int64(off)); err != nil {
				return 0, 0, err
			}
		}
		return len(offs), int64(len(offs)) * int64(osPage), nil
	}); err != nil {
		return out, err
	}
	for _, size := range sizes {
		if err := measure("mmap", "random", size, func() (int, int64, error) {
			for _, off := range offs {
				lo := max(start, off&^uint64(size-1))
				hi := min(end, lo+uint64(size))
				w, err := unix.Mmap(int(f.Fd()), int64(lo), int(hi-lo), unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_POPULATE)
				if err != nil {
					return 0, 0, err
				}
				touch(w[off-lo : off-lo+osPage])
				if err := unix.Munmap(w); err != nil {
					return 0, 0, err
				}
			}
			return len(offs), int64(len(offs)) * int64(osPage), nil
		}); err != nil {
			return out, err
		}
	}
	readCostSink.Store(sink)
	return out, nil
}

// readCostSink keeps the touched words alive.
var readCostSink atomic.Uint64

func slicesMax(v []int) int {
	m := 4096
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// WriteReadCosts prints the measurements as a table.
func WriteReadCosts(w io.Writer, costs []ReadCost) error {
	p := &printer{w: w}
	rows := [][]string{{"method", "pattern", "size (KiB)", "calls", "MiB", "wall (s)", "user (s)", "sys (s)", "µs/call (CPU)", "µs/page (CPU)"}}
	for _, c := range costs {
		rows = append(rows, []string{c.Method, c.Pattern, strconv.Itoa(c.Size >> 10), strconv.Itoa(c.Calls), fmt.Sprintf("%.1f", float64(c.Bytes)/(1<<20)),
			sec(c.Wall), sec(c.User), sec(c.Sys), fmt.Sprintf("%.1f", c.PerCall()*1e6), fmt.Sprintf("%.2f", c.PerPage()*1e6)})
	}
	p.table(rows)
	return p.err
}
