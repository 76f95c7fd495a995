package source

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"pagepipe/internal/fuzzcorpus"
	"pagepipe/internal/synth"
	"pagepipe/kdumpfmt"
)

// The committed seed corpora of this package's fuzz targets (see package
// fuzzcorpus): small valid inputs, their truncations and edge cases.
func TestFuzzSeedCorpus(t *testing.T) {
	// One page of data per segment keeps the corpus small.
	tiny := func(s *synth.Spec) {
		s.Segments = []synth.Segment{{Paddr: 0x1000, FileSize: 0x1000, MemSize: 0x1000}, {Paddr: 0x10000, FileSize: 0x800, MemSize: 0x2000}}
	}
	plain := smallVmcore(t, tiny)
	qemu := smallVmcore(t, func(s *synth.Spec) { tiny(s); s.Layout = synth.QEMU; s.ExtraNotes = true })
	xnum := smallVmcore(t, func(s *synth.Spec) { tiny(s); s.PNXnum = true })
	elfSeeds := []fuzzcorpus.Seed{
		{Name: "vmcore", Args: []any{plain}},
		{Name: "qemu", Args: []any{qemu}},
		{Name: "pnxnum", Args: []any{xnum}},
		{Name: "empty", Args: []any{[]byte{}}},
	}
	// Cut inside the ELF header, the program headers, the notes and the
	// page data.
	elfSeeds = append(elfSeeds, fuzzcorpus.Truncations("vmcore", plain, 4, 40, 64+56, 64+56*2+8, 0x400)...)
	// A PT_LOAD whose data runs past the end of the file.
	bad := bytes.Clone(plain)
	binary.LittleEndian.PutUint64(bad[64+56+32:], 1<<40) // 2nd phdr (the first PT_LOAD): p_filesz
	elfSeeds = append(elfSeeds, fuzzcorpus.Seed{Name: "vmcore-filesz-past-eof", Args: []any{bad}})
	fuzzcorpus.Check(t, "FuzzParseELF", elfSeeds)

	kc := kcoreHeader(t, kcoreMachines()[0].spec)
	kcoreSeeds := []fuzzcorpus.Seed{{Name: "kcore", Args: []any{kc}}}
	kcoreSeeds = append(kcoreSeeds, fuzzcorpus.Truncations("kcore", kc, 64+56*3, len(kc)-100)...)
	// Real kcores' headers (TestKcoreRealHeaders), with VMCOREINFO's
	// address ranges and without.
	for _, k := range realKcores {
		kcoreSeeds = append(kcoreSeeds, fuzzcorpus.Seed{Name: "kcore-" + strings.TrimSuffix(k.file, ".head"), Args: []any{realKcore(t, k.file, true)}},
			fuzzcorpus.Seed{Name: "kcore-" + strings.TrimSuffix(k.file, ".head") + "-no-ranges", Args: []any{realKcore(t, k.file, false)}})
	}
	fuzzcorpus.Check(t, "FuzzKcore", kcoreSeeds)

	d := tinyDump()
	dumpSeeds := []fuzzcorpus.Seed{{Name: "dump", Args: []any{d}}}
	dumpSeeds = append(dumpSeeds, fuzzcorpus.Truncations("dump", d, 8, 512, 1500, len(d)-1)...)
	odd := bytes.Clone(d)
	binary.LittleEndian.PutUint32(odd[428:], 3000) // block_size not a power of two
	dumpSeeds = append(dumpSeeds, fuzzcorpus.Seed{Name: "dump-blocksize-3000", Args: []any{odd}})
	incomplete := bytes.Clone(d)
	binary.LittleEndian.PutUint32(incomplete[kdumpfmt.StatusOffset:], kdumpfmt.StatusIncomplete)
	dumpSeeds = append(dumpSeeds, fuzzcorpus.Seed{Name: "dump-incomplete", Args: []any{incomplete}},
		fuzzcorpus.Seed{Name: "dump-zstd-bomb", Args: []any{zstdBombDump()}})
	fuzzcorpus.Check(t, "FuzzOpenDump", dumpSeeds)

	// The small dump as a flattened stream of two records.
	var flat bytes.Buffer
	flat.Write(kdumpfmt.FlatHeader())
	var h [kdumpfmt.FlatRecordSize]byte
	half := len(d) / 2
	for _, r := range [][2]int{{half, len(d)}, {0, half}} {
		kdumpfmt.PutFlatRecord(h[:], int64(r[0]), int64(r[1]-r[0]))
		flat.Write(h[:])
		flat.Write(d[r[0]:r[1]])
	}
	kdumpfmt.PutFlatRecord(h[:], -1, -1)
	flat.Write(h[:])
	rs := []fuzzcorpus.Seed{
		{Name: "flat", Args: []any{flat.Bytes()}},
		{Name: "header-only", Args: []any{kdumpfmt.FlatHeader()}},
	}
	rs = append(rs, fuzzcorpus.Truncations("flat", flat.Bytes(), 100, 4096+8, 4096+16+100, flat.Len()-16)...)
	fuzzcorpus.Check(t, "FuzzRearrange", rs)
}

// tinyDump is smallDump with 512-byte blocks: 64 pfns, every 8th dumped,
// raw pages of letters.
func tinyDump() []byte {
	return rawDump(512, 8, func(i uint64, page []byte) {
		copy(page, bytes.Repeat([]byte{byte('A' + i)}, len(page)))
	})
}
