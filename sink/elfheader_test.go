package sink

import (
	"debug/elf"
	"encoding/binary"
	"testing"
)

// The header sizes the layout uses are debug/elf's structs'.
func TestELFHeaderSizes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"Header64", ehdrSize, binary.Size(elf.Header64{})},
		{"Prog64", phdrSize, binary.Size(elf.Prog64{})},
		{"Section64", shdrSize, binary.Size(elf.Section64{})},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d bytes, debug/elf says %d", tc.name, tc.got, tc.want)
		}
	}
}
