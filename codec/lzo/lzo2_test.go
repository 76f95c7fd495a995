//go:build cgo && lzo2

// Tests against liblzo2 itself, the library makedumpfile, crash and
// libkdumpfile use. Run with: go test -tags lzo2 ./codec/lzo/...
// (needs liblzo2-dev).

package lzo_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pagepipe/codec/internal/cref"
	"pagepipe/codec/lzo"
)

// lzoCode maps Decompress's errors to liblzo2's LZO_E_* codes.
func lzoCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, lzo.ErrInputOverrun):
		return -4
	case errors.Is(err, lzo.ErrOutputOverrun):
		return -5
	case errors.Is(err, lzo.ErrLookBehindOverrun):
		return -6
	case errors.Is(err, lzo.ErrInputNotConsumed):
		return -8
	}
	return -1
}

// cCompressor is liblzo2's lzo1x_1_compress, failing the test on an error.
type cCompressor struct {
	tb testing.TB
	c  cref.Compressor
}

func newC(tb testing.TB) *cCompressor {
	c, err := cref.NewCompressor("lzo")
	if err != nil {
		tb.Fatal(err)
	}
	return &cCompressor{tb, c}
}

func (cc *cCompressor) Compress(dst, src []byte) []byte {
	out, err := cc.c.Compress(dst, src)
	if err != nil {
		cc.tb.Fatal(err)
	}
	return out
}

func (cc *cCompressor) Close() { cc.c.Close() }

// lzo2Inputs are the inputs of the tests against liblzo2: the page set,
// the round-trip cases and the threshold sweep.
func lzo2Inputs(tb testing.TB) [][]byte {
	ins := append([][]byte(nil), pagesFor(tb)...)
	for _, tc := range roundTripCases() {
		ins = append(ins, tc.in)
	}
	for _, d := range sweepDist {
		for _, l := range sweepLens {
			for i := 0; i < len(sweepGaps); i += 2 {
				g := sweepGaps[i]
				ins = append(ins, needleInput(uint64(d*1e6+l*1e3+g), g, l, d))
			}
		}
	}
	return ins
}

// checkCDecodes decodes a Go stream with lzo1x_decompress_safe.
func checkCDecodes(tb testing.TB, c *lzo.Compressor, in []byte) []byte {
	tb.Helper()
	stream := c.Compress(nil, in)
	out := make([]byte, len(in))
	n, code := cref.LZODecompress(out, stream)
	if code != 0 || n != len(in) || !bytes.Equal(out, in) {
		tb.Fatalf("len %d: lzo1x_decompress_safe: code %d, %d bytes, equal %v", len(in), code, n, bytes.Equal(out[:n], in))
	}
	return stream
}

// TestGoCompressCDecompress: liblzo2 decodes every Go stream.
func TestGoCompressCDecompress(t *testing.T) {
	var c lzo.Compressor
	for _, in := range lzo2Inputs(t) {
		checkCDecodes(t, &c, in)
	}
	for n := range 70000 / 331 {
		checkCDecodes(t, &c, randBytes(uint64(n), n*331))
	}
}

// TestCCompressGoDecompress: Decompress decodes every liblzo2 stream.
func TestCCompressGoDecompress(t *testing.T) {
	cc := newC(t)
	defer cc.Close()
	for _, in := range lzo2Inputs(t) {
		stream := cc.Compress(nil, in)
		out := make([]byte, len(in))
		n, err := lzo.Decompress(out, stream)
		if err != nil || n != len(in) || !bytes.Equal(out, in) {
			t.Fatalf("len %d: Decompress: %v, %d bytes", len(in), err, n)
		}
	}
}

// TestSameStreamsAsLiblzo2 checks that the encoder mirrors
// lzo1x_1_compress: its streams are byte for byte liblzo2's. A difference
// is no format error (TestGoCompressCDecompress covers validity), but it
// means the encoder has drifted from the algorithm it copies.
func TestSameStreamsAsLiblzo2(t *testing.T) {
	var c lzo.Compressor
	cc := newC(t)
	defer cc.Close()
	ins := lzo2Inputs(t)
	same := 0
	for _, in := range ins {
		g, want := c.Compress(nil, in), cc.Compress(nil, in)
		if bytes.Equal(g, want) {
			same++
		} else if same+10 > len(ins) || testing.Verbose() {
			t.Logf("len %d: Go stream %d bytes, C %d bytes", len(in), len(g), len(want))
		}
	}
	if same != len(ins) {
		t.Errorf("%d of %d streams differ from liblzo2's", len(ins)-same, len(ins))
	}
}

// TestSpeedAndSizeVsLiblzo2 asserts the size criterion on the page set:
// the Go streams total within 2 % of liblzo2's. Speed is measured by
// BenchmarkCompressGo and BenchmarkCompressC, not asserted here.
func TestSpeedAndSizeVsLiblzo2(t *testing.T) {
	pages := pagesFor(t)
	var c lzo.Compressor
	cc := newC(t)
	defer cc.Close()
	var goSize, cSize int
	dst := make([]byte, 0, lzo.MaxCompressedLen(pageSize))
	for _, p := range pages {
		goSize += len(c.Compress(dst, p))
		cSize += len(cc.Compress(dst, p))
	}
	in := len(pages) * pageSize
	t.Logf("%d pages: Go %d bytes (ratio %.4f), liblzo2 %d bytes (ratio %.4f), Go/C %.4f",
		len(pages), goSize, float64(goSize)/float64(in), cSize, float64(cSize)/float64(in), float64(goSize)/float64(cSize))
	if float64(goSize) > 1.02*float64(cSize) {
		t.Errorf("Go output %d bytes is more than 2 %% above liblzo2's %d", goSize, cSize)
	}
	if !testing.Short() {
		logSpeed(t, pages, &c, cc)
	}
}

