package lzo_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"testing"

	"pagepipe/codec/lzo"
)

// randBytes returns n pseudo-random bytes that depend only on seed.
func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// roundTrip compresses src, checks the stream's size bound, decodes it
// with Decompress and compares. It returns the stream.
func roundTrip(tb testing.TB, c *lzo.Compressor, src []byte) []byte {
	tb.Helper()
	stream := c.Compress(nil, src)
	if max := lzo.MaxCompressedLen(len(src)); len(stream) > max {
		tb.Fatalf("len %d: stream of %d bytes exceeds MaxCompressedLen %d", len(src), len(stream), max)
	}
	out := make([]byte, len(src))
	n, err := lzo.Decompress(out, stream)
	if err != nil {
		tb.Fatalf("len %d: Decompress: %v (after %d bytes)", len(src), err, n)
	}
	if n != len(src) || !bytes.Equal(out, src) {
		tb.Fatalf("len %d: round trip gave %d bytes, differing from the input", len(src), n)
	}
	return stream
}

// needleInput returns an input in which a match of length mlen at distance
// dist (or more, where dist is too short for the rest) follows a run of
// gap literals. The source of the match starts right after some random
// bytes, and zeros fill the distance, so that the encoder, which skips
// ahead in long literal runs, finds the match.
func needleInput(seed uint64, gap, mlen, dist int) []byte {
	const head, tail = 8, 32
	r := randBytes(seed, head+mlen+gap+tail)
	needle := r[head : head+mlen]
	if needle[0] == 0 {
		needle[0] = 1
	}
	p := max(head+dist, head+mlen+gap+4) // match position
	in := make([]byte, p+mlen+tail)
	copy(in, r[:head+mlen])
	copy(in[p-gap:], r[head+mlen:head+mlen+gap])
	copy(in[p:], needle)
	copy(in[p+mlen:], r[head+mlen+gap:])
	in[p+mlen] = in[head+mlen] + 1 // the match ends here
	return in
}

// roundTripCases are the named inputs of TestRoundTrip.
func roundTripCases() []struct {
	name string
	in   []byte
} {
	text := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog; makedumpfile -l writes LZO1X-1 pages.\n", 60))
	pattern := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 9363) // 65541 bytes
	runs := make([]byte, 70000)
	for i := range runs {
		runs[i] = byte(i / 7000)
	}
	far := randBytes(7, 0xC000) // the second half repeats the first at 0x6000
	copy(far[0x6000:], far[:0x6000])
	cases := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"1 byte", []byte{42}},
		{"2 bytes", []byte{0, 0}},
		{"3 bytes", []byte("abc")},
		{"20 bytes", bytes.Repeat([]byte{9}, 20)},
		{"21 bytes", bytes.Repeat([]byte{9}, 21)},
		{"238 random", randBytes(1, 238)},
		{"239 random", randBytes(1, 239)},
		{"zero page", make([]byte, 4096)},
		{"random page", randBytes(2, 4096)},
		{"text page", text[:4096]},
		{"text", text},
		{"pattern", pattern},
		{"long runs", runs},
		{"64 KiB zeros", make([]byte, 65536)},
		{"64 KiB random", randBytes(3, 65536)},
		{"far matches", far},
		{"block edge -1", make([]byte, 0xC000-1)},
		{"block edge", make([]byte, 0xC000)},
		{"block edge +1", make([]byte, 0xC000+1)},
		{"block edge +20", randBytes(4, 0xC000+20)},
		{"block edge +21", randBytes(4, 0xC000+21)},
		{"two blocks", bytes.Repeat(text, 3)},
		{"1 MiB mixed", bytes.Repeat(append(randBytes(5, 3000), text[:5000]...), 131)},
	}
	// liblzo2 does not search inputs (or a last block and the literals
	// before it) of less than 32 bytes for matches.
	for n := 20; n <= 40; n++ {
		cases = append(cases, struct {
			name string
			in   []byte
		}{fmt.Sprintf("compressible %d", n), bytes.Repeat([]byte("IIII0"), 8)[:n]})
	}
	for _, k := range []int{8, 11, 12, 13, 19, 20, 31, 32, 33, 40} {
		cases = append(cases, struct {
			name string
			in   []byte
		}{fmt.Sprintf("zeros block edge +%d", k), make([]byte, 0xC000+k)}, struct {
			name string
			in   []byte
		}{fmt.Sprintf("text block edge +%d", k), bytes.Repeat(text, 10)[:0xC000+k]})
	}
	for i := range 40 {
		n := 1 + i*i*i%9000
		cases = append(cases, struct {
			name string
			in   []byte
		}{fmt.Sprintf("random %d", n), randBytes(uint64(100+i), n)})
	}
	return cases
}

