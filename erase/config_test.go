package erase

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`# every form of makedumpfile.conf(5)
erase array_var
erase mystruct1.buffer size 25   # a comment
erase mystruct1.name
erase	mystruct1.addr1 nullify
erase mystruct1.addr2 size 1K
erase mystruct1.addr3 size 2m
erase mystruct2.addr size mystruct2.addr_size
erase split_over
  size 7
[mymodule]
for mys1 in mystruct1 via next
	erase mys1.private
	erase mys1.key size mys1.key_size
endfor
for mys1 in s1_list_head.next within s1:list
	erase mys1.private
endfor
[vmlinux]
for e in myarray
	erase e.key nullify
endfor
for e in heads within s1
endfor
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{
		{Module: "vmlinux", Line: 2, Erase: &Erase{Line: 2, Expr: "array_var"}},
		{Module: "vmlinux", Line: 3, Erase: &Erase{Line: 3, Expr: "mystruct1.buffer", Size: &Size{Line: 3, Bytes: 25}}},
		{Module: "vmlinux", Line: 4, Erase: &Erase{Line: 4, Expr: "mystruct1.name"}},
		{Module: "vmlinux", Line: 5, Erase: &Erase{Line: 5, Expr: "mystruct1.addr1", Nullify: true}},
		{Module: "vmlinux", Line: 6, Erase: &Erase{Line: 6, Expr: "mystruct1.addr2", Size: &Size{Line: 6, Bytes: 1024}}},
		{Module: "vmlinux", Line: 7, Erase: &Erase{Line: 7, Expr: "mystruct1.addr3", Size: &Size{Line: 7, Bytes: 2 << 20}}},
		{Module: "vmlinux", Line: 8, Erase: &Erase{Line: 8, Expr: "mystruct2.addr", Size: &Size{Line: 8, Expr: "mystruct2.addr_size"}}},
		{Module: "vmlinux", Line: 9, Erase: &Erase{Line: 9, Expr: "split_over", Size: &Size{Line: 10, Bytes: 7}}},
		{Module: "mymodule", Line: 12, Loop: &Loop{Line: 12, Var: "mys1", List: "mystruct1", Via: "next", Body: []Erase{
			{Line: 13, Expr: "mys1.private"},
			{Line: 14, Expr: "mys1.key", Size: &Size{Line: 14, Expr: "mys1.key_size"}},
		}}},
		{Module: "mymodule", Line: 16, Loop: &Loop{Line: 16, Var: "mys1", List: "s1_list_head.next", WithinStruct: "s1", WithinMember: "list", Body: []Erase{
			{Line: 17, Expr: "mys1.private"},
		}}},
		{Module: "vmlinux", Line: 20, Loop: &Loop{Line: 20, Var: "e", List: "myarray", Body: []Erase{
			{Line: 21, Expr: "e.key", Nullify: true},
		}}},
		{Module: "vmlinux", Line: 23, Loop: &Loop{Line: 23, Var: "e", List: "heads", WithinStruct: "s1"}},
	}
	if !reflect.DeepEqual(cfg.Commands, want) {
		for i := range max(len(want), len(cfg.Commands)) {
			var g, w any
			if i < len(cfg.Commands) {
				g = cfg.Commands[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("command %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
	}
	if p := cfg.Commands[6].Erase.Size.Path(); !reflect.DeepEqual(p, []string{"mystruct2", "addr_size"}) {
		t.Errorf("size path %q", p)
	}
	if p := (&Erase{Expr: "a..b."}).Path(); !reflect.DeepEqual(p, []string{"a", "b"}) {
		t.Errorf("path of a..b. = %q", p)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, config string
		line         int
		msg          string
	}{
		{"unknown command", "erase a\nfoo bar\n", 2, `"foo": want erase or for`},
		{"erase without symbol", "erase\n", 1, `a symbol expected after "erase"`},
		{"erase of a keyword", "erase size 10\n", 1, `a symbol expected after "erase"`},
		{"size without value", "erase a size\n", 1, `a size expected after "size"`},
		{"negative size", "erase a size -5\n", 1, `size "-5": want a positive number of bytes`},
		{"size with junk", "erase a size 12x\n", 1, `size "12x": want N, NK or NM bytes`},
		{"size too large", "erase a size 99999999999999M\n", 1, `want N, NK or NM bytes`},
		{"bad identifier", "erase a.b-c\n", 1, `"b-c" is not a C identifier`},
		{"dots only", "erase ..\n", 1, `".." names no symbol`},
		{"section unclosed", "[mod\nerase a\n", 1, `has no closing ']'`},
		{"section empty", "[]\n", 1, `names no module`},
		{"section trailing", "[mod] x\n", 1, `"x" after the section header`},
		{"for without in", "for x of y\nendfor\n", 1, `'in' expected after 'for x'`},
		{"dotted iteration variable", "for x.y in z\nendfor\n", 1, `iteration variable "x.y" is not a plain name`},
		{"no endfor", "for x in y\nerase x.a\n", 2, `no 'endfor' for the 'for x' of line 1`},
		{"no endfor before section", "for x in y\nerase x.a\n[mod]\nendfor\n", 2, `no 'endfor'`},
		{"loop erase of another symbol", "for x in y\nerase z.a\nendfor\n", 2, `does not start with the iteration variable "x"`},
		{"loop with junk", "for x in y\nnullify\nendfor\n", 2, `"nullify" inside a loop`},
		{"within no struct", "for x in y within :list\nendfor\n", 1, `names no structure`},
		{"within no member", "for x in y within s:\nendfor\n", 1, `names no list_head member`},
		{"within dotted member", "for x in y within s:a.b\nendfor\n", 1, `is not a plain name`},
		{"erase cut by a section", "erase\n[mod]\na\n", 1, `a symbol expected after "erase"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.config))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a SyntaxError", err)
			}
			if se.Line != c.line || !strings.Contains(se.Msg, c.msg) {
				t.Errorf("got %q at line %d, want %q at line %d", se.Msg, se.Line, c.msg, c.line)
			}
		})
	}
}

