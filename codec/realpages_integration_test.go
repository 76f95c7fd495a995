//go:build integration

package codec_test

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"pagepipe/codec"
	"pagepipe/codec/lzo"
	"pagepipe/internal/realsample"
	"pagepipe/kdumpfmt"
)

// pageCompressor is what the benchmarks time: a codec.Compressor, or a C
// library's compressor when the test binary is built with them.
type pageCompressor interface {
	Compress(dst, src []byte) ([]byte, error)
}

// newCCompressor returns the C library's compressor for a codec and a
// function that frees it, or nil when there is none. It stays nil unless
// the C libraries are linked (realpages_cref_test.go, build tag lzo2).
var newCCompressor func(tb testing.TB, name string) (pageCompressor, func())

// outBufLen is room for any codec's output, Go's or C's, for one page.
const outBufLen = 4 * pageSize

// storedSize is what the dump stores for a page that compressed to out:
// the stream when it is shorter than a page, else the raw page.
func storedSize(out []byte) int {
	if out == nil || len(out) >= pageSize {
		return pageSize
	}
	return len(out)
}

// BenchmarkRealPages compresses the real-page sample, page by page, with
// each codec's Go compressor (/go) and the C library makedumpfile calls
// (/c; needs -tags lzo2), each reusing its state from page to page. MB/s
// counts input pages; cpu-MB/s is the same over the thread's CPU time
// rather than wall time; ratio is the bytes the dump stores (a page that
// does not shrink counts whole) over the input bytes.
//
//	go test -tags lzo2 -run '^$' -bench RealPages ./codec/
func BenchmarkRealPages(b *testing.B) {
	sample := realsample.Get(b)
	b.Logf("sample: %d of the %d non-zero pages of the %d that -d 31 keeps", len(sample.Pages), sample.NonZero, sample.Dumpable)
	benchCodecs(b, sample.Pages)
}

// BenchmarkIncompressiblePages is BenchmarkRealPages on the pages of the
// sample that the dump stores raw, as they do not shrink (LZO's stream
// is at least a page; those of the other codecs are too): what every
// codec spends on finding that out.
//
//	go test -tags lzo2 -run '^$' -bench IncompressiblePages ./codec/
func BenchmarkIncompressiblePages(b *testing.B) {
	sample := realsample.Get(b)
	var c lzo.Compressor
	var raw [][]byte
	for _, p := range sample.Pages {
		if len(c.Compress(nil, p)) >= pageSize {
			raw = append(raw, p)
		}
	}
	b.Logf("%d of the %d sampled pages do not shrink", len(raw), len(sample.Pages))
	if len(raw) == 0 {
		b.Fatal("no incompressible page in the sample")
	}
	benchCodecs(b, raw)
}

// BenchmarkZstdLiterals is the -z compressor on the real-page sample with
// its literals stored raw, as package codec has it (/raw), and
// Huffman-coded (/huffman): what the choice costs in size and gains in
// speed.
//
//	go test -run '^$' -bench ZstdLiterals ./codec/
func BenchmarkZstdLiterals(b *testing.B) {
	pages := realsample.Get(b).Pages
	zstd, err := codec.ByFlag(kdumpfmt.StatusZstd)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("raw", func(b *testing.B) { benchPages(b, zstd.NewCompressor(), pages) })
	b.Run("huffman", func(b *testing.B) { benchPages(b, codec.NewZstdHuffman(), pages) })
}

// benchCodecs runs benchPages for each codec's Go and C compressors.
func benchCodecs(b *testing.B, pages [][]byte) {
	for _, c := range codec.All() {
		b.Run(c.Name+"/go", func(b *testing.B) {
			benchPages(b, c.NewCompressor(), pages)
		})
		b.Run(c.Name+"/c", func(b *testing.B) {
			if newCCompressor == nil {
				b.Skip("C libraries not linked (build with -tags lzo2)")
			}
			cc, done := newCCompressor(b, c.Name)
			if cc == nil {
				b.Skipf("no C library for %s", c.Name)
			}
			defer done()
			benchPages(b, cc, pages)
		})
	}
}

func benchPages(b *testing.B, c pageCompressor, pages [][]byte) {
	buf := make([]byte, 0, outBufLen)
	pass := func() int {
		stored := 0
		for _, p := range pages {
			out, err := c.Compress(buf, p)
			if err != nil {
				b.Fatal(err)
			}
			stored += storedSize(out)
		}
		return stored
	}
	// One untimed pass first: what a compressor allocates on first use
	// and the caches' warm-up are not per-page costs.
	stored := pass()
	// The build machines are shared: besides MB/s (wall time), report
	// MB/s over the CPU time of the benchmark's thread, which time spent
	// waiting for the CPU does not inflate.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu0 time.Duration
	b.SetBytes(int64(len(pages) * pageSize))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i == 0 {
			cpu0 = threadCPU(b)
		}
		pass()
	}
	cpu := threadCPU(b) - cpu0
	b.ReportMetric(float64(stored)/float64(len(pages)*pageSize), "ratio")
	if cpu > 0 {
		b.ReportMetric(float64(b.N*len(pages)*pageSize)/1e6/cpu.Seconds(), "cpu-MB/s")
	}
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
