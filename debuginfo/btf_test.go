package debuginfo

import (
	"errors"
	"os"
	"testing"
)

func loadBTF(t testing.TB) *BTF {
	b, err := os.ReadFile("testdata/types.btf")
	if err != nil {
		t.Fatal(err)
	}
	btf, err := ParseBTF(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return btf
}

// The BTF pahole makes of testdata/types.c answers every structure and
// member lookup as its DWARF does; it holds no variables but per-cpu ones
// (as the 6.1 and 6.12 kernels' BTF).
func TestBTFLookupsAsDWARF(t *testing.T) {
	b := loadBTF(t)
	for k, want := range wantMembers {
		got, err := b.Member(k[0], k[1])
		if err != nil || got != want {
			t.Errorf("Member(%s, %s) = %+v, %v; want %+v", k[0], k[1], got, err, want)
		}
	}
	for name, want := range wantSizes {
		got, err := b.StructSize(name)
		if err != nil || got != want {
			t.Errorf("StructSize(%s) = %d, %v; want %d", name, got, err, want)
		}
	}
	for _, c := range []struct{ s, m string }{{"outer", "nothing"}, {"nostruct", "next"}, {"outer", "bits"}, {"outer", "anon_x"}} {
		if _, err := b.Member(c.s, c.m); !errors.Is(err, ErrNotFound) {
			t.Errorf("Member(%s, %s): %v, want ErrNotFound", c.s, c.m, err)
		}
	}
	if _, err := b.Var("outer_var"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Var(outer_var): %v, want ErrNotFound", err)
	}
}

// A split BTF's types and strings continue its base's.
func TestSplitBTF(t *testing.T) {
	base := loadBTF(t)
	raw, _ := os.ReadFile("testdata/types.btf")
	split, err := ParseBTF(raw, base)
	if err != nil {
		t.Fatal(err)
	}
	if split.first != base.first+uint32(len(base.types)) {
		t.Errorf("split BTF starts at %d", split.first)
	}
	if m, err := split.Member("outer", "name"); err != nil || m.Offset != 48 {
		t.Errorf("split Member(outer, name) = %+v, %v", m, err)
	}
}

func TestParseBTFErrors(t *testing.T) {
	raw, _ := os.ReadFile("testdata/types.btf")
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte{1, 2}, raw[2:]...)},
		{"cut", raw[:len(raw)/2]},
	} {
		if _, err := ParseBTF(c.data, nil); err == nil {
			t.Errorf("%s: parsed", c.name)
		}
	}
}

// FuzzBTFLookup: BTF of any bytes parses or is refused, and a parsed one
// answers every lookup without a panic or a loop.
func FuzzBTFLookup(f *testing.F) {
	raw, err := os.ReadFile("testdata/types.btf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw, "outer", "next", "pcpu_outer")
	f.Fuzz(func(t *testing.T, data []byte, structName, member, varName string) {
		b, err := ParseBTF(data, nil)
		if err != nil {
			return
		}
		b.Var(varName)
		b.Member(structName, member)
		b.StructSize(structName)
		if s, err := ParseBTF(data, b); err == nil {
			s.Member(structName, member)
			s.Var(varName)
		}
	})
}