func TestParseLongLine(t *testing.T) {
	_, err := Parse(strings.NewReader("erase " + strings.Repeat("a", maxLineBytes) + "\n"))
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("got %v", err)
	}
}

// FuzzParse: any input parses or is refused with an error, never a panic;
// what parses is well formed.
func FuzzParse(f *testing.F) {
	f.Add([]byte("erase a.b size 10K\n[m]\nfor x in y within s:l\nerase x.c nullify\nendfor\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		for _, c := range cfg.Commands {
			if (c.Erase == nil) == (c.Loop == nil) {
				t.Fatalf("command at line %d is neither or both", c.Line)
			}
			if c.Module == "" || c.Line <= 0 {
				t.Fatalf("command %+v without module or line", c)
			}
			var es []Erase
			if c.Loop != nil {
				es = c.Loop.Body
			}
			if c.Erase != nil {
				es = []Erase{*c.Erase}
			}
			for _, e := range es {
				if len(e.Path()) == 0 {
					t.Fatalf("erase %q names nothing", e.Expr)
				}
				if s := e.Size; s != nil && (s.Bytes < 0 || s.Expr != "" && s.Bytes != 0) {
					t.Fatalf("size %+v", s)
				}
			}
		}
	})
}

// Symbols lists each section's symbols once, in order, and never a loop's
// variable.
func TestConfigSymbols(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`erase a.b size c.d
erase a size 8
for x in list.head within s:m
	erase x.name size x.len
	erase x.key size limit
endfor
for y in arr
	erase y
endfor
[mod]
erase m_var
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		module string
		want   []string
	}{
		{"vmlinux", []string{"a", "c", "list", "limit", "arr"}},
		{"mod", []string{"m_var"}},
		{"other", nil},
	} {
		if got := cfg.Symbols(tc.module); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Symbols(%s) = %q, want %q", tc.module, got, tc.want)
		}
	}
}
