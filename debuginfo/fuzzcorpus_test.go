package debuginfo

import (
	"debug/elf"
	"os"
	"strconv"
	"testing"

	"pagepipe/internal/fuzzcorpus"
)

// The committed seed corpora of this package's fuzz targets (see package
// fuzzcorpus).
func TestFuzzSeedCorpus(t *testing.T) {
	b, err := os.ReadFile("testdata/types.elf")
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytesReaderAt(b))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(".debug_info")
	info := b[s.Offset : s.Offset+s.FileSize]
	seeds := []fuzzcorpus.Seed{
		{Name: "types", Args: []any{info, "outer", "next", "outer_arr"}},
		{Name: "typedef", Args: []any{info, "outer_t", "str", "late_decl"}},
		{Name: "empty", Args: []any{[]byte{}, "", "", ""}},
	}
	for _, cut := range []int{11, len(info) / 3, len(info) - 5} {
		seeds = append(seeds, fuzzcorpus.Seed{Name: "types-cut" + strconv.Itoa(cut), Args: []any{info[:cut], "outer", "list", "head_var"}})
	}
	fuzzcorpus.Check(t, "FuzzDWARFLookup", seeds)

	raw, err := os.ReadFile("testdata/types.btf")
	if err != nil {
		t.Fatal(err)
	}
	btf := []fuzzcorpus.Seed{
		{Name: "types", Args: []any{raw, "outer", "next", "pcpu_outer"}},
		{Name: "typedef", Args: []any{raw, "outer_t", "color", "x"}},
		{Name: "empty", Args: []any{[]byte{}, "", "", ""}},
	}
	for _, cut := range []int{24, len(raw) / 2, len(raw) - 3} {
		btf = append(btf, fuzzcorpus.Seed{Name: "types-cut" + strconv.Itoa(cut), Args: []any{raw[:cut], "outer", "list", "x"}})
	}
	fuzzcorpus.Check(t, "FuzzBTFLookup", btf)
}
