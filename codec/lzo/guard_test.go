//go:build linux

package lzo_test

import (
	"bytes"
	"runtime/debug"
	"testing"

	"golang.org/x/sys/unix"

	"pagepipe/codec/lzo"
)

// guarded is memory between two inaccessible pages. The encoder reads its
// input without bounds checks: an input copied flush against either guard
// makes a read past its end, or before its start, fault.
type guarded struct {
	mem  []byte // the whole mapping
	room []byte // between the guards
}

// newGuardedFor is newGuarded with room for the longest of ins.
func newGuardedFor(tb testing.TB, ins [][]byte) *guarded {
	tb.Helper()
	size := 0
	for _, in := range ins {
		size = max(size, len(in))
	}
	return newGuarded(tb, size)
}

func newGuarded(tb testing.TB, size int) *guarded {
	tb.Helper()
	ps := unix.Getpagesize()
	size = (size + ps - 1) / ps * ps
	mem, err := unix.Mmap(-1, 0, size+2*ps, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		tb.Fatal(err)
	}
	room := mem[ps : ps+size : ps+size]
	if err := unix.Mprotect(room, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	return &guarded{mem: mem, room: room}
}

// atEnd and atStart return a copy of in that ends at the upper guard or
// starts at the lower one.
func (g *guarded) atEnd(in []byte) []byte {
	s := g.room[len(g.room)-len(in):]
	copy(s, in)
	return s
}

func (g *guarded) atStart(in []byte) []byte {
	s := g.room[:len(in):len(in)]
	copy(s, in)
	return s
}

// TestReadsStayInInput compresses every test input flush against an
// inaccessible page on either side: a read outside the input would fault
// (a panic here, with SetPanicOnFault) instead of passing unnoticed.
func TestReadsStayInInput(t *testing.T) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var ins [][]byte
	for _, tc := range roundTripCases() {
		ins = append(ins, tc.in)
	}
	for _, d := range sweepDist {
		for _, l := range sweepLens {
			ins = append(ins, needleInput(uint64(d*1e6+l*1e3), 5, l, d))
		}
	}
	for n := range 300 {
		ins = append(ins, randBytes(uint64(n), n), make([]byte, n))
	}
	ins = append(ins, pageSet()...)
	g := newGuardedFor(t, ins)
	var c lzo.Compressor
	for i, in := range ins {
		for _, place := range []func([]byte) []byte{g.atEnd, g.atStart} {
			stream := c.Compress(nil, place(in))
			out := make([]byte, len(in))
			if n, err := lzo.Decompress(out, stream); err != nil || n != len(in) || !bytes.Equal(out, in) {
				t.Fatalf("input %d (%d bytes): round trip: %d bytes, %v", i, len(in), n, err)
			}
		}
	}
}
