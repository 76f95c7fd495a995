package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxVMCOREINFOSize bounds the VMCOREINFO text ParseVMCOREINFO accepts. The
// kernel's own buffer is one page (VMCOREINFO_BYTES); 1 MiB leaves room for
// unusual kernels while keeping a corrupted note size from turning into a
// huge allocation.
const MaxVMCOREINFOSize = 1 << 20

// ErrMissingKey is wrapped by the Require* methods when a key is absent, so
// callers can tell "this kernel does not export it" (often fine: fall back)
// from "the value is malformed" (the dump is suspect).
var ErrMissingKey = errors.New("missing")

// VMCOREINFO is the parsed VMCOREINFO note: the text the kernel writes about
// its own symbols, structure layouts and constants so that dump tools can
// work without debug information.
//
// Lookups follow makedumpfile's rules (its read_vmcoreinfo_* functions), so
// that pagepipe sees the same values makedumpfile would:
//   - the first line with a given key wins;
//   - SYMBOL(x) and KERNELOFFSET values are hexadecimal, with or without 0x;
//   - SIZE(x), OFFSET(x), LENGTH(x), NUMBER(x), PAGESIZE and CRASHTIME are
//     read as decimal first and, if characters remain, again as hexadecimal,
//     so both "-129" and "0x10" work.
//
// A VMCOREINFO is immutable after parsing and safe for concurrent use.
type VMCOREINFO struct {
	values map[string]string
	keys   []string // in order of first appearance
	osrel  string
	page   int64
}

// ParseVMCOREINFO parses the descriptor of a VMCOREINFO note. Lines are
// KEY=VALUE separated by newlines; lines without '=' are ignored, as
// makedumpfile ignores them. Trailing NUL padding (note descriptors are
// padded to 4 bytes) is dropped.
//
// OSRELEASE and PAGESIZE are mandatory, as in makedumpfile; PAGESIZE must be
// a power of two of at least 512 bytes, because every later page computation
// divides or shifts by it.
func ParseVMCOREINFO(data []byte) (*VMCOREINFO, error) {
	if len(data) > MaxVMCOREINFOSize {
		return nil, fmt.Errorf("vmcoreinfo: %d bytes is more than the %d accepted", len(data), MaxVMCOREINFOSize)
	}
	data = bytes.TrimRight(data, "\x00")
	vi := &VMCOREINFO{values: make(map[string]string)}
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		eq := bytes.IndexByte(line, '=')
		if eq <= 0 {
			continue
		}
		key := string(line[:eq])
		if _, dup := vi.values[key]; dup {
			continue
		}
		vi.values[key] = string(line[eq+1:])
		vi.keys = append(vi.keys, key)
	}

	osrel, ok := vi.values["OSRELEASE"]
	if !ok {
		return nil, fmt.Errorf("vmcoreinfo: %w OSRELEASE", ErrMissingKey)
	}
	if osrel == "" {
		return nil, errors.New("vmcoreinfo: OSRELEASE is empty")
	}
	vi.osrel = osrel
	page, err := vi.RequireValue("PAGESIZE")
	if err != nil {
		return nil, err
	}
	if page < 512 || page > 1<<30 || page&(page-1) != 0 {
		return nil, fmt.Errorf("vmcoreinfo: PAGESIZE=%d is not a power of two between 512 and 1 GiB", page)
	}
	vi.page = page
	return vi, nil
}

// Raw returns the text after '=' of the first line with the given key, e.g.
// Raw("SYMBOL(init_uts_ns)").
func (v *VMCOREINFO) Raw(key string) (string, bool) {
	s, ok := v.values[key]
	return s, ok
}

// Keys returns every key in order of first appearance.
func (v *VMCOREINFO) Keys() []string {
	return append([]string(nil), v.keys...)
}

// Has reports whether the key is present, e.g. Has("SYMBOL(init_level4_pgt)").
func (v *VMCOREINFO) Has(key string) bool {
	_, ok := v.values[key]
	return ok
}

