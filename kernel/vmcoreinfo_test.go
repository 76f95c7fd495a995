package kernel

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// sample is a trimmed real VMCOREINFO from the Debian 6.1 fixture guest.
const sample = `OSRELEASE=6.1.0-57-amd64
BUILD-ID=6a2b4ac77585b8cf102cba771300e573c8489b69
PAGESIZE=4096
SYMBOL(init_uts_ns)=ffffffff87dfb000
OFFSET(uts_namespace.name)=0
SYMBOL(_stext)=ffffffff86200000
SYMBOL(mem_section)=ffff8d903ffd7000
LENGTH(mem_section)=4096
SIZE(mem_section)=32
SIZE(page)=64
NUMBER(PG_head_mask)=65536
NUMBER(PAGE_BUDDY_MAPCOUNT_VALUE)=-129
NUMBER(phys_base)=-12582912
SYMBOL(init_top_pgt)=ffffffff87c10000
NUMBER(pgtable_l5_enabled)=0
KERNELOFFSET=5200000
NUMBER(KERNEL_IMAGE_SIZE)=1073741824
NUMBER(sme_mask)=0
`

func TestParseVMCOREINFOSample(t *testing.T) {
	vi, err := ParseVMCOREINFO([]byte(sample + "\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if got := vi.OSRelease(); got != "6.1.0-57-amd64" {
		t.Errorf("OSRelease = %q", got)
	}
	if got := vi.PageSize(); got != 4096 {
		t.Errorf("PageSize = %d", got)
	}
	if got, ok := vi.Symbol("init_top_pgt"); !ok || got != 0xffffffff87c10000 {
		t.Errorf("Symbol(init_top_pgt) = %#x, %v", got, ok)
	}
	if got, ok := vi.Number("phys_base"); !ok || got != -12582912 {
		t.Errorf("Number(phys_base) = %d, %v", got, ok)
	}
	if got, ok := vi.Number("PAGE_BUDDY_MAPCOUNT_VALUE"); !ok || got != -129 {
		t.Errorf("Number(PAGE_BUDDY_MAPCOUNT_VALUE) = %d, %v", got, ok)
	}
	if got, ok := vi.Size("page"); !ok || got != 64 {
		t.Errorf("Size(page) = %d, %v", got, ok)
	}
	if got, ok := vi.Offset("uts_namespace.name"); !ok || got != 0 {
		t.Errorf("Offset(uts_namespace.name) = %d, %v", got, ok)
	}
	if got, ok := vi.Length("mem_section"); !ok || got != 4096 {
		t.Errorf("Length(mem_section) = %d, %v", got, ok)
	}
	if got, ok := vi.KernelOffset(); !ok || got != 0x5200000 {
		t.Errorf("KernelOffset = %#x, %v", got, ok)
	}
	if _, ok := vi.CrashTime(); ok {
		t.Errorf("CrashTime present in a dump without one")
	}
	if got := vi.Keys(); len(got) != 18 || got[0] != "OSRELEASE" || got[17] != "NUMBER(sme_mask)" {
		t.Errorf("Keys = %q", got)
	}
	if err := vi.Require("OSRELEASE", "SYMBOL(_stext)"); err != nil {
		t.Errorf("Require: %v", err)
	}
}

func TestParseVMCOREINFOErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "vmcoreinfo: missing OSRELEASE"},
		{"no osrelease", "PAGESIZE=4096\n", "vmcoreinfo: missing OSRELEASE"},
		{"empty osrelease", "OSRELEASE=\nPAGESIZE=4096\n", "OSRELEASE is empty"},
		{"no pagesize", "OSRELEASE=6.1\n", "vmcoreinfo: missing PAGESIZE"},
		{"bad pagesize", "OSRELEASE=6.1\nPAGESIZE=four\n", `vmcoreinfo: PAGESIZE: invalid number "four"`},
		{"odd pagesize", "OSRELEASE=6.1\nPAGESIZE=4095\n", "not a power of two"},
		{"zero pagesize", "OSRELEASE=6.1\nPAGESIZE=0\n", "not a power of two"},
		{"negative pagesize", "OSRELEASE=6.1\nPAGESIZE=-4096\n", "not a power of two"},
		{"huge", "OSRELEASE=6.1\nPAGESIZE=4096\n" + strings.Repeat("x", MaxVMCOREINFOSize), "more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseVMCOREINFO([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseVMCOREINFORules(t *testing.T) {
	in := "garbage line without equals\n=no key\nOSRELEASE=first\nPAGESIZE=0x1000\nOSRELEASE=second\n" +
		"SYMBOL(a)=0xffffffff81000000\nSYMBOL(b)=zz\nSYMBOL(c)=\nNUMBER(x)=1\nNUMBER(x)=2\nKEY=a=b\nlast=no newline"
	vi, err := ParseVMCOREINFO([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if vi.OSRelease() != "first" {
		t.Errorf("first occurrence must win, got %q", vi.OSRelease())
	}
	if vi.PageSize() != 4096 {
		t.Errorf("PAGESIZE=0x1000 gave %d", vi.PageSize())
	}
	if n, _ := vi.Number("x"); n != 1 {
		t.Errorf("NUMBER(x) = %d, want the first, 1", n)
	}
	if v, _ := vi.Raw("KEY"); v != "a=b" {
		t.Errorf("value must run to the end of the line, got %q", v)
	}
	if v, ok := vi.Raw("last"); !ok || v != "no newline" {
		t.Errorf("last line without newline: %q, %v", v, ok)
	}
	if vi.Has("") {
		t.Errorf("a line starting with '=' must be ignored")
	}
	if a, ok := vi.Symbol("a"); !ok || a != 0xffffffff81000000 {
		t.Errorf("SYMBOL(a) = %#x, %v", a, ok)
	}
	for _, name := range []string{"b", "c"} {
		if _, ok := vi.Symbol(name); ok {
			t.Errorf("malformed SYMBOL(%s) reported ok", name)
		}
		_, err := vi.RequireSymbol(name)
		if err == nil || errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), "SYMBOL("+name+")") {
			t.Errorf("RequireSymbol(%s) = %v, want a malformed-value error naming the key", name, err)
		}
	}

	_, err = vi.RequireSymbol("init_top_pgt")
	if !errors.Is(err, ErrMissingKey) || err.Error() != "vmcoreinfo: missing SYMBOL(init_top_pgt)" {
		t.Errorf("RequireSymbol(missing) = %v", err)
	}
	for _, f := range []func(string) (int64, error){vi.RequireSize, vi.RequireOffset, vi.RequireNumber} {
		if _, err := f("nope"); !errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), "(nope)") {
			t.Errorf("Require*(nope) = %v", err)
		}
	}
	if err := vi.Require("OSRELEASE", "SIZE(page)"); err == nil || err.Error() != "vmcoreinfo: missing SIZE(page)" {
		t.Errorf("Require = %v", err)
	}
}