// logSpeed logs how fast both encoders go on the page set, for
// information only: the machine may be busy. It alternates short timed
// passes of each and reports the median of the per-pair speed ratios,
// which shrugs off load that comes and goes better than two benchmarks run
// one after the other.
func logSpeed(t *testing.T, pages [][]byte, c *lzo.Compressor, cc *cCompressor) {
	const rounds = 31
	dst := make([]byte, 0, lzo.MaxCompressedLen(pageSize))
	pass := func(compress func(dst, src []byte) []byte) time.Duration {
		start := time.Now()
		for _, p := range pages {
			dst = compress(dst, p)
		}
		return time.Since(start)
	}
	var goTimes, cTimes, ratios []float64
	for range rounds {
		g, cg := pass(c.Compress), pass(cc.Compress)
		goTimes = append(goTimes, g.Seconds())
		cTimes = append(cTimes, cg.Seconds())
		ratios = append(ratios, cg.Seconds()/g.Seconds())
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	mb := float64(len(pages)*pageSize) / 1e6
	t.Logf("speed (informational): Go %.0f MB/s, liblzo2 %.0f MB/s; Go/C median of %d paired passes %.2f",
		mb/median(goTimes), mb/median(cTimes), rounds, median(ratios))
}

// TestCraftedStreamsLiblzo2 decodes the hand-made streams, which include
// forms LZO1X-1 never writes, with liblzo2 too: both decoders must agree.
func TestCraftedStreamsLiblzo2(t *testing.T) {
	for _, tc := range craftedStreams {
		room := len(tc.want) + 1<<16
		gout, cout := make([]byte, room), make([]byte, room)
		gn, err := lzo.Decompress(gout, tc.stream)
		cn, code := cref.LZODecompress(cout, tc.stream)
		if code == 0 != (err == nil) || err == nil && !bytes.Equal(gout[:gn], cout[:cn]) {
			t.Errorf("%s: Go %d bytes, %v; liblzo2 %d bytes, code %d", tc.name, gn, err, cn, code)
		}
		if lzoCode(err) != code {
			t.Logf("%s: Go error %v, liblzo2 code %d", tc.name, err, code)
		}
	}
}

// FuzzGoCompressCDecompress: liblzo2 decodes whatever Go compresses.
func FuzzGoCompressCDecompress(f *testing.F) {
	for _, tc := range roundTripCases() {
		if len(tc.in) <= 4096 {
			f.Add(tc.in)
		}
	}
	var c lzo.Compressor
	f.Fuzz(func(t *testing.T, in []byte) {
		checkCDecodes(t, &c, in)
	})
}

// FuzzSameStreamsAsLiblzo2: Go and liblzo2 write the same bytes for
// any input (see TestSameStreamsAsLiblzo2).
func FuzzSameStreamsAsLiblzo2(f *testing.F) {
	for _, tc := range roundTripCases() {
		if len(tc.in) <= 4096 {
			f.Add(tc.in)
		}
	}
	var c lzo.Compressor
	cc := newC(f)
	defer cc.Close()
	f.Fuzz(func(t *testing.T, in []byte) {
		cc.tb = t
		if g, want := c.Compress(nil, in), cc.Compress(nil, in); !bytes.Equal(g, want) {
			t.Fatalf("len %d: Go stream of %d bytes differs from liblzo2's of %d", len(in), len(g), len(want))
		}
	})
}

// FuzzDecompressVsLiblzo2 feeds the same hostile input to both decoders:
// they must agree on success and on the output.
func FuzzDecompressVsLiblzo2(f *testing.F) {
	for _, tc := range craftedStreams {
		if len(tc.stream) <= 4096 { // big seeds slow the fuzzer down
			f.Add(tc.stream, uint16(len(tc.want)))
		}
	}
	gout, cout := make([]byte, 1<<16), make([]byte, 1<<16)
	f.Fuzz(func(t *testing.T, src []byte, room uint16) {
		gn, err := lzo.Decompress(gout[:room], src)
		cn, code := cref.LZODecompress(cout[:room], src)
		if code == 0 != (err == nil) || err == nil && (gn != cn || !bytes.Equal(gout[:gn], cout[:cn])) {
			t.Fatalf("Go %d bytes, %v; liblzo2 %d bytes, code %d", gn, err, cn, code)
		}
	})
}

// BenchmarkCompressC is BenchmarkCompressGo with liblzo2's
// lzo1x_1_compress, one cgo call per page.
func BenchmarkCompressC(b *testing.B) {
	cc := newC(b)
	defer cc.Close()
	benchCompress(b, cc.Compress)
}

// BenchmarkDecompressC is BenchmarkDecompressGo with liblzo2's
// lzo1x_decompress_safe.
func BenchmarkDecompressC(b *testing.B) {
	benchDecompress(b, func(out, src []byte) error {
		if _, code := cref.LZODecompress(out, src); code != 0 {
			return fmt.Errorf("liblzo2 code %d", code)
		}
		return nil
	})
}
