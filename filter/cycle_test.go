package filter

import "testing"

// OneCycle follows makedumpfile's initial() and
// calculate_cyclic_buffer_size(): one cycle when the buffer holds both
// bitmaps whole, which the integer arithmetic allows only for max_mapnr
// a multiple of 4.
func TestOneCycle(t *testing.T) {
	const gib = 1 << 30
	plenty := Cycle{Dumpfiles: 1, MemFree: 20 * gib}
	for _, tc := range []struct {
		name     string
		c        Cycle
		maxMapnr uint64
		want     bool
	}{
		{"mapnr%4=0", plenty, 0x7ffc4, true},
		{"mapnr%4=1", plenty, 0x7ffcd, false},
		{"mapnr%4=2", plenty, 0x7ffd6, false},
		{"mapnr%4=3", plenty, 0x7ffc7, false},
		// 4 MiB of buffer is 2^25 bits: both bitmaps of 2^24 pfns (64 GiB).
		{"64 GiB", plenty, 1 << 24, true},
		{"64 GiB + 4 pages", plenty, 1<<24 + 4, false},
		{"split", Cycle{Dumpfiles: 2, MemFree: 20 * gib}, 0x7ffc4, false},
		{"work-dir", Cycle{WorkDir: true, Dumpfiles: 2}, 0x7ffcd, true},
		{"cyclic-buffer", Cycle{CyclicBufferKiB: 1 << 20, Dumpfiles: 1, MemFree: 20 * gib}, 0x7ffc4, false},
		// 60 % of 1 MiB free is 629145 bytes: 0x7ffc4 pfns need 131057.
		{"1 MiB free", Cycle{Dumpfiles: 1, MemFree: 1 << 20}, 0x7ffc4, true},
		{"100 KiB free", Cycle{Dumpfiles: 1, MemFree: 100 << 10}, 0x7ffc4, false},
		{"no memory", Cycle{Dumpfiles: 1}, 0x7ffc4, false},
		{"empty", plenty, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.OneCycle(tc.maxMapnr); got != tc.want {
				t.Errorf("OneCycle(%#x) = %v, want %v", tc.maxMapnr, got, tc.want)
			}
		})
	}
}
