package dump

import (
	"fmt"
	"testing"
)

// findModuleBTF finds a module's struct btf in btf_modules by its struct
// module, and stops at the head, at a NULL link, and at an unreadable one.
func TestFindModuleBTF(t *testing.T) {
	// btf_module: list at 0, module at 16, btf at 24. The head at 0x1000;
	// entries at 0x2000 (module 0xa000, btf 0xb000) and 0x3000 (module
	// 0xa100, btf 0xb100).
	list := func(links map[uint64]uint64) func(uint64) (uint64, error) {
		return func(at uint64) (uint64, error) {
			if v, ok := links[at]; ok {
				return v, nil
			}
			return 0, fmt.Errorf("read %#x: not mapped", at)
		}
	}
	good := map[uint64]uint64{
		0x1000: 0x2000,
		0x2000: 0x3000, 0x2010: 0xa000, 0x2018: 0xb000,
		0x3000: 0x1000, 0x3010: 0xa100, 0x3018: 0xb100,
	}
	for _, tc := range []struct {
		name    string
		links   map[uint64]uint64
		mod     uint64
		want    uint64
		wantErr bool
	}{
		{"first", good, 0xa000, 0xb000, false},
		{"second", good, 0xa100, 0xb100, false},
		{"not listed", good, 0xa200, 0, false},
		{"empty", map[uint64]uint64{0x1000: 0x1000}, 0xa000, 0, false},
		{"NULL link", map[uint64]uint64{0x1000: 0x2000, 0x2000: 0, 0x2010: 0xa000}, 0xa100, 0, true},
		{"unreadable", map[uint64]uint64{0x1000: 0x2000}, 0xa000, 0, true},
		{"a loop not through the head", map[uint64]uint64{0x1000: 0x2000, 0x2000: 0x2000, 0x2010: 0xa000}, 0xa100, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findModuleBTF(0x1000, 0, 16, 24, tc.mod, list(tc.links))
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("findModuleBTF = %#x, %v; want %#x, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
