package kernel

import (
	"fmt"
	"testing"

	"pagepipe/internal/fuzzcorpus"
)

// The committed seed corpora of this package's fuzz targets (see package
// fuzzcorpus): the targets' own seeds, truncations and edge cases.
func TestFuzzSeedCorpus(t *testing.T) {
	vi := []fuzzcorpus.Seed{
		{Name: "sample", Args: []any{[]byte(sample)}},
		{Name: "hex-and-negative", Args: []any{[]byte("OSRELEASE=x\nPAGESIZE=0x1000\nNUMBER(a)=-0x10\nSYMBOL(b)=0x1\n\x00")}},
		{Name: "repeated-keys", Args: []any{[]byte("OSRELEASE=x\nPAGESIZE=4096\nOSRELEASE=y\n=\n==\n\n")}},
		{Name: "empty", Args: []any{[]byte{}}},
		{Name: "pagesize-not-power-of-two", Args: []any{[]byte("OSRELEASE=x\nPAGESIZE=4095\n")}},
		{Name: "no-newline", Args: []any{[]byte("OSRELEASE=6.1.0\nPAGESIZE=4096")}},
		{Name: "crlf", Args: []any{[]byte("OSRELEASE=6.1.0\r\nPAGESIZE=4096\r\nSYMBOL(x)=ffffffff81000000\r\n")}},
	}
	vi = append(vi, fuzzcorpus.Truncations("sample", []byte(sample), 9, len(sample)/2, len(sample)-1)...)
	fuzzcorpus.Check(t, "FuzzParseVMCOREINFO", vi)

	mm := []fuzzcorpus.Seed{
		{Name: "extreme", Args: []any{int64(16), int64(0), int64(27), int64(46), uint64(1 << 30), []byte{0, 0, 0, 0x88, 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0, 0, 0xea, 0xff, 0xff}}},
		{Name: "flat", Args: []any{int64(0), int64(8), int64(12), int64(52), uint64(1 << 40), []byte{1}}},
		{Name: "no-memory", Args: []any{int64(16), int64(0), int64(27), int64(46), uint64(1 << 18), []byte{}}},
		{Name: "section-bits-over-phys", Args: []any{int64(16), int64(0), int64(47), int64(46), uint64(1 << 18), []byte{1, 0, 0, 0, 0, 0, 0, 0}}},
		{Name: "huge-mapnr", Args: []any{int64(32), int64(8), int64(27), int64(52), ^uint64(0), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}},
	}
	fuzzcorpus.Check(t, "FuzzFindMemMap", mm)

	var tables []byte
	for _, r := range []struct {
		page byte
		idx  uint16
		v    uint64
	}{
		{0, 511, 0x1000 | 1}, {1, 510, 0x2000 | 1}, {2, 0, 0x3000 | 1}, {3, 1, 0x5000 | 1},
		{2, 8, 0x200000 | 0x81}, {1, 0, 0x40000000 | 0x81 | 1<<12},
		{0, 273, 0x4000 | 1}, {4, 0, 0x6000 | 1}, {6, 0, 0x7000 | 1}, {7, 0, 0x0 | 1},
	} {
		tables = append(tables, fuzzRecord(r.page, r.idx, r.v)...)
	}
	loop := fuzzRecord(0, 511, 0x0|1) // the PGD points at itself
	vtop := []fuzzcorpus.Seed{
		{Name: "4k-page", Args: []any{tables, false, uint64(0xffffffff80001234), uint64(0)}},
		{Name: "2m-page", Args: []any{tables, false, uint64(0xffffffff81000000), uint64(0)}},
		{Name: "5-level-sme", Args: []any{tables, true, uint64(0xffffffff80001234), uint64(1 << 47)}},
		{Name: "1g-page", Args: []any{tables, false, uint64(0xffffff8000000000), uint64(0)}},
		{Name: "direct-map", Args: []any{tables, false, uint64(0xffff888000000000), uint64(0)}},
		{Name: "non-canonical", Args: []any{tables, false, uint64(0x800000000000), uint64(0)}},
		{Name: "self-loop", Args: []any{loop, false, uint64(0xffffffff80000000), uint64(0)}},
		{Name: "tables-cut", Args: []any{tables[:len(tables)/2], false, uint64(0xffffffff80001234), uint64(0)}},
		{Name: "no-tables", Args: []any{[]byte{}, false, uint64(0xffffffff80001234), uint64(0)}},
	}
	fuzzcorpus.Check(t, "FuzzVtoP", vtop)

	var arm []byte
	for _, r := range []struct {
		page byte
		idx  uint16
		v    uint64
	}{
		{0, 511, 0x1000 | 3}, {1, 511, 0x2000 | 3}, {2, 0, 0x3000 | 3}, {3, 1, 0x5000 | 3 | 1<<10},
		{2, 8, 0x200000 | 1}, {1, 0, 0x40000000 | 1}, {0, 0, 0x4000 | 3}, {4, 0, 0x6000 | 3 | 1<<8},
		{6, 0, 0x0 | 1}, {7, 0, 0x3000 | 3 | 0xf<<12},
	} {
		arm = append(arm, fuzzRecord(r.page, r.idx, r.v)...)
	}
	arm64 := []fuzzcorpus.Seed{
		{Name: "4k-48-page", Args: []any{arm, uint8(0), uint64(0xffffffffffe01234)}},
		{Name: "4k-48-linear", Args: []any{arm, uint8(0), uint64(0xffff000000001234)}},
		{Name: "4k-39-block", Args: []any{arm, uint8(1), uint64(0xffffffffc0201234)}},
		{Name: "4k-52-lpa2", Args: []any{arm, uint8(2), uint64(0xfff0000000201234)}},
		{Name: "16k-47", Args: []any{arm, uint8(4), uint64(0xffff800000004000)}},
		{Name: "64k-52-lpa", Args: []any{arm, uint8(10), uint64(0xffffffffffff0000)}},
		{Name: "user-address", Args: []any{arm, uint8(0), uint64(0x0000aaaa00001000)}},
		{Name: "self-loop", Args: []any{fuzzRecord(0, 511, 0x0|3), uint8(0), uint64(0xffffff8000000000)}},
		{Name: "no-tables", Args: []any{[]byte{}, uint8(3), uint64(0xffff000000000000)}},
	}
	fuzzcorpus.Check(t, "FuzzARM64VtoP", arm64)

	ppc := ppcFuzzSeed()
	ppc64 := []fuzzcorpus.Seed{
		{Name: "radix-64k-page", Args: []any{ppc, true, uint64(0xc008000000021234)}},
		{Name: "radix-2m-leaf-bit55", Args: []any{ppc, true, uint64(0xc00a000000001234)}},
		{Name: "hash-geometry", Args: []any{ppc, false, uint64(0xc008000000021234)}},
		{Name: "linear", Args: []any{ppc, true, uint64(0xc000000012345678)}},
		{Name: "vmemmap-walk", Args: []any{ppc, true, uint64(0xc00c000000000040)}},
		{Name: "user-address", Args: []any{ppc, false, uint64(0x00007fffffff0000)}},
		{Name: "self-loop", Args: []any{ppcFuzzRecord(0, 0x800, ppc64Present), true, uint64(0xc008000000000000)}},
		{Name: "no-tables", Args: []any{[]byte{}, false, uint64(0xc008000000000000)}},
	}
	fuzzcorpus.Check(t, "FuzzPPC64VtoP", ppc64)

	rv := rvFuzzSeed()
	riscv := []fuzzcorpus.Seed{
		{Name: "sv39-page", Args: []any{rv, uint8(0), uint64(0xffffffffc0001234)}},
		{Name: "sv48-2m-superpage", Args: []any{rv, uint8(1), uint64(0xffffffffc0201234)}},
		{Name: "sv57-1g-superpage-pbmt", Args: []any{rv, uint8(2), uint64(0xffffffffc0201234)}},
		{Name: "sv39-linear", Args: []any{rv, uint8(0), uint64(0xffffffd600000000)}},
		{Name: "non-canonical", Args: []any{rv, uint8(0), uint64(0xff00000000000000)}},
		{Name: "self-loop", Args: []any{fuzzRecord(0, 511, rvPTE(0, 1)), uint8(2), uint64(0xffffffffffffffff)}},
		{Name: "no-tables", Args: []any{[]byte{}, uint8(1), uint64(0xffff800000000000)}},
	}
	fuzzcorpus.Check(t, "FuzzRISCV64VtoP", riscv)

	r := newRing(3, 8, (-(8 + 1))&prbIDMask)
	for i := range 12 {
		r.push(uint64(i)*1e6, uint32(i), fmt.Sprintf("message %d\nline 2 \xff", i))
	}
	r.setClear(9, true)
	small := newRing(2, 6, prbIDMask-1)
	small.push(1, 1, "abc")
	l := newLogImage(128, 16)
	a := l.put(0, 5e9, 0, "new1")
	o := l.put(64, 1e9, 0, "old1")
	l.setLen(o, 0)
	l.setIdx(64, a, 0)
	wrapped := append([]byte(nil), l.mem...)
	l.setIdx(0, 100, 0)
	logs := []fuzzcorpus.Seed{
		{Name: "ring-wrapped", Args: []any{false, true, r.mem}},
		{Name: "ring-partial", Args: []any{true, true, small.mem}},
		{Name: "ring-cut", Args: []any{false, true, r.mem[:len(r.mem)/2]}},
		{Name: "log-wrapped", Args: []any{false, false, wrapped}},
		{Name: "log-bad-index", Args: []any{true, false, l.mem}},
		{Name: "log-cut", Args: []any{false, false, wrapped[:len(wrapped)/3]}},
		{Name: "no-memory", Args: []any{false, true, []byte{}}},
	}
	fuzzcorpus.Check(t, "FuzzReadLog", logs)
}
