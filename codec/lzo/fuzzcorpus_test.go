package lzo_test

import (
	"fmt"
	"strings"
	"testing"

	"pagepipe/codec/lzo"
	"pagepipe/internal/fuzzcorpus"
)

// seedName turns a test case's name into a file name.
func seedName(i int, name string) string {
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
	return fmt.Sprintf("%02d-%s", i, name)
}

// The committed seed corpora of the LZO fuzz targets (see package
// fuzzcorpus), those run against liblzo2 (-tags lzo2) included: inputs
// to compress (the round-trip cases up to a page) and streams to
// decompress (the crafted streams, compressed pages, their truncations and
// too small an output).
func TestFuzzSeedCorpus(t *testing.T) {
	var inputs []fuzzcorpus.Seed
	for i, tc := range roundTripCases() {
		if len(tc.in) <= 1024 || tc.name == "random page" || tc.name == "text page" {
			inputs = append(inputs, fuzzcorpus.Seed{Name: seedName(i, tc.name), Args: []any{tc.in}})
		}
	}
	inputs = append(inputs, fuzzcorpus.Seed{Name: "needle", Args: []any{needleInput(1, 3, 9, 0x4001)[:4096]}})
	for _, target := range []string{"FuzzRoundTrip", "FuzzAsmSameAsGo", "FuzzGoCompressCDecompress", "FuzzSameStreamsAsLiblzo2"} {
		fuzzcorpus.Check(t, target, inputs)
	}

	var c lzo.Compressor
	var streams []fuzzcorpus.Seed
	for i, tc := range craftedStreams {
		if len(tc.stream) <= 4096 {
			streams = append(streams, fuzzcorpus.Seed{Name: seedName(i, tc.name), Args: []any{tc.stream, uint16(len(tc.want))}})
		}
	}
	text := c.Compress(nil, []byte(strings.Repeat("crash> bt\n", 400)))
	random := c.Compress(nil, randBytes(14, 300))
	streams = append(streams,
		fuzzcorpus.Seed{Name: "random-300", Args: []any{random, uint16(300)}},
		fuzzcorpus.Seed{Name: "zero-page", Args: []any{c.Compress(nil, make([]byte, 4096)), uint16(4096)}},
		fuzzcorpus.Seed{Name: "text-4000", Args: []any{text, uint16(4000)}},
		fuzzcorpus.Seed{Name: "text-4000-room-100", Args: []any{text, uint16(100)}},
		fuzzcorpus.Seed{Name: "text-4000-cut-half", Args: []any{text[:len(text)/2], uint16(4000)}},
		fuzzcorpus.Seed{Name: "text-4000-no-end", Args: []any{text[:len(text)-3], uint16(4000)}},
		fuzzcorpus.Seed{Name: "random-300-room-0", Args: []any{random, uint16(0)}},
		fuzzcorpus.Seed{Name: "empty", Args: []any{[]byte{}, uint16(4096)}},
	)
	for _, target := range []string{"FuzzDecompress", "FuzzDecompressVsLiblzo2"} {
		fuzzcorpus.Check(t, target, streams)
	}
}
