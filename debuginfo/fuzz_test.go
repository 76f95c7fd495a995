package debuginfo

import (
	"debug/elf"
	"os"
	"testing"
)

// withDebugInfo returns testdata/types.elf with its .debug_info replaced
// by info (cut or zero-padded to the section's length).
func withDebugInfo(tb testing.TB, info []byte) []byte {
	b, err := os.ReadFile("testdata/types.elf")
	if err != nil {
		tb.Fatal(err)
	}
	f, err := elf.NewFile(bytesReaderAt(b))
	if err != nil {
		tb.Fatal(err)
	}
	s := f.Section(".debug_info")
	sec := b[s.Offset : s.Offset+s.FileSize]
	clear(sec)
	copy(sec, info)
	return b
}

// FuzzDWARFLookup: a debuginfo file whose DWARF is anything is refused or
// answers every lookup, without a panic or a loop.
func FuzzDWARFLookup(f *testing.F) {
	orig, err := os.ReadFile("testdata/types.elf")
	if err != nil {
		f.Fatal(err)
	}
	ef, err := elf.NewFile(bytesReaderAt(orig))
	if err != nil {
		f.Fatal(err)
	}
	s := ef.Section(".debug_info")
	info := orig[s.Offset : s.Offset+s.FileSize]
	f.Add(info, "outer", "next", "outer_arr")
	f.Add(info[:len(info)/2], "outer_t", "str", "late_decl")
	f.Fuzz(func(t *testing.T, info []byte, structName, member, varName string) {
		d, err := newDWARF("fuzz", withDebugInfo(t, info))
		if err != nil {
			return
		}
		d.Var(varName)
		d.Member(structName, member)
		d.StructSize(structName)
		d.MemberArrayLength(structName, member)
		d.SymbolArray(varName)
		d.TypedefSize(structName)
		d.TypedefFile(structName)
		d.Enumerator(member)
		GenerateVMCOREINFO(d, 4096)
	})
}
