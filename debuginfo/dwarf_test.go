package debuginfo

import (
	"errors"
	"testing"
)

// The lookups of a filter config on testdata/types.c, through the
// relocatable object (a module's debuginfo) and the linked executable (a
// vmlinux's, mapped): makedumpfile's answers, quirks included.
func TestDWARFLookups(t *testing.T) {
	for _, file := range []string{"testdata/types.o", "testdata/types.elf"} {
		t.Run(file, func(t *testing.T) {
			d, err := OpenDWARF(file)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			checkTypes(t, d)
			if d.PointerSize() != 8 {
				t.Errorf("pointer size %d", d.PointerSize())
			}
		})
	}
}

// wantVars, wantMembers and wantSizes are testdata/types.c as
// makedumpfile's DWARF search sees it.
var wantVars = map[string]Type{
	"outer_var":    {Name: "outer", Flags: Struct, Size: 152, ArrayLen: -1},
	"outer_ptr":    {Name: "outer", Flags: Ptr | Struct, Size: 152, ArrayLen: -1},
	"outer_arr":    {Name: "outer", Flags: Array | Struct, Size: 152, ArrayLen: 5},
	"head_var":     {Name: "list_head", Flags: Struct, Size: 16, ArrayLen: -1},
	"greeting":     {Name: "char", Flags: Base | Ptr, Size: 1, ArrayLen: -1},
	"counter":      {Name: "long int", Flags: Base, Size: 8, ArrayLen: -1},
	"typedefd_var": {Name: "outer", Flags: Struct, Size: 152, ArrayLen: -1},
	"cstr":         {Name: "char", Flags: Base | Array, Size: 1, ArrayLen: 4},
	// The first DIE of the name is the extern declaration, an array of
	// unknown length.
	"late_decl": {Name: "int", Flags: Base | Array, Size: 4, ArrayLen: -1},
}

var wantMembers = map[[2]string]Member{
	{"outer", "next"}:    {Offset: 8, Type: Type{Name: "long int", Flags: Base, Size: 8, ArrayLen: -1}},
	{"outer", "in"}:      {Offset: 0, Type: Type{Name: "inner", Flags: Struct, Size: 16, ArrayLen: -1}},
	{"outer", "u_long"}:  {Offset: 24, Type: Type{Name: "long int", Flags: Base, Size: 8, ArrayLen: -1}},
	{"outer", "u_bytes"}: {Offset: 24, Type: Type{Name: "char", Flags: Base | Array, Size: 1, ArrayLen: 8}},
	{"outer", "list"}:    {Offset: 32, Type: Type{Name: "list_head", Flags: Struct, Size: 16, ArrayLen: -1}},
	{"outer", "prev"}:    {Offset: 40, Type: Type{Name: "list_head", Flags: Ptr | Struct, Size: 16, ArrayLen: -1}},
	{"outer", "name"}:    {Offset: 48, Type: Type{Name: "char", Flags: Base | Array, Size: 1, ArrayLen: 16}},
	{"outer", "str"}:     {Offset: 64, Type: Type{Name: "char", Flags: Base | Ptr, Size: 1, ArrayLen: -1}},
	{"outer", "opaque"}:  {Offset: 72, Type: Type{Name: "void", Flags: Ptr, Size: 8, ArrayLen: -1}},
	{"outer", "cv"}:      {Offset: 80, Type: Type{Name: "void", Flags: Ptr, Size: -1, ArrayLen: -1}},
	{"outer", "fn"}:      {Offset: 88, Type: Type{Name: "int", Flags: Ptr | Base, Size: 4, ArrayLen: -1}},
	{"outer", "carr"}:    {Offset: 100, Type: Type{Name: "int", Flags: Array | Base, Size: 4, ArrayLen: 4}},
	{"outer", "anon"}:    {Offset: 116, Type: Type{Name: "", Flags: Struct, Size: 4, ArrayLen: -1}},
	{"outer", "ptrs"}:    {Offset: 120, Type: Type{Name: "outer", Flags: Array | Ptr | Struct, Size: 152, ArrayLen: 3}},
	{"outer", "color"}:   {Offset: 144, Type: Type{Name: "unsigned int", Flags: Base, Size: 4, ArrayLen: -1}},
	{"outer", "flex"}:    {Offset: 148, Type: Type{Name: "int", Flags: Array | Base, Size: 4, ArrayLen: -1}},
	{"inner", "next"}:    {Offset: 8, Type: Type{Name: "long int", Flags: Base, Size: 8, ArrayLen: -1}},
	{"outer_t", "str"}:   {Offset: 64, Type: Type{Name: "char", Flags: Base | Ptr, Size: 1, ArrayLen: -1}},
	{"anon_t", "anon_x"}: {Offset: 0, Type: Type{Name: "int", Flags: Base, Size: 4, ArrayLen: -1}},
}

