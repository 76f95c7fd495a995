package debuginfo

import (
	"strings"
	"testing"
)

// tabString takes a name from the string table read at once only where
// it ends there; readSymbols reads the others alone.
func TestTabString(t *testing.T) {
	tab := []byte("\x00ext4_fill_super\x00discard_pa_seq\x00cut")
	long := append([]byte(strings.Repeat("x", maxSymbolName+1)), 0)
	for _, tc := range []struct {
		tab  []byte
		off  uint32
		want string
		ok   bool
	}{
		{tab, 0, "", true},
		{tab, 1, "ext4_fill_super", true},
		{tab, 17, "discard_pa_seq", true},
		{tab, 32, "", false}, // runs past the table
		{tab, 1 << 30, "", false},
		{nil, 1, "", false},
		{long, 0, "", false}, // longer than a symbol name
	} {
		got, ok := tabString(tc.tab, tc.off)
		if got != tc.want || ok != tc.ok {
			t.Errorf("tabString(%q, %d) = %q, %v; want %q, %v", tc.tab, tc.off, got, ok, tc.want, tc.ok)
		}
	}
}
