package bench

import (
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"pagepipe/chunk"
	"pagepipe/codec"
	"pagepipe/internal/cpuclock"
)

// CPUCost is one operation that a dump does per page or per chunk, timed
// alone on one thread: run where the dump runs (in a capture kernel under
// QEMU, on the host) it says which operations an emulator makes dearer
// than others, apart from the programs.
type CPUCost struct {
	Name  string
	Ops   int
	Bytes int // per op
	// CPU is the thread's CPU seconds (user + system), Wall the wall time.
	CPU, Wall float64
}

// NsPerOp is CPU nanoseconds per operation.
func (c CPUCost) NsPerOp() float64 { return c.CPU / float64(c.Ops) * 1e9 }

// lzoDict is the size of the LZO encoder's dictionary, cleared for every
// page: as a fixed-size array the compiler clears it with REP STOSQ.
type lzoDict [1 << 14]uint16

var cpuCostSink atomic.Uint64

// MeasureCPUCosts times, n times each: a 32 KiB array cleared by the
// compiler's REP STOSQ (the LZO dictionary's clear) and the same bytes
// cleared through the runtime's memclr (a slice: SSE or AVX stores); a
// 64 KiB copy (the runtime's memmove: REP MOVSQ without AVX) and the same
// bytes copied 256 at a time (vector moves); the zero check of a page;
// each codec on a page of text; a system call (getppid) and the thread's
// CPU clock (clock_gettime, a system call).
func MeasureCPUCosts(n int) ([]CPUCost, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out []CPUCost
	run := func(name string, bytes, ops int, f func()) {
		t0, u0 := time.Now(), cpuclock.ThreadTotal()
		for range ops {
			f()
		}
		out = append(out, CPUCost{name, ops, bytes, (cpuclock.ThreadTotal() - u0).Seconds(), time.Since(t0).Seconds()})
	}
	var dict lzoDict
	slice := make([]byte, len(dict)*2)
	run("clear 32 KiB array (REP STOSQ)", len(slice), n, func() {
		clear(dict[:])
		dict[len(dict)/2]++
	})
	run("clear 32 KiB slice (memclr)", len(slice), n, func() {
		clear(slice[:len(slice)-int(dict[0])])
		slice[len(slice)/2]++
	})
	src, dst := make([]byte, 64<<10), make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	run("copy 64 KiB (memmove)", len(src), n/2, func() { copy(dst, src) })
	run("copy 64 KiB, 256 bytes at a time", len(src), n/2, func() {
		for i := 0; i < len(src); i += 256 {
			copy(dst[i:i+256], src[i:i+256])
		}
	})
	page := make([]byte, 4096)
	text := []byte("line 12345 of the pagepipe fixture: the quick brown fox jumps over the lazy dog\n")
	for i := 0; i < len(page); i += len(text) {
		copy(page[i:], text)
	}
	zero := make([]byte, 4096)
	run("zero check of a zero page", len(zero), n, func() {
		if chunk.IsZero(zero) {
			cpuCostSink.Add(1)
		}
	})
	for _, c := range codec.All() {
		comp := c.NewCompressor()
		buf := make([]byte, 0, codec.MaxCompressedLen(len(page)))
		var err error
		run("compress a text page: "+c.Name, len(page), n/4, func() {
			var b []byte
			if b, err = comp.Compress(buf, page); err == nil {
				cpuCostSink.Add(uint64(len(b)))
			}
		})
		if err != nil {
			return out, fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	run("system call (getppid)", 0, n, func() { cpuCostSink.Add(uint64(unix.Getppid())) })
	run("thread CPU clock (clock_gettime)", 0, n, func() { cpuCostSink.Add(uint64(cpuclock.ThreadTotal())) })
	return out, nil
}

// WriteCPUCosts prints the measurements.
func WriteCPUCosts(w io.Writer, costs []CPUCost) error {
	p := &printer{w: w}
	rows := [][]string{{"operation", "ops", "ns/op (CPU)", "ns/op (wall)", "bytes/ns (CPU)"}}
	for _, c := range costs {
		bpn := "-"
		if c.Bytes > 0 && c.CPU > 0 {
			bpn = fmt.Sprintf("%.2f", float64(c.Bytes)*float64(c.Ops)/(c.CPU*1e9))
		}
		rows = append(rows, []string{c.Name, fmt.Sprint(c.Ops), fmt.Sprintf("%.0f", c.NsPerOp()), fmt.Sprintf("%.0f", c.Wall/float64(c.Ops)*1e9), bpn})
	}
	p.table(rows)
	return p.err
}
