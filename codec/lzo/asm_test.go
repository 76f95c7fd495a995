package lzo_test

import (
	"bytes"
	"runtime/debug"
	"testing"

	"pagepipe/codec/lzo"
)

// asmInputs are the inputs on which Compress (the assembly on amd64) and
// CompressGo (the pure-Go encoder) are compared: the page set, the
// round-trip cases, the threshold sweep and random and zero inputs of
// every length up to 300 and of many up to 200 KB (several blocks).
func asmInputs() [][]byte {
	var ins [][]byte
	ins = append(ins, pageSet()...)
	for _, tc := range roundTripCases() {
		ins = append(ins, tc.in)
	}
	for _, d := range sweepDist {
		for _, l := range sweepLens {
			for _, g := range sweepGaps {
				ins = append(ins, needleInput(uint64(d*1e6+l*1e3+g), g, l, d))
			}
		}
	}
	for n := range 300 {
		ins = append(ins, randBytes(uint64(n), n), make([]byte, n))
	}
	for n := 300; n < 200000; n = n*5/4 + 7 {
		half := randBytes(uint64(n), n/2)
		ins = append(ins, randBytes(uint64(n), n), append(half, half...))
	}
	return ins
}

// checkSameAsGo compresses in, placed flush against an inaccessible page
// so that a stray read faults, with both encoders and fails unless the
// streams are byte for byte the same.
func checkSameAsGo(tb testing.TB, c *lzo.Compressor, g *guarded, in []byte) {
	tb.Helper()
	for _, place := range []func([]byte) []byte{g.atEnd, g.atStart} {
		p := place(in)
		got := c.Compress(nil, p)
		want := c.CompressGo(nil, p)
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			tb.Fatalf("input of %d bytes: Compress wrote %d bytes, the Go encoder %d; first difference at byte %d", len(in), len(got), len(want), i)
		}
	}
}

// TestAsmSameAsGo: the encoder used (assembly on amd64) writes the same
// streams as the pure-Go one. On other architectures, or with -tags
// purego, both are the Go code and the test checks only that.
func TestAsmSameAsGo(t *testing.T) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	ins := asmInputs()
	g := newGuardedFor(t, ins)
	var c lzo.Compressor
	for _, in := range ins {
		checkSameAsGo(t, &c, g, in)
	}
}

func FuzzAsmSameAsGo(f *testing.F) {
	for _, tc := range roundTripCases() {
		if len(tc.in) <= 4096 {
			f.Add(tc.in)
		}
	}
	f.Add(needleInput(1, 3, 9, 0x4001))
	f.Add(bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123"), 200))
	var c lzo.Compressor
	g := newGuarded(f, 1<<17)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 1<<17 {
			in = in[:1<<17]
		}
		checkSameAsGo(t, &c, g, in)
	})
}