var wantSizes = map[string]int64{"outer": 152, "outer_t": 152, "outer2_t": 152, "inner": 16, "list_head": 16, "anon_t": 4}

func checkTypes(t *testing.T, d Types) {
	t.Helper()
	for name, want := range wantVars {
		got, err := d.Var(name)
		if err != nil || got != want {
			t.Errorf("Var(%s) = %+v, %v; want %+v", name, got, err, want)
		}
	}
	for k, want := range wantMembers {
		got, err := d.Member(k[0], k[1])
		if err != nil || got != want {
			t.Errorf("Member(%s, %s) = %+v, %v; want %+v", k[0], k[1], got, err, want)
		}
	}
	for name, want := range wantSizes {
		got, err := d.StructSize(name)
		if err != nil || got != want {
			t.Errorf("StructSize(%s) = %d, %v; want %d", name, got, err, want)
		}
	}
	for _, c := range []struct{ s, m string }{{"outer", "nothing"}, {"nostruct", "next"}, {"outer", "bits"}, {"list_head", "a"},
		// A member's typedef'd structure is not searched (makedumpfile
		// descends only into a structure or union named as such).
		{"outer", "anon_x"}} {
		if _, err := d.Member(c.s, c.m); !errors.Is(err, ErrNotFound) {
			t.Errorf("Member(%s, %s): %v, want ErrNotFound", c.s, c.m, err)
		}
	}
	if _, err := d.Var("nothing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Var(nothing): %v", err)
	}
	if _, err := d.StructSize("color"); !errors.Is(err, ErrNotFound) {
		t.Errorf("StructSize(color): %v", err)
	}
}

func TestDWARFExtras(t *testing.T) {
	d, err := OpenDWARF("testdata/types.elf")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v, err := d.Enumerator("GREEN"); err != nil || v != 5 {
		t.Errorf("GREEN = %d, %v", v, err)
	}
	if v, err := d.Enumerator("BLUE"); err != nil || v != 6 {
		t.Errorf("BLUE = %d, %v", v, err)
	}
	if _, err := d.Enumerator("PURPLE"); !errors.Is(err, ErrNotFound) {
		t.Errorf("PURPLE: %v", err)
	}
	if n, err := d.TypedefSize("outer2_t"); err != nil || n != 152 {
		t.Errorf("TypedefSize(outer2_t) = %d, %v", n, err)
	}
	if f, err := d.TypedefFile("outer_t"); err != nil || f != "types.c" {
		t.Errorf("TypedefFile(outer_t) = %q, %v", f, err)
	}
	if a, n, err := d.SymbolArray("outer_arr"); err != nil || !a || n != 5 {
		t.Errorf("SymbolArray(outer_arr) = %v, %d, %v", a, n, err)
	}
	if a, n, err := d.SymbolArray("outer_ptr"); err != nil || a || n != -1 {
		t.Errorf("SymbolArray(outer_ptr) = %v, %d, %v", a, n, err)
	}
	if n, err := d.MemberArrayLength("outer", "ptrs"); err != nil || n != 3 {
		t.Errorf("MemberArrayLength(outer, ptrs) = %d, %v", n, err)
	}
	v, ok := d.SymbolValue("counter")
	if !ok || v == 0 {
		t.Fatalf("symbol counter: %#x, %v", v, ok)
	}
	b := make([]byte, 8)
	if err := d.ReadVirt(v, b); err != nil || b[0] != 42 {
		t.Errorf("counter's bytes %v, %v", b, err)
	}
	if next, ok := d.NextSymbolValue("counter"); !ok || next <= v {
		t.Errorf("next after counter %#x, %v", next, ok)
	}
}