// Require returns an error naming the first absent key, wrapping
// ErrMissingKey, or nil when all are present.
func (v *VMCOREINFO) Require(keys ...string) error {
	for _, k := range keys {
		if !v.Has(k) {
			return fmt.Errorf("vmcoreinfo: %w %s", ErrMissingKey, k)
		}
	}
	return nil
}

// OSRelease is the kernel's release string (uname -r).
func (v *VMCOREINFO) OSRelease() string { return v.osrel }

// PageSize is the kernel's page size in bytes, always a power of two.
func (v *VMCOREINFO) PageSize() int64 { return v.page }

// CrashTime is the CRASHTIME value (seconds since the epoch), which the
// kernel appends at panic time. It is absent from dumps not taken through a
// panic, such as QEMU's dump-guest-memory of a running guest.
func (v *VMCOREINFO) CrashTime() (int64, bool) { return v.Value("CRASHTIME") }

// KernelOffset is the KASLR slide (KERNELOFFSET, hexadecimal). The symbols
// in VMCOREINFO are already runtime addresses and need no adjustment; the
// slide matters only for symbols taken from a vmlinux.
func (v *VMCOREINFO) KernelOffset() (uint64, bool) { return v.hexValue("KERNELOFFSET") }

// Symbol returns SYMBOL(name), a kernel virtual address. It reports false
// when the key is absent or malformed; RequireSymbol tells the two apart.
func (v *VMCOREINFO) Symbol(name string) (uint64, bool) { return v.hexValue(symbolKey(name)) }

// Size returns SIZE(name): sizeof a kernel structure.
func (v *VMCOREINFO) Size(name string) (int64, bool) { return v.Value("SIZE(" + name + ")") }

// Offset returns OFFSET(name), name being "struct.member".
func (v *VMCOREINFO) Offset(name string) (int64, bool) { return v.Value("OFFSET(" + name + ")") }

// Length returns LENGTH(name): the number of elements of an array.
func (v *VMCOREINFO) Length(name string) (int64, bool) { return v.Value("LENGTH(" + name + ")") }

// Number returns NUMBER(name), a signed constant; some are negative, such
// as PAGE_BUDDY_MAPCOUNT_VALUE (-129 on 6.1) and phys_base under KASLR.
func (v *VMCOREINFO) Number(name string) (int64, bool) { return v.Value(numberKey(name)) }

// NumberUnsigned returns NUMBER(name) read as makedumpfile's
// READ_NUMBER_UNSIGNED reads it (strtoul): the values above 2^63 that
// arm64's PHYS_OFFSET and kimage_voffset are, and VMALLOC_START, which
// Number rejects as out of range. A leading '-' negates modulo 2^64, as
// strtoul does.
func (v *VMCOREINFO) NumberUnsigned(name string) (uint64, bool) {
	n, err := v.RequireNumberUnsigned(name)
	return n, err == nil
}

// RequireNumberUnsigned is NumberUnsigned with an error naming the absent
// or malformed key.
func (v *VMCOREINFO) RequireNumberUnsigned(name string) (uint64, error) {
	return require(v, numberKey(name), parseUnsigned)
}

// Value parses the value of any decimal-or-hexadecimal key (SIZE, OFFSET,
// LENGTH, NUMBER, PAGESIZE, CRASHTIME) by makedumpfile's rule. It reports
// false when the key is absent, malformed or out of int64's range.
func (v *VMCOREINFO) Value(key string) (int64, bool) {
	s, ok := v.values[key]
	if !ok {
		return 0, false
	}
	n, err := parseNumber(s)
	return n, err == nil
}

// RequireSymbol is Symbol with an error naming the key when it is absent
// (wrapping ErrMissingKey) or malformed.
func (v *VMCOREINFO) RequireSymbol(name string) (uint64, error) {
	return require(v, symbolKey(name), parseHex)
}