func TestParseNumber(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"4096", 4096, true},
		{"-129", -129, true},
		{"+7", 7, true},
		{"0x10", 16, true},
		{"0X10", 16, true},
		{"ff", 255, true},
		{"10abc", 0x10abc, true}, // decimal leaves "abc": re-read as hex
		{"-0x80", -128, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"0x7fffffffffffffff", math.MaxInt64, true},
		{"-0x8000000000000000", math.MinInt64, true},
		{"9223372036854775808", 0, false},
		{"0x8000000000000000", 0, false},
		{"0x10000000000000000", 0, false},
		{"", 0, false},
		{"0x", 0, false},
		{"-", 0, false},
		{"--1", 0, false},
		{"-+1", 0, false},
		{"0x-1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"12g", 0, false},
		{"1_000", 0, false},
	}
	for _, tt := range tests {
		got, err := parseNumber(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseNumber(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseHex(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"ffffffff81000000", 0xffffffff81000000, true},
		{"0xffffffff81000000", 0xffffffff81000000, true},
		{"0", 0, true},
		{"", 0, false},
		{"0x", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{"1ffffffffffffffff", 0, false},
		{"xyz", 0, false},
	}
	for _, tt := range tests {
		got, err := parseHex(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseHex(%q) = %#x, %v; want %#x, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParseVMCOREINFO(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("OSRELEASE=x\nPAGESIZE=0x1000\nNUMBER(a)=-0x10\nSYMBOL(b)=0x1\n\x00"))
	f.Add([]byte("OSRELEASE=x\nPAGESIZE=4096\nOSRELEASE=y\n=\n==\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		vi, err := ParseVMCOREINFO(data)
		if err != nil {
			if vi != nil {
				t.Fatal("non-nil result with an error")
			}
			return
		}
		if p := vi.PageSize(); p < 512 || p&(p-1) != 0 {
			t.Fatalf("accepted PAGESIZE %d", p)
		}
		if vi.OSRelease() == "" {
			t.Fatal("accepted an empty OSRELEASE")
		}
		keys := vi.Keys()
		if len(keys) > len(data)/2+1 {
			t.Fatalf("%d keys from %d bytes", len(keys), len(data))
		}
		seen := make(map[string]bool, len(keys))
		for _, k := range keys {
			if seen[k] {
				t.Fatalf("key %q listed twice", k)
			}
			seen[k] = true
			if _, ok := vi.Raw(k); !ok {
				t.Fatalf("listed key %q has no value", k)
			}
			// Every accessor must cope with every value.
			vi.Value(k)
			vi.hexValue(k)
			_, _ = vi.RequireValue(k)
		}
	})
}

// NUMBER values makedumpfile reads with READ_NUMBER_UNSIGNED (strtoul)
// take the values above 2^63 that arm64's PHYS_OFFSET and kimage_voffset
// are, which the signed reading refuses.
func TestNumberUnsigned(t *testing.T) {
	for _, tc := range []struct {
		value  string
		want   uint64
		signed bool // Number accepts it too
		bad    bool
	}{
		{"0xffffb1a200000000", 0xffffb1a200000000, false, false},
		{"18446657908075659264", 0xffffb1a200000000, false, false},
		{"0x40000000", 0x40000000, true, false},
		{"ffffb03beb800000", 0xffffb03beb800000, false, false},
		{"-1", ^uint64(0), true, false},
		{"0x1ffffffffffffffff", 0, false, true},
		{"", 0, false, true},
		{"0x", 0, false, true},
		{"12 ", 0, false, true},
	} {
		vi, err := ParseVMCOREINFO([]byte("OSRELEASE=6.1\nPAGESIZE=4096\nNUMBER(PHYS_OFFSET)=" + tc.value + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := vi.RequireNumberUnsigned("PHYS_OFFSET")
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("%q: %#x, %v; want %#x", tc.value, got, err, tc.want)
		}
		if _, ok := vi.Number("PHYS_OFFSET"); ok != tc.signed {
			t.Errorf("%q: Number ok = %v", tc.value, ok)
		}
	}
}