func TestRoundTrip(t *testing.T) {
	var c lzo.Compressor
	for _, tc := range roundTripCases() {
		t.Run(tc.name, func(t *testing.T) {
			roundTrip(t, &c, tc.in)
		})
	}
}

// thresholds used by the sweeps: every length and distance limit of the
// encodings, with its neighbours.
var (
	sweepGaps = []int{0, 1, 2, 3, 4, 5, 15, 16, 17, 18, 19, 20, 31, 32, 33, 272, 273, 274, 275, 528, 529}
	sweepLens = []int{4, 5, 8, 9, 10, 20, 32, 33, 34, 35, 263, 264, 265, 266, 287, 288, 289, 290, 600}
	sweepDist = []int{1, 2, 3, 4, 7, 8, 9, 0x7ff, 0x800, 0x801, 0x3fff, 0x4000, 0x4001, 0x4002, 0x7fff, 0x8000, 0x8001, 0xbf00, 0xbfd0}
)

// TestThresholds round-trips matches of every length, distance and
// preceding literal run around the limits of the encodings, and checks
// that the streams used every instruction form LZO1X-1 emits.
func TestThresholds(t *testing.T) {
	var c lzo.Compressor
	seen := map[string]int{}
	for _, d := range sweepDist {
		for _, l := range sweepLens {
			for _, g := range sweepGaps {
				in := needleInput(uint64(d*1e6+l*1e3+g), g, l, d)
				stream := roundTrip(t, &c, in)
				found := false
				err := scanStream(stream, seen, func(length, dist int) {
					// A random byte next to the match may
					// lengthen it or shift its start.
					found = found || dist == d && length >= l-1 && length <= l+1
				})
				if err != nil {
					t.Fatalf("dist %d len %d gap %d: %v", d, l, g, err)
				}
				// Short literal runs are probed at every byte, so
				// the encoder must find the planted match if it
				// lies within one 0xC000-byte block.
				if !found && g <= 16 && d >= l+g+4 && d+l+64 <= 0xC000 {
					t.Errorf("dist %d len %d gap %d: planted match not found", d, l, g)
				}
			}
		}
	}
	// Short inputs end in literal runs of every size.
	for n := range 600 {
		in := randBytes(uint64(n), n)
		if err := scanStream(roundTrip(t, &c, in), seen, nil); err != nil {
			t.Fatal(err)
		}
		if n > 40 {
			in = append(make([]byte, 40), in[40:]...) // a match, then n-40 literals
			if err := scanStream(roundTrip(t, &c, in), seen, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, kind := range emittedKinds {
		if seen[kind] == 0 {
			t.Errorf("no %s in the streams", kind)
		}
	}
	for _, kind := range []string{"M1 2-byte", "M1 3-byte", "M2 length 3"} {
		if seen[kind] != 0 {
			t.Errorf("LZO1X-1 never emits %s, but the streams have %d", kind, seen[kind])
		}
	}
	t.Logf("instruction forms: %v", seen)
}

// emittedKinds lists the instruction forms an LZO1X-1 encoder uses.
var emittedKinds = []string{
	"first literals", "SS literals", "literals 4-18", "literals 19-273", "literals 274+",
	"M2 length 4", "M2 length 5-8", "M3 length 3-33", "M3 length 34-288", "M3 length 289+",
	"M4 length 3-9", "M4 length 10-264", "M4 length 265+", "M4 H=1", "end",
}

// scanStream walks a valid stream and counts its instruction forms into
// seen. It is independent of Decompress, which it double-checks. It calls
// onMatch, when not nil, for every match.
func scanStream(s []byte, seen map[string]int, onMatch func(length, dist int)) error {
	ip, out, state := 0, 0, 0
	byteAt := func(i int) (int, error) {
		if i >= len(s) {
			return 0, errors.New("truncated")
		}
		return int(s[i]), nil
	}
	// length reads a field of the given bits at s[ip-1] and its
	// continuation bytes, returning the field value plus extension and
	// the number of zero bytes.
	length := func(v, mask int) (int, int, error) {
		n := v & mask
		if n != 0 {
			return n, -1, nil
		}
		zeros := 0
		for {
			b, err := byteAt(ip)
			ip++
			if err != nil {
				return 0, 0, err
			}
			if b != 0 {
				return mask + 255*zeros + b, zeros, nil
			}
			zeros++
		}
	}
	class := func(zeros int, short, one, more string) string {
		switch zeros {
		case -1:
			return short
		case 0:
			return one
		}
		return more
	}
	if len(s) > 0 && s[0] > 17 {
		seen["first literals"]++
		n := int(s[0]) - 17
		ip, out, state = 1+n, n, min(n, 4)
	}
	for {
		inst, err := byteAt(ip)
		if err != nil {
			return err
		}
		ip++
		next, dist, mlen := 0, 0, 0
		switch {
		case inst >= 64:
			b, err := byteAt(ip)
			if err != nil {
				return err
			}
			ip++
			mlen, dist, next = inst>>5+1, b<<3+(inst>>2&7)+1, inst&3
			switch {
			case mlen == 3:
				seen["M2 length 3"]++
			case mlen == 4:
				seen["M2 length 4"]++
			default:
				seen["M2 length 5-8"]++
			}
		case inst >= 16:
			mask := 31
			if inst < 32 {
				mask = 7
			}
			n, zeros, err := length(inst, mask)
			if err != nil {
				return err
			}
			lo, err1 := byteAt(ip)
			hi, err2 := byteAt(ip + 1)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			ip += 2
			w := lo | hi<<8
			mlen, next = n+2, w&3
			if inst >= 32 {
				dist = w>>2 + 1
				seen[class(zeros, "M3 length 3-33", "M3 length 34-288", "M3 length 289+")]++
			} else {
				dist = (inst&8)<<11 + w>>2
				if dist == 0 {
					seen["end"]++
					if ip != len(s) {
						return errors.New("data after the end marker")
					}
					return nil
				}
				dist += 0x4000
				if inst&8 != 0 {
					seen["M4 H=1"]++
				}
				seen[class(zeros, "M4 length 3-9", "M4 length 10-264", "M4 length 265+")]++
			}
		case state == 0:
			n, zeros, err := length(inst, 15)
			if err != nil {
				return err
			}
			seen[class(zeros, "literals 4-18", "literals 19-273", "literals 274+")]++
			ip += n + 3
			out += n + 3
			state = 4
			continue
		default:
			b, err := byteAt(ip)
			if err != nil {
				return err
			}
			ip++
			mlen, dist, next = 2, b<<2+inst>>2+1, inst&3
			seen["M1 2-byte"]++
			if state == 4 {
				mlen, dist = 3, dist+0x800
				seen["M1 2-byte"]--
				seen["M1 3-byte"]++
			}
		}
		if dist > out {
			return fmt.Errorf("distance %d at output %d", dist, out)
		}
		if onMatch != nil {
			onMatch(mlen, dist)
		}
		if next > 0 {
			seen["SS literals"]++
		}
		out += mlen + next
		ip += next
		state = next
	}
}

// TestRepeats round-trips repetitions of short periods, which make
// overlapping matches.
func TestRepeats(t *testing.T) {
	var c lzo.Compressor
	for period := 1; period <= 20; period++ {
		unit := randBytes(uint64(period), period)
		for _, n := range []int{5, 21, 22, 40, 100, 4096, 20000} {
			in := bytes.Repeat(unit, n/period+1)[:n]
			in = append(randBytes(9, 7), in...)
			roundTrip(t, &c, in)
		}
	}
}

// TestCompressBuffer checks how Compress uses dst.
func TestCompressBuffer(t *testing.T) {
	var c lzo.Compressor
	src := randBytes(11, 4096)
	want := c.Compress(nil, src)

	small := make([]byte, 10, 100)
	got := c.Compress(small, src)
	if !bytes.Equal(got, want) {
		t.Fatal("Compress into a small buffer gave another stream")
	}
	big := make([]byte, 7, lzo.MaxCompressedLen(len(src)))
	got = c.Compress(big, src)
	if &got[0] != &big[:1][0] {
		t.Error("Compress did not reuse a big enough buffer")
	}
	if !bytes.Equal(got, want) {
		t.Fatal("Compress into a reused buffer gave another stream")
	}
	// The dictionary left by one input must not change the next stream.
	var fresh lzo.Compressor
	text := []byte(strings.Repeat("abcdefgh", 512))
	c.Compress(nil, text)
	if !bytes.Equal(c.Compress(nil, src), fresh.Compress(nil, src)) {
		t.Fatal("stream depends on earlier inputs")
	}
}

func TestMaxCompressedLen(t *testing.T) {
	for n, want := range map[int]int{0: 67, 4096: 4419, 65536: 69699} {
		if got := lzo.MaxCompressedLen(n); got != want {
			t.Errorf("MaxCompressedLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	var c lzo.Compressor
	page := append(randBytes(12, 2048), bytes.Repeat([]byte("kdump "), 342)[:2048]...)
	dst := make([]byte, 0, lzo.MaxCompressedLen(len(page)))
	if a := testing.AllocsPerRun(100, func() { dst = c.Compress(dst, page) }); a != 0 {
		t.Errorf("Compress: %v allocations per page, want 0", a)
	}
	out := make([]byte, len(page))
	if a := testing.AllocsPerRun(100, func() { _, _ = lzo.Decompress(out, dst) }); a != 0 {
		t.Errorf("Decompress: %v allocations per page, want 0", a)
	}
}

// Hand-made streams, some with forms LZO1X-1 never writes.
var (
	lits2100  = randBytes(21, 2100)
	lits0bfff = randBytes(22, 0xbfff)
)

// longLiterals returns a 0000LLLL run of n >= 19 literals, as after a
// match or at the start of a stream.
func longLiterals(lits []byte) []byte {
	rest := len(lits) - 18
	s := []byte{0}
	for ; rest > 255; rest -= 255 {
		s = append(s, 0)
	}
	return append(append(s, byte(rest)), lits...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var craftedStreams = []struct {
	name   string
	stream []byte
	want   []byte // nil for an error
	err    error
}{
	{"end only", []byte{0x11, 0, 0}, []byte{}, nil},
	{"M1 2-byte after SS literals", []byte{20, 'a', 'b', 'c', 0x09, 0, 'x', 0x00, 0x00, 0x11, 0, 0}, []byte("abcabxxx"), nil},
	{"M1 3-byte after a literal run", cat(longLiterals(lits2100), []byte{0x06, 1, 'y', 'z', 0x11, 0, 0}),
		cat(lits2100, lits2100[46:49], []byte("yz")), nil},
	{"M2 length 3", []byte{21, 'a', 'b', 'c', 'd', 0x48, 0, 0x11, 0, 0}, []byte("abcdbcd"), nil},
	{"distance 0xBFFF", cat(longLiterals(lits0bfff), []byte{0x1a, 0xfc, 0xff, 0x11, 0, 0}),
		cat(lits0bfff, lits0bfff[:4]), nil},
	{"distance 0xBFFF too far", cat(longLiterals(lits0bfff[1:]), []byte{0x1a, 0xfc, 0xff, 0x11, 0, 0}),
		nil, lzo.ErrLookBehindOverrun},
	{"M3 long overlapping", []byte{18, 'z', 0x20, 0, 1, 0, 0, 0x11, 0, 0}, bytes.Repeat([]byte("z"), 1+2+31+255+1), nil},
	{"empty input", []byte{}, nil, lzo.ErrInputOverrun},
	{"truncated", []byte{0x11, 0}, nil, lzo.ErrInputOverrun},
	{"truncated literals", []byte{30, 'a'}, nil, lzo.ErrInputOverrun},
	{"truncated length", []byte{0x00, 0, 0}, nil, lzo.ErrInputOverrun},
	{"no end marker", []byte{18, 'a'}, nil, lzo.ErrInputOverrun},
	{"trailing data", []byte{0x11, 0, 0, 0}, nil, lzo.ErrInputNotConsumed},
	{"lookbehind", []byte{21, 'a', 'b', 'c', 'd', 0x60, 1, 0x11, 0, 0}, nil, lzo.ErrLookBehindOverrun},
	{"0000LLLL at the start is a literal run", []byte{0x01, 0x00, 0x11, 0, 0}, nil, lzo.ErrInputOverrun},
	{"match first", []byte{0x11, 4, 0, 0x11, 0, 0}, nil, lzo.ErrLookBehindOverrun},
}

func TestDecompressCrafted(t *testing.T) {
	for _, tc := range craftedStreams {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]byte, len(tc.want)+1<<16)
			n, err := lzo.Decompress(out, tc.stream)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.err == nil && !bytes.Equal(out[:n], tc.want) {
				t.Fatalf("got %d bytes, want %d: %x", n, len(tc.want), out[:n])
			}
		})
	}
}

func TestDecompressErrors(t *testing.T) {
	var c lzo.Compressor
	src := append(randBytes(13, 3000), make([]byte, 1096)...)
	stream := c.Compress(nil, src)
	out := make([]byte, len(src))

	// Too little room: an output overrun, never a write past dst.
	for _, room := range []int{0, 1, 100, 2999, 3000, 4095} {
		buf := bytes.Repeat([]byte{0xee}, len(src)+64)
		n, err := lzo.Decompress(buf[:room], stream)
		if !errors.Is(err, lzo.ErrOutputOverrun) || n > room {
			t.Errorf("room %d: n %d, err %v; want an output overrun", room, n, err)
		}
		if !bytes.Equal(buf[room:], bytes.Repeat([]byte{0xee}, len(buf)-room)) {
			t.Errorf("room %d: wrote past dst", room)
		}
	}
	// More room is fine: the count tells the size.
	big := make([]byte, len(src)+1)
	if n, err := lzo.Decompress(big, stream); err != nil || n != len(src) || !bytes.Equal(big[:n], src) {
		t.Errorf("room to spare: n %d, err %v", n, err)
	}
	// Every truncation is an input overrun.
	for cut := range len(stream) {
		if _, err := lzo.Decompress(out, stream[:cut]); !errors.Is(err, lzo.ErrInputOverrun) {
			t.Fatalf("cut at %d of %d: err %v, want an input overrun", cut, len(stream), err)
		}
	}
	// Trailing data is reported, with the output complete.
	n, err := lzo.Decompress(out, append(stream[:len(stream):len(stream)], 0))
	if !errors.Is(err, lzo.ErrInputNotConsumed) || n != len(src) || !bytes.Equal(out, src) {
		t.Errorf("trailing byte: n %d, err %v", n, err)
	}
	// The end marker may carry any length, even one beyond dst, as in
	// liblzo2 (found by FuzzDecompressVsLiblzo2).
	if n, err := lzo.Decompress(make([]byte, 6), []byte{0x10, 0, 0x30, 0, 0}); n != 0 || err != nil {
		t.Errorf("end marker with a long length: n %d, err %v", n, err)
	}
	// A length of a million zero bytes ends quickly.
	huge := append([]byte{18, 'a', 0x20}, make([]byte, 1<<20)...)
	if _, err := lzo.Decompress(out, huge); err == nil {
		t.Error("huge length accepted")
	}
}

func FuzzRoundTrip(f *testing.F) {
	for _, tc := range roundTripCases() {
		if len(tc.in) <= 4096 {
			f.Add(tc.in)
		}
	}
	f.Add(needleInput(1, 3, 9, 0x4001))
	var c lzo.Compressor
	dst := make([]byte, 0, lzo.MaxCompressedLen(1<<16))
	out := make([]byte, 1<<16)
	// Each input is compressed where it ends at an inaccessible page,
	// so that a read past it faults (see TestReadsStayInInput).
	g := newGuarded(f, 1<<16)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 1<<16 {
			in = in[:1<<16]
		}
		dst = c.Compress(dst, g.atEnd(in))
		if len(dst) > lzo.MaxCompressedLen(len(in)) {
			t.Fatalf("stream of %d bytes for %d", len(dst), len(in))
		}
		n, err := lzo.Decompress(out[:len(in)], dst)
		if err != nil || n != len(in) || !bytes.Equal(out[:n], in) {
			t.Fatalf("round trip: n %d, err %v", n, err)
		}
	})
}

func FuzzDecompress(f *testing.F) {
	var c lzo.Compressor
	for _, tc := range craftedStreams {
		if len(tc.stream) <= 4096 { // big seeds slow the fuzzer down
			f.Add(tc.stream, uint16(len(tc.want)))
		}
	}
	f.Add(c.Compress(nil, randBytes(14, 300)), uint16(300))
	f.Add(c.Compress(nil, make([]byte, 4096)), uint16(4096))
	f.Add(c.Compress(nil, []byte(strings.Repeat("crash> bt\n", 400))), uint16(4000))
	// dst is the start of buf; the rest of buf must keep its canaries.
	canaries := bytes.Repeat([]byte{0xa5}, 1<<16+64)
	buf := bytes.Clone(canaries)
	f.Fuzz(func(t *testing.T, src []byte, room uint16) {
		n, err := lzo.Decompress(buf[:room], src)
		if n < 0 || n > int(room) {
			t.Fatalf("count %d outside 0..%d (err %v)", n, room, err)
		}
		if !bytes.Equal(buf[room:], canaries[room:]) {
			t.Fatalf("wrote past dst of %d bytes", room)
		}
		copy(buf[:room], canaries) // for the next run
	})
}

// BenchmarkCompressGo compresses the page set one page at a time.
func BenchmarkCompressGo(b *testing.B) {
	var c lzo.Compressor
	benchCompress(b, c.Compress)
}

// benchCompress compresses the page set one page at a time with compress
// and reports the compression ratio.
func benchCompress(b *testing.B, compress func(dst, src []byte) []byte) {
	pages := pagesFor(b)
	dst := make([]byte, 0, lzo.MaxCompressedLen(pageSize))
	total := 0
	for _, p := range pages {
		total += len(compress(dst, p))
	}
	b.SetBytes(pageSize)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		dst = compress(dst, pages[i%len(pages)])
	}
	// After the loop: b.Loop drops metrics reported before it.
	b.ReportMetric(float64(total)/float64(len(pages)*pageSize), "ratio")
}

// BenchmarkDecompressGo decodes the page set one page at a time.
func BenchmarkDecompressGo(b *testing.B) {
	benchDecompress(b, func(out, src []byte) error {
		_, err := lzo.Decompress(out, src)
		return err
	})
}

// benchDecompress decodes the page set, compressed by Compressor, one
// page at a time with decompress.
func benchDecompress(b *testing.B, decompress func(out, src []byte) error) {
	pages := pagesFor(b)
	var c lzo.Compressor
	streams := make([][]byte, len(pages))
	for i, p := range pages {
		streams[i] = c.Compress(nil, p)
	}
	out := make([]byte, pageSize)
	b.SetBytes(pageSize)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := decompress(out, streams[i%len(streams)]); err != nil {
			b.Fatal(err)
		}
	}
}
