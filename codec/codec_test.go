package codec

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"
)

// pages is a small set of 4 KiB pages of the kinds a vmcore holds.
func pages() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	text := bytes.Repeat([]byte("kernel: page allocation failure: order:0, mode:0x40cc0 "), 80)[:4096]
	pattern := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0}, 512)
	return map[string][]byte{"zero": make([]byte, 4096), "random": random, "text": text, "pattern": pattern}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range All() {
		comp, dec := c.NewCompressor(), c.NewDecompressor()
		buf := make([]byte, 0, MaxCompressedLen(4096))
		for name, page := range pages() {
			out, err := comp.Compress(buf, page)
			if err != nil {
				t.Fatalf("%s/%s: %v", c.Name, name, err)
			}
			if out == nil {
				if name != "random" {
					t.Errorf("%s/%s: did not compress", c.Name, name)
				}
				continue
			}
			if name != "random" && len(out) >= len(page)/2 {
				t.Errorf("%s/%s: %d bytes", c.Name, name, len(out))
			}
			got := make([]byte, 4096)
			if err := dec.Decompress(got, out); err != nil {
				t.Fatalf("%s/%s: decompress: %v", c.Name, name, err)
			}
			if !bytes.Equal(got, page) {
				t.Fatalf("%s/%s: round trip differs", c.Name, name)
			}
			// A reader wanting a different page size must fail, as crash does.
			if err := dec.Decompress(make([]byte, 2048), out); err == nil {
				t.Errorf("%s/%s: decompressed into a short page", c.Name, name)
			}
		}
	}
}

// Per-worker state is reused: compressing a page allocates nothing once
// the compressor is warm.
func TestNoAllocationPerPage(t *testing.T) {
	for _, c := range All() {
		comp := c.NewCompressor()
		buf := make([]byte, 0, MaxCompressedLen(4096))
		page := pages()["text"]
		comp.Compress(buf, page)
		if n := testing.AllocsPerRun(100, func() { comp.Compress(buf, page) }); n != 0 {
			t.Errorf("%s: %.1f allocations per page", c.Name, n)
		}
	}
}

func TestDecompressGarbage(t *testing.T) {
	d := Decoders{}
	for _, c := range All() {
		for _, junk := range [][]byte{nil, {0}, {0xff, 0xff, 0xff}, bytes.Repeat([]byte{0x11}, 100)} {
			if err := d.Decompress(c.Flag, make([]byte, 4096), junk); err == nil {
				t.Errorf("%s: garbage %x decompressed", c.Name, junk)
			}
		}
	}
	if err := d.Decompress(0x100, make([]byte, 4096), []byte{1}); err == nil {
		t.Error("unknown flag accepted")
	}
}

// A stored page that expands to far more than a page is refused after
// about a page of work: every codec bounds its output by the page, not by
// what the stream claims or produces, and writes nothing past len(dst).
// (Allocation stands in for work: it is what an unbounded decoder spends,
// measured without timing anything.)
func TestDecompressionBombs(t *testing.T) {
	const page = 4096
	huge := make([]byte, 4<<20)
	for _, c := range All() {
		comp, dec := c.NewCompressor(), c.NewDecompressor()
		big, err := comp.Compress(make([]byte, 0, MaxCompressedLen(len(huge))), huge)
		if err != nil || big == nil {
			t.Fatalf("%s: compressing 4 MiB of zeros: %v", c.Name, err)
		}
		// Warm the decoder: its first call allocates its state.
		good, _ := comp.Compress(make([]byte, 0, MaxCompressedLen(page)), huge[:page])
		if err := dec.Decompress(make([]byte, page), good); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err = dec.Decompress(make([]byte, page), big)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: 4 MiB in %d stored bytes accepted as a %d-byte page", c.Name, len(big), page)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: refusing 4 MiB in %d stored bytes allocated %d bytes", c.Name, len(big), n)
		}
		t.Logf("%s: %d stored bytes: %v", c.Name, len(big), err)

		spare := bytes.Repeat([]byte{0xaa}, 8<<20)
		if dec.Decompress(spare[:page], big) == nil {
			t.Errorf("%s: 4 MiB accepted as a page", c.Name)
		}
		if n := len(bytes.TrimLeft(spare[page:], "\xaa")); n != 0 {
			t.Errorf("%s: wrote past the page, %d bytes after it", c.Name, len(spare)-page-n)
		}
	}
}

func BenchmarkCompress(b *testing.B) {
	for _, c := range All() {
		for name, page := range pages() {
			b.Run(c.Name+"/"+name, func(b *testing.B) {
				comp := c.NewCompressor()
				buf := make([]byte, 0, MaxCompressedLen(4096))
				b.SetBytes(4096)
				b.ReportAllocs()
				for b.Loop() {
					comp.Compress(buf, page)
				}
			})
		}
	}
}