// require parses key's value with parse, with an error naming the key when
// it is absent (wrapping ErrMissingKey) or malformed.
func require[T any](v *VMCOREINFO, key string, parse func(string) (T, error)) (T, error) {
	var zero T
	s, ok := v.values[key]
	if !ok {
		return zero, fmt.Errorf("vmcoreinfo: %w %s", ErrMissingKey, key)
	}
	n, err := parse(s)
	if err != nil {
		return zero, fmt.Errorf("vmcoreinfo: %s: %w", key, err)
	}
	return n, nil
}

// RequireSize is Size with an error naming the absent or malformed key.
func (v *VMCOREINFO) RequireSize(name string) (int64, error) {
	return v.RequireValue("SIZE(" + name + ")")
}

// RequireOffset is Offset with an error naming the absent or malformed key.
func (v *VMCOREINFO) RequireOffset(name string) (int64, error) {
	return v.RequireValue("OFFSET(" + name + ")")
}

// RequireNumber is Number with an error naming the absent or malformed key.
func (v *VMCOREINFO) RequireNumber(name string) (int64, error) {
	return v.RequireValue(numberKey(name))
}

// RequireValue is Value with an error naming the absent or malformed key.
func (v *VMCOREINFO) RequireValue(key string) (int64, error) {
	return require(v, key, parseNumber)
}

func symbolKey(name string) string { return "SYMBOL(" + name + ")" }
func numberKey(name string) string { return "NUMBER(" + name + ")" }

func (v *VMCOREINFO) hexValue(key string) (uint64, bool) {
	s, ok := v.values[key]
	if !ok {
		return 0, false
	}
	n, err := parseHex(s)
	return n, err == nil
}

// parseHex parses an unsigned hexadecimal value with an optional 0x prefix,
// the form the kernel writes for addresses ("%lx").
func parseHex(s string) (uint64, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	n, err := strconv.ParseUint(t, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid hexadecimal value %q", s)
	}
	return n, nil
}

// parseUnsigned follows makedumpfile's read_vmcoreinfo_ulong: decimal
// first (strtoul base 10); when characters remain, hexadecimal (strtoul
// base 16, which takes a sign and a 0x prefix too). A sign negates modulo
// 2^64. Leading blanks are not skipped and values beyond 64 bits are
// errors rather than clamped.
func parseUnsigned(s string) (uint64, error) {
	t, neg := s, false
	switch {
	case strings.HasPrefix(t, "-"):
		t, neg = t[1:], true
	case strings.HasPrefix(t, "+"):
		t = t[1:]
	}
	u, err := strconv.ParseUint(t, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		h := strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
		if h == "" || h[0] == '+' || h[0] == '-' {
			return 0, fmt.Errorf("invalid number %q", s)
		}
		u, err = strconv.ParseUint(h, 16, 64)
	}
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("value %q is out of range", s)
	case err != nil || t == "" || t[0] == '+' || t[0] == '-':
		return 0, fmt.Errorf("invalid number %q", s)
	case neg:
		return -u, nil
	}
	return u, nil
}

// parseNumber follows makedumpfile: decimal first (strtol base 10); when
// characters remain, hexadecimal (strtol base 16, which also takes a sign
// and a 0x prefix). Unlike strtol, leading blanks are not skipped and
// out-of-range values are errors rather than clamped.
func parseNumber(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("value %q is out of range", s)
	}
	t, neg := s, false
	switch {
	case strings.HasPrefix(t, "-"):
		t, neg = t[1:], true
	case strings.HasPrefix(t, "+"):
		t = t[1:]
	}
	t = strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
	if t == "" || t[0] == '+' || t[0] == '-' {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	u, err := strconv.ParseUint(t, 16, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("value %q is out of range", s)
		}
		return 0, fmt.Errorf("invalid number %q", s)
	}
	switch {
	case !neg && u <= 1<<63-1:
		return int64(u), nil
	case neg && u <= 1<<63:
		return -int64(u), nil // -int64(1<<63) wraps to MinInt64, as wanted
	}
	return 0, fmt.Errorf("value %q is out of range", s)
}
